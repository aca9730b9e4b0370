"""schedule_once, the loop turn, against a real devhub: what one turn lands and reads, and a
turn with nothing to schedule runs no cycle."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler import Profile
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Status
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    placement_condition,
    targets,
    writes,
)
from workflows.models import TurnRequest, TurnResult

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


def test_one_turn_syncs_the_snapshot_schedules_and_writes_status_reading_the_placement_once(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    for name in ("a", "b", "c"):
        add_cluster(hub, name)
    add_cluster(hub, "d", taints=[("gpu", "true")])
    add_placement(hub, "one", PICK_TWO)
    rig = make_activities()

    devhub.stats.clear()
    result = turn(env, rig, "one", 3)

    # The placement is read once, and its condition written once (no SchedulePending first).
    assert devhub.stats.count("get", "clusterresourceplacements") == 1
    assert writes(devhub, "clusterresourceplacements/status") == 1, devhub.stats.snapshot()
    assert result.prepared.phase == "ready" and result.prepared.snapshot == "one-0"
    assert result.prepared.snapshot_action == "created one-0"
    assert result.report is not None and result.report.cycle == 3
    assert result.report.outcome.fulfilled and result.report.writes.created == 2
    assert result.report.writes.placement_condition_written
    fulfilled = (names.TRUE, names.POLICY_FULFILLED_REASON)
    bindings, decided, scheduled, condition, finalizers = landed(hub, "one")
    assert bindings == ["b", "c"]
    assert decided == ["a", "b", "c", "d"]  # picked, not picked and filtered, as KubeFleet
    assert scheduled is not None and scheduled[:2] == fulfilled
    assert condition is not None and condition[:2] == fulfilled
    assert finalizers == [names.SCHEDULER_CLEANUP_FINALIZER]

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


def test_a_large_explanation_is_recorded_packed_and_the_same_fates_only_as_a_digest(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Over a fleet whose explanation is larger than INLINE_EXPLANATION_BYTES the turn's report
    holds it packed; a turn told the digest it would record again leaves it out."""
    clusters = [f"member-westeurope-production-{i:03d}" for i in range(160)]
    for name in clusters:
        add_cluster(hub, name)
    add_placement(hub, "wide", {"placementType": "PickAll"})
    rig = make_activities()

    first = turn(env, rig, "wide").report
    assert first is not None and first.evaluated
    assert first.explanation is None and first.explanation_packed is not None
    explanation = first.full_explanation()
    assert explanation is not None
    assert sorted(c for g in explanation.picked for c in g.clusters) == clusters

    # The second turn finds the bindings the first wrote: other fates, recorded again.
    second = turn(env, rig, "wide", 2).report
    assert second is not None and second.has_explanation
    assert second.explanation_digest != first.explanation_digest
    request = TurnRequest(
        placement="wide", cycle=3, reason="test", known_explanation=second.explanation_digest
    )
    again: TurnResult = env.run(rig.activities.schedule_once, request)
    assert again.report is not None and not again.report.has_explanation
    assert again.report.explanation_digest == second.explanation_digest


def test_a_turn_logs_one_line_when_it_writes_bindings_or_is_refused_and_none_otherwise(
    hub: HubClient,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in ("a", "b"):
        add_cluster(hub, name)
    add_placement(hub, "logged", PICK_TWO)
    bad_key = {"matchLabels": {"bad key": "x"}}  # refused by the snapshotter, not the CRD
    add_placement(
        hub,
        "no-count",
        {
            "placementType": "PickN",
            "numberOfClusters": 1,
            "affinity": {
                "clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "clusterSelectorTerms": [{"labelSelector": bad_key}]
                    }
                }
            },
        },
    )
    rig = make_activities()
    caplog.set_level(logging.INFO, logger="fleet_scheduler.cycles")

    first = turn(env, rig, "logged")
    turn(env, rig, "logged", 2)  # keeps both bindings: nothing to tell
    failed = turn(env, rig, "no-count")

    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert first.report is not None and failed.report is None
    assert first.summary == first.report.summary and first.summary.startswith("cycle 1: PickN")
    assert failed.summary == f"no cycle: {failed.prepared.message}"
    assert lines == [
        (logging.INFO, f"placement logged: {first.report.summary}"),
        (logging.WARNING, f"placement no-count: {failed.prepared.message}"),
    ]
    assert "spec.policy.affinity.clusterAffinity" in failed.prepared.message


@dataclass
class Broken:
    """A filter plugin that raises: the cycle runs and cannot act (a PluginError)."""

    name: str = "Broken"

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status:
        raise RuntimeError("this plugin is broken")


def test_a_cycle_that_cannot_act_is_logged_as_a_warning(
    hub: HubClient,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_cluster(hub, "a")
    add_placement(hub, "broken", PICK_TWO)
    rig = make_activities(profile=Profile(name="broken", filter=(Broken(),)))
    caplog.set_level(logging.INFO, logger="fleet_scheduler.cycles")

    report = turn(env, rig, "broken").report

    assert report is not None and report.error is not None and "Broken" in report.error
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, f"placement broken: {report.summary}")
    ]
