"""Rebalancing capacity-aware placements: which bindings to move where (docs/capacity.md,
"Compaction and rebalancing"). The fleet form of Knative's evictor and Karmada's descheduler.

Pure: the caller reads the hub and builds a `Fleet` (each cluster's allocatable and everything
reserved on it, and how many of its active bindings may not move) and the `Movable` bindings:
those of PickN placements that opt in with `fleet-scheduler.io/rebalance: allowed`, each with
the clusters its placement's filters let it move to and its placement's disruption budget. Two
strategies:

- **pack**: free whole clusters. Clusters in use are tried least utilised first; one is emptied
  only if *every* binding on it can move to another cluster already in use (fullest first, as
  MostAllocated ranks), within room, budgets and each placement's own filters, never two
  bindings of one placement on one cluster. A cluster holding a binding that may not move is
  never emptied. No move opens a cluster that was empty. All-or-nothing holds for the plan:
  the moves are made by each placement's own turn, on fresh reads, and one refused there (a
  budget spent meanwhile, room taken) leaves its cluster in use.
- **spread**: even out utilisation. Repeatedly move one binding from the most utilised cluster
  to the least utilised one that may take it, as long as the move lowers the larger of the two
  clusters' utilisations (so each move strictly improves the pair and the loop ends).

Utilisation is the dominant share: the largest allocated/allocatable over the resources the
cluster reports. Each move costs its placement one disruption: KubeFleet's
ClusterResourcePlacementDisruptionBudget arithmetic (scheduler.moves.budgets) says how many moves it
may make in a row (`budgets`); the activity that applies a move checks it again on fresh reads."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final, Literal

__all__ = [
    "PACK",
    "SPREAD",
    "STRATEGIES",
    "Fleet",
    "Movable",
    "Move",
    "Strategy",
    "in_use",
    "percent",
    "plan_moves",
]

Strategy = Literal["pack", "spread"]
PACK: Final = "pack"
SPREAD: Final = "spread"
STRATEGIES: Final = (PACK, SPREAD)


@dataclass(frozen=True, slots=True)
class Movable:
    """An active binding of a placement that allows rebalancing."""

    placement: str
    binding: str
    cluster: str
    requests: Mapping[str, Fraction]
    targets: frozenset[str]
    """Clusters its placement's filters pass (its own cluster may be among them)."""


@dataclass(frozen=True, slots=True)
class Move:
    placement: str
    binding: str
    source: str
    target: str
    reason: str
    source_before: Fraction
    source_after: Fraction
    target_before: Fraction
    target_after: Fraction


@dataclass
class Fleet:
    """What the planner changes as it goes: every cluster's capacity and occupants."""

    allocatable: dict[str, dict[str, Fraction]]
    allocated: dict[str, dict[str, Fraction]]
    pinned: dict[str, int] = field(default_factory=dict)
    """Cluster -> active bindings there that may not move (any placement, capacity-aware or
    not): a cluster with one is in use for good."""
    occupants: dict[str, set[str]] = field(default_factory=dict)
    """Cluster -> the placements of those pinned bindings (a move never joins one of them)."""

    def utilisation(
        self, cluster: str, change: Mapping[str, Fraction] | None = None, sign: int = 0
    ) -> Fraction:
        """The dominant share in use; with `change`, as if it were added (sign 1) or taken
        away (sign -1), without changing anything."""
        held = self.allocated.get(cluster, {})
        shares = [
            (held.get(resource, Fraction(0)) + sign * (change or {}).get(resource, Fraction(0)))
            / supply
            for resource, supply in self.allocatable.get(cluster, {}).items()
            if supply > 0
        ]
        return max(shares, default=Fraction(0))

    def fits(self, cluster: str, requests: Mapping[str, Fraction]) -> bool:
        supply = self.allocatable.get(cluster, {})
        held = self.allocated.get(cluster, {})
        return all(
            amount <= 0 or supply.get(r, Fraction(0)) - held.get(r, Fraction(0)) >= amount
            for r, amount in requests.items()
        )

    def add(self, cluster: str, requests: Mapping[str, Fraction], sign: int) -> None:
        held = self.allocated.setdefault(cluster, {})
        for resource, amount in requests.items():
            held[resource] = held.get(resource, Fraction(0)) + sign * amount

    def copy(self) -> Fleet:
        return Fleet(
            dict(self.allocatable),
            {c: dict(a) for c, a in self.allocated.items()},
            dict(self.pinned),
            self.occupants,
        )


