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

from workflows.models import CarriedState, MoveRequest, MovesRequest

__all__ = ["MAX_PENDING_REASONS", "Inbox", "Work"]

# Reasons kept for a turn (its reason line and the status query): the first this many since
# the last turn began; later ones are not kept (the turn runs all the same).
MAX_PENDING_REASONS: Final = 20
STARTED: Final = "workflow started"


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
    dirty: bool = True
    fresh: bool = False
    reasons: list[str] = field(default_factory=lambda: [STARTED])
    moves: list[MoveRequest] = field(default_factory=list)
    priority_key: int | None = None

    @classmethod
    def of(cls, carried: CarriedState | None) -> Inbox:
        """A new run's inbox: a first run has one turn to take; a continued one what was
        pending when the previous run ended."""
        if carried is None:
            return cls()
        return cls(
            dirty=carried.dirty,
            fresh=carried.fresh,
            reasons=list(carried.pending_reasons),
            moves=list(carried.moves),
            priority_key=carried.pending_priority_key,
        )

    def mark(self, reason: str) -> None:
        """One more turn is wanted, because of `reason`."""
        self.dirty = True
        if len(self.reasons) < MAX_PENDING_REASONS:
            self.reasons.append(reason)

    def ask(self, key: int | None) -> None:
        """Queued work asks for priority key `key` (None: no opinion): the turn that takes it
        runs at the best key asked for since the last one started."""
        if key is not None and (self.priority_key is None or key < self.priority_key):
            self.priority_key = key

    def propose(self, request: MovesRequest) -> bool:
        """Rebalance moves for the next turn; a newer proposal for a binding replaces an older
        one not yet made. False when there is nothing to propose."""
        if not request.moves:
            return False
        proposed = {m.binding for m in request.moves}
        self.moves = [m for m in self.moves if m.binding not in proposed] + list(request.moves)
        return True

    def take(self) -> Work:
        """Everything queued, for the turn starting now; the inbox is empty after."""
        work = Work(
            reasons=self.reasons or ["requeue"],
            fresh=self.fresh,
            moves=self.moves,
            priority_key=self.priority_key,
        )
        self.dirty, self.fresh, self.reasons, self.moves = False, False, [], []
        self.priority_key = None
        return work

    def keep_fresh(self, fresh: bool) -> None:
        """A fresh turn asked for did not happen (the turn failed or ran no cycle): the next
        one is fresh."""
        self.fresh = self.fresh or fresh
