"""Inputs, signals and query results of PlacementWorkflow.

They live in event histories (inputs, signals) or cross to the CLI (the `status` query), so
fields are only ever added, with defaults, never renamed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from temporalio.common import Priority

from activities.models import ActivityModel, CycleReport, MoveRequest

__all__ = [
    "CarriedState",
    "HubEvent",
    "MovesRequest",
    "PlacementExplanation",
    "PlacementInput",
    "PlacementPhase",
    "PlacementStatus",
    "RebalanceInput",
    "RebalanceReport",
    "ReconcileInput",
    "ReconcileReport",
    "RequeueRequest",
    "RequeueResult",
    "TurnOutcome",
    "TurnPriority",
]

PlacementPhase = Literal["pending", "running", "idle", "requeue_timer", "cleaning_up", "done"]
"""Where a placement workflow is in its loop, for programs (`waiting_for` says it for people):
pending: work is queued and the next turn is about to start; running: a turn (or the cycle in
it) is in progress; idle: waiting for a hub event or a requeue, with nothing queued (after a
finished cycle, a placement that is not ready, or a turn that failed in a way retrying cannot
fix: see `last_error`); requeue_timer: waiting for a cycle's requeue-after timer or an event;
cleaning_up: the placement is being deleted and its cleanup runs; done: the workflow is ending
(placement gone or cleaned up)."""


class TurnPriority(ActivityModel):
    """Where a placement's turns go in Temporal's task queues: the QueueSort plugin's answer
    (scheduler.framework.queue_sort.QueuePriority) on the wire, and what it came from, for
    `status`, `explain` and the search attributes (docs/priority.md)."""

    # Temporal's priority key for the turn the signal asks for: 1 first, 5 last, None unset
    # (Temporal's default, 3). A fan-out signal's key is usually below the placement's own.
    priority_key: int | None = Field(default=None, ge=1, le=5)
    # The key of the turns the placement causes itself, for a person's requeue.
    placement_key: int | None = Field(default=None, ge=1, le=5)
    fairness_key: str | None = None
    fairness_weight: float | None = Field(default=None, gt=0)
    value: int = 0  # the placement's priority: its PriorityClass value
    priority_class: str | None = None
    tenant: str | None = None
    problem: str | None = None  # e.g. the PriorityClass named does not exist

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


class RequeueRequest(ActivityModel):
    """Payload of the `requeue` signal; every field optional (`{}` or no payload at all)."""

    fresh: bool = False  # reschedule a PickN placement from scratch instead of keeping its picks
    reason: str = ""
    # The priority key of the turn this requeue causes (`requeue --priority N`); None: the
    # placement's own (TurnPriority.placement_key).
    priority: int | None = Field(default=None, ge=1, le=5)


TurnOutcome = Literal["scheduled", "not_ready", "failed", "gone", "cleaned_up"]
"""How a loop turn ended: scheduled: a cycle ran (its summary says what it decided); not_ready:
there was nothing to schedule yet (e.g. no policy snapshot); failed: the turn failed in a way
retrying cannot fix (see `error`); gone: the placement does not exist; cleaned_up: it was being
deleted and its cleanup ran."""


class RequeueResult(ActivityModel):
    """The answer of the `requeue_and_wait` update: the turn that the requeue caused.

    Kept to a few hundred bytes, since every answer is recorded in the history: the cycle's
    full explanation is what `explain` shows."""

    outcome: TurnOutcome
    cycle: int | None = None  # the cycle's number, when one ran
    summary: str = ""
    error: str | None = None
    fulfilled: bool | None = None


class HubEvent(ActivityModel):
    """Payload of the watcher's signals: what happened in the hub, for the history's sake."""

    reason: str = ""
    # Where the placement's next turns run (docs/operations.md, "Local cycles"): True in the
    # workflow worker as local activities, False on the activity queue, None (senders that do
    # not decide, and every history written before the field) leaves it as it is.
    local_cycles: bool | None = None
    # Where the turn goes in the task queues, and the placement's priority (None: senders that
    # do not order turns, and every history written before the field).
    priority: TurnPriority | None = None


class MovesRequest(ActivityModel):
    """The `move` signal: rebalance moves for the placement's next turn, and who asked."""

    moves: list[MoveRequest] = Field(default_factory=list)
    reason: str = ""


