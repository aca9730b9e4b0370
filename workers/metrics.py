"""Prometheus metrics of the scheduler, named as KubeFleet names them, plus Temporal's SDK metrics.

Dashboards and alerts written for KubeFleet's scheduler keep working: the cycle histogram and the
active-workers gauge have KubeFleet's names, buckets and labels (kubefleet-rules section 8). Our own
counters (cycles by placement type and outcome, binding writes, watcher events) are prefixed
`fleet_scheduler_`. Everything lives in one `SchedulerMetrics` object handed to the activities
and the watcher, not in module globals, so tests get a fresh registry each.

Temporal's SDK metrics (task latencies, poll counts, sticky cache) are produced by the SDK's Rust
core, which serves them on its own Prometheus endpoint. `sdk_metrics_runtime` binds that endpoint
to a free loopback port, and `SchedulerMetrics.exposition` appends its text to ours, so a single
`/metrics` scrape returns both."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Final, get_args

import aiohttp
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from activities.plumbing import BindingWrite, CycleOutcome
from control.config import LOOPBACK
from scheduler.invariants import INVARIANTS
from workers.devserver import free_port
from workers.processes import merge_expositions

__all__ = [
    "BINDING_WRITES",
    "CYCLE_DURATION_BUCKETS_MS",
    "CYCLE_OUTCOMES",
    "BindingWrite",
    "CycleOutcome",
    "SchedulerMetrics",
    "sdk_metrics_runtime",
]

# KubeFleet's histogram buckets (pkg/metrics/hub/metrics.go), in milliseconds.
CYCLE_DURATION_BUCKETS_MS: Final = (10, 50, 100, 500, 1000, 5000, 10000, 50000)
SDK_SCRAPE_TIMEOUT_S: Final = 2.0

CYCLE_OUTCOMES: Final = get_args(CycleOutcome)

# KubeFleet's (is_failed, needs_requeue) label values for each outcome, from the table in 3.2.
_CYCLE_LABELS: Final[dict[str, tuple[str, str]]] = {
    "success": ("false", "false"),
    "requeue": ("false", "true"),
    "error": ("true", "true"),
    "unexpected": ("true", "false"),
}

BINDING_WRITES: Final = get_args(BindingWrite)


class SchedulerMetrics:
    """The scheduler's metric families in one registry. Thread-safe (prometheus_client is), so
    activities running in a thread pool can share one instance.

    Label values come from closed sets (`CycleOutcome`, `BindingWrite`, placement types, watched
    kinds); unknown values raise ValueError instead of growing the series count."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        sdk_metrics_url: str | None = None,
        process_metrics: bool = True,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.sdk_metrics_url = sdk_metrics_url
        # (label, /metrics URL) of the activity processes this one started
        # (workers.processes): their samples join ours in one exposition.
        self.children: Callable[[], Sequence[tuple[str, str]]] | None = None
        self._unschedulable = _ResourceSums(
            "fleet_scheduler_unschedulable_demand",
            "What capacity-aware placements could not place for lack of room, summed by "
            "resource (CPU in cores, memory in bytes, as Kubernetes quantities).",
            "fleet_scheduler_unschedulable_placements",
            "Capacity-aware placements short of room.",
        )
        self._overcommit = _ResourceSums(
            "fleet_scheduler_overcommit",
            "How far clusters' capacity reservations exceed their allocatable, summed by "
            "resource: bindings kept beyond the room (made before their placement declared "
            "requests, or on a cluster whose allocatable shrank). Nothing new goes there.",
            "fleet_scheduler_overcommitted_clusters",
            "Clusters whose reservations exceed their allocatable.",
        )
        self._admission = _AdmissionGauges()
        self._deadlines = _DeadlineGauge()
        self._tracked: set[int] = set()  # the sums registered: only a watcher's process
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        self.cycle_duration = Histogram(
            "scheduling_cycle_duration_milliseconds",
            "The duration of a scheduling cycle run in milliseconds.",
            ["is_failed", "needs_requeue"],
            buckets=CYCLE_DURATION_BUCKETS_MS,
            registry=self.registry,
        )
        self.active_workers = Gauge(
            "scheduling_active_workers",
            "Number of currently running scheduling loop.",
            registry=self.registry,
        )
        self.cycles = Counter(
            "fleet_scheduler_cycles",
            "Scheduling cycles run, by placement type and outcome.",
            ["placement_type", "outcome"],
            registry=self.registry,
        )
        self.binding_writes = Counter(
            "fleet_scheduler_binding_writes",
            "Writes to ClusterResourceBindings, by operation.",
            ["operation"],
            registry=self.registry,
        )
        self.invariant_violations = Gauge(
            "fleet_scheduler_invariant_violations",
            "Invariants broken as the last reconcile found them, by invariant (the checks of "
            "`fleet-scheduler check`), less what it repaired itself (workflows it started or "
            "finished, reservations it released).",
            ["invariant"],
            registry=self.registry,
        )
        self.preemptions = Counter(
            "fleet_scheduler_preemptions",
            "Clusters nominated for a preemptor (room its lower-priority victims give up), by "
            "the preemptor's PriorityClass (empty: none).",
            ["priority_class"],
            registry=self.registry,
        )
        self.watcher_events = Counter(
            "fleet_scheduler_watcher_events",
            "Watch events seen by the watcher, by kind, event type and whether they reached a "
            "placement workflow.",
            ["kind", "event", "action"],
            registry=self.registry,
        )

    def observe_cycle(
        self, duration_ms: float, *, placement_type: str, outcome: CycleOutcome
    ) -> None:
        """Record one framework cycle: KubeFleet's histogram plus our outcome counter."""
        if outcome not in _CYCLE_LABELS:
            raise ValueError(f"unknown cycle outcome {outcome!r}; expected one of {CYCLE_OUTCOMES}")
        is_failed, needs_requeue = _CYCLE_LABELS[outcome]
        self.cycle_duration.labels(is_failed=is_failed, needs_requeue=needs_requeue).observe(
            duration_ms
        )
        self.cycles.labels(placement_type=placement_type, outcome=outcome).inc()

    def count_binding_writes(self, operation: BindingWrite, count: int = 1) -> None:
        if operation not in BINDING_WRITES:
            raise ValueError(
                f"unknown binding write {operation!r}; expected one of {BINDING_WRITES}"
            )
        if count:
            self.binding_writes.labels(operation=operation).inc(count)

    def count_preemption(self, priority_class: str) -> None:
        """One cluster nominated for a preemptor of this PriorityClass."""
        self.preemptions.labels(priority_class=priority_class).inc()

    def count_watcher_event(self, kind: str, event: str, action: str) -> None:
        """One watch event: `kind` of object, `event` (ADDED, MODIFIED, DELETED, ...), and
        `action` (e.g. "signalled", "filtered")."""
        self.watcher_events.labels(kind=kind, event=event, action=action).inc()

    @contextmanager
    def active_worker(self) -> Iterator[None]:
        """Count a placement being processed for the duration of the block (KubeFleet's gauge)."""
        self.active_workers.inc()
        try:
            yield
        finally:
            self.active_workers.dec()

    def set_invariant_violations(self, counts: Mapping[str, int]) -> None:
        """What the last reconcile found broken and could not repair on the spot, by invariant
        (scheduler.invariants; scheduler.requeue.reconcile.unrepaired); every invariant has its
        series, 0 when it holds."""
        for invariant in INVARIANTS:
            self.invariant_violations.labels(invariant=invariant).set(counts.get(invariant, 0))

    def track_overcommit(self, excess: Callable[[], Iterable[Mapping[str, Fraction]]]) -> None:
        """Export how far clusters' reservations exceed their allocatable (docs/capacity.md):
        `fleet_scheduler_overcommit{resource}`, summed over clusters, and
        `fleet_scheduler_overcommitted_clusters`. `excess` is read at each scrape: one mapping
        per cluster over its allocatable. A second call replaces the source."""
        self._track(self._overcommit, excess)

    def track_unschedulable(
        self, shortages: Callable[[], Iterable[Mapping[str, Fraction]]]
    ) -> None:
        """Export what capacity-aware placements lack (docs/capacity.md, an autoscaler's input):
        `fleet_scheduler_unschedulable_demand{resource}`, the sum of what every placement short
        of room is missing, and `fleet_scheduler_unschedulable_placements`, how many are short.
        `shortages` is read at each scrape: one mapping per placement that is short. A second
        call replaces the source (one watcher per process exports them)."""
        self._track(self._unschedulable, shortages)

    def track_admission(self, figures: Callable[[], tuple[int, float | None]]) -> None:
        """Export the watcher's admission window (docs/priority.md, "Admission"):
        `fleet_scheduler_admission_window`, the turns per priority key and better it lets into
        Temporal now (0: no window), and `fleet_scheduler_admission_drain_rate`, the turns seen
        done per second while a backlog waited, which an automatic window is sized from (NaN
        until measured). `figures` is read at each scrape. A second call replaces the source."""
        self._admission.source = figures
        self._register(self._admission)

    def track_deadlines(self, exceeded: Callable[[], int]) -> None:
        """Export `fleet_scheduler_deadline_exceeded_placements`: placements past their
        scheduling deadline now (docs/operations.md, "Scheduling deadlines"). `exceeded` is read
        at each scrape. A second call replaces the source."""
        self._deadlines.source = exceeded
        self._register(self._deadlines)

    def _track(
        self, sums: _ResourceSums, source: Callable[[], Iterable[Mapping[str, Fraction]]]
    ) -> None:
        sums.source = source
        self._register(sums)

    def _register(self, collector: Collector) -> None:
        if id(collector) not in self._tracked:
            self._tracked.add(id(collector))
            self.registry.register(collector)

    def render(self) -> bytes:
        """Our metrics in the Prometheus text format."""
        return generate_latest(self.registry)

    async def exposition(self, session: aiohttp.ClientSession | None = None) -> bytes:
        """Our metrics followed by the Temporal SDK's, as one Prometheus text document, and
        those of our activity processes, each labelled with its name.

        If an endpoint cannot be read, the rest is still served, with a comment saying why."""
        if session is None:
            async with aiohttp.ClientSession() as own_session:
                return await self.exposition(own_session)
        own = self.render()
        notes = b""
        if self.sdk_metrics_url is not None:
            try:
                sdk = await self._fetch(self.sdk_metrics_url, session)
            except (aiohttp.ClientError, TimeoutError) as exc:
                where = self.sdk_metrics_url
                notes += f"# Temporal SDK metrics unavailable from {where}: {exc!r}\n".encode()
            else:
                own += sdk if sdk.endswith(b"\n") or not sdk else sdk + b"\n"
        children = list(self.children()) if self.children is not None else []
        if not children:
            return own + notes
        parts: list[tuple[str | None, str]] = [(None, own.decode())]
        for label, url in children:
            try:
                parts.append((label, (await self._fetch(url, session)).decode()))
            except (aiohttp.ClientError, TimeoutError) as exc:
                notes += f"# metrics of {label} unavailable from {url}: {exc!r}\n".encode()
        return merge_expositions(parts) + notes

    @staticmethod
    async def _fetch(url: str, session: aiohttp.ClientSession) -> bytes:
        """Another endpoint's Prometheus text (the SDK's, an activity process's)."""
        async with asyncio.timeout(SDK_SCRAPE_TIMEOUT_S):
            async with session.get(url) as response:
                response.raise_for_status()
                return await response.read()


