"""The victims preemption should take, found by trying every subset: the yardstick the tests and
the bench compare `scheduler.preemption.victims.choose` with. Exponential in the number of
lower-priority bindings on the cluster: for small inputs only (at most `LIMIT` of them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from itertools import combinations
from typing import Final, TypeVar

from scheduler.preemption.models import Occupant, Preemptor, Room

__all__ = ["LIMIT", "best_victims", "fitting_sets", "frees_enough"]

LIMIT: Final = 16

K = TypeVar("K")


def frees_enough(preemptor: Preemptor, room: Room, victims: Sequence[Occupant]) -> bool:
    """With `victims` gone, does one binding of the preemptor fit on the cluster?"""
    for resource, amount in preemptor.requests.items():
        if amount <= 0:
            continue
        free = room.capacity.free(resource)
        if free is None:
            return False
        freed = sum((v.requests.get(resource, Fraction(0)) for v in victims), Fraction(0))
        if free + freed < amount:
            return False
    return True


def fitting_sets(
    preemptor: Preemptor, room: Room, pool: Sequence[Occupant] | None = None
) -> Iterator[tuple[Occupant, ...]]:
    """Every set of bindings of strictly lower priority (from `pool`, default all of the
    cluster's) whose removal lets one binding of the preemptor fit, smallest sets first."""
    candidates = [
        o
        for o in (room.occupants if pool is None else pool)
        if o.priority < preemptor.priority and o.placement != preemptor.placement
    ]
    if len(candidates) > LIMIT:
        raise ValueError(
            f"{len(candidates)} candidates: a search over subsets takes at most {LIMIT}"
        )
    for size in range(len(candidates) + 1):
        for subset in combinations(candidates, size):
            if frees_enough(preemptor, room, subset):
                yield subset


def best_victims(
    preemptor: Preemptor,
    room: Room,
    key: Callable[[tuple[Occupant, ...]], K] = len,  # type: ignore[assignment]
    pool: Sequence[Occupant] | None = None,
) -> tuple[Occupant, ...] | None:
    """The fitting set with the smallest `key` (default: the fewest victims); None when no set
    of lower-priority bindings frees enough."""
    best: tuple[Occupant, ...] | None = None
    best_key: K | None = None
    for subset in fitting_sets(preemptor, room, pool):
        value = key(subset)
        if best is None or value < best_key:  # type: ignore[operator]
            best, best_key = subset, value
    return best
