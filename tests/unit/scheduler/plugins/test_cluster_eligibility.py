"""ClusterEligibility filters ineligible clusters with the checker's reason (kubefleet-rules
5.2)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.clusters.eligibility import REASON_LEFT_FLEET, REASON_NO_RECENT_HEARTBEAT
from scheduler.framework.status import Code
from scheduler.plugins.cluster_eligibility import NAME, ClusterEligibility
from tests.unit.scheduler.plugins.plugin_builders import (
    NOW,
    cluster,
    healthy_agent,
    snapshot,
    state,
)


def test_eligible_cluster_passes() -> None:
    member = cluster("a")
    assert ClusterEligibility().filter(state(member), snapshot(), member).code is Code.SUCCESS


def test_ineligible_cluster_is_unschedulable_with_the_single_eligibility_reason() -> None:
    member = cluster("a", deleting=True)
    status = ClusterEligibility().filter(state(member), snapshot(), member)
    assert status.code is Code.CLUSTER_UNSCHEDULABLE
    assert status.reasons == (REASON_LEFT_FLEET,)
    assert str(status) == "ClusterUnschedulable, cluster has left the fleet"


def test_uses_the_cycle_now_and_the_configured_timeout() -> None:
    member = cluster("a", agents=[healthy_agent(NOW - timedelta(minutes=3))])
    relaxed = ClusterEligibility()
    strict = ClusterEligibility(heartbeat_timeout_minutes=1, health_timeout_minutes=1.5)
    assert relaxed.filter(state(member), snapshot(), member).code is Code.SUCCESS
    status = strict.filter(state(member), snapshot(), member)
    assert status.reasons == (REASON_NO_RECENT_HEARTBEAT.format(minutes=3.5),)


@pytest.mark.parametrize(
    ("arguments", "error", "complaint"),
    [
        pytest.param({"heartbeat_timeout_minutes": "5"}, TypeError, "must be a number"),
        pytest.param({"health_timeout_minutes": True}, TypeError, "must be a number"),
        pytest.param({"heartbeat_timeout_minutes": 0}, ValueError, "positive"),
        pytest.param({"health_timeout_minutes": -1}, ValueError, "positive"),
        pytest.param({"health_timeout_minutes": float("inf")}, ValueError, "positive"),
        pytest.param({"heartbeat_timeout": 5}, TypeError, "heartbeat_timeout"),
    ],
)
def test_bad_arguments_are_refused_clearly(
    arguments: dict[str, object], error: type[Exception], complaint: str
) -> None:
    with pytest.raises(error, match=complaint):
        ClusterEligibility(**arguments)  # type: ignore[arg-type]


def test_name() -> None:
    assert ClusterEligibility().name == NAME == "ClusterEligibility"
