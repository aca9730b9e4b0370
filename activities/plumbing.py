"""What every activity of a worker shares: its settings, metering, spans and heartbeats.

Settings come from the worker process, never from activity inputs (inputs are stored in
history). Metrics and tracing are optional: a worker that exports neither passes nothing and
pays nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal, Protocol

from opentelemetry import trace
from temporalio import activity

from activities.advice import TurnAdvisor
from activities.bindings import Tally
from activities.decisions import DecisionSettings
from activities.local_slots import LocalSlots
from activities.outage import HubGate
from hub import names
from hub.types import MemberCluster
from scheduler import Profile

__all__ = [
    "ActivitySettings",
    "BindingWrite",
    "CycleMetrics",
    "CycleOutcome",
    "CycleRun",
    "PhaseSpans",
    "heartbeat",
    "in_local_activity",
    "metered",
    "paced_heartbeats",
]

CycleOutcome = Literal["success", "requeue", "error", "unexpected"]
"""How a cycle ended (kubefleet-rules 3.2): done; done and wants another turn now; failed and
will be retried with backoff; failed in a way retrying cannot fix (waits for the next event)."""

BindingWrite = Literal["create", "patch", "unschedule", "remove_finalizer", "delete"]

# Within `paced_heartbeats`, progress reaches Temporal once the activity has run this long, and
# then at most this often: far inside a turn's heartbeat timeout (30 s,
# workflows.execution.CYCLE_HEARTBEAT), while a turn that ends sooner sends none (issue 35).
HEARTBEAT_AFTER_S: Final = 1.0

# When the running activity's next heartbeat is due (time.monotonic()); None: every one goes.
# The SDK runs each activity in its own copy of the context, so this is per activity attempt.
_beat_due: ContextVar[float | None] = ContextVar("fleet_scheduler_beat_due", default=None)

# Metric label for a placement type outside KubeFleet's three (a bad snapshot), so a typo in
# one snapshot cannot grow the series count.
INVALID_TYPE_LABEL: Final = "Invalid"


class CycleMetrics(Protocol):
    """What the activities record; `workers.metrics.SchedulerMetrics` is the implementation."""

    def active_worker(self) -> AbstractContextManager[None]: ...

    def count_binding_writes(self, operation: BindingWrite, count: int = 1) -> None: ...

    def observe_cycle(
        self, duration_ms: float, *, placement_type: str, outcome: CycleOutcome
    ) -> None: ...

    def set_invariant_violations(self, counts: Mapping[str, int]) -> None: ...

    def count_preemption(self, priority_class: str) -> None: ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ActivitySettings:
    """Per-worker configuration of the activities."""

    # The snapshotter is on (standalone mode): the worker plays KubeFleet's placement controller
    # too (policy snapshots, the placement's Scheduled condition). Off beside KubeFleet's hub
    # agent (--no-snapshotter).
    snapshotter: bool = True
    profile: Profile | None = None  # None: KubeFleet's default profile
    metrics: CycleMetrics | None = None
    clock: Callable[[], datetime] = field(default=_utcnow)
    # Spans of the cycle stages go to this tracer; None: OpenTelemetry's global one (a no-op
    # until a provider is installed). A worker that installs its own provider passes its tracer.
    tracer: trace.Tracer | None = None
    # Where a cycle reads MemberClusters: a cache's `clusters` (activities.clusters, as
    # KubeFleet reads them from its informer), which may answer None when it cannot be trusted
    # yet; None, or a None answer: list them from the hub. Bindings are always read directly.
    clusters: Callable[[], list[MemberCluster] | None] | None = None
    # How many clusters `clusters` would list, without listing them (the advisor asks after
    # every turn); None: count what `clusters` lists.
    fleet_size: Callable[[], int | None] | None = None
    # Where activities wait out a hub outage (activities.outage); None: they fail at once and
    # Temporal's RetryPolicy retries them. Every worker that `build_worker` makes has one.
    hub_gate: HubGate | None = None
    # Advises each turn's placement where its next turn runs (activities.advice); None: no
    # advice (the workflow keeps its choice). Every worker that `build_worker` makes has one.
    advisor: TurnAdvisor | None = None
    # The workflow worker's local slots (activities.local_slots): local turns run best key
    # first; None: in the order the SDK starts them. `build_worker` makes one with workflows.
    local_slots: LocalSlots | None = None
    # Where turns publish their placements' PlacementDecisions (activities.decisions); None:
    # they publish none (beside KubeFleet, by default: docs/decisions.md).
    decisions: DecisionSettings | None = None

    def now(self) -> datetime:
        # metav1.Time has second precision; conditions compare equal after a round trip.
        return self.clock().replace(microsecond=0)

    def get_tracer(self) -> trace.Tracer:
        return self.tracer or trace.get_tracer("activities")


def heartbeat(progress: str) -> None:
    """Report progress to Temporal (paced inside `paced_heartbeats`)."""
    due = _beat_due.get()
    if due is not None:
        now = time.monotonic()
        if now < due:
            return
        _beat_due.set(now + HEARTBEAT_AFTER_S)
    # A local activity has no heartbeat of its own (its workflow task is kept alive instead).
    if not in_local_activity():
        activity.heartbeat(progress)


@contextmanager
def paced_heartbeats() -> Iterator[None]:
    """Within: `heartbeat` sends progress only once HEARTBEAT_AFTER_S have passed since entry,
    and then at most every HEARTBEAT_AFTER_S.

    A thread-bound activity's heartbeat is a blocking round trip to the worker's event loop
    (which encodes the details) and, for the first one, a call to the Temporal server: a turn
    beat three times, in a few tens of milliseconds, for a timeout of 30 s (issue 35)."""
    token = _beat_due.set(time.monotonic() + HEARTBEAT_AFTER_S)
    try:
        yield
    finally:
        _beat_due.reset(token)


def in_local_activity() -> bool:
    """Whether this runs as a local activity: it then neither heartbeats nor waits out a hub
    outage at the gate, so its turn soon fails over to the activity queue
    (workflows.placement.LOCAL_TURN_LIMIT)."""
    return activity.in_activity() and activity.info().is_local


class PhaseSpans:
    """Opens a child span per extension point the scheduler runs (PreFilter, Filter, ...)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def phase(self, stage: str) -> AbstractContextManager[object]:
        return self._tracer.start_as_current_span(stage)


