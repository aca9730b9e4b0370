"""Preemption over generated fleets (scheduler/preemption), compared with a search over every
subset of each cluster's bindings (scheduler/preemption/search.py):

- a victim is never of equal or higher priority, nor the preemptor's own binding;
- the victims free enough: after they go and the preemptor's binding comes, no cluster holds
  more than its allocatable in any resource the preemptor asks for;
- no disruption budget is overspent, across all the clusters of a plan;
- no victim could be spared, and the highest victim priority is the lowest any fitting set has;
  with one resource, no fitting set spares more bindings of the highest priority, then of the
  next, and so on (kube-scheduler's reprieve, made exact): among bindings of one priority, the
  victims are the fewest the search finds;
- a cluster is rejected exactly when the search finds no fitting set (without budgets)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from scheduler.preemption import Occupant, Preemptor, Room, choose, plan_preemption, sort_key
from scheduler.preemption.search import best_victims, fitting_sets, frees_enough
from scheduler.room.capacity import ClusterCapacity
from tests.property.worlds import SETTINGS

PRIORITY = 5
PRIORITIES = (-3, 0, 2, PRIORITY, 9)
PLACEMENTS = [f"crp-{i}" for i in range(7)]


@st.composite
def rooms(draw: st.DrawFn, name: str, resources: Sequence[str]) -> Room:
    placements = draw(st.lists(st.sampled_from(PLACEMENTS), unique=True, max_size=7))
    occupants = tuple(
        Occupant(
            binding=f"{name}-{placement}",
            placement=placement,
            priority=draw(st.sampled_from(PRIORITIES)),
            requests={r: Fraction(draw(st.integers(0, 6))) for r in resources},
        )
        for placement in placements
    )
    allocated = {
        r: sum((o.requests[r] for o in occupants), Fraction(draw(st.integers(0, 2))))
        for r in resources
    }
    allocatable = {}
    for r in resources:
        if draw(st.integers(0, 9)):  # now and then a resource the cluster does not report
            # mostly about full, now and then overcommitted (the member's report shrank)
            allocatable[r] = max(allocated[r] + draw(st.integers(-3, 3)), Fraction(0))
    return Room(name, ClusterCapacity(allocatable, allocated), occupants)


@st.composite
def fleets(
    draw: st.DrawFn, resources: Sequence[str] = ("cpu", "memory")
) -> tuple[Preemptor, list[Room]]:
    requests = {r: Fraction(draw(st.integers(0, 6))) for r in resources}
    preemptor = Preemptor("checkout", PRIORITY, requests, draw(st.integers(1, 4)))
    count = draw(st.integers(1, 4))
    return preemptor, [draw(rooms(f"m{i}", resources)) for i in range(count)]


budget_maps = st.dictionaries(st.sampled_from(PLACEMENTS), st.none() | st.integers(0, 2))


def no_overcommit(preemptor: Preemptor, room: Room, victims: Sequence[Occupant]) -> bool:
    """Capacity minus what remains, then the preemptor's binding: within allocatable."""
    for resource, amount in preemptor.requests.items():
        if amount <= 0:
            continue
        supply = room.capacity.allocatable.get(resource)
        held = room.capacity.allocated.get(resource, Fraction(0))
        freed = sum((v.requests.get(resource, Fraction(0)) for v in victims), Fraction(0))
        if supply is None or held - freed + amount > supply:
            return False
    return True


def victims_of(room: Room, bindings: Sequence[str]) -> list[Occupant]:
    by_name = {o.binding: o for o in room.occupants}
    return [by_name[b] for b in bindings]


@SETTINGS
@given(fleets(), budget_maps)
def test_a_plan_takes_only_lower_priorities_frees_enough_and_spends_no_budget_twice(
    fleet: tuple[Preemptor, list[Room]], budgets: dict[str, int | None]
) -> None:
    preemptor, candidates = fleet
    plan = plan_preemption(preemptor, candidates, budgets)
    by_name = {r.cluster: r for r in candidates}
    taken: Counter[str] = Counter()
    assert len(plan.clusters) <= preemptor.short
    assert plan.still_short == preemptor.short - len(plan.clusters)
    assert len({c.cluster for c in plan.clusters}) == len(plan.clusters)
    for cluster in plan.clusters:
        room = by_name[cluster.cluster]
        victims = victims_of(room, [v.binding for v in cluster.victims])
        assert all(v.priority < preemptor.priority for v in victims)
        assert all(v.placement != preemptor.placement for v in victims)
        assert no_overcommit(preemptor, room, victims)
        assert frees_enough(preemptor, room, victims)
        assert cluster.budget_violations == 0
        taken.update(v.placement for v in victims)
    for placement, count in taken.items():
        budget = budgets.get(placement)
        assert budget is None or count <= budget, (placement, count, budget)
    rejected = {r.cluster for r in plan.rejected}
    assert not rejected & {c.cluster for c in plan.clusters}
    if len(plan.clusters) < preemptor.short:  # every cluster was either taken or rejected
        assert rejected | {c.cluster for c in plan.clusters} == set(by_name)
    if plan.clusters:  # the first is the best kube-scheduler's order knows
        answers = [choose(preemptor, r, budgets) for r in candidates]
        keys = [sort_key(a) for a in answers if not isinstance(a, str)]
        assert plan.clusters[0].cluster == min(keys)[-1]


@SETTINGS
@given(fleets(), st.booleans())
def test_per_cluster_victims_compared_with_every_subset(
    fleet: tuple[Preemptor, list[Room]], overspend: bool
) -> None:
    preemptor, candidates = fleet
    for room in candidates:
        answer = choose(preemptor, room, {}, overspend_budgets=overspend)
        fewest = best_victims(preemptor, room)
        if isinstance(answer, str):
            assert fewest is None, (answer, fewest)
            continue
        assert fewest is not None
        victims = list(answer.victims)
        assert frees_enough(preemptor, room, victims)
        assert all(v.priority < preemptor.priority for v in victims)
        for spared in victims:  # none could be spared
            assert not frees_enough(preemptor, room, [v for v in victims if v is not spared])
        lowest_top = best_victims(preemptor, room, key=highest)
        assert lowest_top is not None
        assert highest(answer.victims) == highest(lowest_top)
        assert len(victims) >= len(fewest)


@SETTINGS
@given(fleets(resources=("cpu",)))
def test_with_one_resource_the_reprieve_is_exact(fleet: tuple[Preemptor, list[Room]]) -> None:
    preemptor, candidates = fleet
    for room in candidates:
        answer = choose(preemptor, room, {})
        if isinstance(answer, str):
            assert next(fitting_sets(preemptor, room), None) is None
            continue
        best = best_victims(preemptor, room, key=by_level)
        assert best is not None
        assert by_level(answer.victims) == by_level(best)
        lower = {o.priority for o in room.occupants if o.priority < preemptor.priority}
        if len(lower) == 1:  # one priority among the candidates: the fewest victims
            fewest = best_victims(preemptor, room)
            assert fewest is not None and len(answer.victims) == len(fewest)


def highest(victims: Sequence[Occupant]) -> int:
    return max((v.priority for v in victims), default=-(2**31) - 1)


def by_level(victims: Sequence[Occupant]) -> tuple[int, ...]:
    """Victims per priority, highest priority first: lexicographically smaller spares more of
    the higher priorities."""
    counts = Counter(v.priority for v in victims)
    return tuple(counts[p] for p in sorted(PRIORITIES, reverse=True))
