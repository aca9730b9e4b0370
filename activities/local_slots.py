"""The workflow worker's local slots: local turns run best key first, not in arrival order.

The SDK hands a worker's local activities their slots first in, first out, whatever their
priority: a resync sent straight to the workflows would fill them, and a new placement's first
turn, or a placement of a better class, would wait behind all of it (issue 35). So the worker
gives the SDK more local slots than turns may run at once, and `LocalSlots` decides which of the
turns the SDK has started runs:

- `slots` turns run at once (the worker's `--max-concurrent-activities`, as before);
- up to `waiting` more wait, and a freed slot goes to the best of them: by priority key, then
  the QueueSort plugin's order within it (PrioritySort: a placement that has less than it asks
  for first), then first in, first out;
- a turn arriving while the waiting room is full sheds the worst turn to the activity queue
  (itself, unless it is better than the worst one waiting), as does one that has waited
  `max_wait_s`. A shed turn raises failures.RUN_ON_QUEUE: its workflow runs it on the activity
  queue at its key at once (workflows.placement), where Temporal orders it and every activity
  process can take it. Shedding is what keeps the SDK's own first-in-first-out line short, so a
  better turn reaches this room within a few turns' time however long the backlog behind it.

Thread-safe: the worker runs turns in a thread pool. A waiting turn holds a thread and one of
the SDK's local slots, nothing else (workers.worker sizes both)."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from workflows import failures

__all__ = ["LOCAL_SLOT_WAIT_S", "LocalSlots", "Shed", "TurnOrder", "local_slot"]

# A local turn that has waited this long for a slot runs on the activity queue instead: well
# within the local limit (workflows.execution.LOCAL_TURN_LIMIT), so the turn's own time is left.
LOCAL_SLOT_WAIT_S: Final = 5.0

TurnOrder = tuple[int, int]
"""(priority key, order within the key): smaller first."""


class Shed(Exception):
    """The turn gets no local slot: it runs on the activity queue instead (why in the text)."""


@dataclass(eq=False)
class _Waiter:
    order: TurnOrder
    seq: int
    event: threading.Event = field(default_factory=threading.Event)
    granted: bool = False
    shed: str | None = None  # why it was shed, once it was

    def sort_key(self) -> tuple[TurnOrder, int]:
        return (self.order, self.seq)


@dataclass
class LocalSlots:
    """`slots` local turns at once, the best of up to `waiting` more next."""

    slots: int
    waiting: int
    max_wait_s: float = LOCAL_SLOT_WAIT_S
    better_only: bool = False
    """Only a turn better than the worst running one may wait (by its order, not arrival):
    beside activity processes, where a turn that waits here takes work from them, a new
    placement's turn waits for a slot the edits hold, but neither an edit behind edits nor a
    burst's equal first turns do (they run on the queue at once)."""
    _free: int = field(init=False)
    _queue: list[tuple[tuple[TurnOrder, int], _Waiter]] = field(default_factory=list, init=False)
    _seq: Iterator[int] = field(default_factory=itertools.count, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    shed_count: int = field(default=0, init=False)
    _running: list[TurnOrder] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.slots < 1 or self.waiting < 0:
            raise ValueError(
                f"slots must be >= 1 and waiting >= 0, got {self.slots}, {self.waiting}"
            )
        self._free = self.slots

    @contextmanager
    def slot(self, order: TurnOrder) -> Iterator[None]:
        """Run the body in a local slot, taken in `order`; raises Shed instead when the turn
        should run on the activity queue."""
        self._acquire(order)
        try:
            yield
        finally:
            self._release(order)

    @property
    def waiting_now(self) -> int:
        with self._lock:
            return len(self._queue)

    def _acquire(self, order: TurnOrder) -> None:
        with self._lock:
            if self._free > 0:  # then nobody waits: a freed slot goes to a waiter first
                self._free -= 1
                self._running.append(order)
                return
            me = _Waiter(order, next(self._seq))
            if self.better_only and order >= max(self._running, default=order):
                self.shed_count += 1
                raise Shed(f"the {self.slots} local slots run turns as good as this one")
            if len(self._queue) >= self.waiting:
                worst = max((w for _, w in self._queue), key=_Waiter.sort_key, default=None)
                if worst is None or worst.sort_key() < me.sort_key():
                    self.shed_count += 1
                    raise Shed(
                        f"the {self.slots} local slots are taken and {self.waiting} turns wait"
                    )
                self._shed(worst, "a better turn needed its place in the local waiting room")
            heapq.heappush(self._queue, (me.sort_key(), me))
        me.event.wait(self.max_wait_s)
        with self._lock:
            if me.granted:
                return
            if me.shed is None:
                self._shed(me, f"waited {self.max_wait_s:g}s for a local slot")
            reason = me.shed
        raise Shed(reason or "shed")

    def _release(self, order: TurnOrder) -> None:
        with self._lock:
            self._running.remove(order)
            if self._queue:
                _, waiter = heapq.heappop(self._queue)
                self._running.append(waiter.order)
                waiter.granted = True
                waiter.event.set()
            else:
                self._free += 1

    def _shed(self, waiter: _Waiter, why: str) -> None:
        """Take `waiter` out of the room and wake it to run on the queue. Under the lock."""
        self._queue = [entry for entry in self._queue if entry[1] is not waiter]
        heapq.heapify(self._queue)
        waiter.shed = why
        self.shed_count += 1
        waiter.event.set()


@contextmanager
def local_slot(slots: LocalSlots | None, order: TurnOrder, what: str) -> Iterator[None]:
    """Run the body of a local activity (`what`: "the turn", "the cleanup") in one of `slots`
    (None: at once), taken in `order`; one that is shed fails with failures.RUN_ON_QUEUE and
    the details failures.NO_LOCAL_SLOT, so that its workflow runs it on the activity queue at
    its key, that call only (workflows.execution)."""
    if slots is None:
        yield
        return
    try:
        with slots.slot(order):
            yield
    except Shed as shed:
        raise ApplicationError(
            f"no local slot ({shed}): {what} runs on the activity queue at its key",
            failures.NO_LOCAL_SLOT,
            type=failures.RUN_ON_QUEUE,
            non_retryable=True,
            # Expected under load: logged at DEBUG, not as a failed activity with a traceback.
            category=ApplicationErrorCategory.BENIGN,
        ) from None
