"""The waiters of `requeue_and_wait`: an update answered with the turn its requeue caused.

Turns are numbered within a run. An update waits for the turn after the one running (or last
run) when it arrived: that one read the hub before the requeue was asked for. Tickets count the
waiters of each turn; a turn's result is kept until every waiter has taken it. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.models import RequeueResult

__all__ = ["Waiters"]


@dataclass
class Waiters:
    _tickets: dict[int, int] = field(default_factory=dict)
    _results: dict[int, RequeueResult] = field(default_factory=dict)

    def ticket(self, turns_started: int) -> int:
        """A waiter for the next turn to start."""
        turn = turns_started + 1
        self._tickets[turn] = self._tickets.get(turn, 0) + 1
        return turn

    def ended(self, turn: int, result: RequeueResult) -> None:
        """Turn `turn` ended with `result` (kept only if someone waits for it)."""
        if turn in self._tickets:
            self._results[turn] = result

    def answered(self, ticket: int) -> bool:
        return ticket in self._results

    def take(self, ticket: int) -> RequeueResult:
        """The result of the ticket's turn, for one of its waiters."""
        result = self._results[ticket]
        self._tickets[ticket] -= 1
        if not self._tickets[ticket]:
            del self._tickets[ticket], self._results[ticket]
        return result

    def waiting_after(self, turns_started: int) -> bool:
        """Does someone wait for a turn not started yet?"""
        return any(turn > turns_started for turn in self._tickets)
