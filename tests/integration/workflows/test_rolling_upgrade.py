"""A rolling upgrade with running placements: version A's workers, then version B's beside them,
then A stops. B changes a workflow branch (behind `workflow.patched`) and adds a field to the
activity result. Worker Deployment versioning routes every task to the current version, the
placement workflows auto-upgrade, no workflow task fails, and both versions' histories replay.

Workers run with max_cached_workflows=0, so every task B runs replays the whole history, A's
part included."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.support.waits import until_async

# The workflow sandbox re-imports this module; our packages must be the same objects inside.
with workflow.unsafe.imports_passed_through():
    from tests.integration.workflows.stand_ins import (
        SCRIPTS,
        Script,
        cleanup_placement,
        schedule_once,
    )
    from workers.versioning import WorkerVersion, current_build_id, promote
    from workers.worker import PlacementWorkers, split_workers
    from workflows import names
    from workflows.models import (
        CycleReport,
        PlacementInput,
        PlacementStatus,
        RequeueRequest,
        TurnRequest,
        TurnResult,
    )
    from workflows.names import ACTIVITY_SCHEDULE_ONCE
    from workflows.patches import AT_START_GROUPS
    from workflows.placement import PlacementWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

PATCH = "test-version-b-memo"
PLACEMENTS = 3


@workflow.defn(name=names.PLACEMENT_WORKFLOW)
class PlacementWorkflowB(PlacementWorkflow):
    """Version B: after each cycle it also records the build in the memo (a new command)."""

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        return await super().run(input)

    async def _after_cycle(self, report: CycleReport) -> None:
        if workflow.patched(PATCH):
            workflow.upsert_memo({"build": "b"})
        await super()._after_cycle(report)


@activity.defn(name=ACTIVITY_SCHEDULE_ONCE)
async def schedule_once_b(request: TurnRequest) -> dict[str, Any]:
    """Version B's activity: its result has fields version A does not know, at the top and
    inside the scheduler's own models (which once rejected unknown fields)."""
    result = (await schedule_once(request)).model_dump(mode="json", by_alias=True)
    result["builtBy"] = "b"
    if result.get("report"):
        result["report"]["outcome"]["addedInB"] = True
    return result


def _worker(
    client: Client, queue: str, version: WorkerVersion, workflows: Sequence[type], b: bool
) -> PlacementWorkers:
    return split_workers(
        client,
        queue,
        workflows=list(workflows),
        activities=[schedule_once_b if b else schedule_once, cleanup_placement],
        deployment_config=version.deployment_config(),
        max_cached_workflows=0,
    )


async def _settled(handle: WorkflowHandle[Any, Any], cycles: int) -> PlacementStatus:
    async def idle_at() -> PlacementStatus | None:
        status: PlacementStatus = await handle.query(
            names.QUERY_STATUS, result_type=PlacementStatus
        )
        return status if status.cycles >= cycles and status.phase == "idle" else None

    return await until_async(idle_at, what=f"{handle.id} idle at cycle {cycles}", timeout=30)


def _count(history: WorkflowHistory, event_type: int) -> int:
    return sum(1 for event in history.events if event.event_type == event_type)


def _failed_tasks(history: WorkflowHistory) -> list[str]:
    return [
        str(event.workflow_task_failed_event_attributes.failure.message)
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def test_a_rolling_upgrade_moves_running_placements_to_the_new_version(
    temporal_client: Client, task_queue: str
) -> None:
    deployment = f"fleet-{uuid.uuid4().hex[:8]}"
    version_a = WorkerVersion(build_id="a", deployment=deployment)
    version_b = WorkerVersion(build_id="b", deployment=deployment)
    placements = [f"up-{uuid.uuid4().hex[:8]}" for _ in range(PLACEMENTS)]
    handles = []

    async with _worker(temporal_client, task_queue, version_a, [PlacementWorkflow], b=False):
        await promote(temporal_client, version_a)
        for name in placements:
            SCRIPTS[name] = Script()
            handles.append(
                await temporal_client.start_workflow(
                    PlacementWorkflow.run,
                    # Two turns a run: the second run starts on B. A patch's answer is fixed
                    # for a run at its first call, which B makes replaying A's cycle, so B's
                    # branch shows from the run after the upgrade on, as Temporal intends.
                    # Turns on the activity queue: the results this test reads are there.
                    PlacementInput(placement=name, turns_per_run=2, turn_execution="queue"),
                    id=names.workflow_id(name),
                    task_queue=task_queue,
                )
            )
        for handle in handles:
            await _settled(handle, 1)
        before = [await handle.fetch_history() for handle in handles]

        # B starts beside A and takes over; then A stops.
        worker_b = _worker(temporal_client, task_queue, version_b, [PlacementWorkflowB], b=True)
        await worker_b.__aenter__()
    try:
        await promote(temporal_client, version_b)
        assert await current_build_id(temporal_client, deployment) == "b"
        for cycle in (2, 3):
            for handle in handles:
                await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="upgraded"))
            for handle in handles:
                await _settled(handle, cycle)
    finally:
        await worker_b.__aexit__(None, None, None)

    first_runs = [  # A's cycle, then B's
        await temporal_client.get_workflow_handle(
            handle.id, run_id=handle.first_execution_run_id
        ).fetch_history()
        for handle in handles
    ]
    second_runs = [
        await temporal_client.get_workflow_handle(handle.id).fetch_history() for handle in handles
    ]
    for first, second in zip(first_runs, second_runs, strict=True):
        assert _failed_tasks(first) == [] and _failed_tasks(second) == []
        # The first run continued as new; B's branch ran in the second: marker and memo.
        assert first.events[-1].event_type == (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        )
        # B's marker and the run's patches at start (workflows.patches.AT_START_GROUPS).
        assert _count(second, EventType.EVENT_TYPE_MARKER_RECORDED) == 1 + len(AT_START_GROUPS)
        assert _count(second, EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED) == 1
        completed = [
            e.activity_task_completed_event_attributes.result.payloads[0]
            for e in first.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        ]
        # B wrote the first run's last result, with its new field; version A's TurnResult
        # decodes it.
        assert b"builtBy" in completed[-1].data and b"builtBy" not in completed[0].data
        (decoded,) = pydantic_data_converter.payload_converter.from_payloads(
            [completed[-1]], [TurnResult]
        )
        assert decoded.report is not None and decoded.report.cycle == 2

    # Each version's code replays the histories it must: A its own, B both parts.
    for code, histories in (
        (PlacementWorkflow, before),
        (PlacementWorkflowB, [*first_runs, *second_runs]),
    ):
        replayer = Replayer(workflows=[code], data_converter=pydantic_data_converter)
        for history in histories:
            await replayer.replay_workflow(history)
