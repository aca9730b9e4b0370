"""schedule_once against a real devhub: what lands in the hub is what
scheduler.schedule decides, and a cycle with nothing to change writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from temporalio.testing import ActivityEnvironment

from activities import plumbing
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler import CycleInput, schedule
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    placement_condition,
    prepare_and_cycle,
    targets,
    turn,
    writes,
)
from workflows import details
from workflows.models import WriteCounts

PICK_TWO = {"placementType": "PickN", "numberOfClusters": 2}


def fleet(hub: HubClient) -> None:
    """a, b, c eligible; d tainted (filtered by TaintToleration)."""
    for name in ("a", "b", "c"):
        add_cluster(hub, name)
    add_cluster(hub, "d", taints=[("gpu", "true")])


def test_a_pick_n_placement_gets_the_bindings_and_status_the_scheduler_decides(
    hub: HubClient,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Heartbeats unpaced, so each phase's progress shows (below).
    monkeypatch.setattr(plumbing, "HEARTBEAT_AFTER_S", 0.0)
    fleet(hub)
    add_placement(hub, "web", PICK_TWO)
    rig = make_activities()

    result = turn(env, rig.activities, "web", 7)

    prepared, report = result.prepared, result.report
    assert report is not None
    assert (prepared.phase, prepared.snapshot, prepared.placement_type) == (
        "ready",
        "web-0",
        "PickN",
    )
    assert prepared.snapshot_action == "created web-0"
    assert prepared.placement_generation == 1
    crp = hub.get(ClusterResourcePlacement, "web")
    assert names.SCHEDULER_CLEANUP_FINALIZER in crp.metadata.finalizers

    # What the framework decides on the snapshot the turn made, with no bindings yet.
    snapshot = hub.get(ClusterSchedulingPolicySnapshot, "web-0")
    expected = schedule(
        CycleInput(
            snapshot=snapshot,
            clusters=list(hub.list(MemberCluster)),
            bindings=[],
            now=datetime.now(UTC),
        )
    )
    assert sorted(b.spec.target_cluster for b in expected.plan.create) == ["b", "c"]

    bindings = bindings_of(hub, "web")
    assert targets(bindings, names.STATE_SCHEDULED) == ["b", "c"]
    assert all(b.spec.scheduling_policy_snapshot_name == "web-0" for b in bindings)
    assert all(
        b.metadata.finalizers == [names.SCHEDULER_BINDING_CLEANUP_FINALIZER] for b in bindings
    )
    written = hub.get(ClusterSchedulingPolicySnapshot, "web-0").status
    assert sorted(d.cluster_name for d in written.target_clusters if d.selected) == ["b", "c"]
    assert written.observed_crp_generation == 1
    scheduled = written.condition(names.SCHEDULED_CONDITION)
    assert scheduled is not None and scheduled.reason == names.POLICY_FULFILLED_REASON
    condition = placement_condition(hub, "web")
    assert condition is not None
    assert (
        condition.status,
        condition.reason,
        condition.message,
        condition.observed_generation,
    ) == (
        names.TRUE,
        names.POLICY_FULFILLED_REASON,
        scheduled.message,
        1,
    )

    assert report.outcome.fulfilled and report.outcome.picked == 2
    assert (report.writes.created, report.writes.status_written) == (2, True)
    assert report.writes.placement_condition_written
    assert (report.clusters_seen, report.bindings_seen, report.error) == (4, 0, None)
    assert report.summary.startswith("cycle 7: PickN 2/2, picked b,c; 2 created, status written")
    assert report.explanation is not None
    assert report.explanation.filtered[0].clusters == ["d"]
    # A heartbeat after each phase once they are due (here at once): read, schedule, then each
    # binding write.
    heartbeats = [details[0] for details in env.heartbeats]  # type: ignore[attr-defined]
    assert heartbeats[:3] == [
        "cycle 7: read 4 clusters",
        "cycle 7: scheduled, 2 binding writes",
        "created 1/2",
    ]


def test_a_turn_sends_no_heartbeat_before_one_is_due(
    hub: HubClient,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each heartbeat of a thread-bound activity is a round trip to the worker's event loop,
    and the first a call to the Temporal server: a turn that ends before its first beat is
    due (HEARTBEAT_AFTER_S, default 1 s, the timeout 30 s) sends none (issue 35). The
    interval is made long here so a slow machine cannot make the turn outlast it."""
    monkeypatch.setattr(plumbing, "HEARTBEAT_AFTER_S", 600.0, raising=False)
    fleet(hub)
    add_placement(hub, "web", PICK_TWO)
    rig = make_activities()

    result = turn(env, rig.activities, "web", 7)

    assert result.report is not None and result.report.writes.created == 2
    assert env.heartbeats == []  # type: ignore[attr-defined]


