"""Inputs, signals and query results of PlacementWorkflow.

They live in event histories (inputs, signals) or cross to the CLI (the `status` query), so
fields are only ever added, with defaults, never renamed."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, field_serializer
from temporalio.common import Priority

from scheduler.plugins.priority_sort import WITHIN_WANTING
from workflows.models.turn import CycleReport, MoveRequest
from workflows.models.wire import CompactWire

__all__ = [
    "DeadlineState",
    "HubEvent",
    "MovesRequest",
    "PlacementExplanation",
    "PlacementInput",
    "PlacementPhase",
    "PlacementState",
    "PlacementStatus",
    "RequeueRequest",
    "RequeueResult",
    "TurnExecutionMode",
    "TurnMoves",
    "TurnOutcome",
    "TurnPriority",
]

PlacementPhase = Literal["pending", "running", "idle", "requeue_timer", "cleaning_up", "done"]
# Where a placement's turns run (workflows.execution): chosen turn by turn, or forced.
TurnExecutionMode = Literal["auto", "local", "queue"]
"""Where a placement workflow is in its loop, for programs (`waiting_for` says it for people):
pending: work is queued and the next turn is about to start; running: a turn (or the cycle in
it) is in progress; idle: waiting for a hub event or a requeue, with nothing queued (after a
finished cycle, a placement that is not ready, or a turn that failed in a way retrying cannot
fix: see `last_error`); requeue_timer: waiting for a cycle's requeue-after timer or an event;
cleaning_up: the placement is being deleted and its cleanup runs; done: the workflow is ending
(placement gone or cleaned up)."""


class TurnPriority(CompactWire):
    """Where a placement's turns go in Temporal's task queues: the QueueSort plugin's answer
    (scheduler.framework.queue_sort.QueuePriority) on the wire, and what it came from, for
    `status`, `explain` and the search attributes (docs/priority.md)."""

    # Temporal's priority key for the turn the signal asks for: 1 first, 5 last, None unset
    # (Temporal's default, 3). A fan-out signal's key is usually below the placement's own.
    priority_key: int | None = Field(default=None, ge=1, le=5)
    # The priority key of the turns the placement causes itself, for a person's requeue (on the
    # wire "placementKey", its first name: a priority key, never a placement's key).
    own_priority_key: int | None = Field(default=None, ge=1, le=5, alias="placementKey")
    fairness_key: str | None = None
    fairness_weight: float | None = Field(default=None, gt=0)
    value: int = 0  # the placement's priority: its PriorityClass value
    priority_class: str | None = None
    tenant: str | None = None
    problem: str | None = None  # e.g. the PriorityClass named does not exist
    # The best key aging may lift the placement's turns to (docs/priority.md, "Aging"); None:
    # its own key, what every sender before the field meant.
    aging_limit: int | None = Field(default=None, ge=1, le=5)
    # The QueueSort plugin's order within the key (QueuePriority.within_key; PrioritySort: 1 for
    # a re-decision of a placement that has what it asked for); None: 0, first within the key.
    # Only the worker's local slots read it: Temporal's keys are whole numbers.
    within_key: int | None = Field(default=None, ge=0)

    def best_aged_key(self) -> int | None:
        """The best key a missed deadline may lift a turn to: the profile's limit, else the
        placement's own key (None: Temporal's default, 3)."""
        return self.aging_limit if self.aging_limit is not None else self.own_priority_key

    @staticmethod
    def temporal(priority: TurnPriority | None, key: int | None) -> Priority:
        """Temporal's Priority for a task at priority key `key` of a placement of `priority`
        (None: a sender that said nothing; no fairness key)."""
        if priority is None:
            return Priority(priority_key=key)
        return Priority(
            priority_key=key,
            fairness_key=priority.fairness_key,
            fairness_weight=priority.fairness_weight,
        )


class DeadlineState(CompactWire):
    """A placement's scheduling deadline as its workflow keeps it (workflows.deadline;
    docs/operations.md, "Scheduling deadlines"): carried across continue-as-new and shown by
    `status` and `explain`. Only placements with the annotation have one."""

    annotation: str  # the annotation as the last turn carried it (never raw: carried_deadline)
    seconds: int | None = None  # the deadline; None: the annotation cannot be read
    aging: bool = False
    problem: str | None = None  # why the annotation cannot be read
    # When the placement became not fully scheduled (None: it is fully scheduled, or no cycle
    # has run yet), and how many deadline periods have passed since, as the workflow counted
    # them when its timer fired.
    since: datetime | None = None
    misses: int = 0
    missing: str = ""  # which clusters are missing and why, as the last cycle said
    # When a miss of this stretch was last counted (a turn reported it); None: none yet. The
    # next miss runs a turn only REPORT_INTERVAL later, unless aging would lift its key.
    reported_at: datetime | None = None


class RequeueRequest(CompactWire):
    """Payload of the `requeue` signal; every field optional (`{}` or no payload at all)."""

    fresh: bool = False  # reschedule a PickN placement from scratch instead of keeping its picks
    reason: str = ""
    # The priority key of the turn this requeue causes (`requeue --priority N`); None: the
    # placement's own (TurnPriority.own_priority_key).
    priority: int | None = Field(default=None, ge=1, le=5)
    # The reconcile's requeue for a cluster change: moot once the placement's last cycle read
    # the hub at this version or later (scheduler.requeue.decided), as a turn running when it
    # arrives may have. None: the requeue always runs a turn (`requeue_and_wait` always does).
    unless_read: int | None = Field(default=None, ge=0)


class RenewRequest(CompactWire):
    """Payload of the `renew_run` signal (workflows.renewal); every field optional."""

    reason: str = ""
    generation: int | None = None  # the sender's patch generation, for the history's reader


TurnOutcome = Literal["scheduled", "not_ready", "failed", "gone", "cleaned_up"]
"""How a loop turn ended: scheduled: a cycle ran (its summary says what it decided); not_ready:
there was nothing to schedule yet (e.g. no policy snapshot); failed: the turn failed in a way
retrying cannot fix (see `error`); gone: the placement does not exist; cleaned_up: it was being
deleted and its cleanup ran."""


class RequeueResult(CompactWire):
    """The answer of the `requeue_and_wait` update: the turn that the requeue caused.

    Kept to a few hundred bytes, since every answer is recorded in the history: the cycle's
    full explanation is what `explain` shows."""

    outcome: TurnOutcome
    cycle: int | None = None  # the cycle's number, when one ran
    summary: str = ""
    error: str | None = None
    fulfilled: bool | None = None

    @classmethod
    def failed(cls, error: str | None) -> RequeueResult:
        """A turn whose activity failed (`error`: what the workflow recorded)."""
        return cls(outcome="failed", error=error)

    @classmethod
    def scheduled(cls, report: CycleReport) -> RequeueResult:
        """A turn that ran `report`'s cycle."""
        return cls(
            outcome="scheduled",
            cycle=report.cycle,
            summary=report.summary,
            error=report.error,
            fulfilled=report.fulfilled,
        )


