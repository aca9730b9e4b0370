"""The watcher's outbox: routes waiting to be sent, coalesced per placement.

A cluster label flapping twenty times in a second, or one cluster change fanning out to ten
thousand placements, must not become one Temporal call per event. Routes for the same placement
merge into one `Batch` until it is sent: the workflow coalesces signals into a dirty flag anyway,
so one signal stands for all of them, and its reason lists the first few and counts the rest.
A placement with a send in flight or a retry pending keeps collecting here until it is due.

Pure and single-threaded (the watcher's asyncio loop owns it); time is an argument."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final

from hub.informer import Backoff
from workers.watcher_routes import Route
from workflows import names

__all__ = ["MAX_REASONS", "SIGNAL_PRIORITY", "Backoff", "Batch", "Outbox"]

# When a batch mixes signals, the one sent is the most telling for the history, in this order.
SIGNAL_PRIORITY: Final = (
    names.SIGNAL_PLACEMENT_DELETING,
    names.SIGNAL_PLACEMENT_CHANGED,
    names.SIGNAL_SNAPSHOT_CHANGED,
    names.SIGNAL_BINDING_DELETING,
    names.SIGNAL_CLUSTER_CHANGED,
)
_RANK: Final = {signal: rank for rank, signal in enumerate(SIGNAL_PRIORITY)}
# Distinct reasons listed in one signal; the rest are counted.
MAX_REASONS: Final = 3


@dataclass(slots=True)
class Batch:
    """Every route for one placement since its last send: what to send, and why."""

    placement: str
    signal: str
    may_start: bool
    reasons: list[str] = field(default_factory=list)
    events: int = 0

    @classmethod
    def of(cls, route: Route) -> Batch:
        return cls(route.placement, route.signal, route.may_start, [route.reason], 1)

    def merge(self, other: Batch) -> None:
        if _RANK.get(other.signal, len(_RANK)) < _RANK.get(self.signal, len(_RANK)):
            self.signal = other.signal
        self.may_start = self.may_start or other.may_start
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
    """Batches by placement, each due at once or, after a failed send, at a retry time."""

    def __init__(self) -> None:
        self._batches: dict[str, Batch] = {}
        self._due: dict[str, float] = {}  # placement -> earliest send time, only when held back

    def __len__(self) -> int:
        return len(self._batches)

    def __contains__(self, placement: object) -> bool:
        return placement in self._batches

    def add(self, route: Route) -> None:
        self.put_back(Batch.of(route))

    def put_back(self, batch: Batch, *, not_before: float | None = None) -> None:
        """Merge `batch` in (after a failed send: not to be sent before `not_before`)."""
        current = self._batches.get(batch.placement)
        if current is None:
            self._batches[batch.placement] = batch
        else:
            current.merge(batch)
        if not_before is not None:
            self._due[batch.placement] = max(self._due.get(batch.placement, 0.0), not_before)

    def take_due(self, now: float, busy: Collection[str] = ()) -> list[Batch]:
        """Remove and return every batch that is due and whose placement is not `busy`."""
        due = [
            name for name in self._batches if name not in busy and self._due.get(name, 0.0) <= now
        ]
        for name in due:
            self._due.pop(name, None)
        return [self._batches.pop(name) for name in due]

    def next_due(self, now: float, busy: Collection[str] = ()) -> float | None:
        """When the earliest held-back batch falls due (None: nothing is waiting for a time)."""
        times = [t for name, t in self._due.items() if t > now and name not in busy]
        return min(times) if times else None
