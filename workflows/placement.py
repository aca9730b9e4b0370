"""Keeps one placement scheduled, turn by turn, for as long as it exists.

One run per placement (id `crp/<name>`, `rp/<namespace>/<name>`): Temporal allows one running
execution per id, so a placement is never scheduled twice at once, the guarantee KubeFleet gets
from its work queue. Each turn is one KubeFleet `scheduleOnce` (kubefleet-rules 3.2) and one
activity, `schedule_once`, called by name: it reads the placement and its latest policy
snapshot (standalone, it syncs the snapshot first) and, when there is one to schedule, runs the
cycle and writes bindings and status. `cleanup_placement` runs when the placement is being
deleted, after which the workflow completes.

Signals (workflows.names); those that ask for a turn land in the inbox (workflows.inbox), where
any number of them during a turn cause exactly one more:
- `requeue`: a person's (or the reconcile's) request for a turn, fresh or not, at a priority;
- the watcher's hub events: `snapshot_changed`, `cluster_changed`, `binding_deleting`,
  `placement_deleting`, `placement_changed`; they also say where turns run and the priority;
- `priority_changed`: the placement's priority, kept for its next turn and shown; no turn;
- `move`: rebalance moves for the next turn (docs/capacity.md);
- `renew_run`: the reconcile's ask to continue as new at the next idle point, so that old
  patches can be retired (workflows.renewal, docs/operations.md "Retiring patches").
The update `requeue_and_wait` is a requeue answered with the turn it caused (workflows.waiters);
the queries `status` and `explanation` answer from the workflow's state.

"Requeue now" is another turn; "requeue after" is a durable timer, and so is a scheduling
deadline (workflows.deadline). Transient hub errors are retried by the activities'
RetryPolicy, which replaces KubeFleet's rate limiter; errors that retrying cannot fix are
recorded and the workflow waits for the next event. Its state is one object (PlacementState):
continue-as-new hands it to the next run as it is once the run's budget is spent
(workflows.run_budget). The parts that are not Temporal calls live beside it, tested alone:
the inbox, the waiters, the execution, the deadline, the search attributes
(workflows.visibility) and the UI's current details (workflows.details)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from hub.kinds import placement_key
    from scheduler.explain.readable import readable_reason
    from workflows import details, names, renewal
    from workflows.deadline import PlacementDeadline
    from workflows.execution import (
        TURN_FAILURES,
        TurnExecution,
        failure_message,
    )
    from workflows.inbox import IDLE_FOR, Inbox, Work
    from workflows.models import (
        CleanupReport,
        CleanupRequest,
        CycleReport,
        DeadlineReported,
        HubEvent,
        MovesRequest,
        PlacementExplanation,
        PlacementInput,
        PlacementPhase,
        PlacementStatus,
        RenewRequest,
        RequeueRequest,
        RequeueResult,
        TurnMoves,
        TurnPriority,
        TurnRequest,
        TurnResult,
    )
    from workflows.patches import MOOT_REQUEUE_PATCH, PRIORITY_PATCH, RunPatches
    from workflows.run_budget import RUN_EVENTS_BOUND, RunBudget
    from workflows.visibility import Visibility
    from workflows.waiters import Waiters

__all__ = ["RUN_EVENTS_BOUND", "PlacementWorkflow", "ResourcePlacementWorkflow"]

# A cycle may write thousands of bindings, so it heartbeats instead of relying on a long
# start-to-close alone (workflows.execution).
CYCLE_TIMEOUT = timedelta(minutes=10)
CLEANUP_TIMEOUT = timedelta(minutes=10)
REPORT_TIMEOUT = timedelta(minutes=1)  # a deadline miss reported alone: a read and two writes
# How requeue_and_wait refuses an update while the run continues-as-new or completes.
CLOSING_ERROR = "RunClosing"
CLOSING_MESSAGE = "this run is ending (continue-as-new or completion); retry the update"


# Auto-upgrade, set as a versioned worker's default (workers.versioning says why not pinned):
# declaring it here would make every unversioned worker's task completion fail.
@workflow.defn(name=names.PLACEMENT_WORKFLOW)
class PlacementWorkflow:
    @workflow.init
    def __init__(self, input: PlacementInput) -> None:
        self._placement = input.placement
        # A ResourcePlacement's namespace (None: a ClusterResourcePlacement); its placement key,
        # as KubeFleet's queue names it, is what the workflow's texts say.
        self._namespace = input.namespace or None
        self._placement_key = placement_key(self._namespace, self._placement)
        # The previous run's state as it ended, or a first run's (models.PlacementState).
        state = self._state = input.carried or Inbox.first()
        state.waiting_for = state.waiting_for or "the first cycle"
        if state.last is not None:  # carried without its explanation: the deciding one's
            state.last = state.last.filled_from(state.deciding)
        self._inbox = Inbox(state)
        self._execution = TurnExecution.of(
            input.turn_execution, input.local_cycles, input.local_turn_seconds, state
        )
        self._deadline = PlacementDeadline.of(state)
        self._budget = RunBudget.of(input.turns_per_run, input.signals_per_run)
        self._waiters = Waiters()
        self._visibility = Visibility.of(workflow.info().typed_search_attributes)
        # The last cycle's decision as the UI's current details show it (workflows.details).
        self._decided = details.decision(state.last, state.deciding)
        # Continue-as-new or completion is decided: new updates are refused (the caller retries
        # and reaches the next run), so none is left waiting for a turn that will not come.
        self._closing = False
        # The priority key the current turn runs at (docs/priority.md), and the one its work
        # asked for before aging, which a requeue of the same work asks again.
        self._turn_priority_key: int | None = None
        self._turn_asked_key: int | None = None
        self._renewal = renewal.Renewal()  # asked to continue as new (workflows.renewal)
        self._patched = RunPatches()  # workflow.patched, AT_START's answered at the start

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        found = workflow.info().typed_search_attributes
        if identity := Visibility.identity(found, self._placement, self._namespace):
            workflow.upsert_search_attributes(identity)
        renewal.record_generation(found, workflow.patched, workflow.upsert_search_attributes)
        self._patched.begin()
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
                mode = self._execution.mode
                workflow.continue_as_new(input.next_run(self._namespace, self._state, mode))

    # --- one turn ------------------------------------------------------------------------------

    async def _wait_for_work(self) -> None:
        if not self._inbox.dirty:
            self._show()

        # Signals that run no turn still count: a run they fill up continues-as-new without
        # waiting for a turn. Every other signal queues work, so only priority_changed fills
        # a run without it, and only in runs with the priority commands (PRIORITY_PATCH).
        def wanted() -> bool:
            return self._renewal.asked or self._inbox.dirty or self._budget.signals_full

        wait = self._deadline.wait(wanted(), workflow.now(), self._state.priority, self._patched)
        if wait.missed:
            self._deadline_missed()
        if wait.wake is None:
            await workflow.wait_condition(wanted)
            return
        left = wait.wake - workflow.now()
        try:
            if left > timedelta(0):
                summary = self._deadline.summary
                await workflow.wait_condition(wanted, timeout=left, timeout_summary=summary)
                if wait.missed_by(workflow.now()):
                    self._deadline_missed()  # counted by the turn that runs now, not lost
                return
        except TimeoutError:
            pass
        await self._deadline_missed_idle()

    def _deadline_missed(self, reason: str | None = None) -> None:
        reason = reason or self._deadline.missed(workflow.now())
        # At the placement's own key: the turn ages it when it starts, once (docs/priority.md).
        self._inbox.ask(self._state.own_priority_key)
        self._inbox.mark(reason)

    async def _deadline_missed_idle(self) -> None:
        """A miss while idle: reported alone, without a turn, where it can be
        (PlacementDeadline.alone); else, or if the report cannot speak for the placement or
        fails, by a turn, as before."""
        priority = self._state.priority
        before = self._deadline.aged(None, priority)
        reason = self._deadline.missed(workflow.now())
        lifted = self._deadline.aged(None, priority) != before
        report = self._deadline.alone(self._placement, self._namespace, lifted, self._patched)
        if report is not None:
            summary = f"{reason}: report for placement {self._placement_key}"
            try:
                done: DeadlineReported = await self._execute(
                    names.ACTIVITY_REPORT_DEADLINE_MISS,
                    report,
                    DeadlineReported,
                    REPORT_TIMEOUT,
                    summary,
                )
                if done.reported:
                    return
            except TURN_FAILURES:
                pass
        self._deadline_missed(reason)

    async def _turn(self) -> bool:
        """One loop turn; True when the workflow is done (placement gone or cleaned up, with
        no event since)."""
        if moot := self._inbox.moot(self._state.last):
            workflow.logger.info("no turn: %s", moot)
            self._set_phase("idle", IDLE_FOR)
            return False
        number = self._budget.turn()
        work = self._inbox.take()
        # The key its work asked for is what a requeue of the same work asks again; aging is
        # applied to it here and nowhere else, so a miss lifts a turn by one key, not two.
        self._turn_asked_key = work.priority_key
        self._turn_priority_key = self._deadline.aged(work.priority_key, self._state.priority)
        self._upsert_priority()
        turn = await self._schedule_once(number, work.fresh, work.because(), work)
        if turn is None:
            self._waiters.ended(number, RequeueResult.failed(self._state.last_error))
            return False
        prepared, report = turn.prepared, turn.report
        if turn.moves:
            cycle = report.cycle if report is not None else self._state.cycles + 1
            self._state.last_moves = TurnMoves(cycle=cycle, lines=turn.moves[: details.MOVES_KEPT])
        self._deadline.after_turn(prepared, report, self._state.last, workflow.now(), self._patched)
        if prepared.phase == "gone":
            self._set_phase("done", "nothing: the placement is gone")
            self._waiters.ended(number, RequeueResult(outcome="gone", summary=prepared.message))
            return not self._inbox.dirty  # an event since: it may have been created again
        if prepared.phase == "deleting":
            cleaned = await self._cleanup()
            self._waiters.ended(
                number,
                RequeueResult(outcome="cleaned_up", summary=self._state.waiting_for)
                if cleaned
                else RequeueResult.failed(self._state.last_error),
            )
            return cleaned and not self._inbox.dirty
        if prepared.phase != "ready" or report is None:
            # KubeFleet forgets the key and waits for the snapshot watcher (3.2 step 4).
            self._set_phase("idle", f"an event: {prepared.message}")
            # A snapshot sync that failed is the placement's own mistake: the requeue failed.
            failed = prepared.message if prepared.snapshot_action == "failed" else None
            self._waiters.ended(
                number, RequeueResult(outcome="not_ready", summary=prepared.message, error=failed)
            )
            return False
        self._waiters.ended(number, RequeueResult.scheduled(report))
        await self._after_cycle(report)
        return False

    async def _schedule_once(
        self, number: int, fresh: bool, because: str, work: Work
    ) -> TurnResult | None:
        """The loop turn as one activity: prepare and, when ready, the cycle (kubefleet-rules
        3.2). Its summary in the UI names the turn, not a cycle: a turn that is not ready runs
        none, and the result says which cycle ran (`cycle N: ...`) or that none did."""
        last = self._state.last
        cycle = self._state.cycles + 1
        self._set_phase("running", f"cycle {cycle}")
        kind = f"{last.placement_type} " if last is not None else ""
        request = TurnRequest(
            placement=self._placement,
            namespace=self._namespace,
            cycle=cycle,
            fresh=fresh,
            reason=because,
            # A cycle that decides the fates this workflow holds records only their digest.
            known_explanation=last.held_digest if last is not None else None,
            moves=work.moves,
            deadline=self._deadline.request(),
            priority_key=self._turn_priority_key,
            within_key=self._state.turn_within_key(),
        )
        summary = (
            f"turn {number}: {'fresh ' if fresh else ''}{kind}placement {self._placement_key} "
            f"({readable_reason(because)})"
        )
        activity = names.schedule_once_activity(self._namespace)
        execution = self._execution
        try:
            turn: TurnResult = await self._execute(
                activity, request, TurnResult, CYCLE_TIMEOUT, summary
            )
        except TURN_FAILURES as err:
            execution.after_turn(None, fell_back=execution.falls_back(workflow.patched))
            self._inbox.keep_fresh(fresh)  # the fresh cycle asked for has not happened
            self._record_failure(f"cycle {cycle}", err)
            return None
        execution.after_turn(turn.next_local, fell_back=execution.falls_back(workflow.patched))
        if turn.report is None:
            # Nothing was scheduled: any fresh request was for a cycle that did not happen.
            self._inbox.keep_fresh(fresh)
        return turn

    async def _execute(
        self, activity: str, request: Any, result: type[Any], timeout: timedelta, summary: str
    ) -> Any:
        """One of the placement's activities, by name, where its turns run now
        (TurnExecution.execute), at the turn's priority on the activity queue."""
        priority = TurnPriority.temporal(self._state.priority, self._turn_priority_key)
        return await self._execution.execute(activity, request, result, timeout, summary, priority)

    async def _after_cycle(self, report: CycleReport) -> None:
        state = self._state
        cycle = state.cycles = report.cycle
        self._budget.cycles += 1
        report = state.last = report.filled_from(state.last)
        if report.evaluated:
            state.deciding = report
        self._decided = details.decision(report, state.deciding)
        state.last_error = report.error
        fully = report.fulfilled and not report.requeue
        if attributes := self._visibility.after_cycle(report.placement_type, fully):
            workflow.upsert_search_attributes(attributes)
        if self._visibility.after_decision(report, self._patched):
            workflow.upsert_search_attributes(self._visibility.for_version(report.clusters_version))
        if report.requeue:
            self._inbox.ask(self._turn_asked_key)  # the next batch is the same work
            self._inbox.mark(f"cycle {cycle} asked to requeue now")
            self._set_phase("pending", "the next batch")
        elif report.requeue_after_seconds:
            await self._requeue_after(cycle, report.requeue_after_seconds)
        else:
            self._set_phase("idle", IDLE_FOR)

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
        request = CleanupRequest(
            placement=self._placement,
            namespace=self._namespace,
            priority_key=self._turn_priority_key,
        )
        activity = names.cleanup_activity(self._namespace)
        summary = f"placement {self._placement_key} is being deleted: clean up"
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
        self._requeue(request, moot=self._patched.from_start(MOOT_REQUEUE_PATCH))

    def _requeue(self, request: RequeueRequest | None, *, moot: bool) -> None:
        self._budget.signals += 1
        self._inbox.requeue(request or RequeueRequest(), self._state.own_priority_key, moot)

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
        if not workflow.patched(PRIORITY_PATCH):
            return  # a run begun before priorities: its history has no such commands
        self._budget.signals += 1
        if event is not None and event.priority is not None:
            self._state.priority = event.priority
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
        self._requeue(request, moot=False)  # answered by a turn: never moot
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
        return PlacementExplanation.of(self._state.last, self._state.deciding)

    # --- helpers -------------------------------------------------------------------------------

    def _hub_signal(self, signal: str, event: HubEvent | None) -> None:
        if event is not None:
            self._execution.heard(event.turn_execution, event.local_cycles)
        if event is not None and event.priority is not None:
            self._state.priority = event.priority
            self._inbox.ask(event.priority.priority_key)
        self._signalled(f"{signal}: {event.reason}" if event and event.reason else signal)

    def _signalled(self, reason: str) -> None:
        self._budget.signals += 1
        self._inbox.mark(reason)

    def _upsert_priority(self) -> None:
        """FleetPriority and FleetTenant follow the priority the watcher last sent."""
        priority, shown = self._state.priority, self._visibility
        # The patch is asked only when there is an upsert to issue.
        changed = priority is not None and shown.priority_changed(priority)
        if priority is not None and changed and workflow.patched(PRIORITY_PATCH):
            workflow.upsert_search_attributes(shown.for_priority(priority))

    def _record_failure(self, what: str, err: FailureError) -> None:
        message = self._state.last_error = failure_message(what, err)
        self._set_phase("idle", f"an event (last attempt: {message})")
        workflow.logger.warning("placement %s: %s", self._placement_key, message)

    def _set_phase(self, phase: PlacementPhase, waiting_for: str) -> None:
        self._state.phase, self._state.waiting_for = phase, waiting_for
        self._show()

    def _show(self) -> None:
        """The UI's current details: the last cycle's decision and what the placement does now
        (workflow metadata, not a history command)."""
        now = details.now_line(self._state.phase, self._state.waiting_for)
        workflow.set_current_details(details.current(self._decided, now, self._state.last_moves))

    def _status(self) -> PlacementStatus:
        budget = self._budget
        return PlacementStatus.of(
            self._placement,
            self._namespace,
            self._state,
            cycles_this_run=budget.cycles,
            turns_this_run=budget.turns_started,
            signals_this_run=budget.signals,
            local_cycles=self._execution.local,
            turn_execution=self._execution.mode,
            last_turn_key=self._turn_priority_key,
        )


# The same workflow for a ResourcePlacement, under its own type (workflows.names says why).
# The workflow id (`rp/<namespace>/<name>`) and PlacementInput.namespace say which RP it is.
@workflow.defn(name=names.RP_PLACEMENT_WORKFLOW)
class ResourcePlacementWorkflow(PlacementWorkflow):
    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        return await super().run(input)
