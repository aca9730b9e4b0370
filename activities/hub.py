"""Activities that read and write hub objects for one placement's cycle.

Thin, idempotent adapters: hub errors in, Temporal failure types out (`activities.translate`).
Settings come from the worker (`ActivitySettings`), never from inputs (inputs are stored in
history). Each activity may run twice, or overlap a timed-out earlier attempt of itself, so
every one re-reads what it acts on and every write is safe to repeat:

- `prepare_cycle` is KubeFleet's `scheduleOnce` steps 2-5 (kubefleet-rules 3.2), plus, in standalone
  mode, the placement controller's snapshot sync (kubefleet-rules 2).
- `run_cycle` reads, decides and writes in one activity: a first PickAll plan at 5,000 clusters
  is megabytes, too big to pass between activities, so only a compact `CycleReport` leaves it.
  Its stages carry OpenTelemetry spans (`read`, `schedule` with a child span per extension
  point the scheduler runs, `apply`, `write_status`).
- `cleanup_placement` is the placement deletion cleanup (kubefleet-rules 3.4).

A cycle the scheduler cannot act on (bad annotation, failing plugin) is not a failure: its False
condition is written and the report carries the error (kubefleet-rules 3.2 table, first row)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from opentelemetry import trace
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import failures
from activities.bindings import Pacer, Tally, apply_binding_plan
from activities.conditions import sync_failed_condition, write_scheduled_condition
from activities.models import (
    CleanupReport,
    CleanupRequest,
    CycleReport,
    CycleRequest,
    PrepareRequest,
    PrepareResult,
    TurnRequest,
    TurnResult,
    WriteCounts,
)
from activities.snapshotter import sync_policy_snapshots
from activities.translate import hub_failures, is_retryable
from hub import names
from hub.client import HubClient
from hub.errors import HubError, NotFoundError
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import CycleInput, CycleResult, Outcome, Profile, schedule
from scheduler.framework.runner import PhaseObserver
from scheduler.scheduling import placement_type_of
from scheduler.snapshots import (
    InvalidPlacementError,
    MultipleLatestSnapshotsError,
    SnapshotError,
    placement_scheduled_condition,
)

__all__ = ["ActivitySettings", "HubActivities"]

# How many picked cluster names a cycle's one-line summary lists before "+N more".
SUMMARY_NAMES: Final = 5
# Metric label for a placement type outside KubeFleet's three (a bad snapshot), so a typo in
# one snapshot cannot grow the series count.
INVALID_TYPE_LABEL: Final = "Invalid"

# Both labels are named: a snapshot that lacks its parent-CRP label is invisible to this lookup
# (and to KubeFleet's), and a user reading only "is-latest-snapshot" would look in vain.
NO_LATEST_MESSAGE: Final = (
    "placement {placement!r} has no policy snapshot labelled {label}=true and "
    "{parent}={placement} yet; waiting for the placement controller to create one"
)
# Label values are at most 63 characters, and the placement's name is the parent-CRP label value
# of its snapshots and bindings; KubeFleet's webhook refuses longer placement names.
MAX_LABEL_VALUE_LENGTH: Final = 63
NAME_TOO_LONG_MESSAGE: Final = (
    "placement name {placement!r} is {length} characters long; it labels the placement's policy "
    "snapshots and bindings ({label}), and a label value holds at most {limit}: recreate the "
    "placement with a shorter name"
)
MULTIPLE_LATEST_MESSAGE: Final = (
    "placement {placement!r} has {count} policy snapshots labelled {label}=true ({listed}); "
    'set the label to "false" on all but the newest'
)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ActivitySettings:
    """Per-worker configuration of the activities."""

    # Standalone mode: the worker plays KubeFleet's placement controller too (policy snapshots,
    # the placement's Scheduled condition). Off beside KubeFleet's hub agent (--no-snapshotter).
    snapshotter: bool = True
    profile: Profile | None = None  # None: KubeFleet's default profile
    metrics: Any = None  # workers.metrics.SchedulerMetrics, when the worker exports metrics
    clock: Callable[[], datetime] = field(default=_utcnow)
    # Spans of the cycle stages go to this tracer; None: OpenTelemetry's global one (a no-op
    # until a provider is installed). A worker that installs its own provider passes its tracer.
    tracer: trace.Tracer | None = None
    # Where run_cycle reads MemberClusters: a cache's `clusters` (activities.clusters, as
    # KubeFleet reads them from its informer), which may answer None when it cannot be trusted
    # yet; None, or a None answer: list them from the hub. Bindings are always read directly.
    clusters: Callable[[], list[MemberCluster] | None] | None = None


@dataclass
class _CycleRun:
    """What one run_cycle attempt has learnt so far, for its report and metrics on any exit."""

    started: float = field(default_factory=time.perf_counter)
    placement_type: str = ""
    counted: bool = False  # reached the framework cycle (KubeFleet meters only those)
    tally: Tally = field(default_factory=Tally)

    @property
    def duration_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0


@dataclass(frozen=True)
class _Prepared:
    """prepare's answer, and for a ready placement the objects it read (for the cycle)."""

    result: PrepareResult
    placement: ClusterResourcePlacement | None = None
    snapshot: ClusterSchedulingPolicySnapshot | None = None


