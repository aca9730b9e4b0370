"""A tiny workflow and activity for the tracing and metrics tests.

Kept apart from the test modules because the workflow sandbox re-imports this module for every
run; it imports only what a workflow module may."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from control import telemetry

STAGE_SPAN = "cycle/filter"


@activity.defn
async def greet(name: str) -> str:
    with telemetry.span(STAGE_SPAN, placement=name):
        return f"hello {name}"


@workflow.defn
class GreetingWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=30)
        )