def plan_moves(
    fleet: Fleet,
    movable: Sequence[Movable],
    budgets: Mapping[str, int | None],
    strategy: Strategy,
    *,
    max_moves: int | None = None,
) -> list[Move]:
    """The moves `strategy` proposes, in the order to make them. `fleet` is left as it was."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
    state = _State(fleet.copy(), list(movable), dict(budgets))
    if strategy == PACK:
        return _pack(state, max_moves)
    return _spread(state, max_moves)


# --- the strategies ----------------------------------------------------------------------------


@dataclass
class _State:
    fleet: Fleet
    movable: list[Movable]
    budgets: dict[str, int | None]
    moved: set[str] = field(default_factory=set)
    """Bindings moved in this plan: each moves at most once (its move names where it is)."""

    def on(self, cluster: str) -> list[Movable]:
        return [m for m in self.movable if m.cluster == cluster]

    def holding(self, cluster: str) -> set[str]:
        pinned = self.fleet.occupants.get(cluster, set())
        return pinned | {m.placement for m in self.movable if m.cluster == cluster}

    def in_use(self) -> set[str]:
        return in_use(self.fleet, self.movable)

    def budget_left(self, placement: str) -> bool:
        left = self.budgets.get(placement)
        return left is None or left > 0

    def apply(self, item: Movable, target: str, reason: str) -> Move:
        fleet = self.fleet
        source = item.cluster
        before = (fleet.utilisation(source), fleet.utilisation(target))
        fleet.add(source, item.requests, -1)
        fleet.add(target, item.requests, +1)
        self.movable[self.movable.index(item)] = Movable(
            item.placement, item.binding, target, item.requests, item.targets
        )
        left = self.budgets.get(item.placement)
        if left is not None:
            self.budgets[item.placement] = left - 1
        self.moved.add(item.binding)
        return Move(
            item.placement,
            item.binding,
            source,
            target,
            reason,
            before[0],
            fleet.utilisation(source),
            before[1],
            fleet.utilisation(target),
        )


def _size(item: Movable, fleet: Fleet) -> Fraction:
    """How much of an average cluster a binding takes: bigger ones are placed first."""
    total = Fraction(0)
    for resource, amount in item.requests.items():
        supplies = [a[resource] for a in fleet.allocatable.values() if a.get(resource)]
        if supplies and amount > 0:
            total += amount * len(supplies) / sum(supplies)
    return total


def _pack(state: _State, max_moves: int | None) -> list[Move]:
    moves: list[Move] = []
    freed: set[str] = set()
    sources = sorted(
        (c for c in state.in_use() if not state.fleet.pinned.get(c)),
        key=lambda c: (state.fleet.utilisation(c), c),
    )
    for source in sources:
        items = sorted(state.on(source), key=lambda m: (-_size(m, state.fleet), m.binding))
        if not items or (max_moves is not None and len(moves) + len(items) > max_moves):
            continue
        if any(item.binding in state.moved for item in items):
            continue  # it took bindings this plan moves: moving them again would not hold
        trial = _State(
            state.fleet.copy(), list(state.movable), dict(state.budgets), set(state.moved)
        )
        open_ = trial.in_use() - freed - {source}
        planned: list[Move] = []
        for item in items:
            if not trial.budget_left(item.placement):
                break
            candidates = [
                t
                for t in item.targets & open_
                if trial.fleet.fits(t, item.requests) and item.placement not in trial.holding(t)
            ]
            if not candidates:
                break
            target = max(candidates, key=lambda t: (trial.fleet.utilisation(t), t))
            planned.append(trial.apply(item, target, f"pack: empties {source} into {target}"))
        if len(planned) == len(items):
            state.fleet, state.movable = trial.fleet, trial.movable
            state.budgets, state.moved = trial.budgets, trial.moved
            moves += planned
            freed.add(source)
    return moves


def _spread(state: _State, max_moves: int | None) -> list[Move]:
    moves: list[Move] = []
    limit = max_moves if max_moves is not None else 4 * len(state.movable)
    while len(moves) < limit:
        best: tuple[Fraction, str, Movable, str] | None = None
        ordered = sorted(state.in_use(), key=lambda c: (-state.fleet.utilisation(c), c))
        for source in ordered:
            high = state.fleet.utilisation(source)
            for item in sorted(state.on(source), key=lambda m: m.binding):
                if item.binding in state.moved or not state.budget_left(item.placement):
                    continue
                for target in sorted(item.targets - {source}):
                    if not state.fleet.fits(target, item.requests):
                        continue
                    if item.placement in state.holding(target):
                        continue
                    fleet = state.fleet
                    worse = max(
                        fleet.utilisation(source, item.requests, -1),
                        fleet.utilisation(target, item.requests, +1),
                    )
                    if worse < high and (best is None or worse < best[0]):
                        best = (worse, source, item, target)
            if best is not None:
                break  # the most utilised cluster that can give something
        if best is None:
            break
        _, source, item, target = best
        before = state.fleet.utilisation(source)
        moves.append(
            state.apply(
                item, target, f"spread: {source} at {percent(before)} -> {target}, the emptiest"
            )
        )
    return moves


def percent(share: Fraction) -> str:
    """A utilisation as people read it, rounded down (a cluster shown at 100% is full)."""
    return f"{math.floor(share * 100)}%"


def in_use(fleet: Fleet, movable: Iterable[Movable]) -> set[str]:
    """Clusters holding at least one active binding."""
    return {c for c, n in fleet.pinned.items() if n > 0} | {m.cluster for m in movable}
