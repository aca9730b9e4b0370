"""Objects deleted while a cycle is running.

A cycle reads the placement, its snapshot, every cluster and the placement's bindings, then
writes. devhub's hang fault holds one of those reads open, the test deletes an object, and the
read is released: the cycle goes on with what it read before the deletion (a real race with a
hub, made deterministic). What a user must see afterwards:

- placement deleted mid-cycle: the bindings that cycle wrote are removed by the cleanup turn
  that follows, with the snapshots and our finalizer; the placement is gone and its workflow
  completes. Nothing is left behind, nothing is retried.
- cluster deleted mid-cycle: the binding the cycle created on it is dangling on the next cycle
  (the watcher signals the deletion) and is marked Unscheduled; the other clusters keep theirs."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from control.watcher import Watcher
from devhub import DevHub
from devhub.faults import Fault
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.cycles.schedule import WHY_DANGLING
from tests.integration.bad_input.outcome import assert_no_retries, decisions, finished
from tests.support.fleet import add_cluster, add_placement, bindings, live_targets, unique
from tests.support.history import activity_attempts, completed_activities
from tests.support.waits import until_async
from workflows.models import CycleReport, PlacementStatus, TurnResult
from workflows.names import ACTIVITY_CLEANUP_PLACEMENT, workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def held(fault: Fault) -> None:
    """Wait until the cycle's read is being held. The worker's hub client gives up on a read
    after 5 s (e2e TEST_TIMEOUT); the tests release it well before, so the hang itself never
    makes the cycle retry."""
    await until_async(lambda: fault.hits >= 1, timeout=30, blocking=True)


async def test_a_placement_deleted_mid_cycle_is_cleaned_up_after_the_cycle(
    hub: HubClient, temporal_client: Client, standalone: Watcher, devhub: DevHub
) -> None:
    add_cluster(hub, "member-a")
    add_cluster(hub, "member-b")
    # The turn reads the placement and makes its snapshot, then its cycle lists the bindings:
    # hold that list.
    fault = devhub.faults.inject(
        verb="list", resource="clusterresourcebindings", hang=True, count=1
    )
    web = unique("web")
    add_placement(hub, web, {"placementType": "PickAll"})
    await held(fault)

    hub.delete(ClusterResourcePlacement, web)  # our finalizer keeps it, deleting
    assert hub.get(ClusterResourcePlacement, web).metadata.deleting
    fault.remove()

    handle = temporal_client.get_workflow_handle(workflow_id(web), result_type=PlacementStatus)
    result = await asyncio.wait_for(handle.result(), timeout=45)
    # The cleanup ran as an activity. A watcher signal that lands while it finishes makes the
    # workflow look once more and find the placement gone, so the final text may say either.
    cleanups = [kind for kind, _ in await completed_activities(handle)].count(
        ACTIVITY_CLEANUP_PLACEMENT
    )
    assert cleanups == 1
    assert result.last is not None and result.last.writes.created == 2  # the cycle did write
    assert result.last_error is None
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert not bindings(hub, web)
    assert not hub.list(ClusterSchedulingPolicySnapshot).items
    assert not hub.list(ClusterResourcePlacement).items
    attempts = await activity_attempts(handle)
    assert attempts and max(attempts) == 1, attempts


async def test_a_cluster_deleted_mid_cycle_has_its_new_binding_unscheduled_next_cycle(
    hub: HubClient, temporal_client: Client, standalone: Watcher, devhub: DevHub
) -> None:
    add_cluster(hub, "member-a")
    add_cluster(hub, "member-b")
    web = unique("web")
    add_placement(hub, web, {"placementType": "PickAll"})
    await until_async(lambda: len(live_targets(hub, web)) == 2, blocking=True)
    before = (await finished(temporal_client, web)).status.cycles

    # A cluster joins, which reaches the PickAll placement; its cycle has listed the clusters
    # (member-c included) when it lists the bindings: hold that list and delete member-c.
    fault = devhub.faults.inject(
        verb="list", resource="clusterresourcebindings", hang=True, count=1
    )
    add_cluster(hub, "member-c")
    await held(fault)
    hub.delete(MemberCluster, "member-c")
    fault.remove()

    await until_async(
        lambda: (
            {b.spec.target_cluster: b.spec.state for b in bindings(hub, web)}
            == {
                "member-a": names.STATE_SCHEDULED,
                "member-b": names.STATE_SCHEDULED,
                "member-c": names.STATE_UNSCHEDULED,
            }
        ),
        blocking=True,
    )
    done = await finished(temporal_client, web, cycles=before + 2)
    assert_no_retries(done)
    assert done.error is None
    gone = next(b for b in bindings(hub, web) if b.spec.target_cluster == "member-c")
    assert gone.metadata.annotations[names.PREVIOUS_BINDING_STATE_ANNOTATION] == (
        names.STATE_SCHEDULED
    )
    assert "member-c" not in {n for n, d in decisions(hub, web).items() if d.selected}
    # The history tells the story: one cycle created it, a later one found it dangling.
    reports = await cycle_reports(temporal_client, web)
    created = [r.cycle for r in reports if r.cycle > before and r.writes.created == 1]
    unscheduled = [
        r.cycle
        for r in reports
        if r.explanation is not None
        and any(
            g.why == WHY_DANGLING and g.clusters == ["member-c"] for g in r.explanation.bindings
        )
    ]
    assert len(created) == 1 and len(unscheduled) == 1, [r.summary for r in reports]
    assert created[0] < unscheduled[0]


async def cycle_reports(client: Client, placement: str) -> list[CycleReport]:
    """Every cycle report in the placement's history (schedule_once results), in order."""
    handle = client.get_workflow_handle(workflow_id(placement))
    reports: list[CycleReport] = []
    for kind, payloads in await completed_activities(handle):
        if kind == "schedule_once":
            [turn] = await client.data_converter.decode(payloads, [TurnResult])
            if turn.report is not None:
                reports.append(turn.report)
    return reports
