"""Preemption across clusters: which lower-priority bindings to take off which clusters so that a
placement short of room gets it (issue 37). kube-scheduler's DefaultPreemption, in fleet form.

Per candidate cluster (one that passes every filter of the preemptor's but room), as
kube-scheduler's `SelectVictimsOnNode` does per node:

1. only bindings of placements of *strictly* lower priority may be victims (never the
   preemptor's own, never one of equal or higher priority);
2. take them all away; if one binding of the preemptor still does not fit, the cluster cannot be
   freed, and the rejection says by how much it stays short;
3. give them back one by one ("reprieve") while the preemptor still fits: those whose removal
   would overspend their placement's disruption budget first, then the highest priority first,
   and among equals the smallest first (so the fewest victims remain; kube-scheduler breaks this
   tie by start time, which a binding does not have). What cannot be given back is the victim
   set.

Then clusters are taken in kube-scheduler's `pickOneNodeForPreemption` order: the fewest budget
violations, the lowest highest-victim priority, the lowest sum of victim priorities (each offset
by 2^31, as kube-scheduler does, so that more victims never sum lower), the fewest victims, and
the cluster's name. One cluster per binding the preemptor is short of (a placement has at most
one binding per cluster); after each, the victims' placements have spent one disruption each,
and the remaining clusters are judged again.

Disruption budgets stand where kube-scheduler has PodDisruptionBudgets. By default they are
hard: a binding whose placement may not be disrupted now is not a victim (the fleet's promise is
"never a budget overspent"). `overspend_budgets=True` is kube-scheduler's rule: such bindings may
go, counted as violations and spared first.

What the victims are guaranteed (tests/unit/scheduler/test_preemption*.py, with a brute-force
search in `scheduler.preemption.search`): never of equal or higher priority; enough to fit; none
can be spared (each given back would leave the preemptor short); the highest victim priority is
the lowest any fitting set has; and with one requested resource, no fitting set spares more
bindings of the highest priority, then of the next (so, among bindings of one priority, the
fewest victims). Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from scheduler.moves.budgets import BudgetState
from scheduler.preemption.models import (
    NEVER,
    ClusterPreemption,
    ClusterRejection,
    Occupant,
    PreemptionPlan,
    Preemptor,
    Room,
    Victim,
)
from scheduler.room.capacity import ClusterCapacity, format_amount, shortfalls, shown_requests

__all__ = [
    "NEVER_REASON",
    "Choice",
    "budget_left",
    "choose",
    "plan_preemption",
    "sort_key",
]

# kube-scheduler adds MaxInt32 + 1 to each victim's priority before summing.
_PRIORITY_OFFSET: Final = 2**31
# Below every int32 priority: the highest victim priority of a cluster that needs no victim.
_NO_VICTIM: Final = -(2**31) - 1

NEVER_REASON: Final = "its PriorityClass has preemptionPolicy: Never"


def budget_left(state: BudgetState, limit: int) -> int | None:
    """How many of a placement's bindings may be taken away one after another, each marked
    Unscheduled without a replacement (None: no budget); at most `limit`."""
    if not state.limited:
        return None
    made = 0
    while made < limit and state.allows_one():
        state = state.after_unschedule(state.available > 0)
        made += 1
    return made


@dataclass(frozen=True, slots=True)
class Choice:
    """The victims that free one cluster for one binding of the preemptor."""

    cluster: str
    victims: tuple[Occupant, ...]
    """Highest priority first."""
    over_budget: frozenset[str]
    """Bindings among the victims whose removal overspends their placement's budget."""
    freed: Mapping[str, Fraction]


def sort_key(choice: Choice) -> tuple[int, int, int, int, str]:
    """kube-scheduler's preference among clusters: smaller is better."""
    priorities = [v.priority for v in choice.victims]
    return (
        len(choice.over_budget),
        max(priorities, default=_NO_VICTIM),
        sum(p + _PRIORITY_OFFSET for p in priorities),
        len(priorities),
        choice.cluster,
    )


def choose(
    preemptor: Preemptor,
    room: Room,
    budgets: Mapping[str, int | None],
    *,
    overspend_budgets: bool = False,
) -> Choice | str:
    """The victims on one cluster, or why the cluster cannot be freed. `budgets`: placement ->
    disruptions it may still take (absent or None: no limit)."""
    need = {r: a for r, a in preemptor.requests.items() if a > 0}
    capacity = room.capacity
    below = [
        o
        for o in room.occupants
        if o.priority < preemptor.priority and o.placement != preemptor.placement
    ]
    lower = [o for o in below if not o.protected]
    lower.sort(key=lambda o: (-o.priority, _size(o, need, capacity), o.binding))
    over = _over_budget(lower, budgets)
    pool = lower if overspend_budgets else [o for o in lower if o.binding not in over]

    free = {r: capacity.free(r) for r in need}
    for occupant in pool:
        _give(free, occupant, -1)
    if not _fits(free, need):
        if below and not lower:
            return f"every lower-priority binding ({len(below)}) is protected: {below[0].protected}"
        return _why_not(preemptor, room, lower, pool, free)

    # Reprieve: over-budget ones first, then highest priority, smallest first (`pool` is sorted).
    victims: list[Occupant] = []
    for occupant in sorted(pool, key=lambda o: o.binding not in over):
        _give(free, occupant, +1)
        if not _fits(free, need):
            _give(free, occupant, -1)
            victims.append(occupant)
    victims.sort(key=lambda o: (-o.priority, o.binding))
    freed = {r: sum((v.requests.get(r, Fraction(0)) for v in victims), Fraction(0)) for r in need}
    return Choice(
        room.cluster,
        tuple(victims),
        frozenset(v.binding for v in victims if v.binding in over),
        freed,
    )


