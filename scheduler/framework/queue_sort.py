"""The QueueSort extension point: in which order pending placement turns are taken.

kube-scheduler's QueueSort plugin orders its own in-process queue (`Less(a, b)`). Ours does not
own a queue: turns wait in the watcher's outbox and then in Temporal's task queues, which order
tasks by a `Priority` (a priority key, 1 first to 5 last, 3 when unset; and a fairness key with
a weight, shared out in proportion to the weights when the server has fairness on). So a
QueueSort plugin maps one placement and the cause of a turn to that triple, and everything on
the way honours it: the outbox sends in that order, the workflow's tasks and its activities
carry it (docs/priority.md).

Exactly one QueueSort plugin per profile, as in kube-scheduler; `PrioritySort` is the default.
Like every plugin it is pure: it reads the placement's metadata and the PriorityClasses the
caller hands over, never the hub itself."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from hub.types import ObjectMeta
from scheduler.framework.interfaces import Plugin

__all__ = [
    "DEFAULT_PRIORITY_KEY",
    "HIGHEST_PRIORITY_KEY",
    "LOWEST_PRIORITY_KEY",
    "PriorityClasses",
    "QueueItem",
    "QueuePriority",
    "QueueSortPlugin",
    "TurnCause",
    "checked_priority_key",
    "no_later_than",
]

# Temporal's priority keys: 1 is taken first, 5 last; a task without one counts as 3.
HIGHEST_PRIORITY_KEY = 1
LOWEST_PRIORITY_KEY = 5
DEFAULT_PRIORITY_KEY = 3


def checked_priority_key(value: object, where: str) -> int:
    """`value` if it is a Temporal priority key (an int in 1-5); else ValueError naming `where`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not HIGHEST_PRIORITY_KEY <= value <= LOWEST_PRIORITY_KEY
    ):
        raise ValueError(
            f"{where} must be an integer in [{HIGHEST_PRIORITY_KEY}, {LOWEST_PRIORITY_KEY}], "
            f"got {value!r}"
        )
    return value


class TurnCause(enum.Enum):
    """Why a placement's turn runs, as far as its order is concerned."""

    PLACEMENT = "placement"
    """The placement itself: created, spec or policy snapshot changed, deleting, one of its
    bindings deleted."""
    PERSON = "person"
    """Someone asked: `fleet-scheduler requeue`."""
    FAN_OUT = "fanOut"
    """Something outside the placement: a member cluster changed, the watcher started, the
    reconcile safety net. One change can fan out to every placement in the fleet."""


@dataclass(frozen=True, slots=True)
class PriorityClasses:
    """What QueueSort plugins know of `scheduling.k8s.io/v1` PriorityClasses: each one's
    value, and the global default (`globalDefault: true`)."""

    values: Mapping[str, int] = field(default_factory=dict)
    global_default: str | None = None

    @classmethod
    def of(cls, classes: Iterable[object]) -> PriorityClasses:
        """From PriorityClass objects (`metadata.name`, `value`, `global_default`). Should
        several claim to be the global default, the one with the lowest value counts (ties:
        the first name), as Kubernetes' priority admission does."""
        values: dict[str, int] = {}
        defaults: list[tuple[int, str]] = []
        for pc in classes:
            name: str = pc.metadata.name  # type: ignore[attr-defined]
            value: int = pc.value  # type: ignore[attr-defined]
            values[name] = value
            if getattr(pc, "global_default", False):
                defaults.append((value, name))
        return cls(values=values, global_default=min(defaults)[1] if defaults else None)


@dataclass(frozen=True, slots=True)
class QueueItem:
    """One turn to order: the placement's metadata (name, namespace for a ResourcePlacement,
    labels, annotations), why the turn runs, and the PriorityClasses of the hub."""

    placement: ObjectMeta
    cause: TurnCause
    priority_classes: PriorityClasses = field(default_factory=PriorityClasses)
    unsatisfied: bool = False
    """The placement has less than it asks for: it is new, below its N, or its spec or policy
    changed since it was last scheduled (its Scheduled condition is not True at its
    generation). False: a re-decision of a placement that has what it asked for, or a caller
    that does not know."""
    new: bool = False
    """The placement has nothing yet: it was never scheduled (no Scheduled condition), so it is
    unsatisfied too. False: it was, or a caller that does not know."""


@dataclass(frozen=True, slots=True)
class QueuePriority:
    """Where a turn goes in the queues, and what it came from (for status, explain and the
    search attributes).

    `priority_key` is Temporal's (1-5; None = unset, which Temporal treats as 3). The fairness
    key and weight are Temporal's too (None = none). `value` is the placement's priority (its
    PriorityClass value, 0 without one), `priority_class` the class it came from, `tenant` the
    fairness key's source, and `problem` says why the placement did not get what it asked for
    (e.g. a PriorityClass that does not exist).

    `aging_limit` is the best key a placement past its scheduling deadline with `,aging` may be
    lifted to (docs/priority.md, "Aging"); None: the key of its own turns (the key this plugin
    gives a PLACEMENT turn), so a deadline never buys more priority than its class gives. It is
    left out of `repr`: the reconcile's priority digests add it only when set, so the digests
    of a fleet that does not use it stay what they were before it."""

    priority_key: int | None = None
    fairness_key: str | None = None
    fairness_weight: float | None = None
    value: int = 0
    priority_class: str | None = None
    tenant: str | None = None
    problem: str | None = None
    aging_limit: int | None = field(default=None, repr=False)
    within_key: int = field(default=0, repr=False, compare=False)
    """Order among turns of the same priority key, 0 first: honoured where the scheduler owns
    the queue (the watcher's outbox, the workflow worker's local slots), not by Temporal, whose
    priority keys are whole numbers. It says how a turn waits, not what the placement's priority
    is: left out of `repr` and equality, so the reconcile's priority digests, and the watcher's
    look for placements whose priority a PriorityClass change moved, stay what they were."""

    def __post_init__(self) -> None:
        if self.priority_key is not None:
            checked_priority_key(self.priority_key, "priority_key")
        if self.aging_limit is not None:
            checked_priority_key(self.aging_limit, "aging_limit")
        weight = self.fairness_weight
        if weight is not None and not (isinstance(weight, int | float) and weight > 0):
            raise ValueError(f"fairness_weight must be a positive number or None, got {weight!r}")
        if isinstance(self.within_key, bool) or not isinstance(self.within_key, int):
            raise ValueError(f"within_key must be an integer, got {self.within_key!r}")

    @property
    def effective_key(self) -> int:
        """The key Temporal acts on (an unset key is the default, 3)."""
        return DEFAULT_PRIORITY_KEY if self.priority_key is None else self.priority_key

    @property
    def order(self) -> tuple[int, int]:
        """Where the turn goes in the scheduler's own queues: by key, then within it."""
        return (self.effective_key, self.within_key)


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def queue_sort(self, item: QueueItem) -> QueuePriority: ...


def no_later_than(own: QueuePriority, other: QueuePriority) -> QueuePriority:
    """`own`, queued no later than `other`: a turn another placement waits on (a preemption's
    victim) takes that placement's place in the queues when it is ahead. Only where the turn
    waits changes; the placement's priority (value, class) stays its own."""
    if other.order >= own.order:
        return own
    return replace(own, priority_key=other.effective_key, within_key=other.within_key)
