"""The watcher's outbox: routes waiting to be sent, coalesced per placement, taken in priority
order and shared fairly between tenants.

A cluster label flapping twenty times in a second, or one cluster change fanning out to ten
thousand placements, must not become one Temporal call per event. Routes for the same placement
merge into one `Batch` until it is sent: the workflow coalesces signals into a dirty flag anyway,
so one signal stands for all of them, and its reason lists the first few and counts the rest.
A placement with a send in flight or a retry pending keeps collecting here until it is due.

Order (docs/priority.md): a batch carries the QueuePriority the profile's QueueSort plugin gave
its routes (the best of them when they merge). Batches are taken by priority key, 1 first, and
within a key by the plugin's `within_key` (PrioritySort: turns of placements that have less than
they ask for before re-decisions of satisfied ones); then by fairness key in proportion to the
keys' weights (start-time fair queuing: each tenant's virtual time advances by 1/weight per
batch taken, and a tenant that was idle starts at the current virtual time, so it neither
starves nor floods); within a tenant, first in, first out.
Without priorities and tenants that is the first-in, first-out order it always was, but 50 new
placements of high priority no longer wait behind 5,000 signal-with-starts.

Pure and single-threaded (the watcher's asyncio loop owns it); time is an argument. Taking a
batch is O(1) amortised: queues hold (placement, token) entries, and an entry whose token is not
its placement's current one (the batch moved to a better key, or was taken) is skipped."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Final

from control.routes import Route
from hub.informer import Backoff
from scheduler.framework.queue_sort import QueuePriority
from workflows import names

__all__ = ["MAX_REASONS", "SIGNAL_PRIORITY", "Backoff", "Batch", "Outbox"]

# When a batch mixes signals, the one sent is the most telling for the history, in this order.
SIGNAL_PRIORITY: Final = (
    names.SIGNAL_PLACEMENT_DELETING,
    names.SIGNAL_PLACEMENT_CHANGED,
    names.SIGNAL_SNAPSHOT_CHANGED,
    names.SIGNAL_BINDING_DELETING,
    names.SIGNAL_CLUSTER_CHANGED,
    names.SIGNAL_PRIORITY_CHANGED,  # every other signal carries the priority too
)
_RANK: Final = {signal: rank for rank, signal in enumerate(SIGNAL_PRIORITY)}
# Distinct reasons listed in one signal; the rest are counted.
MAX_REASONS: Final = 3
_NO_PRIORITY: Final = QueuePriority()
# One line of entries (placement, token), and where a placement's entry is (order: priority key
# and within_key, tenant, gated).
_Line = deque[tuple[str, int]]
_Order = tuple[int, int]
_Place = tuple[_Order, str | None, bool]


@dataclass(slots=True)
class Batch:
    """Every route for one placement since its last send: what to send, and why."""

    placement: str
    signal: str
    may_start: bool
    reasons: list[str] = field(default_factory=list)
    events: int = 0
    priority: QueuePriority = _NO_PRIORITY
    fan_out: bool = False  # every route came from outside the placement (Route.fan_out)
    # Starts a turn that needs a place in the admission window (AdmissionWindow): such batches
    # wait in a line of their own, so a closed window never holds back one that needs none.
    gated: bool = False
    # Its send took a new place in the window (a failed send gives that place back, no other).
    admitted: bool = False

    @classmethod
    def of(cls, route: Route, priority: QueuePriority | None = None, gated: bool = False) -> Batch:
        return cls(
            route.placement,
            route.signal,
            route.may_start,
            [route.reason],
            1,
            priority or _NO_PRIORITY,
            route.fan_out,
            gated,
        )

    def merge(self, other: Batch) -> None:
        if _RANK.get(other.signal, len(_RANK)) < _RANK.get(self.signal, len(_RANK)):
            self.signal = other.signal
        self.may_start = self.may_start or other.may_start
        # The better priority wins; at the same order the newer one (its tenant and weight).
        if other.priority.order <= self.priority.order:
            self.priority = other.priority
        self.fan_out = self.fan_out and other.fan_out
        self.gated = self.gated or other.gated
        for reason in other.reasons:
            if reason not in self.reasons and len(self.reasons) < MAX_REASONS:
                self.reasons.append(reason)
        self.events += other.events

    @property
    def reason(self) -> str:
        """The reasons in arrival order, e.g. `cluster a: labels changed (+19 more events)`."""
        text = "; ".join(self.reasons)
        more = self.events - len(self.reasons)
        return f"{text} (+{more} more events)" if more > 0 else text


class Outbox:
    """Batches by placement, each due at once or, after a failed send, at a retry time; taken
    best priority first, fairly between tenants, first in, first out within one."""

    def __init__(self) -> None:
        self._batches: dict[str, Batch] = {}
        self._due: dict[str, float] = {}  # placement -> earliest send time, only when held back
        # order -> fairness key -> (free line, gated line) of entries (placement, token).
        # Tokens order entries across a tenant's two lines: ascending for entries put at the
        # back, descending below zero for those put in front (the last put in front goes first).
        self._queues: dict[_Order, dict[str | None, tuple[_Line, _Line]]] = {}
        self._token: dict[str, int] = {}  # placement -> the token of its queued entry
        self._where: dict[str, _Place] = {}  # ... and where that entry is
        self._parked: set[str] = set()  # taken while busy: queued again, first, once free
        self._timers: list[tuple[float, str]] = []  # (time, placement): held back until then
        self._tokens = itertools.count()
        self._front_tokens = itertools.count(-1, -1)
        self._pass: dict[str | None, float] = {}  # each fairness key's virtual time
        self._clock = 0.0  # the virtual time of the last batch taken

    def __len__(self) -> int:
        return len(self._batches)

    def __contains__(self, placement: object) -> bool:
        return placement in self._batches

    def add(
        self, route: Route, priority: QueuePriority | None = None, *, gated: bool = False
    ) -> None:
        self.put_back(Batch.of(route, priority, gated))

    def set_gated(self, placement: str, gated: bool) -> None:
        """The placement's batch (if any) needs a place in the admission window, or no longer
        does (its turn is done): it moves to the matching line, at the back."""
        batch = self._batches.get(placement)
        if batch is None or batch.gated == gated:
            return
        batch.gated = gated
        if placement in self._token:  # in a line (not parked, not held back): move it
            self._enqueue(placement, front=False)

    def put_back(self, batch: Batch, *, not_before: float | None = None) -> None:
        """Merge `batch` in (after a failed send: not to be sent before `not_before`)."""
        name = batch.placement
        current = self._batches.get(name)
        if current is None:
            self._batches[name] = current = batch
        else:
            current.merge(batch)
        if not_before is not None:
            self._due[name] = max(self._due.get(name, 0.0), not_before)
            heapq.heappush(self._timers, (self._due[name], name))
        place = (current.priority.order, current.priority.fairness_key, current.gated)
        if name not in self._parked and self._where.get(name) != place:
            self._enqueue(name, front=False)

    def take_due(
        self,
        now: float,
        busy: Collection[str] = (),
        limit: int | None = None,
        admit: Callable[[Batch], bool] | None = None,
    ) -> list[Batch]:
        """Remove and return, best first, up to `limit` (None: all) batches that are due and
        whose placement is not `busy`. Busy and held-back ones keep their place in line.
        `admit` (the watcher's admission window) may refuse a batch: it goes back to the front
        of its tenant's gated line, and no gated batch of its key or a worse one is taken in this
        call (the window counts turns of the same or a better key, so what it refuses at one
        key it refuses at every worse key), while batches that need no place, and gated ones of
        better keys, still go in order. A refused batch that was not gated is gated from then
        on: it needs a place after all."""
        for name in [n for n in self._parked if n not in busy]:
            self._parked.discard(name)
            self._enqueue(name, front=True)
        while self._timers and self._timers[0][0] <= now:
            _, name = heapq.heappop(self._timers)
            if name in self._batches and name not in self._token and name not in self._parked:
                self._enqueue(name, front=True)  # its retry time has come: back in line
        taken: list[Batch] = []
        closed_from: int | None = None  # gated lines of this key and worse are closed
        refused: list[str] = []  # put back in front of their lines at the end, in order
        while limit is None or len(taken) < limit:
            found = self._pop(closed_from)
            if found is None:
                break
            if found in busy:
                self._parked.add(found)
            elif self._due.get(found, 0.0) > now:
                continue  # held back: out of line until its timer puts it back
            elif admit is not None and not admit(batch := self._batches[found]):
                priority_key = batch.priority.effective_key
                closed_from = (
                    priority_key if closed_from is None else min(closed_from, priority_key)
                )
                batch.gated = True
                refused.append(found)  # not charged
            else:
                self._due.pop(found, None)
                batch = self._batches.pop(found)
                self._charge(batch.priority)
                taken.append(batch)
        for name in reversed(refused):
            self._enqueue(name, front=True)
        return taken

    def next_due(self, now: float, busy: Collection[str] = ()) -> float | None:
        """When the earliest held-back batch falls due (None: nothing is waiting for a time)."""
        times = [t for name, t in self._due.items() if t > now and name not in busy]
        return min(times) if times else None

    # --- the queues ----------------------------------------------------------------------------

    def _enqueue(self, name: str, *, front: bool) -> None:
        batch = self._batches[name]
        order, tenant = batch.priority.order, batch.priority.fairness_key
        token = next(self._front_tokens) if front else next(self._tokens)
        self._token[name] = token
        self._where[name] = (order, tenant, batch.gated)
        tenants = self._queues.setdefault(order, {})
        lines = tenants.get(tenant)
        if lines is None:
            # An idle tenant starts at the current virtual time: no credit for having waited.
            tenants[tenant] = lines = (deque(), deque())
            self._pass[tenant] = max(self._pass.get(tenant, 0.0), self._clock)
        line = lines[1] if batch.gated else lines[0]
        if front:
            line.appendleft((name, token))
        else:
            line.append((name, token))

    def _charge(self, priority: QueuePriority) -> None:
        """A batch of this tenant was taken: its virtual time moves on by 1/weight (only sends
        count, not batches passed over as busy or held back)."""
        tenant = priority.fairness_key
        self._clock = self._pass.get(tenant, 0.0)
        self._pass[tenant] = self._clock + 1.0 / (priority.fairness_weight or 1.0)

    def _pop(self, closed_from: int | None = None) -> str | None:
        """The next placement in line, its entry removed; None when every open line is empty.
        Gated lines of keys >= `closed_from` are closed (skipped, kept), whatever their order
        within the key (the window counts by key)."""
        for order in sorted(self._queues):
            tenants = self._queues[order]
            gated_open = closed_from is None or order[0] < closed_from
            by_pass = sorted(tenants, key=lambda t: (self._pass.get(t, 0.0), t is not None, t))
            for tenant in by_pass:
                lines = tenants[tenant]
                name = self._pop_line(lines, gated_open)
                if not (lines[0] or lines[1]):
                    del tenants[tenant]
                if name is not None:
                    if not tenants:
                        del self._queues[order]
                    return name
            if not tenants:
                del self._queues[order]
        return None

    def _pop_line(self, lines: tuple[_Line, _Line], gated_open: bool) -> str | None:
        """The first live entry of a tenant's free line and (when open) gated line, by token."""
        for line in lines:
            while line and self._token.get(line[0][0]) != line[0][1]:
                line.popleft()  # moved to a better line, or taken: a stale entry
        free, gated = lines
        heads = [line for line in ((free, gated) if gated_open else (free,)) if line]
        if not heads:
            return None
        line = min(heads, key=lambda candidate: candidate[0][1])
        name, _ = line.popleft()
        del self._token[name], self._where[name]
        return name