class HubEvent(CompactWire):
    """Payload of the watcher's signals: what happened in the hub, for the history's sake."""

    reason: str = ""
    # Where the placement's next turns run (docs/operations.md, "Where turns run"): "auto" (the
    # worker decides turn by turn), "local" or "queue" (forced, for experiments); None (senders
    # that do not decide, e.g. a person's requeue) leaves the current choice as it is.
    turn_execution: TurnExecutionMode | None = None
    # The word of senders before `turn_execution`: True reads as "local"; False, which they
    # sent when local cycles were off (their default), as "auto". Read, never written.
    local_cycles: bool | None = None
    # Where the turn goes in the task queues, and the placement's priority (None: senders that
    # do not order turns, and every history written before the field).
    priority: TurnPriority | None = None


class MovesRequest(CompactWire):
    """The `move` signal: rebalance moves for the placement's next turn, and who asked."""

    moves: list[MoveRequest] = Field(default_factory=list)
    reason: str = ""


class TurnMoves(CompactWire):
    """What the last turn that moved, unscheduled or kept bindings for a reason of its own
    (rebalance moves, affinity enforcement: docs/enforcement.md) said of them, one line each,
    as its result holds them; `explain` and the UI's current details show it."""

    cycle: int
    """The cycle of that turn (the turn's moves come before its cycle)."""
    lines: list[str] = Field(default_factory=list)


