"""A placement's trace starts at the watcher: its `watcher.signal` span parents the client's
signal-with-start span, and the workflow's spans join the same trace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from control import telemetry
from hub.client import HubClient
from tests.integration.control.watcher_helpers import (
    placement,
    placement_worker,
    quiet,
    running_watcher,
    signals_matching,
    unique,
)
from workflows import names

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    telemetry.setup_tracing("watcher", exporter=spans)
    yield spans
    telemetry.shutdown_tracing()


async def test_the_watchers_signal_span_is_the_root_of_the_placements_trace(
    hub: HubClient, temporal_client: Client, task_queue: str, exporter: InMemorySpanExporter
) -> None:
    client = Client(
        temporal_client.service_client,
        namespace=temporal_client.namespace,
        data_converter=temporal_client.data_converter,
        interceptors=telemetry.temporal_interceptors(),
    )
    name = unique("traced")
    hub.create(placement(name))
    async with (
        placement_worker(client, task_queue, hub),
        running_watcher(hub, client, task_queue) as watcher,
    ):
        await signals_matching(client, name, names.SIGNAL_PLACEMENT_CHANGED)
        await quiet(watcher)

    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "watcher.signal"]
    assert root.parent is None
    assert dict(root.attributes or {}) == {
        "placement": name,
        "signal": names.SIGNAL_PLACEMENT_CHANGED,
        "events": 1,
    }
    children = [
        s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id
    ]
    assert [s.name for s in children] == [f"SignalWithStartWorkflow:{names.PLACEMENT_WORKFLOW}"]
    in_trace = {s.name for s in spans if s.context.trace_id == root.context.trace_id}
    assert f"RunWorkflow:{names.PLACEMENT_WORKFLOW}" in in_trace
    assert "RunActivity:schedule_once" in in_trace
