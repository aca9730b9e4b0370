"""schedule_once, the one-activity loop turn, against a real devhub: it lands exactly what
prepare_cycle + run_cycle land, with fewer requests, and a turn with nothing to schedule runs
no cycle."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.models import TurnRequest, TurnResult
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    placement_condition,
    prepare_and_cycle,
    targets,
)

PICK_TWO = {"placementType": "PickN", "numberOfClusters": 2}


def turn(env: ActivityEnvironment, rig: Rig, placement: str, number: int = 1) -> TurnResult:
    request = TurnRequest(placement=placement, cycle=number, reason="test")
    result: TurnResult = env.run(rig.activities.schedule_once, request)
    return result


def landed(hub: HubClient, placement: str) -> tuple[object, ...]:
    """What a turn leaves in the hub for `placement`, free of names and timestamps."""
    bindings = bindings_of(hub, placement)
    snapshot = hub.get(ClusterSchedulingPolicySnapshot, f"{placement}-0")
    scheduled = snapshot.status.condition(names.SCHEDULED_CONDITION)
    condition = placement_condition(hub, placement)
    crp = hub.get(ClusterResourcePlacement, placement)
    return (
        targets(bindings, names.STATE_SCHEDULED),
        sorted(t.cluster_name for t in snapshot.status.target_clusters),
        scheduled and (scheduled.status, scheduled.reason, scheduled.message),
        condition and (condition.status, condition.reason, condition.message),
        crp.metadata.finalizers,
    )


def test_one_turn_lands_what_prepare_and_run_land_with_fewer_requests(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    for name in ("a", "b", "c"):
        add_cluster(hub, name)
    add_cluster(hub, "d", taints=[("gpu", "true")])
    add_placement(hub, "two", PICK_TWO)
    add_placement(hub, "one", PICK_TWO)
    rig = make_activities()

    devhub.stats.clear()
    prepare_and_cycle(env, rig.activities, "two")
    two_activities = devhub.stats.count()
    devhub.stats.clear()
    result = turn(env, rig, "one", 3)
    one_activity = devhub.stats.count()

    assert result.prepared.phase == "ready" and result.prepared.snapshot == "one-0"
    assert result.prepared.snapshot_action == "created one-0"
    assert result.report is not None and result.report.cycle == 3
    assert result.report.outcome.fulfilled and result.report.writes.created == 2
    assert result.report.writes.placement_condition_written
    assert landed(hub, "one") == landed(hub, "two")
    assert targets(bindings_of(hub, "one"), names.STATE_SCHEDULED) == ["b", "c"]
    # No second read of the placement or of its snapshot, and no SchedulePending condition
    # written moments before the cycle's own.
    assert one_activity <= two_activities - 3, (one_activity, two_activities)

    # Later turns keep what the first decided: after KubeFleet's one status refresh (see
    # test_cycle_end_to_end), nothing is written at all.
    turn(env, rig, "one", 4)
    devhub.stats.clear()
    again = turn(env, rig, "one", 5)
    assert again.report is not None and again.report.writes.bindings == 0
    assert not again.report.writes.status_written
    assert sum(devhub.stats.count(verb) for verb in ("create", "update", "patch")) == 0
    assert targets(bindings_of(hub, "one"), names.STATE_SCHEDULED) == ["b", "c"]


def test_a_turn_with_nothing_to_schedule_runs_no_cycle(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    gone = turn(env, rig, "never-made")
    assert (gone.prepared.phase, gone.report) == ("gone", None)

    quiet = make_activities(snapshotter=False)
    add_placement(hub, "waits", PICK_TWO)
    waiting = turn(env, quiet, "waits")
    assert (waiting.prepared.phase, waiting.report) == ("no_latest_snapshot", None)
    assert "waiting for the placement controller" in waiting.prepared.message


def test_a_cycle_that_fails_leaves_the_placement_schedule_pending(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    for name in ("a", "b"):
        add_cluster(hub, name)
    add_placement(hub, "web", PICK_TWO)
    rig = make_activities()
    devhub.faults.inject(verb="list", resource="clusterresourcebindings", status=503)

    with pytest.raises(ApplicationError) as failed:
        turn(env, rig, "web")

    assert not failed.value.non_retryable  # the hub is unavailable: Temporal retries the turn
    condition = placement_condition(hub, "web")
    assert condition is not None
    assert (condition.status, condition.reason) == (names.UNKNOWN, names.SCHEDULE_PENDING_REASON)
    devhub.faults.clear()
    assert bindings_of(hub, "web") == []
    retried = turn(env, rig, "web")
    assert retried.report is not None and retried.report.outcome.fulfilled
    condition = placement_condition(hub, "web")
    assert condition is not None and condition.status == names.TRUE