def _doing(placement: str, cycle: int) -> str:
    """What a failure message says was being done."""
    return f"cycle {cycle} of placement {placement!r}"


def _heartbeat(progress: str) -> None:
    activity.heartbeat(progress)


class _PhaseSpans:
    """Opens a child span per extension point the scheduler runs (PreFilter, Filter, ...)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def phase(self, stage: str) -> AbstractContextManager[object]:
        return self._tracer.start_as_current_span(stage)


class HubActivities:
    """One instance per worker process, holding that process's HubClient. Thread-safe: the
    worker runs these sync activities in a thread pool, and HubClient is shareable."""

    def __init__(self, client: HubClient, settings: ActivitySettings | None = None) -> None:
        self._client = client
        self._settings = settings or ActivitySettings()
        self._tracer = self._settings.tracer or trace.get_tracer(__name__)
        self._phases: PhaseObserver = _PhaseSpans(self._tracer)

    # --- prepare_cycle ---------------------------------------------------------------------

    @activity.defn
    def prepare_cycle(self, request: PrepareRequest) -> PrepareResult:
        """Read the placement; sync its snapshots (standalone); find its latest snapshot."""
        with hub_failures(f"preparing a cycle of placement {request.placement!r}"):
            return self._prepare(request.placement)

    def _prepare(self, name: str) -> PrepareResult:
        return self._prepare_turn(name, pending_condition=True).result

    def _prepare_turn(self, name: str, *, pending_condition: bool) -> _Prepared:
        """Steps 2-5 of scheduleOnce; with the objects read, for a cycle in the same activity.

        `pending_condition`: write the placement's Scheduled condition for the latest snapshot
        now (SchedulePending for a new one). A caller that runs the cycle next passes False:
        the cycle writes the condition moments later, and writes it on failure too."""
        client = self._client
        try:
            placement = client.get(ClusterResourcePlacement, name)
        except NotFoundError:
            return _Prepared(
                PrepareResult(phase="gone", message=f"placement {name!r} does not exist")
            )
        generation = placement.metadata.generation
        if placement.metadata.deleting:
            return _Prepared(
                PrepareResult(
                    phase="deleting",
                    message=f"placement {name!r} is being deleted",
                    placement_generation=generation,
                )
            )

        if too_long := _name_too_long(name):
            if self._settings.snapshotter:
                return _Prepared(self._sync_failed(placement, InvalidPlacementError(too_long)))
            return _Prepared(
                PrepareResult(
                    phase="no_latest_snapshot", message=too_long, placement_generation=generation
                )
            )

        action: str | None = None
        known: tuple[ClusterSchedulingPolicySnapshot, ...] | None = None
        if self._settings.snapshotter:
            # Finalizer first, as KubeFleet's placement controller adds its own before making
            # snapshots: once one exists, a deletion waits for the cleanup that removes it.
            # The other way round, a placement deleted after the snapshot was made but before
            # the finalizer landed (a failed write, a killed worker) vanished at once and left
            # its snapshots behind for good.
            placement = self._ensure_finalizer(placement)
            try:
                synced = sync_policy_snapshots(client, placement)
            except SnapshotError as exc:
                return _Prepared(self._sync_failed(placement, exc))
            action, known = synced.action, synced.latest

        latest = (
            list(known)
            if known is not None
            else client.list(
                ClusterSchedulingPolicySnapshot,
                {names.PARENT_PLACEMENT_LABEL: name, names.IS_LATEST_SNAPSHOT_LABEL: "true"},
            ).items
        )
        if not latest:
            message = NO_LATEST_MESSAGE.format(
                placement=name,
                label=names.IS_LATEST_SNAPSHOT_LABEL,
                parent=names.PARENT_PLACEMENT_LABEL,
            )
            return _Prepared(
                PrepareResult(
                    phase="no_latest_snapshot",
                    message=message,
                    placement_generation=generation,
                    snapshot_action=action,
                )
            )
        if len(latest) > 1:
            message = MULTIPLE_LATEST_MESSAGE.format(
                placement=name,
                count=len(latest),
                label=names.IS_LATEST_SNAPSHOT_LABEL,
                listed=", ".join(sorted(s.name for s in latest)),
            )
            return _Prepared(
                PrepareResult(
                    phase="multiple_latest_snapshots",
                    message=message,
                    placement_generation=generation,
                    snapshot_action=action,
                )
            )
        snapshot = latest[0]
        placement = self._ensure_finalizer(placement)
        if self._settings.snapshotter and pending_condition:
            self._write_pending_condition(placement, snapshot)
        placement_type = placement_type_of(snapshot)
        result = PrepareResult(
            phase="ready",
            message=f"latest policy snapshot {snapshot.name} ({placement_type})",
            snapshot=snapshot.name,
            placement_type=placement_type,
            placement_generation=generation,
            snapshot_action=action,
        )
        return _Prepared(result, placement, snapshot)

    def _write_pending_condition(
        self, placement: ClusterResourcePlacement, snapshot: ClusterSchedulingPolicySnapshot
    ) -> None:
        # The placement controller re-derives the condition on every reconcile (2.7): a new
        # snapshot makes it SchedulePending until the cycle reports.
        now = self._now()
        write_scheduled_condition(
            self._client, placement, lambda p: placement_scheduled_condition(p, snapshot, now)
        )

    def _ensure_finalizer(self, placement: ClusterResourcePlacement) -> ClusterResourcePlacement:
        finalizers = placement.metadata.finalizers
        if names.SCHEDULER_CLEANUP_FINALIZER in finalizers:
            return placement
        return self._client.patch(
            ClusterResourcePlacement,
            placement.name,
            {"metadata": {"finalizers": [*finalizers, names.SCHEDULER_CLEANUP_FINALIZER]}},
            resource_version=placement.metadata.resource_version,
        )

    def _sync_failed(
        self, placement: ClusterResourcePlacement, exc: SnapshotError
    ) -> PrepareResult:
        """Say on the placement why its snapshots cannot be kept, then wait for a change."""
        error = str(exc)
        now = self._now()
        write_scheduled_condition(
            self._client, placement, lambda p: sync_failed_condition(p, error, now)
        )
        phase = (
            "multiple_latest_snapshots"
            if isinstance(exc, MultipleLatestSnapshotsError)
            else "no_latest_snapshot"
        )
        return PrepareResult(
            phase=phase,
            message=f"policy snapshot sync failed: {error}",
            placement_generation=placement.metadata.generation,
            snapshot_action="failed",
        )

    # --- run_cycle -------------------------------------------------------------------------

    @activity.defn
    def run_cycle(self, request: CycleRequest) -> CycleReport:
        """Read, schedule, write bindings and status; report what was decided and written."""
        return self._metered_cycle(request)

    def _metered_cycle(
        self, request: CycleRequest, prepared: _Prepared | None = None
    ) -> CycleReport:
        """The cycle, counted in scheduling_active_workers and metered by outcome. With
        `prepared` (the placement and snapshot just read), a failure leaves the placement's
        condition as KubeFleet's placement controller would show it."""
        run = _CycleRun()
        with self._active_worker():
            try:
                with hub_failures(_doing(request.placement, request.cycle)):
                    try:
                        report = self._cycle(request, run, prepared)
                    except BaseException:
                        if prepared is not None:
                            self._pending_after_failure(prepared)
                        raise
            except ApplicationError as err:
                self._meter(run, "error" if is_retryable(err) else "unexpected")
                raise
        if run.counted:
            self._meter(run, _outcome_label(report))
        return report

    def _cycle(
        self, request: CycleRequest, run: _CycleRun, prepared: _Prepared | None = None
    ) -> CycleReport:
        """The cycle; `prepared`: the placement and snapshot this activity has just read."""
        client = self._client
        with self._tracer.start_as_current_span("read") as span:
            span.set_attribute("placement", request.placement)
            span.set_attribute("snapshot", request.snapshot)
            if prepared is not None and prepared.placement and prepared.snapshot:
                placement, snapshot = prepared.placement, prepared.snapshot
            else:
                try:
                    placement = client.get(ClusterResourcePlacement, request.placement)
                except NotFoundError:
                    return self._skipped(request, run, "the placement is gone")
                run.placement_type = _placement_type(placement)
                if placement.metadata.deleting:
                    return self._skipped(request, run, "the placement is being deleted")
                try:
                    snapshot = client.get(ClusterSchedulingPolicySnapshot, request.snapshot)
                except NotFoundError:
                    return self._skipped(
                        request, run, f"policy snapshot {request.snapshot} is gone"
                    )
                if snapshot.placement_name != request.placement or not snapshot.is_latest:
                    return self._skipped(
                        request, run, f"policy snapshot {request.snapshot} is no longer the latest"
                    )
            run.placement_type = placement_type_of(snapshot)
            run.counted = True
            cached = self._settings.clusters() if self._settings.clusters is not None else None
            clusters = cached if cached is not None else client.list(MemberCluster).items
            span.set_attribute("clusters_cached", cached is not None)
            bindings = client.list(
                ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: request.placement}
            ).items
            span.set_attribute("clusters", len(clusters))
            span.set_attribute("bindings", len(bindings))

        now = self._now()
        with self._tracer.start_as_current_span("schedule") as span:
            result = schedule(
                CycleInput(
                    snapshot=snapshot,
                    clusters=clusters,
                    bindings=bindings,
                    now=now,
                    fresh=request.fresh,
                ),
                self._settings.profile,
                self._phases,
            )
            explanation = result.explanation
            span.set_attribute("placement_type", result.outcome.placement_type)
            span.set_attribute("clusters", len(clusters))
            span.set_attribute("picked", result.outcome.picked)
            span.set_attribute("filtered", sum(len(g.clusters) for g in explanation.filtered))
            span.set_attribute("binding_writes", result.plan.binding_writes)
            if result.error:
                span.set_attribute("error", result.error)

        with self._tracer.start_as_current_span("apply") as span:
            apply_binding_plan(client, result.plan, run.tally, _heartbeat)
            span.set_attribute("created", run.tally.created)
            span.set_attribute("patched", run.tally.patched)
            span.set_attribute("unscheduled", run.tally.unscheduled)

        with self._tracer.start_as_current_span("write_status") as span:
            status_written = False
            write = result.plan.snapshot_status
            if write is not None:
                metadata = snapshot.metadata.model_copy(
                    update={"resource_version": write.resource_version}
                )
                snapshot = client.update_status(
                    snapshot.model_copy(update={"status": write.status, "metadata": metadata})
                )
                status_written = True
            condition_written = False
            if self._settings.snapshotter:
                written_snapshot = snapshot
                condition_written = write_scheduled_condition(
                    client,
                    placement,
                    lambda p: placement_scheduled_condition(p, written_snapshot, now),
                )
            span.set_attribute("status_written", status_written)
            span.set_attribute("placement_condition_written", condition_written)

        tally = run.tally
        writes = WriteCounts(
            created=tally.created,
            adopted=tally.adopted,
            patched=tally.patched,
            unscheduled=tally.unscheduled,
            finalizers_removed=tally.finalizers_removed,
            status_written=status_written,
            placement_condition_written=condition_written,
        )
        return CycleReport(
            cycle=request.cycle,
            placement=request.placement,
            snapshot=snapshot.name,
            outcome=result.outcome,
            explanation=explanation,
            writes=writes,
            requeue=result.requeue,
            requeue_after_seconds=result.requeue_after_seconds,
            error=result.error,
            clusters_seen=len(clusters),
            bindings_seen=len(bindings),
            duration_ms=run.duration_ms,
            summary=cycle_summary(request.cycle, result, writes),
        )

    # --- schedule_once ---------------------------------------------------------------------

    @activity.defn
    def schedule_once(self, request: TurnRequest) -> TurnResult:
        """One loop turn in one activity: prepare, then, when the placement is ready, the cycle.

        The same work as `prepare_cycle` followed by `run_cycle`, in one round trip through
        Temporal instead of two, and without reading the placement and its snapshot twice."""
        with hub_failures(_doing(request.placement, request.cycle)):
            prepared = self._prepare_turn(request.placement, pending_condition=False)
        if prepared.result.phase != "ready" or prepared.result.snapshot is None:
            return TurnResult(prepared=prepared.result)
        cycle = CycleRequest(
            placement=request.placement,
            snapshot=prepared.result.snapshot,
            cycle=request.cycle,
            fresh=request.fresh,
            reason=request.reason,
        )
        return TurnResult(prepared=prepared.result, report=self._metered_cycle(cycle, prepared))

    def _pending_after_failure(self, prepared: _Prepared) -> None:
        """A cycle that failed before its status write leaves the condition KubeFleet's
        placement controller would show (SchedulePending for a new snapshot); best effort:
        the hub is likely what failed, and the retry writes the real condition anyway."""
        if not self._settings.snapshotter or not prepared.placement or not prepared.snapshot:
            return
        with suppress(HubError):
            self._write_pending_condition(prepared.placement, prepared.snapshot)

    def _skipped(self, request: CycleRequest, run: _CycleRun, why: str) -> CycleReport:
        """No cycle: what it was asked to schedule moved on; requeue so prepare looks again."""
        return CycleReport(
            cycle=request.cycle,
            placement=request.placement,
            snapshot=request.snapshot,
            outcome=Outcome(placement_type=run.placement_type),
            requeue=True,
            duration_ms=run.duration_ms,
            summary=f"cycle {request.cycle}: skipped, {why}; no writes",
        )

    # --- cleanup_placement -----------------------------------------------------------------

    @activity.defn
    def cleanup_placement(self, request: CleanupRequest) -> CleanupReport:
        """Delete the placement's bindings (and snapshots, standalone), then its finalizer."""
        with hub_failures(f"cleaning up placement {request.placement!r}"):
            return self._cleanup(request.placement)

    def _cleanup(self, name: str) -> CleanupReport:
        client = self._client
        try:
            placement: ClusterResourcePlacement | None = client.get(ClusterResourcePlacement, name)
        except NotFoundError:
            placement = None  # gone already: still sweep any bindings it left behind
        if placement is not None and not placement.metadata.deleting:
            raise ApplicationError(
                f"refusing to clean up placement {name!r}: it is not being deleted",
                type=failures.UNEXPECTED,
                non_retryable=True,
            )
        if _name_too_long(name):
            # No object can carry the name as a label, so none was ever made; the finalizer
            # was never added either (prepare_cycle stops first).
            removed = placement is not None and self._remove_placement_finalizer(placement)
            return CleanupReport(
                finalizer_removed=removed,
                summary=f"placement {name}: nothing to clean up (name too long to label objects)",
            )
        pacer = Pacer(_heartbeat)
        bindings = client.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: name})
        deleted = 0
        for binding in sorted(bindings, key=lambda b: b.name):
            if self._remove_binding(binding):
                deleted += 1
            pacer.tick(f"cleaned binding {binding.name}")

        snapshots = 0
        if self._settings.snapshotter:
            # Standalone, we are the placement controller too: its snapshots go (kubefleet-rules 2.6).
            selector = {names.PARENT_PLACEMENT_LABEL: name}
            snapshots = len(client.list(ClusterSchedulingPolicySnapshot, selector))
            if snapshots:
                client.delete_collection(ClusterSchedulingPolicySnapshot, selector)

        removed = placement is not None and self._remove_placement_finalizer(placement)
        parts = [f"{deleted} binding(s) deleted"]
        if self._settings.snapshotter:
            parts.append(f"{snapshots} policy snapshot(s) deleted")
        parts.append("finalizer removed" if removed else "no finalizer to remove")
        return CleanupReport(
            bindings_deleted=deleted,
            snapshots_deleted=snapshots,
            finalizer_removed=removed,
            summary=f"placement {name}: " + ", ".join(parts),
        )

    def _remove_binding(self, binding: ClusterResourceBinding) -> bool:
        """Drop our finalizer, then delete unless deleting already; True if deleted now."""
        client = self._client
        ours = names.SCHEDULER_BINDING_CLEANUP_FINALIZER
        finalizers = binding.metadata.finalizers
        try:
            if ours in finalizers:
                remaining = [f for f in finalizers if f != ours]
                client.patch(
                    ClusterResourceBinding,
                    binding.name,
                    {"metadata": {"finalizers": remaining}},
                    resource_version=binding.metadata.resource_version,
                )
            if binding.metadata.deleting:
                return False
            client.delete(ClusterResourceBinding, binding.name)
        except NotFoundError:
            return False  # gone meanwhile: nothing left to do for it
        return True

    def _remove_placement_finalizer(self, placement: ClusterResourcePlacement) -> bool:
        finalizers = placement.metadata.finalizers
        if names.SCHEDULER_CLEANUP_FINALIZER not in finalizers:
            return False
        try:
            self._client.patch(
                ClusterResourcePlacement,
                placement.name,
                {
                    "metadata": {
                        "finalizers": [
                            f for f in finalizers if f != names.SCHEDULER_CLEANUP_FINALIZER
                        ]
                    }
                },
                resource_version=placement.metadata.resource_version,
            )
        except NotFoundError:
            return False  # deleted by another finalizer owner finishing first
        return True

    # --- helpers ---------------------------------------------------------------------------

    def _now(self) -> datetime:
        # metav1.Time has second precision; conditions compare equal after a round trip.
        return self._settings.clock().replace(microsecond=0)

    @contextmanager
    def _active_worker(self) -> Iterator[None]:
        metrics = self._settings.metrics
        if metrics is None:
            yield
            return
        with metrics.active_worker():
            yield

    def _meter(self, run: _CycleRun, outcome: str) -> None:
        metrics = self._settings.metrics
        if metrics is None:
            return
        tally = run.tally
        for operation, count in (
            ("create", tally.created),
            ("patch", tally.patched),
            ("unschedule", tally.unscheduled),
            ("remove_finalizer", tally.finalizers_removed),
        ):
            metrics.count_binding_writes(operation, count)
        if run.counted:
            placement_type = (
                run.placement_type
                if run.placement_type in names.PLACEMENT_TYPES
                else INVALID_TYPE_LABEL
            )
            metrics.observe_cycle(run.duration_ms, placement_type=placement_type, outcome=outcome)


