"""The reconcile safety net's workflow: started by the `fleet-reconcile` Schedule, it runs one
activity (workers/reconcile.py says what it checks) and returns its report, which the next
scheduled run reads back as its last completion result to see what changed in between."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from workflows import names
    from workflows.models import ReconcileInput, ReconcileReport

__all__ = ["ReconcileWorkflow"]

# Reading a large hub and signalling thousands of workflows takes a while; it heartbeats.
RECONCILE_TIMEOUT = timedelta(minutes=4)
RECONCILE_HEARTBEAT = timedelta(seconds=60)
# A failed run is retried until RECONCILE_RETRY_WINDOW has passed since it was scheduled. The
# run a watcher start triggers stands in for signalling every placement, so a hub outage must
# not use it up: with three attempts (about 6 s) a restarted watcher's run could meet an outage
# (or a share of failing requests), and what no watcher had seen waited for the next scheduled
# run, up to 5 minutes later. The window is inside the Schedule's default 5 minutes, so at the
# default a run that retries through it does not make the next scheduled one skip; with a shorter
# `--reconcile-every` it does (the Schedule's overlap policy skips), and the retrying run, which
# reads the hub afresh at each attempt, does that run's work.
RECONCILE_RETRY_WINDOW = timedelta(minutes=4)
RECONCILE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=30),
)  # fmt: skip


@workflow.defn(name=names.RECONCILE_WORKFLOW)
class ReconcileWorkflow:
    @workflow.run
    async def run(self, input: ReconcileInput) -> ReconcileReport:
        previous: ReconcileReport | None = None
        if workflow.has_last_completion_result():
            previous = workflow.get_last_completion_result(ReconcileReport)
        report: ReconcileReport = await workflow.execute_activity(
            names.ACTIVITY_RECONCILE_FLEET,
            ReconcileInput(
                task_queue=input.task_queue,
                standalone=input.standalone,
                local_cycles_up_to=input.local_cycles_up_to,
                resource_placements=input.resource_placements,
                previous_clusters=previous.clusters if previous is not None else None,
                previous_annotations=previous.annotations if previous is not None else None,
                previous_priorities=previous.priorities if previous is not None else None,
                previous_renewed=previous.renewed if previous is not None else None,
            ),
            result_type=ReconcileReport,
            start_to_close_timeout=RECONCILE_TIMEOUT,
            schedule_to_close_timeout=RECONCILE_RETRY_WINDOW,
            heartbeat_timeout=RECONCILE_HEARTBEAT,
            retry_policy=RECONCILE_RETRY,
            summary="reconcile: every placement has a workflow, every workflow a placement",
        )
        workflow.set_current_details(report.summary)
        return report
