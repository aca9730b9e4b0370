"""`explain` against a worker older than the `explanation` query: that worker's `status` answer
still holds the last cycle's explanation, which is shown instead of failing."""

from __future__ import annotations

import uuid

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from scheduler import Explanation, Outcome
    from workers.cli.common import CliError
    from workers.cli.explain import query_explanation
    from workflows import names
    from workflows.models import CycleReport, PlacementStatus

pytestmark = pytest.mark.asyncio(loop_scope="session")

EXPLANATION = Explanation(placement_type="PickN", snapshot="old-0", kept=["a", "b"])


@workflow.defn(name=names.PLACEMENT_WORKFLOW)
class OlderPlacementWorkflow:
    """A placement workflow as workers before the `explanation` query ran it."""

    @workflow.run
    async def run(self, placement: str) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.query(name=names.QUERY_STATUS)
    def status(self) -> PlacementStatus:
        last = CycleReport(
            cycle=3,
            placement="old",
            snapshot="old-0",
            outcome=Outcome(placement_type="PickN", wanted=2, picked=2, fulfilled=True),
            explanation=EXPLANATION,
        )
        return PlacementStatus(placement="old", cycles=3, waiting_for="an event", last=last)



@workflow.defn(name=names.PLACEMENT_WORKFLOW)
class FailingExplanationWorkflow(OlderPlacementWorkflow):
    """A placement workflow whose `explanation` query fails for a reason of its own."""

    @workflow.run
    async def run(self, placement: str) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.query(name=names.QUERY_EXPLANATION)
    def explanation(self) -> None:
        raise RuntimeError("a query that fails for another reason")


async def test_explain_falls_back_to_the_status_answer_of_an_older_worker(
    temporal_client: Client, task_queue: str
) -> None:
    workflow_id = f"crp/old-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=task_queue, workflows=[OlderPlacementWorkflow]):
        handle = await temporal_client.start_workflow(
            OlderPlacementWorkflow.run, "old", id=workflow_id, task_queue=task_queue
        )
        status = await handle.query(names.QUERY_STATUS, result_type=PlacementStatus)
        answer = await query_explanation(temporal_client, workflow_id, status)
        assert answer.deciding is None
        assert answer.last is not None and answer.last.full_explanation() == EXPLANATION
        await handle.terminate()


async def test_an_explanation_query_that_fails_otherwise_is_an_error(
    temporal_client: Client, task_queue: str
) -> None:
    """Only a missing query falls back; any other failure is reported in one line."""
    workflow_id = f"crp/old-{uuid.uuid4().hex[:8]}"
    worker = Worker(temporal_client, task_queue=task_queue, workflows=[FailingExplanationWorkflow])
    async with worker:
        handle = await temporal_client.start_workflow(
            FailingExplanationWorkflow.run, "old", id=workflow_id, task_queue=task_queue
        )
        status = await handle.query(names.QUERY_STATUS, result_type=PlacementStatus)
        with pytest.raises(CliError, match=r"explanation query .* failed: .*another reason"):
            await query_explanation(temporal_client, workflow_id, status)
        await handle.terminate()
