"""Where a placement's activities go: the workflow schedules them on the activity task queue
(`<queue>-activities`), and a workflow worker that runs no activity worker still serves those an
earlier version scheduled on the workflow queue itself, so an upgrade strands none of them."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The workflow sandbox re-imports this module: our packages pass through as they are.
with workflow.unsafe.imports_passed_through():
    from activities.plumbing import ActivitySettings
    from hub.client import HubClient
    from workers.worker import build_worker
    from workflows import names
    from workflows.models import CleanupReport, CleanupRequest

pytestmark = pytest.mark.asyncio(loop_scope="session")


@workflow.defn(name="EarlierVersionCleanup")
class EarlierVersionCleanup:
    """An activity scheduled as versions before the split did: on the workflow task queue."""

    @workflow.run
    async def run(self, queue_and_placement: list[str]) -> CleanupReport:
        queue, placement = queue_and_placement
        report: CleanupReport = await workflow.execute_activity(
            names.ACTIVITY_CLEANUP_PLACEMENT,
            CleanupRequest(placement=placement),
            task_queue=queue,
            start_to_close_timeout=timedelta(seconds=30),
            result_type=CleanupReport,
        )
        return report


async def test_a_workflow_worker_without_activities_serves_those_left_on_its_queue(
    temporal_client: Client, hub: HubClient
) -> None:
    queue = f"split-{uuid.uuid4().hex[:8]}"
    elsewhere = f"{queue}-earlier"
    workers = build_worker(
        temporal_client, hub, task_queue=queue, settings=ActivitySettings(), activities=False
    )
    assert [w.config()["task_queue"] for w in workers.workers] == [queue]  # no activity worker
    async with workers, Worker(
        temporal_client, task_queue=elsewhere, workflows=[EarlierVersionCleanup]
    ):
        report = await temporal_client.execute_workflow(
            EarlierVersionCleanup.run,
            [queue, f"gone-{uuid.uuid4().hex[:6]}"],
            id=f"earlier-{uuid.uuid4().hex[:8]}",
            task_queue=elsewhere,
            execution_timeout=timedelta(seconds=60),
        )
    assert report.bindings_deleted == 0 and not report.finalizer_removed
