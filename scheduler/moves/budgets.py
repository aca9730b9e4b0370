"""KubeFleet's disruption-budget arithmetic, for rebalance moves (docs/capacity.md, "Compaction
and rebalancing").

A ClusterResourcePlacementDisruptionBudget bounds the voluntary disruptions of one placement.
KubeFleet's eviction controller decides each eviction on the placement's bindings as they are at
that moment: every binding labelled with the placement counts (whatever its state), those whose
`Available` condition is True at the binding's generation are available, and

- `maxUnavailable`: `maxUnavailable - (bindings - available)` disruptions are allowed;
- `minAvailable`: `available - minAvailable` are allowed;

percentages scale N (PickN's numberOfClusters), rounding up; never below 0; one more eviction
goes ahead when that number is above 0.

A move here is a disruption: its new binding is created (one more binding, not available yet),
then its old one is marked Unscheduled (no longer available; it stays a binding until KubeFleet's
rollout removes it). `BudgetState` applies the rule above *before each move*, to the state the
earlier moves left, so the rule is the same whoever asks: the planner (how many moves in a row a
placement may make), the turn that makes the moves (one by one, on fresh reads; a retried turn
evaluates a half-done move on the state from before it began, its new binding left out), and
`fleet-scheduler check` (with the moves in flight, whose old binding KubeFleet's eviction
would have removed, the budget's bound holds: see `respected`).

Pure: hub types in, numbers out."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final

from hub import names
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
)

__all__ = [
    "MOVED_FROM_ANNOTATION",
    "MOVED_FROM_UID_ANNOTATION",
    "BudgetState",
    "available",
    "budget_state",
    "disruptions_allowed",
    "moved_bindings",
    "moved_from",
    "replaces",
]

# On a binding a rebalance move created: the name and uid of the binding it replaces. A retried
# turn finds its half-done move by them, and `check` tells a move in progress from a surplus
# binding (the uid, because binding names are made again: a later binding may carry the name).
MOVED_FROM_ANNOTATION: Final = names.OWN_PREFIX + "moved-from"
MOVED_FROM_UID_ANNOTATION: Final = names.OWN_PREFIX + "moved-from-uid"


def available(binding: ClusterResourceBinding) -> bool:
    """KubeFleet's eviction rule: the binding's Available condition is True, observed at the
    binding's current generation."""
    for condition in binding.status.get("conditions", []) or []:
        if condition.get("type") == names.BINDING_AVAILABLE_CONDITION:
            observed = condition.get("observedGeneration") or 0
            return condition.get("status") == names.TRUE and observed == (
                binding.metadata.generation or 0
            )
    return False


def moved_from(binding: ClusterResourceBinding) -> str | None:
    """The name of the binding a rebalance move replaced with this one, or None."""
    return binding.metadata.annotations.get(MOVED_FROM_ANNOTATION) or None


def replaces(new: ClusterResourceBinding, old: ClusterResourceBinding) -> bool:
    """Did a rebalance move make `new` to replace `old` (its name, and its uid when recorded)?"""
    if moved_from(new) != old.metadata.name:
        return False
    uid = new.metadata.annotations.get(MOVED_FROM_UID_ANNOTATION)
    return uid is None or uid == old.metadata.uid


def moved_bindings(
    bindings: Iterable[ClusterResourceBinding],
) -> list[tuple[ClusterResourceBinding, ClusterResourceBinding]]:
    """(new, old) for every binding of `bindings` that a move made to replace another of them
    still there: the move half done (old still active) or in flight (old Unscheduled, not yet
    removed by KubeFleet's rollout)."""
    listed = list(bindings)
    by_name = {b.metadata.name: b for b in listed}
    pairs = []
    for binding in listed:
        source = moved_from(binding)
        old = by_name.get(source) if source is not None else None
        if old is not None and old is not binding and replaces(binding, old):
            pairs.append((binding, old))
    return pairs


