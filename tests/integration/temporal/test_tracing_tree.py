"""One placement's trace, from the client call through the workflow into the activity and a
cycle stage inside it, on a real dev server, asserted as a tree from an in-memory exporter."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from control import telemetry
from tests.integration.temporal.temporal_test_workflows import STAGE_SPAN, GreetingWorkflow, greet


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    telemetry.setup_tracing("test", exporter=spans)
    yield spans
    telemetry.shutdown_tracing()


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, str]]:
    """(depth, name) in depth-first order, children by start time."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for child in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            out.append((depth, child.name))
            walk(child.context.span_id, depth + 1)

    walk(None, 0)
    return out


async def test_client_workflow_activity_and_stage_spans_form_one_trace(
    temporal_env: WorkflowEnvironment, task_queue: str, exporter: InMemorySpanExporter
) -> None:
    # The interceptor goes on the client only; the worker built on it inherits it.
    client = Client(
        temporal_env.client.service_client,
        namespace=temporal_env.client.namespace,
        data_converter=temporal_env.client.data_converter,
        interceptors=telemetry.temporal_interceptors(),
    )
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[GreetingWorkflow],
        activities=[greet],
        max_cached_workflows=0,
    ):
        result = await client.execute_workflow(
            GreetingWorkflow.run,
            "web",
            id=f"crp/trace-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
    assert result == "hello web"

    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1, "every span belongs to one trace"
    # TracingInterceptor ends workflow-side spans at once and parents them on the client's
    # span, so RunWorkflow, StartActivity and CompleteWorkflow are siblings; replays (every
    # task replays with max_cached_workflows=0) add no spans.
    assert tree(spans) == [
        (0, "StartWorkflow:GreetingWorkflow"),
        (1, "RunWorkflow:GreetingWorkflow"),
        (1, "StartActivity:greet"),
        (2, "RunActivity:greet"),
        (3, STAGE_SPAN),
        (1, "CompleteWorkflow:GreetingWorkflow"),
    ]
    stage = next(s for s in spans if s.name == STAGE_SPAN)
    assert dict(stage.attributes or {}) == {"placement": "web"}


async def test_no_spans_and_no_interceptor_when_tracing_is_off(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    telemetry.setup_tracing("test", env={})
    assert telemetry.temporal_interceptors() == []
    async with Worker(
        temporal_env.client,
        task_queue=task_queue,
        workflows=[GreetingWorkflow],
        activities=[greet],
    ):
        result = await temporal_env.client.execute_workflow(
            GreetingWorkflow.run,
            "db",
            id=f"crp/untraced-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
    assert result == "hello db"
    assert telemetry.temporal_interceptors() == []