def test_the_hub_keeps_kubefleets_reasons_while_people_read_clean_ones(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Parity: the decisions written on the snapshot and the bindings are KubeFleet's exact
    text (a taint as Go's `%+v`), whatever the UI and `explain` make of them."""
    fleet(hub)
    add_placement(hub, "web", {"placementType": "PickAll"})
    rig = make_activities()

    _, report = prepare_and_cycle(env, rig.activities, "web", 1)

    snapshot = hub.get(ClusterSchedulingPolicySnapshot, "web-0")
    unwritten = snapshot.model_copy(update={"status": type(snapshot.status)()})
    expected = schedule(
        CycleInput(
            snapshot=unwritten, clusters=list(hub.list(MemberCluster)), now=datetime.now(UTC)
        )
    )
    planned = expected.plan.snapshot_status
    assert planned is not None
    written = snapshot.status.target_clusters
    assert [d.model_dump() for d in written] == [
        d.model_dump() for d in planned.status.target_clusters
    ]
    (tainted,) = [d for d in written if d.cluster_name == "d"]
    kubefleet = "ClusterUnschedulable, taint &{Key:gpu Value:true Effect:NoSchedule} cannot be"
    assert not tainted.selected and kubefleet in (tainted.reason or "")
    made = {b.spec.target_cluster: b.spec.cluster_decision for b in bindings_of(hub, "web")}
    assert made == {b.spec.target_cluster: b.spec.cluster_decision for b in expected.plan.create}
    # The recorded explanation keeps KubeFleet's text too; what people read is clean.
    assert report.explanation is not None
    assert report.explanation.filtered[0].reason.startswith(kubefleet)
    assert report.summary.endswith("; filtered 1: TaintToleration 1")
    shown = details.decision(report)
    assert "TaintToleration, d: taint gpu=true:NoSchedule cannot be" in shown
    assert "&{" not in shown and "ClusterUnschedulable" not in shown


def test_a_second_pick_all_cycle_writes_nothing(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    fleet(hub)
    add_placement(hub, "web", {"placementType": "PickAll"})
    rig = make_activities()
    _, first = prepare_and_cycle(env, rig.activities, "web", 1)
    assert first.writes.created == 3
    devhub.stats.clear()

    prepared, report = prepare_and_cycle(env, rig.activities, "web", 2)

    assert writes(devhub) == 0, devhub.stats.snapshot()
    assert prepared.snapshot_action == "unchanged"
    assert report.writes == WriteCounts()
    assert report.summary == (
        "cycle 2: PickAll 3, picked a,b,c; no change; filtered 1: TaintToleration 1"
    )
    assert (report.bindings_seen, report.requeue) == (3, False)


def test_a_pick_n_placement_settles_after_kubefleets_one_status_refresh(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    """Reference 4.6 branch B: once N bindings exist the status lists only them, so the second
    cycle drops the not-picked and filtered decisions; from then on nothing is written."""
    fleet(hub)
    add_placement(hub, "web", PICK_TWO)
    rig = make_activities()
    prepare_and_cycle(env, rig.activities, "web", 1)
    devhub.stats.clear()

    _, second = prepare_and_cycle(env, rig.activities, "web", 2)

    assert devhub.stats.snapshot().get(("update", "clusterschedulingpolicysnapshots/status")) == 1
    assert writes(devhub) == 1
    assert second.writes == WriteCounts(status_written=True)
    decisions = hub.get(ClusterSchedulingPolicySnapshot, "web-0").status.target_clusters
    assert sorted(d.cluster_name for d in decisions) == ["b", "c"]
    devhub.stats.clear()

    _, third = prepare_and_cycle(env, rig.activities, "web", 3)

    assert writes(devhub) == 0, devhub.stats.snapshot()
    assert third.writes == WriteCounts()
    assert third.summary == "cycle 3: PickN 2/2, picked b,c; no change"


def test_a_cycle_is_metered_and_traced_stage_by_stage(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    fleet(hub)
    add_placement(hub, "web", PICK_TWO)
    rig = make_activities()

    prepare_and_cycle(env, rig.activities, "web")

    sample = rig.metrics.registry.get_sample_value
    assert (
        sample(
            "scheduling_cycle_duration_milliseconds_count",
            {"is_failed": "false", "needs_requeue": "false"},
        )
        == 1
    )
    assert (
        sample("fleet_scheduler_cycles_total", {"placement_type": "PickN", "outcome": "success"})
        == 1
    )
    assert sample("fleet_scheduler_binding_writes_total", {"operation": "create"}) == 2
    finished = rig.spans.get_finished_spans()
    spans = {s.name: s for s in finished}
    # Children end before their parent: the extension points PickN ran, then `schedule`.
    assert [s.name for s in finished] == [
        "read",
        "PostBatch",
        "PreFilter",
        "Filter",
        "PreScore",
        "Score",
        "schedule",
        "apply",
        "write_status",
    ]
    schedule_span = spans["schedule"].context
    assert schedule_span is not None
    for phase in ("PostBatch", "PreFilter", "Filter", "PreScore", "Score"):
        parent = spans[phase].parent
        assert parent is not None and parent.span_id == schedule_span.span_id, phase
    assert all(spans[s].parent is None for s in ("read", "schedule", "apply", "write_status"))
    assert spans["read"].attributes is not None and spans["read"].attributes["clusters"] == 4
    attributes = spans["schedule"].attributes
    assert attributes is not None
    assert (attributes["picked"], attributes["filtered"]) == (2, 1)
