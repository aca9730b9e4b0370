"""`schedule_once`: one loop turn of a placement workflow, KubeFleet's `scheduleOnce`
(kubefleet-rules 3.2), in one activity.

The turn reads the placement; in standalone mode (the snapshotter on) it plays KubeFleet's
placement controller first: the scheduler-cleanup finalizer, then the policy snapshot sync
(kubefleet-rules 2); it finds the latest policy snapshot and, when there is exactly one, runs the
cycle (`activities.turn.cycle`). Anything else (placement gone, deleting, no or several latest
snapshots) ends the turn with a phase the workflow acts on.

Each attempt may run twice, or overlap a timed-out earlier attempt of itself, so it re-reads
what it acts on and every write is safe to repeat."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from typing import Final

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.conditions import sync_failed_condition, write_scheduled_condition
from activities.deadline import unscheduled_since
from activities.enforcement import RETRY_AFTER_SECONDS, enforce
from activities.local_slots import local_slot
from activities.moves import apply_moves
from activities.outage import is_outage, through_outages
from activities.plumbing import (
    ActivitySettings,
    heartbeat,
    in_local_activity,
    meter,
    metered,
    paced_heartbeats,
)
from activities.snapshotter import sync_policy_snapshots
from activities.translate import hub_failures, is_retryable
from activities.turn.cycle import outcome_of, read_clusters, run_cycle
from hub import names
from hub.client import HubClient
from hub.errors import HubError, NotFoundError
from hub.kinds import kinds_for, placement_key
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot
from scheduler.cycles.schedule import placement_type_of
from scheduler.opt_in.deadline import carried_deadline
from scheduler.snapshots import (
    InvalidPlacementError,
    MultipleLatestSnapshotsError,
    SnapshotError,
    placement_scheduled_condition,
)
from workflows import failures
from workflows.models import PrepareResult, TurnRequest, TurnResult
from workflows.names import ACTIVITY_SCHEDULE_ONCE, ACTIVITY_SCHEDULE_ONCE_RP

log = logging.getLogger("fleet_scheduler.cycles")

__all__ = ["ScheduleOnce", "name_too_long"]

# Both labels are named: a snapshot that lacks its parent-CRP label is invisible to this lookup
# (and to KubeFleet's), and a user reading only "is-latest-snapshot" would look in vain.
NO_LATEST_MESSAGE: Final = (
    "placement {placement!r} has no policy snapshot labelled {label}=true and "
    "{parent}={name} yet; waiting for the placement controller to create one"
)
NAME_TOO_LONG_MESSAGE: Final = (
    "placement name {placement!r} is {length} characters long; it labels the placement's policy "
    "snapshots and bindings ({label}), and a label value holds at most {limit}: recreate the "
    "placement with a shorter name"
)
MULTIPLE_LATEST_MESSAGE: Final = (
    "placement {placement!r} has {count} policy snapshots labelled {label}=true ({listed}); "
    'set the label to "false" on all but the newest'
)


def name_too_long(name: str) -> str | None:
    """Why no object can carry this placement's name as a label, or None when one can."""
    if len(name) <= names.MAX_PLACEMENT_NAME_LENGTH:
        return None
    return NAME_TOO_LONG_MESSAGE.format(
        placement=name,
        length=len(name),
        label=names.PARENT_PLACEMENT_LABEL,
        limit=names.MAX_PLACEMENT_NAME_LENGTH,
    )


@dataclass(frozen=True)
class _Prepared:
    """How the turn's first half ended; for a ready placement, the objects it read."""

    result: PrepareResult
    placement: ClusterResourcePlacement | None = None
    snapshot: ClusterSchedulingPolicySnapshot | None = None


