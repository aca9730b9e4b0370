"""Keeps one ClusterResourcePlacement scheduled, cycle by cycle, for as long as it exists.

One workflow per placement (id `crp/<name>`): Temporal allows one running execution per id, so a
placement is never scheduled twice at once, the guarantee KubeFleet gets from its work queue.
Each loop turn is one KubeFleet `scheduleOnce` (kubefleet-rules 3.2) and one activity,
`schedule_once`: it reads the placement and its latest policy snapshot (in standalone mode it
syncs the snapshot first) and, when there is one to schedule, runs the filter/score cycle and
writes bindings and status. `cleanup_placement` runs when the placement is being deleted, after
which the workflow completes. Both run on the activity task queue, or as local activities in
the workflow worker while the watcher says the fleet is small enough (`local_cycles`).

It listens to the watcher's signals and the manual `requeue` signal. Signals coalesce: any
number of them during a cycle set one dirty flag, which causes exactly one more cycle. That holds
for the last turn too: a signal that arrives while prepare finds the placement gone, or while
its cleanup runs, means one more look before completing (the watcher's signal-with-start for a
placement deleted and created again under the same name lands on this workflow as it ends).
"Requeue now" is another loop turn; "requeue after" is a durable timer. Transient hub errors are
retried by the activities' RetryPolicy, which replaces KubeFleet's rate limiter; errors that
retrying cannot fix are recorded and the workflow waits for the next event, as KubeFleet does.
History is bounded for healthy and broken placements alike: every turn counts, and the run
continues-as-new, its state carried over, after MAX_TURNS_PER_RUN turns or MAX_HISTORY_EVENTS
events (RUN_EVENTS_BOUND is the documented ceiling of one run)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy, SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from activities import failures
    from activities.cleanup import CleanupPlacement
    from activities.models import (
        CleanupReport,
        CleanupRequest,
        CycleReport,
        MoveRequest,
        TurnRequest,
        TurnResult,
    )
    from activities.turn import ScheduleOnce
    from workflows import names
    from workflows.models import (
        CarriedState,
        HubEvent,
        MovesRequest,
        PlacementExplanation,
        PlacementInput,
        PlacementPhase,
        PlacementStatus,
        RequeueRequest,
        RequeueResult,
        TurnPriority,
    )

__all__ = ["PlacementWorkflow", "ResourcePlacementWorkflow"]

# A cycle may write thousands of bindings, so it heartbeats instead of relying on a long
# start-to-close alone.
CYCLE_TIMEOUT = timedelta(minutes=10)
CYCLE_HEARTBEAT = timedelta(seconds=30)
CLEANUP_TIMEOUT = timedelta(minutes=10)
# A local turn keeps its workflow task open, and the SDK heartbeats that task with a few history
# events every ~8 s. A local turn that takes longer than this, or fails this many times in a
# row (a slow or unreachable hub: about 3 s of backoff), runs again on the activity queue, whose
# retries add nothing to the history.
LOCAL_TURN_LIMIT = timedelta(seconds=30)
LOCAL_ATTEMPTS = 5

# Replaces KubeFleet's per-key rate limiter (5 ms x 2^n, capped at 1000 s; kubefleet-rules 1.11). We
# start at 200 ms because every retry here is a full activity round trip through the server, and
# cap at 60 s, not 1000 s, so a placement resumes within a minute of the hub coming back. No
# attempt limit: like KubeFleet, transient errors are retried until they stop. Errors that
# retrying cannot fix are non-retryable and end the turn instead (kubefleet-rules 3.3).
HUB_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    non_retryable_error_types=list(failures.NON_RETRYABLE),
)

# Local turns: the same backoff, LOCAL_ATTEMPTS attempts, then the activity queue.
LOCAL_RETRY = dataclasses.replace(HUB_RETRY, maximum_attempts=LOCAL_ATTEMPTS)
# What awaiting a turn's activity raises when it fails: an ActivityError, or for a local
# activity its last failure itself.
TURN_FAILURES = (ActivityError, ApplicationError, ActivityTimeout)

# A run continues-as-new at the end of the turn that reaches any of these bounds (or when the
# server suggests it). A turn adds about a dozen events, a signal one or a few, so 100 turns keep
# a run near 1,500 events; the signal and event bounds are for signals that outnumber turns
# (they coalesce while a turn runs). No run exceeds MAX_HISTORY_EVENTS plus one turn and the
# signals that arrived during it: RUN_EVENTS_BOUND, far below the server's 51,200 events. The
# server refuses signals past history.maximumSignalsPerExecution (10,000 by default): a server
# configured below MAX_SIGNALS_PER_RUN needs `signals_per_run` set below its limit, and until
# the run continues the watcher retries what was refused.
MAX_TURNS_PER_RUN = 100
MAX_SIGNALS_PER_RUN = 1_000
MAX_HISTORY_EVENTS = 2_000
RUN_EVENTS_BOUND = 2_500
# How requeue_and_wait refuses an update while the run continues-as-new or completes.
CLOSING_ERROR = "RunClosing"
CLOSING_MESSAGE = "this run is ending (continue-as-new or completion); retry the update"
# Signal reasons kept for the status query; older ones are counted, not listed.
MAX_PENDING_REASONS = 20
# The priority commands (search-attribute upserts, priority_changed counting toward
# continue-as-new) are new: a run begun by a worker from before them replays without them.
PRIORITY_PATCH = "priority"


# Auto-upgrade, set as a versioned worker's default (workers.versioning says why not pinned):
# declaring it here would make every unversioned worker's task completion fail.
@workflow.defn(name=names.PLACEMENT_WORKFLOW)
class PlacementWorkflow:
    @workflow.init
    def __init__(self, input: PlacementInput) -> None:
        carried = input.carried or CarriedState()
        self._placement = input.placement
        # A ResourcePlacement's namespace (None: a ClusterResourcePlacement); its key, as
        # KubeFleet's queue names it, is what the workflow's texts say.
        self._namespace = input.namespace or None
        self._key = f"{self._namespace}/{self._placement}" if self._namespace else self._placement
        self._cycles = carried.cycles
        self._dirty = carried.dirty
        self._fresh = carried.fresh
        self._reasons = list(carried.pending_reasons) if input.carried else ["workflow started"]
        # The last cycle's report and the last that evaluated clusters, with their explanations
        # (a run carries the first without: it has the same one as the second, or a small one).
        self._last: CycleReport | None = carried.last
        self._deciding: CycleReport | None = carried.deciding
        if self._last is not None:
            self._last = self._last.filled_from(self._deciding)
        self._last_error = carried.last_error
        self._waiting_for = carried.waiting_for or "the first cycle"
        self._phase: PlacementPhase = carried.phase if input.carried else "pending"
        self._cycles_this_run = 0
        self._turns_per_run = input.turns_per_run or MAX_TURNS_PER_RUN
        self._signals_this_run = 0
        self._signals_per_run = input.signals_per_run or MAX_SIGNALS_PER_RUN
        # requeue_and_wait: turns are numbered within the run; an update waits for the turn
        # after the one running (or last run) when it arrived. Tickets count its waiters per
        # turn; results hold the outcomes of turns that have waiters.
        self._turns_started = 0
        self._tickets: dict[int, int] = {}
        self._results: dict[int, RequeueResult] = {}
        # Continue-as-new or completion is decided: new updates are refused (the caller retries
        # and reaches the next run), so none is left waiting for a turn that will not come.
        self._closing = False
        # Search attribute values this run last upserted (type, fully scheduled).
        self._attributes: tuple[str, bool] | None = None
        # Turns run as local activities in this worker (docs/operations.md, "Local cycles").
        self._local_cycles = bool(input.local_cycles)
        self._local_limit = (
            timedelta(seconds=input.local_turn_seconds)
            if input.local_turn_seconds
            else LOCAL_TURN_LIMIT
        )
        # Order (docs/priority.md): the placement's priority as the watcher last sent it, the
        # best priority key the queued work asked for, and the key the current turn runs at.
        # Whether this run issues the priority commands: decided (workflow.patched) the first
        # time it would, so runs that never need one record no marker. A run begun by a
        # worker from before priorities replays without them, and keeps without them.
        self._prioritised: bool | None = None
        self._priority: TurnPriority | None = carried.priority
        self._pending_key: int | None = carried.pending_key
        self._turn_key: int | None = None
        # Rebalance moves proposed for the next turn (the `move` signal), and the current one's.
        self._moves = list(carried.moves)
        self._turn_moves: list[MoveRequest] = []
        # FleetPriority and FleetTenant as this run last set them (or found them at start).
        found = workflow.info().typed_search_attributes
        self._priority_attributes = (found.get(names.SA_PRIORITY), found.get(names.SA_TENANT))

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        started_with = workflow.info().typed_search_attributes.get(names.SA_PLACEMENT_NAME)
        if started_with != self._placement:
            # The watcher starts workflows with the name set; a start without it gets it here
            # (a ResourcePlacement's kind and namespace with it: workers.starts sets all three).
            attributes: list[SearchAttributeUpdate[Any]] = [
                names.SA_PLACEMENT_NAME.value_set(self._placement)
            ]
            if self._namespace:
                attributes += [
                    names.SA_PLACEMENT_KIND.value_set(names.KIND_RESOURCE_PLACEMENT),
                    names.SA_PLACEMENT_NAMESPACE.value_set(self._namespace),
                ]
            workflow.upsert_search_attributes(attributes)
        while True:
            await self._wait_for_work()
            if self._dirty and await self._turn():
                self._closing = True
                await workflow.wait_condition(workflow.all_handlers_finished)
                return self._status()
            # Every turn counts, whatever it found: a placement that can never be fully
            # scheduled (or a hub that keeps failing) is signalled on every relevant change, and
            # its run must not grow until the server's limits terminate it.
            if self._should_continue_as_new():
                self._closing = True
                if any(turn > self._turns_started for turn in self._tickets):
                    continue  # accepted updates wait for the next turn: run it here first
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    PlacementInput(
                        placement=self._placement,
                        namespace=self._namespace,
                        carried=self._carried(),
                        turns_per_run=input.turns_per_run,
                        signals_per_run=input.signals_per_run,
                        local_cycles=self._local_cycles,
                        local_turn_seconds=input.local_turn_seconds,
                    )
                )

    async def _turn(self) -> bool:
        """One loop turn; True when the workflow is done (placement gone or cleaned up, with
        no event since)."""
        self._turns_started += 1
        number = self._turns_started
        reasons, fresh = self._take_work()
        self._upsert_priority()
        because = "; ".join(reasons[:3]) + (f" (+{len(reasons) - 3})" if len(reasons) > 3 else "")
        turn = await self._schedule_once(number, fresh, because)
        if turn is None:
            self._turn_ended(number, RequeueResult(outcome="failed", error=self._last_error))
            return False
        prepared, report = turn.prepared, turn.report
        if prepared.phase == "gone":
            self._set_phase("done", "nothing: the placement is gone")
            self._turn_ended(number, RequeueResult(outcome="gone", summary=prepared.message))
            # An event since: the placement may have been created again.
            return not self._dirty
        if prepared.phase == "deleting":
            cleaned = await self._cleanup()
            self._turn_ended(
                number,
                RequeueResult(outcome="cleaned_up", summary=self._waiting_for)
                if cleaned
                else RequeueResult(outcome="failed", error=self._last_error),
            )
            return cleaned and not self._dirty
        if prepared.phase != "ready" or report is None:
            # KubeFleet forgets the key and waits for the snapshot watcher (3.2 step 4).
            self._set_phase("idle", f"an event: {prepared.message}")
            # A snapshot sync that failed is the placement's own mistake: the requeue failed.
            failed = prepared.message if prepared.snapshot_action == "failed" else None
            self._turn_ended(
                number,
                RequeueResult(outcome="not_ready", summary=prepared.message, error=failed),
            )
            return False
        self._turn_ended(
            number,
            RequeueResult(
                outcome="scheduled",
                cycle=report.cycle,
                summary=report.summary,
                error=report.error,
                fulfilled=report.fulfilled,
            ),
        )
        await self._after_cycle(report)
        return False

    def _turn_ended(self, number: int, result: RequeueResult) -> None:
        if number in self._tickets:
            self._results[number] = result

    # --- signals and query -----------------------------------------------------------------

    @workflow.signal(name=names.SIGNAL_REQUEUE)
    def requeue(self, request: RequeueRequest | None = None) -> None:
        request = request or RequeueRequest()
        self._fresh = self._fresh or request.fresh
        kind = "fresh requeue" if request.fresh else "requeue"
        # A person's requeue runs at the placement's own key, or at the one asked for.
        own = self._priority.placement_key if self._priority is not None else None
        self._ask(request.priority if request.priority is not None else own)
        self._signalled(f"{kind}: {request.reason}" if request.reason else kind)

    @workflow.signal(name=names.SIGNAL_SNAPSHOT_CHANGED)
    def snapshot_changed(self, event: HubEvent | None = None) -> None:
        self._hub_signal(names.SIGNAL_SNAPSHOT_CHANGED, event)

    @workflow.signal(name=names.SIGNAL_CLUSTER_CHANGED)
    def cluster_changed(self, event: HubEvent | None = None) -> None:
        self._hub_signal(names.SIGNAL_CLUSTER_CHANGED, event)

    @workflow.signal(name=names.SIGNAL_BINDING_DELETING)
    def binding_deleting(self, event: HubEvent | None = None) -> None:
        self._hub_signal(names.SIGNAL_BINDING_DELETING, event)

    @workflow.signal(name=names.SIGNAL_PLACEMENT_DELETING)
    def placement_deleting(self, event: HubEvent | None = None) -> None:
        self._hub_signal(names.SIGNAL_PLACEMENT_DELETING, event)

    @workflow.signal(name=names.SIGNAL_PLACEMENT_CHANGED)
    def placement_changed(self, event: HubEvent | None = None) -> None:
        self._hub_signal(names.SIGNAL_PLACEMENT_CHANGED, event)

    @workflow.signal(name=names.SIGNAL_PRIORITY_CHANGED)
    def priority_changed(self, event: HubEvent | None = None) -> None:
        """The placement's priority changed: kept for its next turn, shown at once; no turn."""
        if not self._priority_commands():
            return  # a run begun before priorities: its history has no such commands
        self._signals_this_run += 1
        if event is not None and event.priority is not None:
            self._priority = event.priority
            self._upsert_priority()

    @workflow.signal(name=names.SIGNAL_MOVE)
    def move(self, request: MovesRequest | None = None) -> None:
        """Rebalance moves (docs/capacity.md): the next turn makes those that still hold. A
        newer proposal for a binding replaces an older one not yet made."""
        if request is None or not request.moves:
            return
        proposed = {m.binding for m in request.moves}
        self._moves = [m for m in self._moves if m.binding not in proposed] + list(request.moves)
        because = f" ({request.reason})" if request.reason else ""
        self._signalled(f"rebalance: {len(request.moves)} move(s){because}")

    @workflow.update(name=names.UPDATE_REQUEUE_AND_WAIT)
    async def requeue_and_wait(self, request: RequeueRequest | None = None) -> RequeueResult:
        """A requeue that answers with the turn it caused: the next one to start, never the one
        running when it arrived (that one read the hub before the requeue was asked for)."""
        ticket = self._turns_started + 1
        self._tickets[ticket] = self._tickets.get(ticket, 0) + 1
        self.requeue(request)
        await workflow.wait_condition(lambda: ticket in self._results)
        result = self._results[ticket]
        self._tickets[ticket] -= 1
        if not self._tickets[ticket]:
            del self._tickets[ticket], self._results[ticket]
        return result

    @requeue_and_wait.validator
    def _accept_requeue_and_wait(self, request: RequeueRequest | None = None) -> None:
        if self._closing:
            # Checked by the caller: `fleet-scheduler requeue --wait` retries, reaching the
            # next run, or starting one with update-with-start once this one has completed.
            raise ApplicationError(CLOSING_MESSAGE, type=CLOSING_ERROR, non_retryable=True)

    @workflow.query(name=names.QUERY_STATUS)
    def status(self) -> PlacementStatus:
        return self._status()

    @workflow.query(name=names.QUERY_EXPLANATION)
    def explanation(self) -> PlacementExplanation:
        deciding = self._deciding
        if deciding is not None and self._last is not None and deciding.cycle == self._last.cycle:
            deciding = None
        return PlacementExplanation(last=self._last, deciding=deciding)

    # --- one loop turn ---------------------------------------------------------------------

    async def _wait_for_work(self) -> None:
        if not self._dirty:
            workflow.set_current_details(f"waiting for {self._waiting_for}")
        # Signals that run no turn (priority_changed) still count: a run they fill up
        # continues-as-new without waiting for a turn.
        await workflow.wait_condition(
            lambda: (
                self._dirty
                or (self._prioritised is True and self._signals_this_run >= self._signals_per_run)
            )
        )

    def _take_work(self) -> tuple[list[str], bool]:
        reasons, fresh = self._reasons, self._fresh
        self._dirty, self._fresh, self._reasons = False, False, []
        self._turn_moves, self._moves = self._moves, []
        self._turn_key, self._pending_key = self._pending_key, None
        return reasons or ["requeue"], fresh

    def _ask(self, key: int | None) -> None:
        """Queued work asks for priority key `key` (None: no opinion): the turn that takes it
        runs at the best key asked for since the last one started."""
        if key is not None and (self._pending_key is None or key < self._pending_key):
            self._pending_key = key

    def _activity_priority(self) -> Priority:
        """The Priority of this turn's activities: its key and the placement's fairness key.
        Nothing set (Priority.default: the workflow's own) when no sender said anything, as in
        every history written before priorities."""
        return TurnPriority.temporal(self._priority, self._turn_key)

    def _priority_commands(self) -> bool:
        if self._prioritised is None:
            self._prioritised = workflow.patched(PRIORITY_PATCH)
        return self._prioritised

    def _upsert_priority(self) -> None:
        """FleetPriority and FleetTenant follow the priority the watcher last sent (a visibility
        write only when they changed)."""
        if self._priority is None:
            return
        wanted = (self._priority.value, self._priority.tenant)
        if wanted == self._priority_attributes or not self._priority_commands():
            return
        self._priority_attributes = wanted
        workflow.upsert_search_attributes(
            [
                names.SA_PRIORITY.value_set(wanted[0]),
                names.SA_TENANT.value_set(wanted[1])
                if wanted[1]
                else names.SA_TENANT.value_unset(),
            ]
        )

    async def _schedule_once(self, number: int, fresh: bool, because: str) -> TurnResult | None:
        """The loop turn as one activity: prepare and, when ready, the cycle (kubefleet-rules
        3.2). Its summary in the UI names the turn, not a cycle: a turn that is not ready runs
        none, and the result says which cycle ran (`cycle N: ...`) or that none did."""
        cycle = self._cycles + 1
        self._set_phase("running", f"cycle {cycle}")
        workflow.set_current_details(f"running cycle {cycle}")
        kind = f"{self._last.placement_type} " if self._last is not None else ""
        activity = ScheduleOnce.schedule_once_rp if self._namespace else ScheduleOnce.schedule_once
        request = TurnRequest(
            placement=self._placement,
            namespace=self._namespace,
            cycle=cycle,
            fresh=fresh,
            reason=because,
            known_explanation=self._known_explanation(),
            moves=self._turn_moves,
        )
        summary = (
            f"turn {number}: {'fresh ' if fresh else ''}{kind}placement {self._key} ({because})"
        )
        try:
            turn: TurnResult = await self._execute(activity, request, CYCLE_TIMEOUT, summary)
        except TURN_FAILURES as err:
            self._fresh = self._fresh or fresh  # the fresh cycle asked for has not happened
            self._record_failure(f"cycle {cycle}", err)
            return None
        if turn.report is None:
            # Nothing was scheduled: the turn ends as prepare said; any fresh request was for a
            # cycle that did not happen, so it waits for the next one.
            self._fresh = self._fresh or fresh
        return turn

    async def _execute(
        self, method: Callable[..., Any], request: Any, timeout: timedelta, summary: str
    ) -> Any:
        """One of the placement's activities: on the activity queue, or as a local activity in
        this worker when the placement has local cycles (one workflow task instead of two and
        no activity task: about half the Temporal server's work per turn; docs/operations.md,
        "Local cycles"). Either way Temporal retries it by HUB_RETRY. A local one that has not
        succeeded within the local limit runs again on the activity queue (a turn is
        idempotent); one that failed for good fails the turn, as on the queue."""
        if self._local_cycles:
            try:
                return await workflow.execute_local_activity_method(
                    method,
                    request,
                    start_to_close_timeout=min(timeout, self._local_limit),
                    schedule_to_close_timeout=self._local_limit,
                    retry_policy=LOCAL_RETRY,
                    summary=summary,
                )
            except TURN_FAILURES as err:
                if _failed_for_good(err):
                    raise
                summary = f"{summary}; on the activity queue: the local attempts {_how(err)}"
        return await workflow.execute_activity_method(
            method,
            request,
            task_queue=self._activity_queue(),
            start_to_close_timeout=timeout,
            heartbeat_timeout=CYCLE_HEARTBEAT,
            retry_policy=HUB_RETRY,
            summary=summary,
            priority=self._activity_priority(),
        )

    @staticmethod
    def _activity_queue() -> str:
        # The activities' own task queue (workflows.names says why). A history written when
        # they shared the workflow's queue replays the same: a scheduled activity is matched by
        # its type and id, not its queue.
        return names.activity_task_queue(workflow.info().task_queue)

    def _known_explanation(self) -> str | None:
        """The digest of the explanation this workflow holds: a cycle that decides the same
        fates records only the digest, not the explanation again."""
        last = self._last
        return last.explanation_digest if last is not None and last.has_explanation else None

    async def _after_cycle(self, report: CycleReport) -> None:
        cycle = report.cycle
        self._cycles = cycle
        self._cycles_this_run += 1
        report = report.filled_from(self._last)
        self._last = report
        if report.evaluated:
            self._deciding = report
        self._last_error = report.error
        attributes = (report.placement_type, report.fulfilled and not report.requeue)
        # An upsert that would change nothing is skipped: each one is a visibility write.
        if attributes != self._attributes:
            self._attributes = attributes
            workflow.upsert_search_attributes(
                [
                    names.SA_PLACEMENT_TYPE.value_set(attributes[0]),
                    names.SA_FULLY_SCHEDULED.value_set(attributes[1]),
                ]
            )
        if report.requeue:
            self._ask(self._turn_key)  # the next batch is the same work: the same key
            self._mark_dirty(f"cycle {cycle} asked to requeue now")
            self._set_phase("pending", "the next batch")
        elif report.requeue_after_seconds:
            await self._requeue_after(cycle, report.requeue_after_seconds)
        else:
            self._set_phase(
                "idle", "an event (placement, snapshot, cluster or binding change, or requeue)"
            )
        workflow.set_current_details(report.summary)

    async def _requeue_after(self, cycle: int, seconds: float) -> None:
        self._set_phase("requeue_timer", f"a {seconds:g}s requeue timer, or an event")
        try:
            await workflow.wait_condition(
                lambda: self._dirty,
                timeout=timedelta(seconds=seconds),
                timeout_summary=f"cycle {cycle} asked to requeue after {seconds:g}s",
            )
        except TimeoutError:
            self._ask(self._turn_key)
            self._mark_dirty(f"requeue after {seconds:g}s (cycle {cycle})")

    async def _cleanup(self) -> bool:
        self._set_phase("cleaning_up", "cleanup")
        workflow.set_current_details("placement deleting: removing its bindings and finalizer")
        request = CleanupRequest(placement=self._placement, namespace=self._namespace)
        summary = f"placement {self._key} is being deleted: clean up"
        try:
            report: CleanupReport = await self._execute(
                CleanupPlacement.cleanup_placement_rp
                if self._namespace
                else CleanupPlacement.cleanup_placement,
                request,
                CLEANUP_TIMEOUT,
                summary,
            )
        except TURN_FAILURES as err:
            # E.g. the placement was re-created between prepare and cleanup: not a reason to
            # fail the workflow; record it and let the next event decide again.
            self._record_failure("cleanup", err)
            return False
        self._set_phase("done", f"nothing: cleaned up ({report.summary})")
        workflow.set_current_details(self._waiting_for)
        return True

    # --- helpers ---------------------------------------------------------------------------

    def _record_failure(self, what: str, err: FailureError) -> None:
        cause = _cause(err)
        if isinstance(cause, ApplicationError) and cause.type in failures.NON_RETRYABLE:
            message = f"{what} failed ({cause.type}): {cause.message}"
        else:
            message = f"{what} failed: {cause or err}"
        self._last_error = message
        self._set_phase("idle", f"an event (last attempt: {message})")
        workflow.logger.warning("placement %s: %s", self._key, message)

    def _set_phase(self, phase: PlacementPhase, waiting_for: str) -> None:
        self._phase, self._waiting_for = phase, waiting_for

    def _signalled(self, reason: str) -> None:
        self._signals_this_run += 1
        self._mark_dirty(reason)

    def _mark_dirty(self, reason: str) -> None:
        self._dirty = True
        if len(self._reasons) < MAX_PENDING_REASONS:
            self._reasons.append(reason)

    def _hub_signal(self, signal: str, event: HubEvent | None) -> None:
        if event is not None and event.local_cycles is not None:
            self._local_cycles = event.local_cycles
        if event is not None and event.priority is not None:
            self._priority = event.priority
            self._ask(event.priority.priority_key)
        self._signalled(f"{signal}: {event.reason}" if event and event.reason else signal)

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            self._turns_started >= self._turns_per_run
            or self._signals_this_run >= self._signals_per_run
            or info.get_current_history_length() >= MAX_HISTORY_EVENTS
            or info.is_continue_as_new_suggested()
        )

    def _carried(self) -> CarriedState:
        return CarriedState(
            cycles=self._cycles,
            dirty=self._dirty,
            fresh=self._fresh,
            pending_reasons=self._reasons,
            last=self._last.slim() if self._last is not None else None,
            deciding=self._deciding,
            last_error=self._last_error,
            waiting_for=self._waiting_for,
            phase=self._phase,
            priority=self._priority,
            pending_key=self._pending_key,
            moves=self._moves,
        )

    def _status(self) -> PlacementStatus:
        return PlacementStatus(
            placement=self._placement,
            namespace=self._namespace,
            cycles=self._cycles,
            waiting_for=self._waiting_for,
            # Queued work shows as pending whatever the loop last said it waits for.
            phase="pending"
            if self._dirty and self._phase in ("idle", "requeue_timer")
            else self._phase,
            pending_reasons=list(self._reasons) if self._dirty else [],
            fresh_pending=self._fresh,
            last=self._last.slim() if self._last is not None else None,
            last_error=self._last_error,
            cycles_this_run=self._cycles_this_run,
            turns_this_run=self._turns_started,
            signals_this_run=self._signals_this_run,
            local_cycles=self._local_cycles,
            priority=self._priority,
            last_turn_key=self._turn_key,
        )


def _cause(err: FailureError) -> BaseException | None:
    """What failed: an activity's error, or a local activity's own (the SDK raises a local
    activity's last failure as it is, not wrapped in an ActivityError)."""
    return err.cause if isinstance(err, ActivityError) else err


def _failed_for_good(err: FailureError) -> bool:
    """A failure retrying cannot fix (kubefleet-rules 3.3), as opposed to a local turn that ran
    out of time or attempts."""
    cause = _cause(err)
    return isinstance(cause, ApplicationError) and (
        cause.non_retryable or cause.type in failures.NON_RETRYABLE
    )


def _how(err: FailureError) -> str:
    cause = _cause(err)
    if isinstance(cause, ActivityTimeout):
        return "timed out"
    return f"failed ({cause})"


# The same workflow for a ResourcePlacement, under its own type (workflows.names says why).
# The workflow id (`rp/<namespace>/<name>`) and PlacementInput.namespace say which RP it is.
@workflow.defn(name=names.RP_PLACEMENT_WORKFLOW)
class ResourcePlacementWorkflow(PlacementWorkflow):
    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        return await super().run(input)