def plan_preemption(
    preemptor: Preemptor,
    rooms: Sequence[Room],
    budgets: Mapping[str, int | None],
    *,
    overspend_budgets: bool = False,
) -> PreemptionPlan:
    """Which clusters to free for the preemptor, at most `preemptor.short` of them, best first."""
    overspend = overspend_budgets
    plan = PreemptionPlan(placement=preemptor.placement, priority=preemptor.priority)
    if preemptor.policy == NEVER:
        return plan.model_copy(update={"still_short": preemptor.short, "reason": NEVER_REASON})
    left = dict(budgets)
    remaining = {room.cluster: room for room in rooms}
    chosen: list[ClusterPreemption] = []
    rejected: dict[str, str] = {}
    answers: dict[str, Choice | str] = {}  # judged with the budgets as they are now
    while len(chosen) < preemptor.short and remaining:
        best: Choice | None = None
        for name in sorted(remaining):
            answer = answers.get(name)
            if answer is None:
                answer = choose(preemptor, remaining[name], left, overspend_budgets=overspend)
                answers[name] = answer
            if isinstance(answer, str):
                rejected[name] = answer
            elif best is None or sort_key(answer) < sort_key(best):
                best = answer
        for name in rejected:
            remaining.pop(name, None)
        if best is None:
            break
        del remaining[best.cluster]
        spent = set()
        for victim in best.victims:
            budget = left.get(victim.placement)
            if budget is not None:
                left[victim.placement] = max(budget - 1, 0)
                spent.add(victim.placement)
        for name, room in remaining.items():  # judge again where a budget it read has changed
            if any(o.placement in spent for o in room.occupants):
                answers.pop(name, None)
        chosen.append(_shown(best))
    return plan.model_copy(
        update={
            "clusters": chosen,
            "rejected": [
                ClusterRejection(cluster=c, reason=r) for c, r in sorted(rejected.items())
            ],
            "still_short": preemptor.short - len(chosen),
        }
    )


# --- helpers -----------------------------------------------------------------------------------


def _size(occupant: Occupant, need: Mapping[str, Fraction], capacity: ClusterCapacity) -> Fraction:
    """The occupant's dominant share of the cluster, in the resources the preemptor needs."""
    shares = []
    for resource in need:
        amount = occupant.requests.get(resource, Fraction(0))
        supply = capacity.allocatable.get(resource)
        shares.append(amount / supply if supply else amount)
    return max(shares, default=Fraction(0))


def _over_budget(ordered: Sequence[Occupant], budgets: Mapping[str, int | None]) -> set[str]:
    """Bindings whose removal, in this order (the most important first, as kube-scheduler counts
    PDB violations), would take more disruptions than their placement has left."""
    spent: dict[str, int] = {}
    over = set()
    for occupant in ordered:
        left = budgets.get(occupant.placement)
        if left is None:
            continue
        used = spent.get(occupant.placement, 0)
        if used >= left:
            over.add(occupant.binding)
        else:
            spent[occupant.placement] = used + 1
    return over


def _give(free: dict[str, Fraction | None], occupant: Occupant, sign: int) -> None:
    """Put the occupant's requests back on the cluster (sign +1) or take them away (-1)."""
    for resource, value in free.items():
        if value is not None:
            free[resource] = value - sign * occupant.requests.get(resource, Fraction(0))


def _fits(free: Mapping[str, Fraction | None], need: Mapping[str, Fraction]) -> bool:
    return all((f := free[r]) is not None and f >= a for r, a in need.items())


def _why_not(
    preemptor: Preemptor,
    room: Room,
    lower: Sequence[Occupant],
    pool: Sequence[Occupant],
    free: Mapping[str, Fraction | None],
) -> str:
    if not room.occupants:
        head = "no binding to preempt"
    elif not lower:
        return "only equal or higher priority bindings"
    elif not pool:
        return (
            f"every lower-priority binding ({len(lower)}) is kept by its placement's "
            "disruption budget"
        )
    else:
        head = "even with every lower-priority binding gone"
    after = ClusterCapacity(
        room.capacity.allocatable,
        {r: room.capacity.allocatable.get(r, Fraction(0)) - (f or 0) for r, f in free.items()},
    )
    parts = []
    for short in shortfalls(preemptor.requests, after):
        if short.free is None:
            parts.append(f"{short.resource} not reported")
        else:
            parts.append(f"{short.resource} short by {format_amount(short.missing)}")
    reason = f"{head}, {', '.join(parts)}"
    if len(pool) < len(lower):
        reason += (
            f" ({len(lower) - len(pool)} lower-priority binding(s) kept by their placement's "
            "disruption budget)"
        )
    return reason


def _shown(choice: Choice) -> ClusterPreemption:
    return ClusterPreemption(
        cluster=choice.cluster,
        victims=[
            Victim(
                binding=v.binding,
                placement=v.placement,
                priority=v.priority,
                requests=shown_requests(v.requests),
                over_budget=v.binding in choice.over_budget,
            )
            for v in choice.victims
        ],
        freed=shown_requests(choice.freed),
        budget_violations=len(choice.over_budget),
    )
