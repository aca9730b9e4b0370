"""Keeps one placement scheduled, turn by turn, for as long as it exists.

One run per placement (id `crp/<name>`, `rp/<namespace>/<name>`): Temporal allows one running
execution per id, so a placement is never scheduled twice at once, the guarantee KubeFleet gets
from its work queue. Each turn is one KubeFleet `scheduleOnce` (kubefleet-rules 3.2) and one
activity, `schedule_once`, called by name: it reads the placement and its latest policy
snapshot (standalone, it syncs the snapshot first) and, when there is one to schedule, runs the
cycle and writes bindings and status. `cleanup_placement` runs when the placement is being
deleted, after which the workflow completes.

It listens to the watcher's signals, `requeue`, `move` and `priority_changed`; they land in the
inbox (workflows.inbox), where any number of them during a turn cause exactly one more. "Requeue
now" is another turn; "requeue after" is a durable timer. Transient hub errors are retried by
the activities' RetryPolicy, which replaces KubeFleet's rate limiter; errors that retrying
cannot fix are recorded and the workflow waits for the next event. The run continues as new,
its state carried over, when its budget is spent (workflows.run_budget). The parts that are not
Temporal calls live beside it and are tested alone: the inbox, the waiters of
`requeue_and_wait` (workflows.waiters), where a turn runs (workflows.execution), the search
attributes (workflows.visibility) and the current details the UI shows (workflows.details)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from scheduler.deadline import missing_line
    from scheduler.readable import readable_reason
    from workflows import details, failures, names, renewal
    from workflows.deadline import DeadlineClock
    from workflows.execution import TurnExecution
    from workflows.inbox import Inbox, Work
    from workflows.models import (
        CarriedState,
        CleanupReport,
        CleanupRequest,
        CycleReport,
        HubEvent,
        MovesRequest,
        PlacementExplanation,
        PlacementInput,
        PlacementPhase,
        PlacementStatus,
        PrepareResult,
        RenewRequest,
        RequeueRequest,
        RequeueResult,
        TurnMoves,
        TurnPriority,
        TurnRequest,
        TurnResult,
    )
    from workflows.run_budget import RUN_EVENTS_BOUND, RunBudget
    from workflows.visibility import Visibility
    from workflows.waiters import Waiters

__all__ = ["RUN_EVENTS_BOUND", "PlacementWorkflow", "ResourcePlacementWorkflow"]

# A cycle may write thousands of bindings, so it heartbeats instead of relying on a long
# start-to-close alone (workflows.execution).
CYCLE_TIMEOUT = timedelta(minutes=10)
CLEANUP_TIMEOUT = timedelta(minutes=10)
# What awaiting a turn's activity raises when it fails: an ActivityError, or for a local
# activity its last failure itself.
TURN_FAILURES = (ActivityError, ApplicationError, ActivityTimeout)
# How requeue_and_wait refuses an update while the run continues-as-new or completes.
CLOSING_ERROR = "RunClosing"
CLOSING_MESSAGE = "this run is ending (continue-as-new or completion); retry the update"
# The priority commands (search-attribute upserts, priority_changed counting toward
# continue-as-new) are new: a run begun by a worker from before them replays without them.
PRIORITY_PATCH = "priority"
# The scheduling deadline's commands (its timer, its turns' aged priority): decided the first
# time a turn reads the annotation, so placements without it record no marker and replay as
# before.
DEADLINE_PATCH = "schedule-deadline"
# A deadline that passed while the workflow was busy (a requeue-after timer, whose expiry leaves
# work waiting, or events arriving faster than turns) is counted before the next turn; before
# this, only an idle workflow counted misses, and a placement turned every 30 s (enforcement
# held back) was never reported. Decided when it first matters, as the deadline's own patch.
DEADLINE_BUSY_PATCH = "schedule-deadline-busy"
# A miss runs a turn at most once per REPORT_INTERVAL once its stretch's first miss has (unless
# aging would lift its key): a `1s` deadline on a placement that cannot be scheduled ran a whole
# turn every second, for ever. Decided when it first puts a miss's timer off.
DEADLINE_FLOOR_PATCH = "schedule-deadline-report-interval"


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
        self._inbox = Inbox.of(input.carried)
        self._budget = RunBudget.of(input.turns_per_run, input.signals_per_run)
        self._waiters = Waiters()
        self._execution = TurnExecution.of(
            input.turn_execution,
            input.local_cycles,
            input.local_turn_seconds,
            carried.next_local,
            carried.queue_turns,
        )
        self._fell_back = False  # the last local call ran again on the activity queue
        self._visibility = Visibility.of(workflow.info().typed_search_attributes)
        self._cycles = carried.cycles
        # The last cycle's report and the last that evaluated clusters, with their explanations
        # (a run carries the first without: it has the same one as the second, or a small one).
        self._last: CycleReport | None = carried.last
        self._deciding: CycleReport | None = carried.deciding
        if self._last is not None:
            self._last = self._last.filled_from(self._deciding)
        # The last cycle's decision as the UI's current details show it (workflows.details).
        self._decided = details.decision(self._last, self._deciding)
        self._moves: TurnMoves | None = carried.last_moves
        self._last_error = carried.last_error
        self._waiting_for = carried.waiting_for or "the first cycle"
        self._phase: PlacementPhase = carried.phase if input.carried else "pending"
        # Continue-as-new or completion is decided: new updates are refused (the caller retries
        # and reaches the next run), so none is left waiting for a turn that will not come.
        self._closing = False
        # Order (docs/priority.md): the placement's priority as the watcher last sent it, and
        # the priority key the current turn runs at. Whether this run issues the priority
        # commands is decided (workflow.patched) the first time it would, so runs that never
        # need one record no marker, and a run begun by a worker from before priorities
        # replays, and keeps on, without them.
        self._prioritised: bool | None = None
        self._priority: TurnPriority | None = carried.priority
        self._turn_priority_key: int | None = None
        self._turn_asked_key: int | None = None  # the same, before aging
        # The scheduling deadline's clock (workflows.deadline), for placements with the
        # annotation only; whether this run issues its commands, decided as for priorities.
        self._deadline = DeadlineClock.of(carried.deadline)
        self._deadlines: bool | None = True if carried.deadline is not None else None
        self._deadlines_busy: bool | None = None
        self._renewal = renewal.Renewal()  # asked to continue as new (workflows.renewal)

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        found = workflow.info().typed_search_attributes
        if identity := Visibility.identity(found, self._placement, self._namespace):
            workflow.upsert_search_attributes(identity)
        generation = renewal.generation_update(found)
        if generation and workflow.patched(renewal.GENERATION_PATCH):
            workflow.upsert_search_attributes(generation)
        while True:
            await self._wait_for_work()
            if self._inbox.dirty and await self._turn():
                self._closing = True
                await workflow.wait_condition(workflow.all_handlers_finished)
                return self._status()
            info = workflow.info()
            if self._renewal.asked or self._budget.spent(
                info.get_current_history_length(), info.is_continue_as_new_suggested()
            ):
                self._closing = True
                if self._waiters.waiting_after(self._budget.turns_started):
                    continue  # accepted updates wait for the next turn: run it here first
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    PlacementInput(
                        placement=self._placement,
                        namespace=self._namespace,
                        carried=self._carried(),
                        turns_per_run=input.turns_per_run,
                        signals_per_run=input.signals_per_run,
                        turn_execution=self._execution.mode,
                        # For a worker from before the mode (rolled back): only a forced choice.
                        local_cycles=True if self._execution.mode == "local" else None,
                        local_turn_seconds=input.local_turn_seconds,
                    )
                )

    # --- one turn ------------------------------------------------------------------------------

    async def _wait_for_work(self) -> None:
        if not self._inbox.dirty:
            self._show()
        # Signals that run no turn (priority_changed) still count: a run they fill up
        # continues-as-new without waiting for a turn.
        def wanted() -> bool:
            full = self._prioritised is True and self._budget.signals_full
            return self._renewal.asked or self._inbox.dirty or full

        due = self._deadline.due() if self._deadlines else None
        if due is None:
            await workflow.wait_condition(wanted)
            return
        if wanted():
            if due <= workflow.now() and self._busy_misses():
                self._deadline_missed()
            await workflow.wait_condition(wanted)
            return
        wake = self._deadline_wake(due)
        left = wake - workflow.now()
        try:
            if left > timedelta(0):
                summary = f"schedule deadline {self._deadline.annotation}"
                await workflow.wait_condition(wanted, timeout=left, timeout_summary=summary)
                if wake > due and workflow.now() >= due:
                    self._deadline_missed()  # counted by the turn that runs now, not lost
                return
        except TimeoutError:
            pass
        self._deadline_missed()

    def _deadline_wake(self, due: datetime) -> datetime:
        """When the next miss wakes the workflow for a turn: `due`, or later for a miss that
        has nothing new to report (DeadlineClock.reported_due; patch DEADLINE_FLOOR_PATCH,
        asked where the branch is: the SDK keeps its answer for the run)."""
        wake = self._deadline.reported_due(self._own_key(), self._best_aged_key())
        if wake is None or wake <= due or not workflow.patched(DEADLINE_FLOOR_PATCH):
            return due
        return wake

    def _best_aged_key(self) -> int | None:
        """How far aging may lift this placement's turns (TurnPriority.best_aged_key)."""
        return self._priority.best_aged_key() if self._priority is not None else None

    def _deadline_missed(self) -> None:
        misses = self._deadline.miss(workflow.now())
        # At the placement's own key: the turn ages it when it starts, once (docs/priority.md).
        self._inbox.ask(self._own_key())
        self._inbox.mark(f"schedule deadline {self._deadline.annotation} exceeded ({misses})")

    async def _turn(self) -> bool:
        """One loop turn; True when the workflow is done (placement gone or cleaned up, with
        no event since)."""
        number = self._budget.turn()
        work = self._inbox.take()
        # The key its work asked for is what a requeue of the same work asks again; aging is
        # applied to it here and nowhere else, so a miss lifts a turn by one key, not two.
        self._turn_asked_key = self._turn_priority_key = work.priority_key
        if self._deadlines:
            key = work.priority_key if work.priority_key is not None else self._own_key()
            self._turn_priority_key = self._deadline.aged(key, self._best_aged_key())
        self._upsert_priority()
        turn = await self._schedule_once(number, work.fresh, work.because(), work)
        if turn is None:
            self._ended(number, RequeueResult(outcome="failed", error=self._last_error))
            return False
        prepared, report = turn.prepared, turn.report
        if turn.moves:
            cycle = report.cycle if report is not None else self._cycles + 1
            self._moves = TurnMoves(cycle=cycle, lines=turn.moves[: details.MOVES_KEPT])
        self._deadline_after(prepared, report)
        if prepared.phase == "gone":
            self._set_phase("done", "nothing: the placement is gone")
            self._ended(number, RequeueResult(outcome="gone", summary=prepared.message))
            return not self._inbox.dirty  # an event since: it may have been created again
        if prepared.phase == "deleting":
            cleaned = await self._cleanup()
            self._ended(
                number,
                RequeueResult(outcome="cleaned_up", summary=self._waiting_for)
                if cleaned
                else RequeueResult(outcome="failed", error=self._last_error),
            )
            return cleaned and not self._inbox.dirty
        if prepared.phase != "ready" or report is None:
            # KubeFleet forgets the key and waits for the snapshot watcher (3.2 step 4).
            self._set_phase("idle", f"an event: {prepared.message}")
            # A snapshot sync that failed is the placement's own mistake: the requeue failed.
            failed = prepared.message if prepared.snapshot_action == "failed" else None
            self._ended(
                number, RequeueResult(outcome="not_ready", summary=prepared.message, error=failed)
            )
            return False
        self._ended(
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

    def _ended(self, number: int, result: RequeueResult) -> None:
        self._waiters.ended(number, result)

    async def _schedule_once(
        self, number: int, fresh: bool, because: str, work: Work
    ) -> TurnResult | None:
        """The loop turn as one activity: prepare and, when ready, the cycle (kubefleet-rules
        3.2). Its summary in the UI names the turn, not a cycle: a turn that is not ready runs
        none, and the result says which cycle ran (`cycle N: ...`) or that none did."""
        cycle = self._cycles + 1
        self._set_phase("running", f"cycle {cycle}")
        kind = f"{self._last.placement_type} " if self._last is not None else ""
        request = TurnRequest(
            placement=self._placement,
            namespace=self._namespace,
            cycle=cycle,
            fresh=fresh,
            reason=because,
            known_explanation=self._known_explanation(),
            moves=work.moves,
            deadline=self._deadline.request() if self._deadlines else None,
        )
        summary = (
            f"turn {number}: {'fresh ' if fresh else ''}{kind}placement {self._key} "
            f"({readable_reason(because)})"
        )
        activity = (
            names.ACTIVITY_SCHEDULE_ONCE_RP if self._namespace else names.ACTIVITY_SCHEDULE_ONCE
        )
        try:
            turn: TurnResult = await self._execute(
                activity, request, TurnResult, CYCLE_TIMEOUT, summary
            )
        except TURN_FAILURES as err:
            self._execution.after_turn(None, fell_back=self._fell_back)
            self._inbox.keep_fresh(fresh)  # the fresh cycle asked for has not happened
            self._record_failure(f"cycle {cycle}", err)
            return None
        self._execution.after_turn(turn.next_local, fell_back=self._fell_back)
        if turn.report is None:
            # Nothing was scheduled: any fresh request was for a cycle that did not happen.
            self._inbox.keep_fresh(fresh)
        return turn

    async def _execute(
        self, activity: str, request: Any, result: type[Any], timeout: timedelta, summary: str
    ) -> Any:
        """One of the placement's activities, by name: as a local activity in this worker
        while the placement has local cycles, or on the activity queue (workflows.execution).
        A local one that has not succeeded within the local limit runs again on the queue (a
        turn is idempotent); one that failed for good fails the turn, as on the queue."""
        self._fell_back = False
        if self._execution.wants_local(workflow.patched):
            try:
                return await workflow.execute_local_activity(
                    activity,
                    request,
                    result_type=result,
                    **self._execution.local_options(timeout, summary),
                )
            except TURN_FAILURES as err:
                if _failed_for_good(err):
                    raise
                summary = f"{summary}; on the activity queue: the local attempts {_how(err)}"
                self._fell_back = True
        # The activities' own task queue (workflows.names says why). A history written when
        # they shared the workflow's queue replays the same: an activity is matched by its type
        # and id, not its queue.
        queue = names.activity_task_queue(workflow.info().task_queue)
        priority = TurnPriority.temporal(self._priority, self._turn_priority_key)
        return await workflow.execute_activity(
            activity,
            request,
            result_type=result,
            **TurnExecution.queue_options(queue, timeout, summary, priority),
        )

    def _known_explanation(self) -> str | None:
        """The digest of the explanation this workflow holds: a cycle that decides the same
        fates records only the digest, not the explanation again."""
        last = self._last
        return last.explanation_digest if last is not None and last.has_explanation else None

    async def _after_cycle(self, report: CycleReport) -> None:
        cycle = report.cycle
        self._cycles = cycle
        self._budget.cycles += 1
        report = report.filled_from(self._last)
        self._last = report
        if report.evaluated:
            self._deciding = report
        self._decided = details.decision(report, self._deciding)
        self._last_error = report.error
        fully = report.fulfilled and not report.requeue
        if attributes := self._visibility.after_cycle(report.placement_type, fully):
            workflow.upsert_search_attributes(attributes)
        if report.requeue:
            self._inbox.ask(self._turn_asked_key)  # the next batch is the same work
            self._inbox.mark(f"cycle {cycle} asked to requeue now")
            self._set_phase("pending", "the next batch")
        elif report.requeue_after_seconds:
            await self._requeue_after(cycle, report.requeue_after_seconds)
        else:
            self._set_phase(
                "idle", "an event (placement, snapshot, cluster or binding change, or requeue)"
            )

    async def _requeue_after(self, cycle: int, seconds: float) -> None:
        self._set_phase("requeue_timer", f"a {seconds:g}s requeue timer, or an event")
        try:
            await workflow.wait_condition(
                lambda: self._inbox.dirty,
                timeout=timedelta(seconds=seconds),
                timeout_summary=f"cycle {cycle} asked to requeue after {seconds:g}s",
            )
        except TimeoutError:
            self._inbox.ask(self._turn_asked_key)
            self._inbox.mark(f"requeue after {seconds:g}s (cycle {cycle})")

    async def _cleanup(self) -> bool:
        self._set_phase("cleaning_up", "cleanup")
        request = CleanupRequest(placement=self._placement, namespace=self._namespace)
        activity = (
            names.ACTIVITY_CLEANUP_PLACEMENT_RP
            if self._namespace
            else names.ACTIVITY_CLEANUP_PLACEMENT
        )
        summary = f"placement {self._key} is being deleted: clean up"
        try:
            report: CleanupReport = await self._execute(
                activity, request, CleanupReport, CLEANUP_TIMEOUT, summary
            )
        except TURN_FAILURES as err:
            # E.g. the placement was re-created between prepare and cleanup: not a reason to
            # fail the workflow; record it and let the next event decide again.
            self._record_failure("cleanup", err)
            return False
        self._set_phase("done", f"nothing: cleaned up ({report.summary})")
        return True

    # --- signals, update and queries -----------------------------------------------------------

    @workflow.signal(name=names.SIGNAL_REQUEUE)
    def requeue(self, request: RequeueRequest | None = None) -> None:
        request = request or RequeueRequest()
        self._inbox.keep_fresh(request.fresh)
        kind = "fresh requeue" if request.fresh else "requeue"
        # A person's requeue runs at the placement's own key, or at the one asked for.
        own = self._priority.own_priority_key if self._priority is not None else None
        self._inbox.ask(request.priority if request.priority is not None else own)
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
        self._budget.signals += 1
        if event is not None and event.priority is not None:
            self._priority = event.priority
            self._upsert_priority()

    @workflow.signal(name=names.SIGNAL_MOVE)
    def move(self, request: MovesRequest | None = None) -> None:
        """Rebalance moves (docs/capacity.md): the next turn makes those that still hold."""
        if request is None or not self._inbox.propose(request):
            return
        because = f" ({request.reason})" if request.reason else ""
        self._signalled(f"rebalance: {len(request.moves)} move(s){because}")

    @workflow.signal(name=names.SIGNAL_RENEW_RUN)
    def renew_run(self, request: RenewRequest | None = None) -> None:
        """Continue as new at the next idle point, state carried (workflows.renewal)."""
        self._renewal.ask(request)

    @workflow.update(name=names.UPDATE_REQUEUE_AND_WAIT)
    async def requeue_and_wait(self, request: RequeueRequest | None = None) -> RequeueResult:
        """A requeue that answers with the turn it caused: the next one to start, never the one
        running when it arrived (that one read the hub before the requeue was asked for)."""
        ticket = self._waiters.ticket(self._budget.turns_started)
        self.requeue(request)
        await workflow.wait_condition(lambda: self._waiters.answered(ticket))
        return self._waiters.take(ticket)

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

    # --- helpers -------------------------------------------------------------------------------

    def _hub_signal(self, signal: str, event: HubEvent | None) -> None:
        if event is not None:
            self._execution.heard(event.turn_execution, event.local_cycles)
        if event is not None and event.priority is not None:
            self._priority = event.priority
            self._inbox.ask(event.priority.priority_key)
        self._signalled(f"{signal}: {event.reason}" if event and event.reason else signal)

    def _signalled(self, reason: str) -> None:
        self._budget.signals += 1
        self._inbox.mark(reason)

    def _own_key(self) -> int | None:
        return self._priority.own_priority_key if self._priority is not None else None

    def _deadline_after(self, prepared: PrepareResult, report: CycleReport | None) -> None:
        """The deadline clock after a turn that read the placement (docs/operations.md,
        "Scheduling deadlines"); nothing, and no marker, for placements without the annotation."""
        annotation = prepared.schedule_deadline
        if prepared.phase != "ready" or (annotation is None and self._deadline.annotation is None):
            return
        if self._deadlines is None:
            self._deadlines = workflow.patched(DEADLINE_PATCH)
        if not self._deadlines:
            return  # a run begun before deadlines: its history has no such commands
        self._deadline.read(annotation, prepared.schedule_deadline_problem)
        if report is not None:
            fully = report.fulfilled and not report.requeue
            # A cycle that decided the same fates recorded only their digest: the last holds them.
            explanation = report.filled_from(self._last).full_explanation()
            missing = missing_line(report.outcome, explanation) if not fully else ""
            self._deadline.after_cycle(fully, prepared.unscheduled_since, workflow.now(), missing)

    def _busy_misses(self) -> bool:
        if self._deadlines_busy is None:
            self._deadlines_busy = workflow.patched(DEADLINE_BUSY_PATCH)
        return self._deadlines_busy

    def _priority_commands(self) -> bool:
        if self._prioritised is None:
            self._prioritised = workflow.patched(PRIORITY_PATCH)
        return self._prioritised

    def _upsert_priority(self) -> None:
        """FleetPriority and FleetTenant follow the priority the watcher last sent."""
        priority = self._priority
        if priority is None or not self._visibility.priority_changed(priority):
            return
        if not self._priority_commands():
            return
        workflow.upsert_search_attributes(self._visibility.for_priority(priority))

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
        self._show()

    def _show(self) -> None:
        """The UI's current details: the last cycle's decision and what the placement does now
        (workflow metadata, not a history command)."""
        now = details.now_line(self._phase, self._waiting_for)
        workflow.set_current_details(details.current(self._decided, now, self._moves))

    def _carried(self) -> CarriedState:
        inbox = self._inbox
        return CarriedState(
            cycles=self._cycles,
            dirty=inbox.dirty,
            fresh=inbox.fresh,
            pending_reasons=inbox.reasons,
            last=self._last.slim() if self._last is not None else None,
            deciding=self._deciding,
            last_error=self._last_error,
            waiting_for=self._waiting_for,
            phase=self._phase,
            priority=self._priority,
            next_local=self._execution.advice,
            queue_turns=self._execution.queue_turns,
            pending_priority_key=inbox.priority_key,
            moves=inbox.moves,
            deadline=self._deadline.state(),
            last_moves=self._moves,
        )

    def _status(self) -> PlacementStatus:
        inbox = self._inbox
        return PlacementStatus(
            placement=self._placement,
            namespace=self._namespace,
            cycles=self._cycles,
            waiting_for=self._waiting_for,
            # Queued work shows as pending whatever the loop last said it waits for.
            phase="pending"
            if inbox.dirty and self._phase in ("idle", "requeue_timer")
            else self._phase,
            pending_reasons=list(inbox.reasons) if inbox.dirty else [],
            fresh_pending=inbox.fresh,
            last=self._last.slim() if self._last is not None else None,
            last_error=self._last_error,
            cycles_this_run=self._budget.cycles,
            turns_this_run=self._budget.turns_started,
            signals_this_run=self._budget.signals,
            local_cycles=self._execution.local,
            turn_execution=self._execution.mode,
            priority=self._priority,
            last_turn_key=self._turn_priority_key,
            deadline=self._deadline.state(),
            last_moves=self._moves,
        )


def _cause(err: FailureError) -> BaseException | None:
    """What failed: an activity's error, or a local activity's own (the SDK raises a local
    activity's last failure as it is, not wrapped in an ActivityError)."""
    return err.cause if isinstance(err, ActivityError) else err


def _failed_for_good(err: FailureError) -> bool:
    """A failure retrying cannot fix (kubefleet-rules 3.3), as opposed to a local turn that ran
    out of time or attempts, or that met a hub outage (failures.RUN_ON_QUEUE)."""
    cause = _cause(err)
    return (
        isinstance(cause, ApplicationError)
        and cause.type != failures.RUN_ON_QUEUE
        and (cause.non_retryable or cause.type in failures.NON_RETRYABLE)
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