def _name_too_long(name: str) -> str | None:
    if len(name) <= MAX_LABEL_VALUE_LENGTH:
        return None
    return NAME_TOO_LONG_MESSAGE.format(
        placement=name,
        length=len(name),
        label=names.PARENT_PLACEMENT_LABEL,
        limit=MAX_LABEL_VALUE_LENGTH,
    )


def _placement_type(placement: ClusterResourcePlacement) -> str:
    policy = placement.spec.policy
    return names.PICK_ALL if policy is None else policy.effective_type


def _outcome_label(report: CycleReport) -> str:
    """KubeFleet's outcome of a finished cycle (kubefleet-rules 3.2 table)."""
    if report.error:
        return "unexpected"
    return "requeue" if report.requeue else "success"


def _names(names_: list[str]) -> str:
    shown = ",".join(names_[:SUMMARY_NAMES])
    more = len(names_) - SUMMARY_NAMES
    return f"{shown} +{more} more" if more > 0 else shown


def cycle_summary(cycle: int, result: CycleResult, writes: WriteCounts) -> str:
    """One line for the Temporal UI, e.g. "cycle 7: PickN 3/3, picked a,b,c; 1 created"."""
    outcome = result.outcome
    wanted = "" if outcome.wanted is None else f"/{outcome.wanted}"
    head = f"cycle {cycle}: {outcome.placement_type} {outcome.picked}{wanted}"
    explanation = result.explanation
    selected = list(
        dict.fromkeys(
            [c for g in explanation.picked for c in g.clusters]
            + explanation.kept
            + explanation.valid
        )
    )
    if selected:
        head += f", picked {_names(selected)}"
    if result.error:
        return f"{head}; error: {result.error}"
    parts = [
        f"{count} {what}"
        for count, what in (
            (writes.created, "created"),
            (writes.adopted, "adopted"),
            (writes.patched, "patched"),
            (writes.unscheduled, "unscheduled"),
            (writes.finalizers_removed, "finalizers removed"),
        )
        if count
    ]
    if writes.status_written:
        parts.append("status written")
    if writes.placement_condition_written:
        parts.append("placement condition written")
    if result.requeue:
        parts.append("requeue")
    return f"{head}; " + (", ".join(parts) if parts else "no change")