def disruptions_allowed(
    desired: int,
    bindings: int,
    available: int,
    *,
    max_unavailable: int | str | None = None,
    min_available: int | str | None = None,
) -> int | None:
    """How many voluntary disruptions a PickN placement's budget allows now, as KubeFleet's
    eviction controller reckons it (the module doc). None: no budget, no limit."""
    if max_unavailable is not None:
        return max(_scaled(max_unavailable, desired) - (bindings - available), 0)
    if min_available is not None:
        return max(available - _scaled(min_available, desired), 0)
    return None


@dataclass(frozen=True, slots=True)
class BudgetState:
    """What KubeFleet's arithmetic reads of one placement: N, its bindings, the available ones,
    and its budget (both bounds None: no budget)."""

    desired: int
    bindings: int
    available: int
    max_unavailable: int | str | None = None
    min_available: int | str | None = None

    @property
    def limited(self) -> bool:
        return self.max_unavailable is not None or self.min_available is not None

    def allowed(self) -> int | None:
        """Disruptions the budget allows now (None: no limit)."""
        return disruptions_allowed(
            self.desired,
            self.bindings,
            self.available,
            max_unavailable=self.max_unavailable,
            min_available=self.min_available,
        )

    def respected(self) -> bool:
        """Does the state keep the budget's bound: at most maxUnavailable bindings unavailable,
        or at least minAvailable available (no budget: always)?"""
        if self.max_unavailable is not None:
            return self.bindings - self.available <= _scaled(self.max_unavailable, self.desired)
        if self.min_available is not None:
            return self.available >= _scaled(self.min_available, self.desired)
        return True

    def allows_one(self) -> bool:
        """May one more disruption go ahead now?"""
        allowed = self.allowed()
        return allowed is None or allowed > 0

    def after_move(self, old_was_available: bool) -> BudgetState:
        """The state once a move is made: its new binding added (not available yet), its old
        one Unscheduled (no longer available)."""
        return replace(
            self,
            bindings=self.bindings + 1,
            available=self.available - (1 if old_was_available else 0),
        )

    def after_unschedule(self, was_available: bool) -> BudgetState:
        """The state once one binding is marked Unscheduled with no replacement (affinity
        enforcement on a PickAll placement): it stays a binding until KubeFleet's rollout
        removes it, no longer available."""
        return replace(self, available=self.available - (1 if was_available else 0))

    def without(self, bindings: Iterable[ClusterResourceBinding]) -> BudgetState:
        """The state as if these bindings (new bindings of half-done moves) were not there."""
        gone = list(bindings)
        return replace(
            self,
            bindings=self.bindings - len(gone),
            available=self.available - sum(1 for b in gone if available(b)),
        )

    def moves_in_a_row(self, limit: int) -> int | None:
        """How many moves the budget lets a placement make one after another (None: no limit),
        each moving an available binding while there is one; at most `limit`."""
        if not self.limited:
            return None
        state, made = self, 0
        while made < limit and state.allows_one():
            state = state.after_move(state.available > 0)
            made += 1
        return made


def budget_state(
    budget: ClusterResourcePlacementDisruptionBudget | None,
    placement: ClusterResourcePlacement,
    bindings: Iterable[ClusterResourceBinding],
) -> BudgetState:
    """KubeFleet's view of the placement for its budget (`budget` None: no limit)."""
    policy = placement.spec.policy
    desired = (policy.number_of_clusters or 0) if policy is not None else 0
    listed = list(bindings)
    return BudgetState(
        desired=desired,
        bindings=len(listed),
        available=sum(1 for b in listed if available(b)),
        max_unavailable=budget.spec.max_unavailable if budget is not None else None,
        min_available=budget.spec.min_available if budget is not None else None,
    )


def _scaled(value: int | str, total: int) -> int:
    """Kubernetes' GetScaledValueFromIntOrPercent rounding up, as KubeFleet calls it: an integer
    as it is, "N%" of `total`; anything else is the error KubeFleet ignores, which leaves 0 (its
    CRD refuses such values; a hub without the rule may hold one)."""
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        return 0
    try:
        percent = int(text[:-1])
    except ValueError:
        return 0
    return math.ceil(percent * total / 100)