class ScheduleOnce:
    """The turn activity. One instance per worker process, holding that process's HubClient.
    Thread-safe: the worker runs sync activities in a thread pool, and HubClient is shareable."""

    def __init__(self, client: HubClient, settings: ActivitySettings | None = None) -> None:
        self._client = client
        self._settings = settings or ActivitySettings()

    @activity.defn(name=ACTIVITY_SCHEDULE_ONCE)
    def schedule_once(self, request: TurnRequest) -> TurnResult:
        """Prepare, then, when the placement is ready, the cycle numbered `request.cycle`; run
        again from the start when the hub comes back after an outage (activities.outage)."""
        local = in_local_activity()
        gate = self._settings.hub_gate
        slots = self._settings.local_slots if local else None
        if local:
            call = functools.partial(self._local_turn, request)
        else:
            call = functools.partial(through_outages, gate, heartbeat, lambda: self._turn(request))
        with local_slot(slots, request.order(), "the turn"), paced_heartbeats():
            return self._advised(call, local)

    def _advised(self, call: Callable[[], TurnResult], local: bool) -> TurnResult:
        """Run the turn, and advise where the placement's next one runs."""
        advisor = self._settings.advisor
        if advisor is None:
            return call()
        with advisor.local_turn() if local else nullcontext():
            started = time.monotonic()
            result = call()
            advice = advisor.advise(time.monotonic() - started, local=local)
        return result.model_copy(update={"next_local": advice})

    def _local_turn(self, request: TurnRequest) -> TurnResult:
        """A turn run as a local activity: one attempt at the hub during an outage, not one per
        retry. A hub the gate knows is down, or an outage met here, sends the turn to the
        activity queue at once (failures.RUN_ON_QUEUE), where the gate waits it out."""
        gate = self._settings.hub_gate
        if gate is not None and gate.is_down:
            raise ApplicationError(
                "the hub is down: the turn waits for it on the activity queue",
                type=failures.RUN_ON_QUEUE,
                non_retryable=True,
            )
        try:
            return self._turn(request)
        except ApplicationError as err:
            if gate is None or not is_outage(err):
                raise
            gate.mark_down(err.__cause__ or err)
            raise ApplicationError(
                f"the hub is down ({err}): the turn waits for it on the activity queue",
                type=failures.RUN_ON_QUEUE,
                non_retryable=True,
            ) from err

    @activity.defn(name=ACTIVITY_SCHEDULE_ONCE_RP)
    def schedule_once_rp(self, request: TurnRequest) -> TurnResult:
        """`schedule_once` for a ResourcePlacement (`request.namespace` set), under its own
        activity type (activities.models says why)."""
        return self.schedule_once(request)

    def _turn(self, request: TurnRequest) -> TurnResult:
        key = placement_key(request.namespace, request.placement)
        doing = f"cycle {request.cycle} of placement {key!r}"
        with hub_failures(doing):
            prepared = self._prepare(request.placement, request.namespace)
        if prepared.placement is None or prepared.snapshot is None:
            return TurnResult.of(prepared.result)
        moved: list[str] = []
        if request.moves:
            with hub_failures(f"rebalance moves of placement {key!r}"):
                moved = apply_moves(
                    self._client,
                    prepared.placement,
                    prepared.snapshot,
                    request.moves,
                    read_clusters(self._client, self._settings.clusters),
                    self._settings.profile,
                    self._settings.now,
                ).lines
        with hub_failures(f"affinity enforcement of placement {key!r}"):
            enforced = enforce(
                self._client,
                prepared.placement,
                prepared.snapshot,
                lambda: read_clusters(self._client, self._settings.clusters),
                self._settings.profile,
                self._settings.now,
            )
        moved += enforced.lines
        for line in moved:
            log.info("placement %s: %s", key, line)
        with metered(self._settings) as run:
            try:
                with hub_failures(doing):
                    try:
                        report = run_cycle(
                            self._client,
                            self._settings,
                            request,
                            prepared.placement,
                            prepared.snapshot,
                            run,
                        )
                    except BaseException:
                        self._pending_after_failure(prepared)
                        raise
            except ApplicationError as err:
                meter(self._settings, run, "error" if is_retryable(err) else "unexpected")
                raise
        for line in run.lines:  # preemption, as a victim or as the preemptor
            log.info("placement %s: %s", key, line)
        moved += run.lines
        if enforced.retry and not report.requeue and report.requeue_after_seconds is None:
            report = report.model_copy(update={"requeue_after_seconds": RETRY_AFTER_SECONDS})
        meter(self._settings, run, outcome_of(report))
        if report.error or report.writes.bindings:
            # What a person watching the worker's log wants to see: decisions and mistakes.
            level = logging.WARNING if report.error else logging.INFO
            log.log(level, "placement %s: %s", key, report.summary)
        return TurnResult.of(prepared.result, report, moved)

    # --- the first half: kubefleet-rules 3.2 steps 2-5 -------------------------------------

    def _prepare(self, name: str, namespace: str | None = None) -> _Prepared:
        """KubeFleet's scheduleOnce up to the cycle, for the ClusterResourcePlacement `name`, or
        the ResourcePlacement `name` in `namespace` (every read then in that namespace)."""
        client, snapshotter = self._client, self._settings.snapshotter
        kinds, key = kinds_for(namespace), placement_key(namespace, name)
        try:
            placement = client.get(kinds.placement, name, namespace=namespace)
        except NotFoundError:
            return _Prepared(
                PrepareResult(phase="gone", message=f"placement {key!r} does not exist")
            )
        generation = placement.metadata.generation
        if placement.metadata.deleting:
            return _Prepared(
                PrepareResult(
                    phase="deleting",
                    message=f"placement {key!r} is being deleted",
                    placement_generation=generation,
                )
            )

        if too_long := name_too_long(name):
            if snapshotter:
                return _Prepared(self._sync_failed(placement, InvalidPlacementError(too_long)))
            return _Prepared(
                PrepareResult(
                    phase="no_latest_snapshot", message=too_long, placement_generation=generation
                )
            )

        action: str | None = None
        known: tuple[ClusterSchedulingPolicySnapshot, ...] | None = None
        if snapshotter:
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
                kinds.snapshot,
                {names.PARENT_PLACEMENT_LABEL: name, names.IS_LATEST_SNAPSHOT_LABEL: "true"},
                namespace=namespace,
            ).items
        )
        if len(latest) != 1:
            phase = "no_latest_snapshot" if not latest else "multiple_latest_snapshots"
            message = (
                NO_LATEST_MESSAGE.format(
                    placement=key,
                    name=name,
                    label=names.IS_LATEST_SNAPSHOT_LABEL,
                    parent=names.PARENT_PLACEMENT_LABEL,
                )
                if not latest
                else MULTIPLE_LATEST_MESSAGE.format(
                    placement=key,
                    count=len(latest),
                    label=names.IS_LATEST_SNAPSHOT_LABEL,
                    listed=", ".join(sorted(s.name for s in latest)),
                )
            )
            return _Prepared(
                PrepareResult(
                    phase=phase,
                    message=message,
                    placement_generation=generation,
                    snapshot_action=action,
                )
            )
        snapshot = latest[0]
        placement = self._ensure_finalizer(placement)
        placement_type = placement_type_of(snapshot)
        result = PrepareResult(
            phase="ready",
            message=f"latest policy snapshot {snapshot.name} ({placement_type})",
            snapshot=snapshot.name,
            placement_type=placement_type,
            placement_generation=generation,
            snapshot_action=action,
        )
        deadline = placement.metadata.annotations.get(names.SCHEDULE_DEADLINE_ANNOTATION)
        if deadline is not None:  # without it, the result is as it always was
            carried, problem = carried_deadline(deadline)  # never the raw value (issue 33)
            result = result.model_copy(
                update={
                    "schedule_deadline": carried,
                    "schedule_deadline_problem": problem,
                    "unscheduled_since": unscheduled_since(placement),
                }
            )
        return _Prepared(result, placement, snapshot)

    def _ensure_finalizer(self, placement: ClusterResourcePlacement) -> ClusterResourcePlacement:
        finalizers = placement.metadata.finalizers
        if names.SCHEDULER_CLEANUP_FINALIZER in finalizers:
            return placement
        return self._client.patch(
            type(placement),
            placement.name,
            {"metadata": {"finalizers": [*finalizers, names.SCHEDULER_CLEANUP_FINALIZER]}},
            resource_version=placement.metadata.resource_version,
            namespace=placement.metadata.namespace,
        )

    def _sync_failed(
        self, placement: ClusterResourcePlacement, exc: SnapshotError
    ) -> PrepareResult:
        """Say on the placement why its snapshots cannot be kept, then wait for a change."""
        error = str(exc)
        now = self._settings.now()
        invalid = isinstance(exc, InvalidPlacementError)
        write_scheduled_condition(
            self._client,
            placement,
            lambda p: sync_failed_condition(p, error, now, invalid=invalid),
        )
        phase = (
            "multiple_latest_snapshots"
            if isinstance(exc, MultipleLatestSnapshotsError)
            else "no_latest_snapshot"
        )
        prefix = "invalid placement" if invalid else "policy snapshot sync failed"
        message = f"{prefix}: {error}"
        key = placement_key(placement.metadata.namespace, placement.name)
        log.warning("placement %s: %s", key, message)
        return PrepareResult(
            phase=phase,
            message=message,
            placement_generation=placement.metadata.generation,
            snapshot_action="failed",
        )

    def _pending_after_failure(self, prepared: _Prepared) -> None:
        """A cycle that failed before its status write leaves the condition KubeFleet's
        placement controller would show (SchedulePending for a new snapshot); best effort:
        the hub is likely what failed, and the retry writes the real condition anyway."""
        placement, snapshot = prepared.placement, prepared.snapshot
        if not self._settings.snapshotter or placement is None or snapshot is None:
            return
        # The placement controller re-derives the condition on every reconcile
        # (kubefleet-rules 2.7): a new snapshot makes it SchedulePending until the cycle reports.
        now = self._settings.now()
        with suppress(HubError):
            write_scheduled_condition(
                self._client, placement, lambda p: placement_scheduled_condition(p, snapshot, now)
            )
