"""What fleet-scheduler processes tell about themselves: OpenTelemetry tracing, configured by the
standard OTEL_* variables, and the watcher's counters (`WatcherStats`) and gauges (read from its
caches at each scrape, `track_watcher`).

One trace follows a placement event from the watcher's signal through the workflow into the
activities and the cycle stages inside them: temporalio's TracingInterceptor carries the context
across Temporal in headers, and `span()` marks stages inside activities. Exporters are chosen as
the OpenTelemetry specification says (`OTEL_TRACES_EXPORTER` = `otlp`, `console` or `none`, a
comma-separated list; OTLP endpoint and headers from `OTEL_EXPORTER_OTLP_*`), so a deployment
configures tracing like any other service. The default is `none`: no provider, no interceptor,
and `span()` is a bare context manager, so tracing off costs nothing.

The gauges are read from the watcher's caches, not from the workflows: the cache is the same in
both modes, full right after a restart (the watcher lists before it serves), and costs no
Temporal query per scrape. Each reads whatever an annotation says without raising: a raise
would make the whole /metrics page answer 500."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from fractions import Fraction
from typing import Final, Protocol

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.util.types import AttributeValue
from temporalio.client import Interceptor
from temporalio.contrib.opentelemetry import TracingInterceptor

from control.views import View
from hub.names import REQUESTS_ANNOTATION, SCHEDULE_DEADLINE_ANNOTATION, TRUE
from hub.types import CapacityLedger, ClusterResourcePlacement, MemberCluster
from scheduler.opt_in.deadline import (
    DEADLINE_EXCEEDED_REASON,
    DeadlineError,
    misses_at,
    parse_deadline,
)
from scheduler.room.capacity import ClusterCapacity, held, missing_of

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "TelemetryConfigError",
    "TracingSettings",
    "WatcherMetrics",
    "WatcherStats",
    "deadlines_exceeded",
    "overcommitted",
    "setup_tracing",
    "shortages",
    "shutdown_tracing",
    "span",
    "temporal_interceptors",
    "tracing_settings",
    "track_watcher",
]

ENV_TRACES_EXPORTER: Final = "OTEL_TRACES_EXPORTER"
ENV_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
ENV_OTLP_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_OTLP_TRACES_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
DEFAULT_SERVICE_NAME: Final = "fleet-scheduler"
COMPONENT_ATTRIBUTE: Final = "fleet_scheduler.component"  # worker, watcher, snapshotter, cli
INSTRUMENTATION_NAME: Final = "fleet_scheduler"

EXPORTER_OTLP: Final = "otlp"
EXPORTER_CONSOLE: Final = "console"
EXPORTER_NONE: Final = "none"
EXPORTERS: Final = (EXPORTER_OTLP, EXPORTER_CONSOLE, EXPORTER_NONE)
PROTOCOL_HTTP: Final = "http/protobuf"  # the specification's default
PROTOCOL_GRPC: Final = "grpc"
PROTOCOLS: Final = (PROTOCOL_HTTP, PROTOCOL_GRPC)


class TelemetryConfigError(ValueError):
    """An OTEL_* variable holds a value we cannot honour; the message names it and the fix."""


@dataclass(frozen=True, slots=True)
class TracingSettings:
    """What the environment asks for. `exporters` is empty when tracing is off."""

    exporters: tuple[str, ...]
    protocol: str
    service_name: str

    @property
    def enabled(self) -> bool:
        return bool(self.exporters)


def tracing_settings(
    env: Mapping[str, str] | None = None, *, console: bool = False
) -> TracingSettings:
    """Read the OTEL_* variables (and the `--trace-console` style flag `console`).

    Raises:
        TelemetryConfigError: an unknown exporter or OTLP protocol.
    """
    env = os.environ if env is None else env
    names = [n.strip().lower() for n in env.get(ENV_TRACES_EXPORTER, "").split(",") if n.strip()]
    unknown = sorted(set(names) - set(EXPORTERS))
    if unknown:
        raise TelemetryConfigError(
            f"{ENV_TRACES_EXPORTER}={env[ENV_TRACES_EXPORTER]!r}: unsupported exporter(s) "
            f"{', '.join(unknown)}; use a comma-separated list of {', '.join(EXPORTERS)}"
        )
    exporters = [n for n in names if n != EXPORTER_NONE]
    if EXPORTER_NONE in names and exporters:
        raise TelemetryConfigError(
            f"{ENV_TRACES_EXPORTER}={env[ENV_TRACES_EXPORTER]!r} mixes 'none' with exporters"
        )
    if console and EXPORTER_CONSOLE not in exporters:
        exporters.append(EXPORTER_CONSOLE)
    protocol_var = (
        ENV_OTLP_TRACES_PROTOCOL if env.get(ENV_OTLP_TRACES_PROTOCOL) else ENV_OTLP_PROTOCOL
    )
    protocol = env.get(protocol_var, "").strip().lower() or PROTOCOL_HTTP
    if EXPORTER_OTLP in exporters and protocol not in PROTOCOLS:
        raise TelemetryConfigError(
            f"{protocol_var}={protocol!r} is not supported; use {' or '.join(PROTOCOLS)}"
        )
    service = env.get(ENV_SERVICE_NAME, "").strip() or DEFAULT_SERVICE_NAME
    return TracingSettings(exporters=tuple(exporters), protocol=protocol, service_name=service)


def _otlp_exporter(protocol: str) -> SpanExporter:
    # Endpoint, headers, timeout and compression come from OTEL_EXPORTER_OTLP_* inside the
    # exporters themselves.
    if protocol == PROTOCOL_GRPC:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter as GrpcSpanExporter,
            )
        except ImportError as exc:
            raise TelemetryConfigError(
                f"{ENV_OTLP_PROTOCOL}=grpc needs the opentelemetry-exporter-otlp-proto-grpc "
                f"package, which is not installed; install it or use {PROTOCOL_HTTP} (the default)"
            ) from exc
        exporter: SpanExporter = GrpcSpanExporter()
        return exporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


@dataclass(slots=True)
class _Tracing:
    provider: TracerProvider
    tracer: trace.Tracer
    interceptor: TracingInterceptor


_active: _Tracing | None = None
_global_installed = False


def setup_tracing(
    component: str,
    *,
    console: bool = False,
    exporter: SpanExporter | None = None,
    env: Mapping[str, str] | None = None,
) -> TracerProvider | None:
    """Install tracing for this process as the environment asks; None when it is off.

    `component` ("worker", "watcher", ...) becomes a resource attribute so one service name can
    hold all of fleet-scheduler's processes. `exporter` replaces the environment's choice (tests
    pass an in-memory exporter; spans are then exported synchronously). Calling again replaces
    the previous setup after flushing it. The first provider also becomes OpenTelemetry's global
    one, for libraries that use `trace.get_tracer`.

    Raises:
        TelemetryConfigError: see `tracing_settings`.
    """
    global _active, _global_installed
    settings = tracing_settings(env, console=console)
    if exporter is None and not settings.enabled:
        shutdown_tracing()
        return None
    # Build everything before touching the active setup, so a bad config changes nothing.
    processors: list[SpanProcessor] = []
    if exporter is not None:
        processors.append(SimpleSpanProcessor(exporter))
        if console:
            processors.append(SimpleSpanProcessor(ConsoleSpanExporter()))
    else:
        for name in settings.exporters:
            chosen = (
                _otlp_exporter(settings.protocol)
                if name == EXPORTER_OTLP
                else ConsoleSpanExporter()
            )
            processors.append(BatchSpanProcessor(chosen))
    resource = Resource.create(
        {SERVICE_NAME: settings.service_name, COMPONENT_ATTRIBUTE: component}
    )
    provider = TracerProvider(resource=resource)
    for processor in processors:
        provider.add_span_processor(processor)
    shutdown_tracing()
    tracer = provider.get_tracer(INSTRUMENTATION_NAME)
    _active = _Tracing(provider=provider, tracer=tracer, interceptor=TracingInterceptor(tracer))
    if not _global_installed:
        trace.set_tracer_provider(provider)
        _global_installed = True
    return provider


def shutdown_tracing() -> None:
    """Flush and stop the active provider (if any); tracing is off afterwards."""
    global _active
    active, _active = _active, None
    if active is not None:
        active.provider.shutdown()


def temporal_interceptors() -> list[Interceptor]:
    """Interceptors for `Client.connect(interceptors=...)`: the tracing one, or none.

    Give them to the client only: a worker built on that client picks them up, and adding them
    to the worker as well would record every span twice."""
    return [_active.interceptor] if _active is not None else []


def _attribute(value: object) -> AttributeValue | None:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    if isinstance(value, Sequence) and all(isinstance(v, int | float) for v in value):
        return [float(v) for v in value]
    return str(value)


@contextmanager
def span(name: str, **attributes: object) -> Iterator[trace.Span | None]:
    """A child span of the current one for a cycle stage, e.g. `with span("filter", clusters=5)`.

    Yields the span (to add attributes or events), or None when tracing is off. Attribute values
    that OpenTelemetry cannot store are written as strings; None values are dropped. An
    exception marks the span as an error and propagates."""
    active = _active
    if active is None:
        yield None
        return
    clean = {k: v for k, v in ((k, _attribute(v)) for k, v in attributes.items()) if v is not None}
    with active.tracer.start_as_current_span(name, attributes=clean) as current:
        yield current


# --- the watcher's counters and gauges ---------------------------------------------------------


@dataclass
class WatcherStats:
    """Counters of one watcher's life, for logs, tests and the CLI (not a metrics registry).

    `events`: watch changes routed (synthesised ones included); `routes`: signals requested;
    `signal_with_start`, `signalled`: Temporal calls that landed; `not_running`, `gone`: plain
    signals that found no workflow and needed none; `retries`: failed calls put back with
    backoff; `dropped`: calls Temporal refused for good; `resyncs`: full lists applied;
    `watch_failures`: watches restarted after an error; `admissions_expired`: turns whose place in
    the admission window timed out before the watcher saw them done."""

    events: int = 0
    routes: int = 0
    signal_with_start: int = 0
    signalled: int = 0
    not_running: int = 0
    gone: int = 0
    retries: int = 0
    dropped: int = 0
    resyncs: int = 0
    watch_failures: int = 0
    admissions_expired: int = 0

    @property
    def sent(self) -> int:
        return self.signal_with_start + self.signalled

    def copy(self) -> WatcherStats:
        return WatcherStats(**{f.name: getattr(self, f.name) for f in fields(self)})


class WatcherMetrics(Protocol):
    """What the watcher exports (workers.metrics.SchedulerMetrics implements it)."""

    def count_watcher_event(self, kind: str, event: str, action: str) -> None: ...

    def track_unschedulable(
        self, shortages: Callable[[], Iterable[Mapping[str, Fraction]]]
    ) -> None: ...

    def track_overcommit(self, excess: Callable[[], Iterable[Mapping[str, Fraction]]]) -> None: ...

    def track_admission(self, figures: Callable[[], tuple[int, float | None]]) -> None: ...

    def track_deadlines(self, exceeded: Callable[[], int]) -> None: ...


def track_watcher(
    metrics: WatcherMetrics,
    *,
    placements: Mapping[str, ClusterResourcePlacement],
    clusters: View[MemberCluster],
    ledgers: View[CapacityLedger],
    clock: Callable[[], datetime],
    admission: Callable[[], tuple[int, float | None]],
) -> None:
    """Export the watcher's gauges, read at each scrape: unschedulable demand (`shortages`), the
    clusters' overcommit (`overcommitted`), the admission window's size and drain rate
    (`admission`) and the placements past their deadline (`deadlines_exceeded`). The views'
    dicts are read anew at each scrape: a full list replaces them."""
    metrics.track_unschedulable(lambda: shortages(placements.values()))
    metrics.track_overcommit(lambda: overcommitted(clusters.objects, ledgers.objects))
    metrics.track_admission(admission)
    metrics.track_deadlines(lambda: deadlines_exceeded(placements.values(), clock()))


def shortages(placements: Iterable[ClusterResourcePlacement]) -> Iterator[dict[str, Fraction]]:
    """What each capacity-aware placement short of room lacks, read back from its Scheduled
    condition (docs/capacity.md; `/metrics`' unschedulable demand)."""
    for placement in placements:
        if REQUESTS_ANNOTATION not in placement.metadata.annotations:
            continue  # a placement that dropped its requests is not short of room
        condition = placement.status.condition(placement.SCHEDULED_CONDITION)
        missing = None if condition is None else missing_of(condition.message)
        if missing:
            yield missing


def deadlines_exceeded(placements: Iterable[ClusterResourcePlacement], now: datetime) -> int:
    """Placements past their scheduling deadline at `now` (`/metrics`).

    A placement counts while its annotation reads and its Scheduled condition is not True, and
    either carries our ScheduleDeadlineExceeded reason (standalone: the workflow's clock said so)
    or has been not True for longer than the deadline (beside KubeFleet, whose condition is its
    own: its SchedulePending on a policy change restarts that time, where the workflow's clock
    does not, so there it may count a placement one deadline later than its Event)."""
    count = 0
    for placement in placements:
        annotation = placement.metadata.annotations.get(SCHEDULE_DEADLINE_ANNOTATION)
        if annotation is None:
            continue
        try:
            deadline = parse_deadline(annotation)
        except DeadlineError:
            continue  # the workflow says what is wrong; nothing to count
        condition = placement.status.condition(placement.SCHEDULED_CONDITION)
        if condition is None or condition.status == TRUE:
            continue
        since = condition.last_transition_time
        if condition.reason == DEADLINE_EXCEEDED_REASON or (
            since is not None and misses_at(deadline, since, now) > 0
        ):
            count += 1
    return count


def overcommitted(
    clusters: Mapping[str, MemberCluster], ledgers: Mapping[str, CapacityLedger]
) -> Iterator[dict[str, Fraction]]:
    """How far each cluster's reservations exceed its allocatable, read from the ledgers and
    clusters by name (docs/capacity.md; `/metrics`' overcommit)."""
    for name, ledger in ledgers.items():
        member = clusters.get(name)
        if member is None:
            continue
        supply = ClusterCapacity.of(member.status.resource_usage.allocatable)
        over = {
            r: amount - supply.allocatable.get(r, Fraction(0))
            for r, amount in held(ledger, nominations=False).items()
            if amount > supply.allocatable.get(r, Fraction(0))
        }
        if over:
            yield over