@dataclass
class CycleRun:
    """What one cycle attempt has learnt so far, for its report and metrics on any exit."""

    started: float = field(default_factory=time.perf_counter)
    placement_type: str = ""
    counted: bool = False  # reached the framework cycle (KubeFleet meters only those)
    tally: Tally = field(default_factory=Tally)
    lines: list[str] = field(default_factory=list)
    """What the turn's preemption did, as a victim or as the preemptor, one line each (the
    turn's result carries them beside its moves; `explain` shows them)."""
    preempted: int = 0
    """Bindings of this placement unscheduled for a preemptor."""
    waits_on_victims: bool = False
    """The placement holds nominations: it waits for its victims to leave."""
    preempted_for: list[str] = field(default_factory=list)
    """The preemptor's PriorityClass ("" without one), once per cluster it nominated."""

    @property
    def duration_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0


@contextmanager
def metered(settings: ActivitySettings) -> Iterator[CycleRun]:
    """A cycle counted in scheduling_active_workers; the caller calls `meter` when it ends."""
    run = CycleRun()
    if settings.metrics is None:
        yield run
        return
    with settings.metrics.active_worker():
        yield run


def meter(settings: ActivitySettings, run: CycleRun, outcome: CycleOutcome) -> None:
    """Record a cycle's binding writes and, if it reached the framework, its duration."""
    metrics = settings.metrics
    if metrics is None:
        return
    tally = run.tally
    writes: tuple[tuple[BindingWrite, int], ...] = (
        ("create", tally.created),
        ("patch", tally.patched),
        ("unschedule", tally.unscheduled),
        ("remove_finalizer", tally.finalizers_removed),
    )
    for operation, count in writes:
        metrics.count_binding_writes(operation, count)
    for priority_class in run.preempted_for:
        metrics.count_preemption(priority_class)
    if run.counted:
        placement_type = (
            run.placement_type
            if run.placement_type in names.PLACEMENT_TYPES
            else INVALID_TYPE_LABEL
        )
        metrics.observe_cycle(run.duration_ms, placement_type=placement_type, outcome=outcome)