class CarriedState(ActivityModel):
    """What one run hands the next through continue-as-new: the last cycle's report without its
    explanation, and the last cycle that evaluated clusters with its explanation (packed at
    scale), so `explain` still shows every cluster's fate after any number of runs."""

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
    pending_key: int | None = None  # the priority key the queued turn asked for
    moves: list[MoveRequest] = Field(default_factory=list)  # rebalance moves not yet made


class PlacementInput(ActivityModel):
    placement: str
    # A ResourcePlacement's namespace (workflow id `rp/<namespace>/<name>`); None for a
    # ClusterResourcePlacement.
    namespace: str | None = None
    carried: CarriedState | None = None
    # Continue-as-new after this many loop turns (None: the workflow's default). A tuning knob,
    # and what lets a test watch state cross a run boundary without a hundred turns.
    turns_per_run: int | None = Field(default=None, ge=1)
    # ... or after the turn during which this many signals arrived (None: the default).
    signals_per_run: int | None = Field(default=None, ge=1)
    # Where turns run until a signal says otherwise (HubEvent.local_cycles; None: on the
    # activity queue). Continue-as-new carries the current choice.
    local_cycles: bool | None = None
    # How long a local turn may take, retries included, before it runs on the activity queue
    # instead (None: the workflow's default). A tuning knob, and what lets a test see it.
    local_turn_seconds: float | None = Field(default=None, gt=0)


class PlacementStatus(ActivityModel):
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
    local_cycles: bool = False  # turns run as local activities in the workflow worker
    priority: TurnPriority | None = None  # the placement's priority, as the watcher last sent it
    last_turn_key: int | None = None  # the priority key the last turn's activity ran with


class PlacementExplanation(ActivityModel):
    """The `explanation` query: the last cycle's report with its explanation, and the last
    cycle that evaluated clusters when that is an earlier one (a PickN cycle that only kept its
    picks), with its explanation. Queries are not recorded in history."""

    last: CycleReport | None = None
    deciding: CycleReport | None = None


class ReconcileInput(ActivityModel):
    """The reconcile Schedule's workflow input (and its activity's request)."""

    task_queue: str
    standalone: bool = True
    # Fleets of at most this many member clusters get local cycles (HubEvent.local_cycles);
    # 0: none.
    local_cycles_up_to: int = Field(default=0, ge=0)
    # Namespaced ResourcePlacements too (False: `--no-resource-placements`).
    resource_placements: bool = True
    # The previous run's cluster digests (the activity's request only; the workflow reads them
    # from the last completed run).
    previous_clusters: dict[str, str] | None = None
    # ... and its digests of the placements' decision annotations and priorities.
    previous_annotations: dict[str, str] | None = None
    previous_priorities: dict[str, str] | None = None


class ReconcileReport(ActivityModel):
    """What one reconcile run did. `clusters` maps each member cluster to a digest of what
    scheduling reads of it, for the next run to compare (about 50 bytes a cluster)."""

    placements: int = 0
    running: int = 0
    started: list[str] = Field(default_factory=list)
    finished: list[str] = Field(default_factory=list)
    requeued: list[str] = Field(default_factory=list)
    reasons: dict[str, str] = Field(default_factory=dict)  # placement -> why it was acted on
    clusters: dict[str, str] = Field(default_factory=dict)
    summary: str = ""
    # Capacity reservations the sweep released (docs/capacity.md): stale, or of placements
    # that are gone or no longer capacity-aware.
    reservations_released: int = 0
    # Placement -> digest of its fleet-scheduler.io/ decision annotations, for the next run.
    annotations: dict[str, str] = Field(default_factory=dict)
    # Placement -> digest of its priority (placements with a non-default one), for the next run,
    # and the placements told their new priority (priority_changed, no turn).
    priorities: dict[str, str] = Field(default_factory=dict)
    reprioritised: list[str] = Field(default_factory=list)
    # Broken invariants (scheduler.invariants): how many of each, and the first ones in words.
    violations: dict[str, int] = Field(default_factory=dict)
    violation_messages: list[str] = Field(default_factory=list)


class RebalanceInput(ActivityModel):
    """The fleet-rebalance Schedule's workflow input (docs/capacity.md)."""

    strategy: Literal["pack", "spread"] = "pack"


class RebalanceReport(ActivityModel):
    """What one rebalance proposed: each move with its reason, and what was left alone."""

    moves: list[str] = Field(default_factory=list)
    not_reached: dict[str, str] = Field(default_factory=dict)
    skipped: dict[str, str] = Field(default_factory=dict)
    clusters_before: int = 0
    clusters_after: int = 0
    summary: str = ""
