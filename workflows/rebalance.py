"""The fleet-rebalance Schedule's workflow (docs/capacity.md, "Compaction and rebalancing"): one
activity that plans moves from the hub and proposes them to the placements' workflows, each of
which makes them in its next turn. Off unless `fleet-scheduler run --rebalance-every` is set."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from workflows import names
    from workflows.models import RebalanceInput, RebalanceReport

__all__ = ["RebalanceWorkflow"]

REBALANCE_TIMEOUT = timedelta(minutes=4)
REBALANCE_HEARTBEAT = timedelta(seconds=60)
# The next scheduled run is the real retry.
REBALANCE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)  # fmt: skip


@workflow.defn(name=names.REBALANCE_WORKFLOW)
class RebalanceWorkflow:
    @workflow.run
    async def run(self, input: RebalanceInput) -> RebalanceReport:
        report: RebalanceReport = await workflow.execute_activity(
            names.ACTIVITY_REBALANCE_FLEET,
            input,
            result_type=RebalanceReport,
            start_to_close_timeout=REBALANCE_TIMEOUT,
            heartbeat_timeout=REBALANCE_HEARTBEAT,
            retry_policy=REBALANCE_RETRY,
            summary=f"rebalance ({input.strategy}): plan moves, propose them to the placements",
        )
        workflow.set_current_details(report.summary)
        return report
