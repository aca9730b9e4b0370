"""Cluster eligibility follows kubefleet-rules section 6: order, boundaries and exact reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hub.types import (
    AgentStatus,
    Condition,
    MemberCluster,
    MemberClusterStatus,
    ObjectMeta,
)
from scheduler.clusters.eligibility import (
    REASON_AGENT_NOT_JOINED,
    REASON_AGENT_NOT_ONLINE,
    REASON_HEALTH_UNKNOWN,
    REASON_LEFT_FLEET,
    REASON_NO_RECENT_HEARTBEAT,
    REASON_UNHEALTHY,
    EligibilityChecker,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=3)


def agent(
    *,
    heartbeat: datetime | None = NOW,
    joined: str | None = "True",
    healthy: str | None = "True",
    healthy_since: datetime | None = LONG_AGO,
    type_: str = "MemberAgent",
) -> AgentStatus:
    conditions = []
    if joined is not None:
        conditions.append(Condition(type="Joined", status=joined, last_transition_time=LONG_AGO))
    if healthy is not None:
        conditions.append(
            Condition(type="Healthy", status=healthy, last_transition_time=healthy_since)
        )
    return AgentStatus(type=type_, last_received_heartbeat=heartbeat, conditions=conditions)


def member(*agents: AgentStatus, deleting: bool = False) -> MemberCluster:
    return MemberCluster(
        metadata=ObjectMeta(name="m", deletion_timestamp=NOW if deleting else None),
        status=MemberClusterStatus(agent_status=list(agents)),
    )


MINUTES_SINCE_GO_ZERO_TIME = "153722867.28"  # time.Since(time.Time{}) saturates


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        pytest.param(member(agent()), None, id="eligible"),
        pytest.param(member(agent(), deleting=True), REASON_LEFT_FLEET, id="left-fleet"),
        pytest.param(member(deleting=True), REASON_LEFT_FLEET, id="left-fleet-checked-first"),
        pytest.param(member(), REASON_AGENT_NOT_ONLINE, id="no-agent-status"),
        pytest.param(
            member(agent(type_="NetworkAgent")), REASON_AGENT_NOT_ONLINE, id="other-agent-only"
        ),
        pytest.param(
            member(agent(heartbeat=NOW - timedelta(minutes=5))), None, id="heartbeat-exactly-5m"
        ),
        pytest.param(
            member(agent(heartbeat=NOW - timedelta(minutes=5, microseconds=1))),
            REASON_NO_RECENT_HEARTBEAT.format(minutes=5.0),
            id="heartbeat-just-over-5m",
        ),
        pytest.param(
            member(agent(heartbeat=NOW - timedelta(minutes=12, seconds=18))),
            "cluster is not connected to the fleet: no recent heartbeat signals "
            "(last received 12.30 minutes ago)",
            id="heartbeat-stale",
        ),
        pytest.param(
            member(agent(heartbeat=None)),
            "cluster is not connected to the fleet: no recent heartbeat signals "
            f"(last received {MINUTES_SINCE_GO_ZERO_TIME} minutes ago)",
            id="heartbeat-missing-is-go-zero-time",
        ),
        pytest.param(
            member(agent(heartbeat=NOW - timedelta(hours=1), joined=None)),
            REASON_NO_RECENT_HEARTBEAT.format(minutes=60.0),
            id="heartbeat-checked-before-joined",
        ),
        pytest.param(member(agent(joined=None)), REASON_AGENT_NOT_JOINED, id="joined-missing"),
        pytest.param(member(agent(joined="False")), REASON_AGENT_NOT_JOINED, id="joined-false"),
        pytest.param(member(agent(joined="Unknown")), REASON_AGENT_NOT_JOINED, id="joined-unknown"),
        pytest.param(member(agent(healthy=None)), REASON_HEALTH_UNKNOWN, id="healthy-missing"),
        pytest.param(
            member(agent(joined=None, healthy=None)),
            REASON_AGENT_NOT_JOINED,
            id="joined-checked-before-healthy",
        ),
        pytest.param(
            member(agent(healthy="False", healthy_since=NOW - timedelta(minutes=2))),
            None,
            id="short-unhealthy-period-tolerated",
        ),
        pytest.param(
            member(agent(healthy="False", healthy_since=NOW - timedelta(minutes=5))),
            None,
            id="unhealthy-exactly-5m-tolerated",
        ),
        pytest.param(
            member(agent(healthy="False", healthy_since=NOW - timedelta(minutes=7, seconds=3))),
            "cluster is not connected to the fleet: unhealthy for a prolonged period of time "
            "(last transitioned 7.05 minutes ago)",
            id="unhealthy-too-long",
        ),
        pytest.param(
            member(agent(healthy="Unknown", healthy_since=LONG_AGO)),
            REASON_UNHEALTHY.format(minutes=3 * 24 * 60),
            id="health-unknown-too-long",
        ),
        pytest.param(
            member(agent(healthy="False", healthy_since=None)),
            REASON_UNHEALTHY.format(minutes=float(MINUTES_SINCE_GO_ZERO_TIME)),
            id="unhealthy-without-transition-time",
        ),
        pytest.param(
            member(agent(healthy="True", healthy_since=None)), None, id="healthy-needs-no-time"
        ),
    ],
)
def test_eligibility_follows_reference_section_6(
    cluster: MemberCluster, expected: str | None
) -> None:
    assert EligibilityChecker().check(cluster, NOW) == expected


def test_timeouts_are_configurable() -> None:
    checker = EligibilityChecker(
        heartbeat_timeout=timedelta(minutes=1), health_timeout=timedelta(minutes=10)
    )
    stale = member(agent(heartbeat=NOW - timedelta(minutes=2)))
    unhealthy = member(agent(healthy="False", healthy_since=NOW - timedelta(minutes=7)))
    assert checker.check(stale, NOW) == REASON_NO_RECENT_HEARTBEAT.format(minutes=2.0)
    assert checker.check(unhealthy, NOW) is None


def test_a_naive_now_is_read_as_utc() -> None:
    naive_now = NOW.replace(tzinfo=None)
    assert EligibilityChecker().check(member(agent()), naive_now) is None


def test_a_future_heartbeat_counts_as_recent() -> None:
    assert (
        EligibilityChecker().check(member(agent(heartbeat=NOW + timedelta(hours=1))), NOW) is None
    )


def test_the_first_condition_of_a_type_counts_as_in_go() -> None:
    first = Condition(type="Healthy", status="False", last_transition_time=LONG_AGO)
    second = Condition(type="Healthy", status="True", last_transition_time=NOW)
    joined = Condition(type="Joined", status="True", last_transition_time=LONG_AGO)
    cluster = member(
        AgentStatus(
            type="MemberAgent", last_received_heartbeat=NOW, conditions=[first, second, joined]
        )
    )
    assert EligibilityChecker().check(cluster, NOW) == REASON_UNHEALTHY.format(minutes=3 * 24 * 60)
