"""Rebalancing end to end (docs/capacity.md): capacity-aware placements spread over a fleet, a
pack plan proposed to their workflows, and the moves made by their next turns: new binding
first, old one unscheduled, room moved in the ledgers, a disruption budget respected, every move
in its placement's history."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from activities.rebalance import plan_rebalance, propose
from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
)
from scheduler.moves.rebalance import Move
from tests.support.fleet import add_cluster, live_targets, unique
from tests.support.history import completed_activities
from tests.support.waits import until_async, within
from workers.cli.render import render_rebalance
from workflows.models import MoveRequest, MovesRequest
from workflows.names import SIGNAL_MOVE, workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")


def capacity_placement(name: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {
                "name": name,
                "annotations": {
                    names.REQUESTS_ANNOTATION: "cpu=3",
                    names.REBALANCE_ANNOTATION: names.REBALANCE_ALLOWED,
                },
            },
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {"placementType": "PickN", "numberOfClusters": 1},
            },
        }
    )


def reserved(hub: HubClient) -> dict[str, set[str]]:
    return {
        ledger.name: set(ledger.spec.reservations)
        for ledger in hub.list(CapacityLedger).items
        if ledger.spec.reservations
    }


async def history_lines(client: Client, placement: str) -> str:
    """The results of the placement's activities, as recorded in its history."""
    handle = client.get_workflow_handle(workflow_id(placement))
    return "\n".join(
        payload.data.decode()
        for _, payloads in await completed_activities(handle)
        for payload in payloads
    )


async def test_pack_frees_clusters_through_the_placements_own_turns(
    hub: HubClient, system: Watcher, temporal_client: Client
) -> None:
    prefix = unique("pk")
    clusters = [f"{prefix}-c{i}" for i in range(4)]
    for cluster in clusters:
        add_cluster(hub, cluster, allocatable={"cpu": "10", "memory": "64Gi"})
    placements = [f"{prefix}-p{i}" for i in range(4)]
    for placement in placements:
        hub.create(capacity_placement(placement))
        # LeastAllocated spreads them: one to each emptiest cluster
        await until_async(lambda p=placement: live_targets(hub, p), blocking=True)
    spread = {p: next(iter(live_targets(hub, p))) for p in placements}
    assert sorted(spread.values()) == sorted(clusters)

    # The placement on the first cluster to be emptied may not be disrupted (nothing is
    # Available in devhub, so minAvailable 1 allows no disruption): the plan leaves it.
    plan = plan_rebalance(hub, "pack")
    assert len(plan.moves) == 2 and plan.clusters_in_use() == (4, 2)
    guarded = plan.moves[0].placement
    hub.create(
        ClusterResourcePlacementDisruptionBudget.from_wire(
            {"metadata": {"name": guarded}, "spec": {"minAvailable": 1}}
        )
    )
    plan = plan_rebalance(hub, "pack")
    assert guarded not in {m.placement for m in plan.moves}
    assert plan.moves, render_rebalance(plan, dry_run=True)
    before, after = plan.clusters_in_use()
    assert before == 4 and after < 4
    text = render_rebalance(plan, dry_run=True)
    assert f"clusters in use 4 -> {after}" in text and "nothing was written" in text

    reached, missed = await propose(temporal_client, plan.moves, "test")
    assert missed == {} and reached == sorted({m.placement for m in plan.moves})
    for move in plan.moves:
        await until_async(
            lambda m=move: live_targets(hub, m.placement) == {m.target: "Scheduled"}, blocking=True
        )
        # The old binding is unscheduled before its reservation is released: wait for both.
        await until_async(
            lambda m=move: m.binding not in reserved(hub).get(m.source, set()), blocking=True
        )
        # the new binding holds the room, the old one gave it back
        holders = reserved(hub)
        assert move.binding not in holders.get(move.source, set())
        assert any(b.startswith(f"{move.placement}-") for b in holders.get(move.target, set())), (
            holders
        )
        line = f"moved {move.binding} {move.source} -> {move.target}"

        async def recorded(m: Move = move, text: str = line) -> bool:
            return text in await history_lines(temporal_client, m.placement)

        await until_async(recorded)  # the turn's result, once its cycle is done too
    in_use = {next(iter(live_targets(hub, p))) for p in placements}
    assert len(in_use) == after

    # Asked directly, the guarded placement's workflow refuses the move on fresh reads.
    source = spread[guarded]
    target = next(c for c in sorted(in_use) if c != source)
    [binding] = [
        b.name
        for b in hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: guarded}).items
        if b.spec.state != names.STATE_UNSCHEDULED
    ]
    await temporal_client.get_workflow_handle(workflow_id(guarded)).signal(
        SIGNAL_MOVE,
        MovesRequest(
            moves=[MoveRequest(binding=binding, source=source, target=target, reason="test")],
            reason="asked by a test",
        ),
    )

    async def refused() -> bool:
        lines = await history_lines(temporal_client, guarded)
        return "the disruption budget allows 0 move(s) now" in lines

    await until_async(refused)
    assert live_targets(hub, guarded) == {source: "Scheduled"}


async def test_the_rebalance_schedule_proposes_and_the_placements_move(
    hub: HubClient, system: Watcher, temporal_client: Client, task_queue: str
) -> None:
    """`run --rebalance-every`: the fleet-rebalance Schedule's workflow plans and proposes."""
    from temporalio.client import ScheduleOverlapPolicy

    from control.schedules import ensure_rebalance_schedule
    from workflows.models import RebalanceReport
    from workflows.names import REBALANCE_WORKFLOW

    prefix = unique("rs")
    for i in range(2):
        add_cluster(hub, f"{prefix}-c{i}", allocatable={"cpu": "10", "memory": "64Gi"})
    placements = [f"{prefix}-p{i}" for i in range(2)]
    for placement in placements:
        hub.create(capacity_placement(placement))
        await until_async(lambda p=placement: live_targets(hub, p), blocking=True)
    assert len({next(iter(live_targets(hub, p))) for p in placements}) == 2

    from datetime import timedelta

    schedule_id = await ensure_rebalance_schedule(
        temporal_client, task_queue, timedelta(hours=1), "pack"
    )
    handle = temporal_client.get_schedule_handle(schedule_id)
    try:
        await handle.trigger(overlap=ScheduleOverlapPolicy.ALLOW_ALL)

        async def report() -> RebalanceReport | None:
            async for run in temporal_client.list_workflows(
                f"WorkflowType = '{REBALANCE_WORKFLOW}' AND TaskQueue = '{task_queue}' "
                "AND ExecutionStatus = 'Completed'"
            ):
                handle_ = temporal_client.get_workflow_handle(
                    run.id, run_id=run.run_id, result_type=RebalanceReport
                )
                done: RebalanceReport = await within(
                    handle_.result(), what=f"the result of completed run {run.run_id}"
                )
                return done
            return None

        done = await until_async(report)
        # the whole fleet is planned: other tests' placements may add moves of their own
        ours = [line for line in done.moves if prefix in line]
        assert len(ours) == 1, done
        await until_async(
            lambda: len({next(iter(live_targets(hub, p)), None) for p in placements}) == 1,
            blocking=True,
        )
    finally:
        await handle.delete()