def sdk_metrics_runtime(host: str = LOOPBACK, port: int | None = None) -> tuple[Runtime, str]:
    """A Temporal `Runtime` whose SDK metrics are served on `host:port` (a free port by default),
    and the URL to scrape them from. Pass the runtime to `Client.connect(runtime=...)`; create
    one per process (the port stays bound for the runtime's life)."""
    port = port if port is not None else free_port(host)
    runtime = Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"{host}:{port}"))
    )
    return runtime, f"http://{host}:{port}/metrics"


class _ResourceSums(Collector):
    """Amounts by resource summed over items (placements short of room, clusters over their
    allocatable), and how many items, computed at scrape time from a source the watcher
    provides (nothing until one is given)."""

    def __init__(self, name: str, help: str, count_name: str, count_help: str) -> None:
        self.name, self.help = name, help
        self.count_name, self.count_help = count_name, count_help
        self.source: Callable[[], Iterable[Mapping[str, Fraction]]] = lambda: ()

    def collect(self) -> Iterator[Metric]:
        sums = GaugeMetricFamily(self.name, self.help, labels=["resource"])
        items = GaugeMetricFamily(self.count_name, self.count_help)
        totals: dict[str, Fraction] = {}
        count = 0
        for amounts in self.source():
            count += 1
            for resource, amount in amounts.items():
                totals[resource] = totals.get(resource, Fraction(0)) + amount
        for resource, amount in sorted(totals.items()):
            sums.add_metric([resource], float(amount))
        items.add_metric([], count)
        yield sums
        yield items

    def describe(self) -> Iterator[Metric]:
        return iter(())


