"""What the workflow tests share: a placement name, a workflow started with a stand-in script
(on the activity queue, with local turns, or as the workers choose), its status once a
condition holds, turns asked one after another, the placement's deletion to the workflow's end,
and a replay of every run (for tests whose worker caches workflows)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import PatchActivationInput, Replayer

from tests.integration.workflows.stand_ins import SCRIPTS, STAND_INS, Script
from tests.support.waits import WAIT_S, until_async, within
from workers.worker import split_workers
from workflows import names
from workflows.models import (
    HubEvent,
    PlacementInput,
    PlacementStatus,
    RequeueRequest,
    TurnExecutionMode,
)
from workflows.placement import PlacementWorkflow, ResourcePlacementWorkflow
from workflows.renewal import GENERATION_PATCH


def placement_name() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


async def start_placement(
    client: Client,
    queue: str,
    name: str,
    script: Script,
    *,
    turn_execution: TurnExecutionMode | None = None,
    turns_per_run: int | None = None,
    local_turn_seconds: float | None = None,
    first: tuple[str, HubEvent] | None = None,
) -> WorkflowHandle[PlacementWorkflow, PlacementStatus]:
    """Start the placement's workflow on `script`'s stand-ins: its turns where `turn_execution`
    says (None: the workers choose), and `first`, a (signal, event), as its start signal."""
    SCRIPTS[name] = script
    signal, event = first if first is not None else (None, None)
    return await client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(
            placement=name,
            turn_execution=turn_execution,
            turns_per_run=turns_per_run,
            local_turn_seconds=local_turn_seconds,
        ),
        id=names.workflow_id(name),
        task_queue=queue,
        start_signal=signal,
        start_signal_args=[] if event is None else [event],
    )


async def start(
    client: Client, queue: str, name: str, script: Script, turns_per_run: int | None = None
) -> WorkflowHandle[PlacementWorkflow, PlacementStatus]:
    """Start the placement's workflow with its turns on the activity queue: these tests are
    about the loop, and their worker caches no workflow, where a local turn still in flight
    when a signal lands can hold its workflow task until it times out (10 s). Local turns have
    their own tests (test_local_cycle_turns.py, `start_local`)."""
    return await start_placement(
        client, queue, name, script, turn_execution="queue", turns_per_run=turns_per_run
    )


async def status_when(
    handle: WorkflowHandle[PlacementWorkflow, PlacementStatus],
    check: Callable[[PlacementStatus], bool],
    timeout: float = WAIT_S,
) -> PlacementStatus:
    """The workflow's status once `check` holds for it (queried until then)."""

    async def matching() -> PlacementStatus | None:
        status = await handle.query(PlacementWorkflow.status)
        return status if check(status) else None

    return await until_async(matching, what="the workflow's status", timeout=timeout)


def idle(status: PlacementStatus) -> bool:
    return status.phase == "idle"


async def start_local(
    client: Client,
    queue: str,
    name: str,
    script: Script,
    turns_per_run: int | None = None,
    local_turn_seconds: float | None = None,
) -> WorkflowHandle[PlacementWorkflow, PlacementStatus]:
    return await start_placement(
        client,
        queue,
        name,
        script,
        turn_execution="local",
        turns_per_run=turns_per_run,
        local_turn_seconds=local_turn_seconds,
    )


async def requeued_turns(
    handle: WorkflowHandle[PlacementWorkflow, PlacementStatus], cycles: Iterable[int]
) -> PlacementStatus:
    """One requeue for each cycle number in `cycles`, each once the turn before it has run and
    the workflow is idle; the status after the last."""
    status: PlacementStatus | None = None
    for cycle in cycles:
        await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason=f"turn {cycle}"))
        status = await status_when(handle, lambda s, c=cycle: s.cycles == c and idle(s))
    assert status is not None, "no cycle to requeue"
    return status


async def delete_and_complete(
    handle: WorkflowHandle[PlacementWorkflow, PlacementStatus], script: Script
) -> PlacementStatus:
    """The placement is deleted (its stand-ins read it deleting, the watcher's signal says so):
    the workflow cleans up and completes; its result."""
    script.deleted = True
    await handle.signal(PlacementWorkflow.placement_deleting)
    return await within(handle.result(), what=f"{handle.id} to complete once deleted", timeout=60)


async def replays(client: Client, workflow_id: str) -> int:
    """Replay every run of the workflow against today's code (a worker that caches workflows
    does not replay them as it goes); the number of runs."""
    replayer = Replayer(
        workflows=[PlacementWorkflow, ResourcePlacementWorkflow],
        data_converter=pydantic_data_converter,
    )
    runs = 0
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        run = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        await replayer.replay_workflow(await run.fetch_history())
        runs += 1
    return runs


def before_generations(found: PatchActivationInput) -> bool:
    return found.patch_id != GENERATION_PATCH


@asynccontextmanager
async def serving(client: Client, queue: str, *, old: bool = False) -> AsyncIterator[None]:
    """A workflow worker on `queue` with the stand-ins: today's, or one from before patch
    generations (`old`)."""
    async with split_workers(
        client,
        queue,
        workflows=[PlacementWorkflow, ResourcePlacementWorkflow],
        activities=STAND_INS,
        max_cached_workflows=0,
        patch_activation_callback=before_generations if old else None,
    ):
        yield
