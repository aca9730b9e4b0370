"""Property values that are not Kubernetes quantities.

A cluster's property provider can report any string (`status.properties[name].value` is a plain
string in the CRD), and a placement's property selector can ask for any string. KubeFleet
aborts the whole cycle, for every placement that reads the property, as long as one cluster
reports garbage (kubefleet-rules 10.15); here only what is broken is affected:

- a cluster value in a required term: that cluster is filtered, and its decision names the
  property and the value; a corrected value schedules it on the next event;
- the expected value of a required term: the term matches nothing, each decision says why;
- a cluster value under a property sorter: the value counts as not available (score 0) and
  the other clusters are ranked as usual."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import Client

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import MemberCluster
from scheduler.plugins.cluster_affinity.filtering import (
    REASON_CANNOT_EVALUATE,
    REASON_INVALID_TERM,
    REASON_NO_MATCH,
)
from scheduler.testing import member_cluster
from tests.integration.bad_input.outcome import (
    assert_no_retries,
    decisions,
    filtered,
    finished,
    placement_condition,
    policy_condition,
)
from tests.support.fleet import add_cluster, add_placement, live_targets, unique
from tests.support.waits import until_async

pytestmark = pytest.mark.asyncio(loop_scope="session")


def cost(operator: str, value: str) -> dict[str, Any]:
    expression = {"name": "cost", "operator": operator, "values": [value]}
    term = {"propertySelector": {"matchExpressions": [expression]}}
    return {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [term]}
        }
    }


def report_cost(hub: HubClient, cluster: str, value: str) -> None:
    """The member agent's property provider reports a new value."""
    current = hub.get(MemberCluster, cluster)
    wanted = member_cluster(cluster, datetime.now(UTC), properties={"cost": value})
    properties = wanted.status.properties
    hub.update_status(
        current.model_copy(
            update={"status": current.status.model_copy(update={"properties": properties})}
        )
    )


async def test_a_cluster_value_that_does_not_parse_filters_only_that_cluster(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    for cluster, value in (("member-a", "3"), ("member-b", "cheap"), ("member-c", "9")):
        add_cluster(hub, cluster, properties={"cost": value})
    web = unique("web")
    add_placement(hub, web, {"placementType": "PickAll", "affinity": cost("Le", "5")})

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is None
    assert live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}
    decided = decisions(hub, web)
    problem = 'property "cost" has value "cheap", which is not a quantity'
    assert decided["member-b"].reason == filtered(
        REASON_CANNOT_EVALUATE.format(index=0, problem=problem)
    )
    assert decided["member-c"].reason == filtered(REASON_NO_MATCH)
    condition = policy_condition(hub, web)
    assert condition is not None and condition.reason == names.POLICY_FULFILLED_REASON

    # The provider fixes its value: the property change reaches the placement.
    report_cost(hub, "member-b", "4")
    await until_async(
        lambda: (
            live_targets(hub, web)
            == {"member-a": names.STATE_SCHEDULED, "member-b": names.STATE_SCHEDULED}
        ),
        blocking=True,
    )


async def test_a_required_value_that_does_not_parse_is_named_in_every_decision(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    add_cluster(hub, "member-a", properties={"cost": "3"})
    add_cluster(hub, "member-b", properties={"cost": "9"})
    web = unique("web")
    add_placement(
        hub, web, {"placementType": "PickN", "numberOfClusters": 1, "affinity": cost("Le", "five")}
    )

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is None
    assert live_targets(hub, web) == {}
    where = 'property selector expression 0 ("cost"): the expected value is not a quantity'
    for decision in decisions(hub, web).values():
        assert not decision.selected
        assert decision.reason.startswith(
            filtered(REASON_INVALID_TERM.format(index=0, problem=where))
        ), decision.reason
        assert "five" in decision.reason
    condition = policy_condition(hub, web)
    assert condition is not None and condition.status == names.FALSE
    assert condition.message == names.POLICY_UNFULFILLED_MESSAGE.format(count=0)
    shown = placement_condition(hub, web)
    assert shown is not None and shown.reason == names.POLICY_UNFULFILLED_REASON


async def test_a_sorted_value_that_does_not_parse_counts_as_not_available(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    values = {"member-a": "3", "member-b": "cheap", "member-c": "9", "member-d": "6"}
    for cluster, value in values.items():
        add_cluster(hub, cluster, properties={"cost": value})
    web = unique("web")
    sorter = {"propertySorter": {"name": "cost", "sortOrder": "Descending"}}
    affinity = {
        "clusterAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": sorter}
            ]
        }
    }
    add_placement(hub, web, {"placementType": "PickN", "numberOfClusters": 3, "affinity": affinity})

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is None
    # Extremes come from the clusters that report a quantity (3 and 9), so 9 scores 100 and 6
    # scores 50; "cheap" scores 0 like a missing value and ties with 3, where the larger name
    # wins (kubefleet-rules 4.4). The cycle is not aborted for anyone.
    assert live_targets(hub, web) == {
        "member-b": names.STATE_SCHEDULED,
        "member-c": names.STATE_SCHEDULED,
        "member-d": names.STATE_SCHEDULED,
    }
    selected = {
        name: decision.cluster_score.affinity_score
        for name, decision in decisions(hub, web).items()
        if decision.selected and decision.cluster_score is not None
    }
    assert selected == {"member-b": 0, "member-c": 100, "member-d": 50}
    condition = policy_condition(hub, web)
    assert condition is not None and condition.reason == names.POLICY_FULFILLED_REASON
