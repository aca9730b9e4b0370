"""How long one run of a placement workflow may grow before it continues as new.

Every turn counts, cycle or not: a placement that can never be fully scheduled (or a hub that
keeps failing) is signalled on every relevant change, and its run must not grow until the
server's limits terminate it. A turn adds about a dozen events, a signal one or a few, so 100
turns keep a run near 1,500 events; the signal and event bounds are for signals that outnumber
turns (they coalesce while a turn runs). No run exceeds MAX_HISTORY_EVENTS plus one turn and the
signals that arrived during it: RUN_EVENTS_BOUND, far below the server's 51,200 events. The
server refuses signals past history.maximumSignalsPerExecution (10,000 by default): a server
configured below MAX_SIGNALS_PER_RUN needs `signals_per_run` set below its limit, and until the
run continues the watcher retries what was refused. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_HISTORY_EVENTS",
    "MAX_SIGNALS_PER_RUN",
    "MAX_TURNS_PER_RUN",
    "RUN_EVENTS_BOUND",
    "RunBudget",
]

MAX_TURNS_PER_RUN: Final = 100
MAX_SIGNALS_PER_RUN: Final = 1_000
MAX_HISTORY_EVENTS: Final = 2_000
RUN_EVENTS_BOUND: Final = 2_500


@dataclass
class RunBudget:
    """This run's turns, cycles and signals, against its bounds."""

    turns_per_run: int = MAX_TURNS_PER_RUN
    signals_per_run: int = MAX_SIGNALS_PER_RUN
    turns_started: int = 0
    cycles: int = 0
    signals: int = 0

    @classmethod
    def of(cls, turns_per_run: int | None, signals_per_run: int | None) -> RunBudget:
        return cls(
            turns_per_run=turns_per_run or MAX_TURNS_PER_RUN,
            signals_per_run=signals_per_run or MAX_SIGNALS_PER_RUN,
        )

    def turn(self) -> int:
        """A turn starts; its number within the run."""
        self.turns_started += 1
        return self.turns_started

    @property
    def signals_full(self) -> bool:
        return self.signals >= self.signals_per_run

    def spent(self, history_length: int, suggested: bool) -> bool:
        """Should the run continue as new at the end of this turn?"""
        return (
            self.turns_started >= self.turns_per_run
            or self.signals_full
            or history_length >= MAX_HISTORY_EVENTS
            or suggested
        )
