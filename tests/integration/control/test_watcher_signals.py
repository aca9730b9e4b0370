"""The watcher against a real devhub and Temporal: which hub changes reach which placement
workflows, with which signal, read back from each workflow's history."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from hub import names as hub_names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from tests.integration.control.watcher_helpers import (
    OTHER_FINALIZER,
    add_taint,
    binding,
    cluster,
    mark_fulfilled,
    placement,
    quiet,
    relabel,
    run_status,
    running_watcher,
    signals,
    signals_matching,
    snapshot,
    unique,
)
from tests.support.waits import until_async
from workers.metrics import SchedulerMetrics
from workflows import names

pytestmark = pytest.mark.asyncio(loop_scope="session")

CHANGED = names.SIGNAL_PLACEMENT_CHANGED
SNAPSHOT = names.SIGNAL_SNAPSHOT_CHANGED
CLUSTER = names.SIGNAL_CLUSTER_CHANGED
DELETING = names.SIGNAL_PLACEMENT_DELETING


async def test_start_up_signals_every_placement_that_wants_the_scheduler(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    live = [unique("live"), unique("live")]
    finished = unique("finished")
    for name in live:
        hub.create(placement(name))
    # Being deleted, and the scheduler already cleaned up (no finalizer of ours): needs nothing.
    hub.create(placement(finished, finalizers=(OTHER_FINALIZER,)))
    hub.delete(ClusterResourcePlacement, finished)

    async with running_watcher(hub, temporal_client, task_queue) as watcher:
        assert watcher.ready and watcher.readiness() == (True, "ok")
        for name in live:
            (received,) = await signals_matching(temporal_client, name, CHANGED)
            assert received.reason == f"watcher started: placement {name} exists"
        await quiet(watcher)
        assert await run_status(temporal_client, finished) is None
        for name in live:
            status = await run_status(temporal_client, name)
            assert status is not None and status[1] == WorkflowExecutionStatus.RUNNING


async def test_readiness_names_the_kinds_not_listed_yet(
    hub: HubClient, temporal_client: Client, task_queue: str, devhub: object
) -> None:
    hub_faults = devhub.faults  # type: ignore[attr-defined]
    fault = hub_faults.inject(verb="list", resource="memberclusters", status=503)
    async with running_watcher(hub, temporal_client, task_queue, wait_ready=False) as watcher:
        # Every other kind listed (on a loaded machine some take a while): only the refused one
        # is left to name.
        await until_async(
            lambda: all(watcher.synced(kind) for kind in watcher.kinds if kind is not MemberCluster)
        )
        await until_async(lambda: watcher.stats.watch_failures > 0)
        ready, reason = watcher.readiness()
        assert not ready and not watcher.ready
        assert "waiting for the first list of memberclusters" in reason
        assert "HubUnavailableError" in reason
        fault.remove()
        await watcher.wait_ready(20)
        assert watcher.readiness() == (True, "ok")


async def test_standalone_placement_creation_and_spec_changes_signal_placement_changed(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    name = unique("web")
    async with running_watcher(hub, temporal_client, task_queue, snapshotter=True):
        hub.create(placement(name, "PickN", n=1))
        await signals_matching(temporal_client, name, CHANGED, f"placement {name} created")
        hub.patch(ClusterResourcePlacement, name, {"spec": {"policy": {"numberOfClusters": 2}}})
        await signals_matching(temporal_client, name, CHANGED, "spec changed (generation 1 -> 2)")


async def test_beside_kubefleet_placements_hear_of_snapshots_not_of_spec_changes(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    name = unique("web")
    hub.create(placement(name, "PickN", n=1))
    hub.create(snapshot(name, 0, n=1))
    async with running_watcher(hub, temporal_client, task_queue, snapshotter=False) as watcher:
        (first,) = await signals_matching(temporal_client, name, SNAPSHOT)
        assert first.reason == f"watcher started: placement {name} exists"

        hub.patch(ClusterResourcePlacement, name, {"spec": {"policy": {"numberOfClusters": 2}}})
        hub.patch(
            ClusterSchedulingPolicySnapshot,
            f"{name}-0",
            {"metadata": {"annotations": {hub_names.NUMBER_OF_CLUSTERS_ANNOTATION: "2"}}},
        )
        await signals_matching(
            temporal_client, name, SNAPSHOT, f"policy snapshot {name}-0: number-of-clusters 1 -> 2"
        )
        hub.patch(
            ClusterSchedulingPolicySnapshot,
            f"{name}-0",
            {"metadata": {"labels": {hub_names.IS_LATEST_SNAPSHOT_LABEL: "false"}}},
        )
        hub.create(snapshot(name, 1, n=2))
        await signals_matching(temporal_client, name, SNAPSHOT, f"policy snapshot {name}-1 created")
        await quiet(watcher)
        assert not [s for s in await signals(temporal_client, name) if s.signal == CHANGED]


async def test_a_cluster_label_change_reaches_pick_all_and_unfulfilled_pick_n_only(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    pick_all, short, done = unique("all"), unique("short"), unique("done")
    hub.create(cluster("member-1", env="dev"))
    hub.create(placement(pick_all, "PickAll"))
    hub.create(placement(short, "PickN", n=2))
    hub.create(placement(done, "PickN", n=1))
    mark_fulfilled(hub, done)
    metrics = SchedulerMetrics(process_metrics=False)

    async with running_watcher(hub, temporal_client, task_queue, metrics=metrics) as watcher:
        await quiet(watcher)
        relabel(hub, "member-1", env="prod")
        for name in (pick_all, short):
            (received,) = await signals_matching(temporal_client, name, CLUSTER)
            assert received.reason == "cluster member-1: labels changed"
        await quiet(watcher)
        assert [s.signal for s in await signals(temporal_client, done)] == [CHANGED]

    sample = metrics.registry.get_sample_value(
        "fleet_scheduler_watcher_events_total",
        {"kind": "MemberCluster", "event": "MODIFIED", "action": "signalled"},
    )
    assert sample == 1.0


async def test_a_cluster_deletion_reaches_every_placement_and_a_new_taint_none(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    pick_all, done = unique("all"), unique("done")
    hub.create(cluster("member-1"))
    hub.create(placement(pick_all, "PickAll"))
    hub.create(placement(done, "PickN", n=1))
    mark_fulfilled(hub, done)

    async with running_watcher(hub, temporal_client, task_queue) as watcher:
        await quiet(watcher)
        before = watcher.stats
        add_taint(hub, "member-1", "gpu")
        await until_async(lambda: watcher.stats.events > before.events)
        await quiet(watcher)
        assert watcher.stats.routes == before.routes  # a taint addition reaches nobody
        assert [s.signal for s in await signals(temporal_client, pick_all)] == [CHANGED]

        hub.delete(MemberCluster, "member-1")
        for name in (pick_all, done):
            (received,) = await signals_matching(temporal_client, name, CLUSTER)
            assert received.reason == "cluster member-1 was deleted"


async def test_a_binding_deletion_signals_its_placement(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    name = unique("web")
    hub.create(placement(name, "PickN", n=1))
    hub.create(binding(name, "member-1"))
    async with running_watcher(hub, temporal_client, task_queue):
        await signals_matching(temporal_client, name, CHANGED)
        hub.delete(ClusterResourceBinding, f"{name}-member-1")  # held by our finalizer
        (received,) = await signals_matching(temporal_client, name, names.SIGNAL_BINDING_DELETING)
        assert received.reason == f"binding {name}-member-1 (cluster member-1): deletion started"


async def test_placement_deletion_runs_cleanup_and_late_events_start_nothing(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    name = unique("web")
    hub.create(placement(name, "PickN", n=1))
    async with running_watcher(hub, temporal_client, task_queue) as watcher:
        await signals_matching(temporal_client, name, CHANGED)
        hub.delete(ClusterResourcePlacement, name)  # held by our finalizer until cleanup
        await signals_matching(temporal_client, name, DELETING, "deletion started")

        async def completed() -> tuple[str, WorkflowExecutionStatus | None] | None:
            status = await run_status(temporal_client, name)
            done = status is not None and status[1] == WorkflowExecutionStatus.COMPLETED
            return status if done else None

        run_id, _ = await until_async(completed)
        await until_async(lambda: watcher.cached(ClusterResourcePlacement) == 0)
        await quiet(watcher)
        before = watcher.stats
        # A late event naming the gone placement: a plain signal at most, never a new run.
        hub.create(snapshot(name, 0))
        await until_async(lambda: watcher.stats.gone == before.gone + 1)
        await quiet(watcher)
        assert await run_status(temporal_client, name) == (
            run_id,
            WorkflowExecutionStatus.COMPLETED,
        )

        # Re-created with the same name: a new run of the same workflow id.
        hub.create(placement(name, "PickN", n=1))

        async def new_run() -> bool:
            status = await run_status(temporal_client, name)
            return status is not None and status[0] != run_id

        await until_async(new_run)
        await signals_matching(temporal_client, name, CHANGED, f"placement {name} created")


async def test_a_snapshot_for_a_placement_not_cached_yet_still_starts_its_workflow(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object, devhub: object
) -> None:
    # Beside KubeFleet a new placement's snapshot can be seen before the placement itself;
    # here the placement list never answers, so only asking the hub can find the placement.
    faults = devhub.faults  # type: ignore[attr-defined]
    faults.inject(verb="list", resource="clusterresourceplacements", status=503)
    name = unique("web")
    async with running_watcher(
        hub, temporal_client, task_queue, snapshotter=False, wait_ready=False
    ) as watcher:
        await until_async(lambda: watcher.synced(ClusterSchedulingPolicySnapshot))
        hub.create(placement(name, "PickN", n=1))
        hub.create(snapshot(name, 0))
        (received,) = await signals_matching(temporal_client, name, SNAPSHOT)
        assert received.reason == f"policy snapshot {name}-0 created"
        assert not watcher.synced(ClusterResourcePlacement)
    faults.clear()


async def test_a_burst_of_cluster_changes_is_coalesced_into_few_signals(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    name = unique("all")
    hub.create(cluster("member-1"))
    hub.create(placement(name, "PickAll"))
    async with running_watcher(hub, temporal_client, task_queue) as watcher:
        await signals_matching(temporal_client, name, CHANGED)
        await quiet(watcher)
        before = watcher.stats

        def burst() -> None:
            for index in range(20):
                relabel(hub, "member-1", env=f"step-{index}")  # a label it reads

        await asyncio.to_thread(burst)  # the watcher's loop runs meanwhile
        await until_async(lambda: watcher.stats.events - before.events >= 20)
        await quiet(watcher)
        received = [s for s in await signals(temporal_client, name) if s.signal == CLUSTER]
        assert 1 <= len(received) <= 5, received
        assert watcher.stats.routes - before.routes == 20
        assert any("more events" in s.reason for s in received)