class PlacementState(CompactWire):
    """A placement workflow's state: what its turns, signals and queries read and change, in one
    object, and what continue-as-new hands the next run as it is (`PlacementInput.carried`).
    Besides its own fields, the inbox (workflows.inbox), where turns run
    (workflows.execution) and the deadline (workflows.deadline) keep their parts here.

    Only the last cycle's report goes without its explanation (what `status` shows too); the
    last cycle that evaluated clusters keeps its own (packed at scale), so `explain` still
    shows every cluster's fate after any number of runs. On the wire its fields are those of
    CarriedState, which the workflow rebuilt from its attributes before (issue 34), with the
    same names: a run continued by an older worker reads them, and this one reads theirs."""

    model_config = ConfigDict(frozen=False)

    cycles: int = 0
    dirty: bool = True
    fresh: bool = False
    pending_reasons: list[str] = Field(default_factory=list)
    last: CycleReport | None = None
    deciding: CycleReport | None = None
    last_error: str | None = None
    waiting_for: str = ""
    phase: PlacementPhase = "pending"
    priority: TurnPriority | None = None  # the last the watcher sent
    # The priority key the queued turn asked for (on the wire "pendingKey", its first name).
    pending_priority_key: int | None = Field(default=None, alias="pendingKey")
    moves: list[MoveRequest] = Field(default_factory=list)  # rebalance moves not yet made
    # While every queued reason is a requeue with `unless_read`: the largest of them; a cycle
    # that read the hub at that version or later makes the queued turn moot (Inbox.moot).
    pending_unless_read: int | None = None
    next_local: bool | None = None  # the worker's last advice (TurnResult.next_local)
    queue_turns: int = 0  # turns left on the activity queue after a local turn fell back
    deadline: DeadlineState | None = None  # the scheduling deadline's clock, when it has one
    last_moves: TurnMoves | None = None

    @field_serializer("last")
    def _slim(self, last: CycleReport | None) -> CycleReport | None:
        return last.slim() if last is not None else None

    @property
    def own_priority_key(self) -> int | None:
        """The priority key of the turns the placement causes itself (TurnPriority)."""
        return self.priority.own_priority_key if self.priority is not None else None

    def turn_within_key(self) -> int | None:
        """The turn's order within its key, for the worker's local slots: the watcher's word
        (QueueSort's within_key), unless the last cycle says the placement has less than it
        asks for (none yet, or not fulfilled): then never after WITHIN_WANTING, where
        PrioritySort puts a placement that wants more; the watcher's word for a new one (0)
        stands. A watcher from before newFirst said 1 for a satisfied placement: read as one
        that wants more, still after new placements."""
        priority, last = self.priority, self.last
        if priority is None or not priority.within_key:
            return None
        if last is None or not last.fulfilled:
            return min(priority.within_key, WITHIN_WANTING)
        return priority.within_key


