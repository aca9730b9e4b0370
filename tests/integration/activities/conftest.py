"""Activities under test run for real: a real devhub over HTTP, the real HubClient, and
temporalio's ActivityEnvironment (a real activity context, heartbeats included). Nothing is
mocked; faults come from devhub's fault injection.

- `hub`: a HubClient on a freshly reset devhub, built from its kubeconfig as users build one.
- `make_activities`: HubActivities with chosen settings (standalone by default), with a fresh
  SchedulerMetrics and an in-memory span exporter each, so tests can read both.
- `env`: an ActivityEnvironment whose heartbeats are kept in `env.heartbeats`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.testing import ActivityEnvironment

from activities.plumbing import ActivitySettings
from hub.client import HubClient
from tests.integration.activities.activity_helpers import Activities, Rig
from workers.metrics import SchedulerMetrics


@pytest.fixture
def make_activities(hub: HubClient) -> Iterator[Callable[..., Rig]]:
    providers: list[TracerProvider] = []

    def make(*, snapshotter: bool = True, on: HubClient | None = None, **settings: Any) -> Rig:
        """`on`: another hub than the test's (e.g. one whose CRDs have no CEL rules)."""
        metrics = SchedulerMetrics(process_metrics=False)
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        providers.append(provider)
        activities = Activities(
            on or hub,
            ActivitySettings(
                snapshotter=snapshotter,
                metrics=metrics,
                tracer=provider.get_tracer("tests"),
                **settings,
            ),
        )
        return Rig(activities=activities, metrics=metrics, spans=spans)

    yield make
    for provider in providers:
        provider.shutdown()


@pytest.fixture
def env() -> ActivityEnvironment:
    environment = ActivityEnvironment()
    heartbeats: list[Any] = []
    environment.on_heartbeat = lambda *details: heartbeats.append(details)
    environment.heartbeats = heartbeats  # type: ignore[attr-defined]
    return environment
