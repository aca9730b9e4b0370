"""Where a placement's next turn should run: the worker's advice, made at the end of each turn
from what this process measures (docs/operations.md, "Where turns run").

A turn runs either as a local activity inside the workflow task (one workflow task, a marker:
about half the Temporal server's work) or on the activity queue (spread over every activity
process). Local is right while a turn is short and the workflow worker has room for it; the
queue is right when turns are long (a big fleet, a slow hub: a local turn holds its workflow
task open) or when the workflow worker's local slots are all taken (a burst of policy changes:
the activity processes have cores to spare). The advice travels in the turn's result, so the
workflow's choice is in its history and a replay makes the same one.

Thread-safe: the worker runs turns in a thread pool."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

__all__ = ["LOCAL_FLEET_LIMIT", "LOCAL_TURN_BUDGET_S", "TurnAdvisor"]

# Above this many member clusters a turn's cycle is tens of milliseconds of Python in the
# workflow worker's one process, where the activity processes could run it beside the workflow
# tasks (bench/RESULTS.md, "Where turns run").
LOCAL_FLEET_LIMIT: Final = 2000
# A local turn keeps its workflow task open: one whose turns take longer than this (a slow hub,
# a heavy cycle) runs them on the queue, where a slow turn holds nothing else up.
LOCAL_TURN_BUDGET_S: Final = 0.5
# Weight of the newest turn in the moving average of turn times.
SMOOTHING: Final = 0.2


@dataclass
class TurnAdvisor:
    """Advice for a placement's next turn, from this process's turns.

    `local_slots`: local activity slots of this process's workflow worker (0: it runs no
    workflows, so it advises from turn times and the fleet's size alone). `fleet_size`: the
    member clusters the process's cache holds (None: not known)."""

    local_slots: int = 0
    fleet_size: Callable[[], int | None] = lambda: None
    # False for a workflow worker that caches no workflow (`--max-cached-workflows 0`): it
    # evicts a run after each workflow task, and a local turn still in flight when another task
    # of the run arrives (a second signal-with-start) can hold that task until it times out.
    local_turns: bool = True
    fleet_limit: int = LOCAL_FLEET_LIMIT
    turn_budget_s: float = LOCAL_TURN_BUDGET_S
    _average_s: float | None = field(default=None, init=False)
    _local_now: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @contextmanager
    def local_turn(self) -> Iterator[None]:
        """Around a turn running as a local activity here: counts the local slots taken."""
        with self._lock:
            self._local_now += 1
        try:
            yield
        finally:
            with self._lock:
                self._local_now -= 1

    def advise(self, turn_seconds: float, *, local: bool) -> bool:
        """Measure a turn that took `turn_seconds` (`local`: it ran here as a local activity)
        and say whether the placement's next turn should run as a local activity."""
        with self._lock:
            average = self._average_s
            average = (
                turn_seconds
                if average is None
                else (1 - SMOOTHING) * average + SMOOTHING * turn_seconds
            )
            self._average_s = average
            # Counted before this turn leaves: the slots the next turns would find taken. One
            # slot is always taken by the turn that asks, so it tells nothing.
            crowded = local and self.local_slots > 1 and self._local_now >= self.local_slots
        if not self.local_turns:
            return False
        size = self.fleet_size()
        if size is not None and size > self.fleet_limit:
            return False
        return average <= self.turn_budget_s and not crowded

    @property
    def average_turn_s(self) -> float | None:
        return self._average_s