class PlacementInput(CompactWire):
    placement: str
    # A ResourcePlacement's namespace (workflow id `rp/<namespace>/<name>`); None for a
    # ClusterResourcePlacement.
    namespace: str | None = None
    carried: PlacementState | None = None  # the previous run's state, as it ended
    # Continue-as-new after this many loop turns (None: the workflow's default). A tuning knob,
    # and what lets a test watch state cross a run boundary without a hundred turns.
    turns_per_run: int | None = Field(default=None, ge=1)
    # ... or after the turn during which this many signals arrived (None: the default).
    signals_per_run: int | None = Field(default=None, ge=1)
    # Where turns run until a signal says otherwise (HubEvent.turn_execution; None: "auto").
    # Continue-as-new carries the current choice. `local_cycles` is the word of starters
    # before it (HubEvent says how it reads).
    turn_execution: TurnExecutionMode | None = None
    local_cycles: bool | None = None
    # How long a local turn may take, retries included, before it runs on the activity queue
    # instead (None: the workflow's default). A tuning knob, and what lets a test see it.
    local_turn_seconds: float | None = Field(default=None, gt=0)

    def next_run(
        self, namespace: str | None, state: PlacementState, mode: TurnExecutionMode
    ) -> PlacementInput:
        """The input of the run this one continues as: its state as it is, where turns run
        now, and the same tuning."""
        # `local_cycles` for a worker from before the mode (rolled back): a forced choice.
        local = True if mode == "local" else None
        update = {"namespace": namespace, "carried": state, "turn_execution": mode}
        return self.model_copy(update=update | {"local_cycles": local})


class PlacementStatus(CompactWire):
    """The `status` query: the last cycle (without its explanation: see `explanation`) and what
    the workflow is waiting for now."""

    placement: str
    cycles: int
    waiting_for: str
    namespace: str | None = None  # a ResourcePlacement's
    phase: PlacementPhase = "idle"
    pending_reasons: list[str] = Field(default_factory=list)
    fresh_pending: bool = False
    last: CycleReport | None = None
    last_error: str | None = None
    cycles_this_run: int = 0
    turns_this_run: int = 0  # loop turns in this run, cycles or not (continue-as-new counts them)
    signals_this_run: int = 0
    local_cycles: bool = False  # the next turn runs as a local activity in the workflow worker
    turn_execution: TurnExecutionMode = "auto"  # who chooses where turns run (HubEvent says)
    priority: TurnPriority | None = None  # the placement's priority, as the watcher last sent it
    last_turn_key: int | None = None  # the priority key the last turn's activity ran with
    deadline: DeadlineState | None = None  # its scheduling deadline, when it has one
    last_moves: TurnMoves | None = None  # the last turn that moved or kept bindings, and why

    @classmethod
    def of(
        cls,
        placement: str,
        namespace: str | None,
        state: PlacementState,
        *,
        cycles_this_run: int,
        turns_this_run: int,
        signals_this_run: int,
        local_cycles: bool,
        turn_execution: TurnExecutionMode,
        last_turn_key: int | None,
    ) -> PlacementStatus:
        """What `status` answers: the workflow's state, and this run's figures."""
        dirty = state.dirty
        return cls(
            placement=placement,
            namespace=namespace,
            cycles=state.cycles,
            waiting_for=state.waiting_for,
            # Queued work shows as pending whatever the loop last said it waits for.
            phase="pending" if dirty and state.phase in ("idle", "requeue_timer") else state.phase,
            pending_reasons=list(state.pending_reasons) if dirty else [],
            fresh_pending=state.fresh,
            last=state.last.slim() if state.last is not None else None,
            last_error=state.last_error,
            cycles_this_run=cycles_this_run,
            turns_this_run=turns_this_run,
            signals_this_run=signals_this_run,
            local_cycles=local_cycles,
            turn_execution=turn_execution,
            priority=state.priority,
            last_turn_key=last_turn_key,
            deadline=state.deadline,
            last_moves=state.last_moves,
        )


class PlacementExplanation(CompactWire):
    """The `explanation` query: the last cycle's report with its explanation, and the last
    cycle that evaluated clusters when that is an earlier one (a PickN cycle that only kept its
    picks), with its explanation. Queries are not recorded in history."""

    last: CycleReport | None = None
    deciding: CycleReport | None = None

    @classmethod
    def of(cls, last: CycleReport | None, deciding: CycleReport | None) -> PlacementExplanation:
        """`deciding` only when it is an earlier cycle than `last`."""
        if deciding is not None and last is not None and deciding.cycle == last.cycle:
            deciding = None
        return cls(last=last, deciding=deciding)
