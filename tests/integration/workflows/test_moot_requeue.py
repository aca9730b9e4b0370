"""The reconcile's requeue for a cluster change carries the hub version it saw
(RequeueRequest.unless_read): a turn whose cycle read that version or later, often one that was
already queued or running when the requeue arrived in a storm, makes it moot, and the workflow
runs no second turn for it. The real PlacementWorkflow on the stand-in activities, every task
replayed from the start (the `worker` fixture caches no workflow)."""

from __future__ import annotations

import asyncio

from tests.integration.workflows.stand_ins import Script
from tests.integration.workflows.workflow_helpers import (
    idle,
    placement_name,
    replays,
    start,
    status_when,
)
from tests.support.history import patch_ids
from workflows.models import RequeueRequest
from workflows.patches import AT_START_2_PATCH, MOOT_REQUEUE_PATCH
from workflows.placement import PlacementWorkflow


def reconciled(version: int) -> RequeueRequest:
    return RequeueRequest(reason="reconcile: cluster c0 changed", unless_read=version)


async def test_a_requeue_a_cycle_already_read_runs_no_turn(
    temporal_client, task_queue, worker
) -> None:
    name = placement_name()
    script = Script(clusters_version=30)
    handle = await start(temporal_client, task_queue, name, script)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))

    # The last cycle read version 30: a requeue for 30 is moot, one for 31 is not.
    await handle.signal(PlacementWorkflow.requeue, reconciled(30))
    status = await status_when(handle, lambda s: s.signals_this_run == 1 and idle(s))
    assert (status.cycles, status.turns_this_run, script.prepares) == (1, 1, 1)
    await handle.signal(PlacementWorkflow.requeue, reconciled(31))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))

    # The storm's case: the requeue arrives while a turn is running; that turn reads the
    # change (version 40 now), so no second turn follows it.
    script.clusters_version, script.gate = 40, asyncio.Event()
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="an edit"))
    await status_when(handle, lambda s: script.cycle_attempts == 3)
    await handle.signal(PlacementWorkflow.requeue, reconciled(35))
    await status_when(handle, lambda s: s.signals_this_run == 4)
    script.gate.set()
    status = await status_when(handle, lambda s: s.cycles == 3 and idle(s))
    assert (status.turns_this_run, script.prepares) == (3, 3)

    # A person's requeue beside it, or one answered by a turn, always runs.
    script.gate = None
    await handle.signal(PlacementWorkflow.requeue, reconciled(10))
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="a person"))
    await status_when(handle, lambda s: s.cycles == 4 and idle(s))
    answer = await handle.execute_update(PlacementWorkflow.requeue_and_wait, reconciled(10))
    assert answer.outcome == "scheduled" and script.prepares == 5

    history = await handle.fetch_history()
    assert AT_START_2_PATCH in patch_ids(history)
    assert MOOT_REQUEUE_PATCH not in patch_ids(history)  # answered at the start
    assert await replays(temporal_client, handle.id) == 1
