"""The rebalance planner (scheduler.moves.rebalance): pack frees whole clusters, spread evens out
utilisation, both within room, each placement's own filters and its disruption budget."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.moves.budgets import disruptions_allowed
from scheduler.moves.rebalance import Fleet, Movable, in_use, plan_moves


def fleet(sizes: Mapping[str, int], pinned: Mapping[str, int] | None = None) -> Fleet:
    return Fleet(
        {c: {"cpu": Fraction(n)} for c, n in sizes.items()},
        {},
        dict(pinned or {}),
    )


def place(f: Fleet, placement: str, cluster: str, cpu: int, targets: set[str]) -> Movable:
    f.add(cluster, {"cpu": Fraction(cpu)}, +1)
    return Movable(
        placement, f"{placement}-{cluster}", cluster, {"cpu": Fraction(cpu)}, frozenset(targets)
    )


ALL = {"a", "b", "c", "d"}


def test_pack_empties_the_least_used_cluster_into_the_fullest_that_fit() -> None:
    f = fleet({"a": 10, "b": 10, "c": 10, "d": 10})
    items = [
        place(f, "p1", "a", 6, ALL),
        place(f, "p2", "b", 3, ALL),
        place(f, "p3", "c", 1, ALL),
    ]
    moves = plan_moves(f, items, {}, "pack")
    assert [(m.binding, m.source, m.target) for m in moves] == [
        ("p3-c", "c", "a"),  # c (10%) first, onto the fullest: a (60%)
        ("p2-b", "b", "a"),  # then b (30%): a has 3 left
    ]
    assert moves[0].reason == "pack: empties c into a"
    assert (moves[1].target_before, moves[1].target_after) == (Fraction(7, 10), Fraction(1))
    assert f.utilisation("c") == Fraction(1, 10)  # the caller's fleet is left as it was


def test_pack_never_opens_an_empty_cluster_and_moves_all_or_nothing() -> None:
    f = fleet({"a": 10, "b": 10, "c": 10})
    items = [place(f, "p1", "a", 5, {"a", "b", "c"}), place(f, "p2", "a", 5, {"a", "b", "c"})]
    assert plan_moves(f, items, {}, "pack") == []  # only empty clusters could take them
    f2 = fleet({"a": 10, "b": 10, "c": 10})
    items2 = [
        place(f2, "p1", "b", 8, {"a", "b", "c"}),
        place(f2, "p2", "a", 1, {"a", "b", "c"}),
        place(f2, "p3", "a", 3, {"a", "b", "c"}),  # does not fit beside p1 on b
    ]
    assert plan_moves(f2, items2, {}, "pack") == []  # a cannot be emptied: nothing moves


def test_pack_leaves_clusters_with_bindings_that_may_not_move() -> None:
    # a holds a binding that may not move (pinned): it is never emptied, but may take more
    f = fleet({"a": 10, "b": 10}, pinned={"a": 1})
    items = [place(f, "p1", "a", 1, {"a", "b"}), place(f, "p2", "b", 5, {"a", "b"})]
    moves = plan_moves(f, items, {}, "pack")
    assert [(m.binding, m.source, m.target) for m in moves] == [("p2-b", "b", "a")]


def test_pack_respects_each_placements_filters_and_one_binding_per_cluster() -> None:
    f = fleet({"a": 10, "b": 10, "c": 10})
    items = [
        place(f, "p1", "a", 1, {"a"}),  # may only be on a
        place(f, "p2", "b", 1, {"a", "b"}),
        place(f, "p2", "c", 1, {"a", "b", "c"}),
    ]
    moves = plan_moves(f, items, {}, "pack")
    # p2's binding on b can go to a; its binding on c cannot join it there, nor go to b after
    # b is freed: c stays
    assert [(m.binding, m.source, m.target) for m in moves] == [("p2-b", "b", "a")]


def test_a_move_never_joins_a_binding_of_its_placement_that_may_not_move() -> None:
    f = fleet({"a": 10, "b": 10})
    f.pinned, f.occupants = {"b": 1}, {"b": {"p1"}}  # p1 holds b without a reservation
    items = [place(f, "p1", "a", 1, {"a", "b"})]
    assert plan_moves(f, items, {}, "pack") == []
    assert plan_moves(f, items, {}, "spread") == []


def test_pack_spends_each_placements_disruption_budget_once_per_move() -> None:
    f = fleet({"a": 10, "b": 10, "c": 10, "d": 10})
    items = [
        place(f, "p1", "a", 6, ALL),
        place(f, "p4", "d", 6, ALL),
        place(f, "p2", "b", 1, ALL),
        place(f, "p2", "c", 1, ALL),
    ]
    unlimited = plan_moves(f, items, {"p2": None}, "pack")
    # one of p2's bindings onto each big cluster (never both on one)
    assert sorted((m.source, m.target) for m in unlimited) == [("b", "d"), ("c", "a")]
    once = plan_moves(f, items, {"p2": 1}, "pack")
    assert [m.placement for m in once].count("p2") == 1
    never = plan_moves(f, items, {"p2": 0}, "pack")
    assert "p2" not in [m.placement for m in never]


def test_spread_moves_from_the_fullest_to_the_emptiest_while_it_helps() -> None:
    f = fleet({"a": 10, "b": 10, "c": 10})
    items = [place(f, f"p{i}", "a", 2, {"a", "b", "c"}) for i in range(4)]  # a at 80%
    moves = plan_moves(f, items, {}, "spread")
    after = f.copy()
    for m in moves:
        after.add(m.source, {"cpu": Fraction(2)}, -1)
        after.add(m.target, {"cpu": Fraction(2)}, +1)
    # 8 CPUs in 2-CPU bindings over three 10-CPU clusters: 4 + 2 + 2 is as even as it gets
    assert sorted(after.utilisation(c) for c in "abc") == [
        Fraction(2, 10),
        Fraction(2, 10),
        Fraction(4, 10),
    ]
    assert moves[0].reason.startswith("spread: a at 80% -> ")
    assert len(moves) == 3


@pytest.mark.parametrize(
    ("budget", "desired", "bindings", "available", "allowed"),
    [
        ({}, 3, 3, 3, None),
        ({"max_unavailable": 1}, 3, 3, 3, 1),
        ({"max_unavailable": 1}, 3, 3, 2, 0),
        ({"max_unavailable": "50%"}, 3, 3, 3, 2),  # 1.5 rounds up
        ({"min_available": 2}, 3, 3, 3, 1),
        ({"min_available": "100%"}, 3, 3, 3, 0),
        ({"min_available": 3}, 3, 3, 1, 0),  # never negative
    ],
)
def test_disruptions_allowed_is_kubefleets_arithmetic(
    budget: dict[str, int | str], desired: int, bindings: int, available: int, allowed: int | None
) -> None:
    assert disruptions_allowed(desired, bindings, available, **budget) == allowed  # type: ignore[arg-type]


def test_a_value_that_is_no_percentage_counts_as_0_as_kubefleet_reads_it() -> None:
    """KubeFleet ignores GetScaledValueFromIntOrPercent's error and goes on with 0 (its CRD
    refuses such values; a hub without the rule may hold one): a turn never fails on it."""
    assert disruptions_allowed(3, 3, 3, min_available="half") == 3
    assert disruptions_allowed(3, 3, 3, max_unavailable="1") == 0


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 20), min_size=2, max_size=8),
    items=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 7), st.integers(1, 6), st.integers(0, 255)),
        max_size=20,
    ),
    budgets=st.dictionaries(st.integers(0, 5), st.none() | st.integers(0, 3)),
    strategy=st.sampled_from(["pack", "spread"]),
)
def test_moves_never_overcommit_never_exceed_budgets_and_pack_never_adds_clusters(
    sizes: list[int],
    items: list[tuple[int, int, int, int]],
    budgets: dict[int, int | None],
    strategy: str,
) -> None:
    names = [f"m{i}" for i in range(len(sizes))]
    f = fleet(dict(zip(names, sizes, strict=True)))
    movable: list[Movable] = []
    taken: set[tuple[str, str]] = set()
    for placement, where, cpu, mask in items:
        cluster = names[where % len(names)]
        key = (f"p{placement}", cluster)
        if key in taken or not f.fits(cluster, {"cpu": Fraction(cpu)}):
            continue
        taken.add(key)
        targets = {n for i, n in enumerate(names) if mask >> i & 1} | {cluster}
        movable.append(place(f, f"p{placement}", cluster, cpu, targets))
    budget_map = {f"p{k}": v for k, v in budgets.items()}
    moves = plan_moves(f, movable, budget_map, strategy)  # type: ignore[arg-type]
    assert len({m.binding for m in moves}) == len(moves)  # each binding moves at most once

    after = f.copy()
    where = {m.binding: m.cluster for m in movable}
    spent: dict[str, int] = {}
    by_binding = {m.binding: m for m in movable}
    for move in moves:
        item = by_binding[move.binding]
        assert where[move.binding] == move.source and move.target in item.targets
        after.add(move.source, item.requests, -1)
        after.add(move.target, item.requests, +1)
        where[move.binding] = move.target
        spent[move.placement] = spent.get(move.placement, 0) + 1
    for cluster in names:
        assert after.utilisation(cluster) <= 1
    for placement, count in spent.items():
        limit = budget_map.get(placement)
        assert limit is None or count <= limit
    placements_at: dict[tuple[str, str], int] = {}
    for binding, cluster in where.items():
        key = (by_binding[binding].placement, cluster)
        placements_at[key] = placements_at.get(key, 0) + 1
    assert max(placements_at.values(), default=1) == 1
    moved = [
        Movable(m.placement, m.binding, where[m.binding], m.requests, m.targets) for m in movable
    ]
    if strategy == "pack":
        assert len(in_use(after, moved)) <= len(in_use(f, movable))
        assert len(in_use(after, moved)) == len(in_use(f, movable)) - len(
            {m.source for m in moves} - {where[b] for b in where}
        )
