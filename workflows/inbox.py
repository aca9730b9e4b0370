"""The inbox of a placement workflow: what its next turn is for.

Signals coalesce here: any number of them while a turn runs set one dirty flag, so they cause
exactly one more turn (KubeFleet's work queue gives a key that guarantee). Besides the flag it
keeps why (the reasons the status query and the turn's summary show, bounded), whether the turn
must be fresh, the rebalance moves proposed for it, and the best priority key any of its work
asked for. Pure: the workflow feeds it signals and takes the work at the start of each turn;
tests drive it without Temporal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from workflows.models import (
    CycleReport,
    MoveRequest,
    MovesRequest,
    PlacementState,
    RequeueRequest,
)

__all__ = ["IDLE_FOR", "MAX_PENDING_REASONS", "Inbox", "Work"]

# Reasons kept for a turn (its reason line and the status query): the first this many since
# the last turn began; later ones are not kept (the turn runs all the same).
MAX_PENDING_REASONS: Final = 20
STARTED: Final = "workflow started"
# What an idle placement waits for (its status's `waiting_for`).
IDLE_FOR: Final = "an event (placement, snapshot, cluster or binding change, or requeue)"


@dataclass(frozen=True)
class Work:
    """What one turn takes from the inbox."""

    reasons: list[str]
    fresh: bool
    moves: list[MoveRequest]
    priority_key: int | None
    """The best Temporal priority key its work asked for (None: no sender said)."""

    def because(self, shown: int = 3) -> str:
        """The reasons as a turn's summary says them: the first few, then how many more."""
        more = len(self.reasons) - shown
        return "; ".join(self.reasons[:shown]) + (f" (+{more})" if more > 0 else "")


@dataclass
class Inbox:
    """The inbox's part of the workflow's state (PlacementState: `dirty`, `fresh`,
    `pending_reasons`, `moves`, `pending_priority_key`), kept there so that continue-as-new
    carries it with the rest."""

    state: PlacementState = field(default_factory=lambda: Inbox.first())

    @staticmethod
    def first() -> PlacementState:
        """A first run's state: one turn to take."""
        return PlacementState(pending_reasons=[STARTED])

    @property
    def dirty(self) -> bool:
        return self.state.dirty

    def mark(self, reason: str, unless_read: int | None = None) -> None:
        """One more turn is wanted, because of `reason`; with `unless_read`, only until a cycle
        has read the hub at that version (`moot`): the reconcile's requeue for a cluster change,
        which a cycle that read the change has already decided on."""
        state = self.state
        if not state.dirty:
            state.pending_unless_read = unless_read
        elif state.pending_unless_read is not None:
            # Moot only while every queued reason is; the latest version asked for then.
            known = state.pending_unless_read
            state.pending_unless_read = None if unless_read is None else max(known, unless_read)
        state.dirty = True
        if len(state.pending_reasons) < MAX_PENDING_REASONS:
            state.pending_reasons.append(reason)

    def requeue(self, request: RequeueRequest, own_key: int | None, moot: bool) -> None:
        """The `requeue` signal (or update): a turn at the key it asks for (None: `own_key`, the
        placement's own), fresh if it says so; with `moot`, one its `unless_read` may make
        moot (the reconcile's, for a cluster change, which a turn running or queued when it
        arrives may already have read)."""
        self.keep_fresh(request.fresh)
        self.ask(request.priority if request.priority is not None else own_key)
        kind = "fresh requeue" if request.fresh else "requeue"
        unless_read = request.unless_read if moot and not request.fresh else None
        self.mark(f"{kind}: {request.reason}" if request.reason else kind, unless_read)

    def moot(self, last: CycleReport | None) -> str | None:
        """Drop the queued turn when all it is for is requeues made moot by `last`, the last
        completed cycle: it read the hub at or past the version each asked for
        (scheduler.requeue.decided says why that cycle decided on what the requeue saw). Why it
        was dropped, or None when the turn still runs."""
        state = self.state
        wanted = state.pending_unless_read
        if not state.dirty or wanted is None or last is None or last.error is not None:
            return None
        read = last.clusters_version
        if read is None or read < wanted:
            return None
        reasons = Work(state.pending_reasons, False, [], None).because()
        self.take()
        return f"{reasons}: moot, cycle {last.cycle} read the hub at version {read} >= {wanted}"

    def ask(self, priority_key: int | None) -> None:
        """Queued work asks for `priority_key` (None: no opinion): the turn that takes it runs
        at the best key asked for since the last one started."""
        best = self.state.pending_priority_key
        if priority_key is not None and (best is None or priority_key < best):
            self.state.pending_priority_key = priority_key

    def propose(self, request: MovesRequest) -> bool:
        """Rebalance moves for the next turn; a newer proposal for a binding replaces an older
        one not yet made. False when there is nothing to propose."""
        if not request.moves:
            return False
        proposed = {m.binding for m in request.moves}
        kept = [m for m in self.state.moves if m.binding not in proposed]
        self.state.moves = kept + list(request.moves)
        return True

    def take(self) -> Work:
        """Everything queued, for the turn starting now; the inbox is empty after."""
        state = self.state
        work = Work(
            reasons=state.pending_reasons or ["requeue"],
            fresh=state.fresh,
            moves=state.moves,
            priority_key=state.pending_priority_key,
        )
        state.dirty, state.fresh, state.pending_reasons, state.moves = False, False, [], []
        state.pending_priority_key = state.pending_unless_read = None
        return work

    def keep_fresh(self, fresh: bool) -> None:
        """A fresh turn asked for did not happen (the turn failed or ran no cycle): the next
        one is fresh."""
        self.state.fresh = self.state.fresh or fresh
