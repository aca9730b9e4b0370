"""What the workflow tests share: a placement name, a workflow started with a stand-in script
(on the activity queue, or with local turns), its status once a condition holds, and a
replay of every run (for tests whose worker caches workflows)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.integration.workflows.stand_ins import SCRIPTS, Script
from tests.support.waits import WAIT_S, until_async
from workflows import names
from workflows.models import PlacementInput, PlacementStatus
from workflows.placement import PlacementWorkflow, ResourcePlacementWorkflow


def placement_name() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


async def start(
    client: Client, queue: str, name: str, script: Script, turns_per_run: int | None = None
) -> WorkflowHandle[PlacementWorkflow, PlacementStatus]:
    """Start the placement's workflow with its turns on the activity queue: these tests are
    about the loop, and their worker caches no workflow, where a local turn still in flight
    when a signal lands can hold its workflow task until it times out (10 s). Local turns have
    their own tests (test_local_cycle_turns.py, `start_local`)."""
    SCRIPTS[name] = script
    return await client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(placement=name, turns_per_run=turns_per_run, turn_execution="queue"),
        id=names.workflow_id(name),
        task_queue=queue,
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
    SCRIPTS[name] = script
    return await client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(
            placement=name,
            turn_execution="local",
            turns_per_run=turns_per_run,
            local_turn_seconds=local_turn_seconds,
        ),
        id=names.workflow_id(name),
        task_queue=queue,
    )


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