class _AdmissionGauges(Collector):
    """The watcher's admission window size and drain rate, read at scrape time."""

    def __init__(self) -> None:
        self.source: Callable[[], tuple[int, float | None]] = lambda: (0, None)

    def collect(self) -> Iterator[Metric]:
        size, rate = self.source()
        window = GaugeMetricFamily(
            "fleet_scheduler_admission_window",
            "Turns of placements not yet scheduled that the watcher lets into Temporal at once, "
            "per priority key and better (0: no window); an automatic window follows the drain "
            "rate.",
        )
        window.add_metric([], size)
        drain = GaugeMetricFamily(
            "fleet_scheduler_admission_drain_rate",
            "Turns seen done per second while turns waited for a place in the admission window, "
            "over the last 10 s in which some waited (NaN until measured).",
        )
        drain.add_metric([], math.nan if rate is None else rate)
        yield window
        yield drain

    def describe(self) -> Iterator[Metric]:
        return iter(())


class _DeadlineGauge(Collector):
    """Placements past their scheduling deadline, counted at scrape time by the watcher."""

    def __init__(self) -> None:
        self.source: Callable[[], int] = lambda: 0

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "fleet_scheduler_deadline_exceeded_placements",
            "Placements with a fleet-scheduler.io/schedule-deadline annotation that are not fully "
            "scheduled and have been so for longer than their deadline.",
        )
        gauge.add_metric([], self.source())
        yield gauge

    def describe(self) -> Iterator[Metric]:
        return iter(())
