"""Capacity-aware cycles over generated fleets (docs/capacity.md).

- Parity: a placement without requests is decided exactly as by KubeFleet's plugins alone.
- Accounting: placements scheduled one after another, each seeing the reservations of those
  before it, never put more on a cluster than it reports allocatable, and every placement left
  short reports exactly the bindings room would have placed.
- The batched filter and score decide as the per-cluster ones."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from hub import names
from hub.types import MemberCluster
from scheduler import CapacityInput, CycleInput, Profile, default_profile, schedule
from scheduler.room.capacity import format_amount
from scheduler.room.quantity import parse_quantity
from scheduler.testing import apply_plan, member_cluster, policy_snapshot
from tests.property.worlds import NOW, SETTINGS, World, per_cluster, worlds


def kubefleet_only() -> Profile:
    profile = default_profile()
    keep = lambda plugins: tuple(p for p in plugins if p.name != "ClusterResourcesFit")  # noqa: E731
    return dataclasses.replace(
        profile,
        pre_filter=keep(profile.pre_filter),
        filter=keep(profile.filter),
        pre_score=keep(profile.pre_score),
        score=keep(profile.score),
    )


@SETTINGS
@given(worlds())
def test_without_requests_the_default_profile_decides_as_kubefleets_plugins(world: World) -> None:
    data = CycleInput(
        snapshot=world.snapshot,
        clusters=world.clusters,
        bindings=world.bindings,
        now=NOW,
        fresh=world.fresh,
    )
    assert schedule(data, default_profile()) == schedule(data, kubefleet_only())


amounts = st.integers(min_value=0, max_value=16)


@st.composite
def capacities(draw: st.DrawFn, world: World) -> CapacityInput:
    resources = draw(st.lists(st.sampled_from(["cpu", "memory", "gpu"]), unique=True, min_size=1))
    requests = ",".join(f"{r}={draw(st.integers(0, 4))}" for r in resources)
    allocated = {
        c.metadata.name: {r: str(draw(amounts)) for r in resources}
        for c in world.clusters
        if draw(st.booleans())
    }
    return CapacityInput(requests=requests, allocated=allocated)


def with_allocatable(world: World, data: st.DataObject) -> World:
    clusters = [
        c.model_copy(
            update={
                "status": c.status.model_copy(
                    update={
                        "resource_usage": c.status.resource_usage.model_copy(
                            update={
                                "allocatable": {
                                    r: str(data.draw(amounts))
                                    for r in data.draw(
                                        st.lists(
                                            st.sampled_from(["cpu", "memory", "gpu"]), unique=True
                                        )
                                    )
                                }
                            }
                        )
                    }
                )
            }
        )
        for c in world.clusters
    ]
    return dataclasses.replace(world, clusters=clusters)


@SETTINGS
@given(worlds(), st.data())
def test_batched_capacity_plugins_decide_exactly_as_per_cluster_ones(
    world: World, data: st.DataObject
) -> None:
    world = with_allocatable(world, data)
    capacity = data.draw(capacities(world))
    cycle = CycleInput(
        snapshot=world.snapshot,
        clusters=world.clusters,
        bindings=world.bindings,
        now=NOW,
        fresh=world.fresh,
        capacity=capacity,
    )
    batched = default_profile()
    assert schedule(cycle, batched) == schedule(cycle, per_cluster(batched))


@SETTINGS
@given(worlds(), st.data())
def test_new_bindings_only_go_where_they_fit(world: World, data: st.DataObject) -> None:
    world = with_allocatable(world, data)
    capacity = data.draw(capacities(world))
    result = world.run(capacity=capacity)
    if result.error is not None:
        return
    requests = {
        name: parse_quantity(q) for name, q in (e.split("=") for e in capacity.requests.split(","))
    }
    by_name = {c.metadata.name: c for c in world.clusters}
    for created in result.plan.create:
        cluster = by_name[created.spec.target_cluster]
        supply = cluster.status.resource_usage.allocatable
        held = capacity.allocated.get(cluster.metadata.name, {})
        for resource, amount in requests.items():
            if amount == 0:
                continue
            assert resource in supply
            used = parse_quantity(held.get(resource, "0")) + amount
            assert used <= parse_quantity(supply[resource])


def fleet(sizes: list[int]) -> list[MemberCluster]:
    return [
        member_cluster(f"m{i:02d}", NOW, allocatable={"cpu": str(size)})
        for i, size in enumerate(sizes)
    ]


@SETTINGS
@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=8),
    st.lists(
        st.tuples(st.sampled_from(["PickN", "PickAll"]), st.integers(1, 4), st.integers(1, 5)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["LeastAllocated", "MostAllocated"]),
)
def test_placements_in_turn_never_overcommit_and_report_what_is_short(
    sizes: list[int], placements: list[tuple[str, int, int]], strategy: str
) -> None:
    """The ledger's rule in miniature: each placement's cycle sees what earlier ones hold."""
    from scheduler import load_profile

    profile = load_profile(
        f"pluginConfig:\n  - name: ClusterResourcesFit\n"
        f"    args: {{scoringStrategy: {{type: {strategy}}}}}\n"
    )
    clusters = fleet(sizes)
    held: dict[str, Fraction] = {}
    for index, (kind, n, cpu) in enumerate(placements):
        name = f"p{index}"
        policy: dict[str, object] = {"placementType": kind}
        if kind == "PickN":
            policy["numberOfClusters"] = n
        snapshot = policy_snapshot(name, policy, index=1)
        allocated = {c: {"cpu": format_amount(a)} for c, a in held.items()}
        result = schedule(
            CycleInput(
                snapshot=snapshot,
                clusters=clusters,
                bindings=[],
                now=NOW,
                capacity=CapacityInput(requests=f"cpu={cpu}", allocated=allocated),
            ),
            profile,
        )
        assert result.error is None
        bindings, _ = apply_plan([], snapshot, result.plan)
        for binding in bindings:
            target = binding.spec.target_cluster
            held[target] = held.get(target, Fraction(0)) + cpu
        room = sum(1 for i, size in enumerate(sizes) if size - held.get(f"m{i:02d}", 0) >= 0)
        assert room == len(sizes)  # no cluster ever holds more than it reports
        placed = len(bindings)
        fits_left = sum(
            1
            for i, size in enumerate(sizes)
            if f"m{i:02d}" not in {b.spec.target_cluster for b in bindings}
            and size - held.get(f"m{i:02d}", 0) >= cpu
        )
        wanted = n if kind == "PickN" else len(sizes)
        shortage = result.explanation.shortage
        if placed < wanted and placed < len(sizes):
            # every cluster not taken lacked room (no other filter in this fleet)
            assert fits_left == 0
            assert shortage is not None
            assert shortage.unplaced == min(wanted, len(sizes)) - placed
            assert shortage.resources[0].missing == format_amount(Fraction(cpu * shortage.unplaced))
        else:
            assert shortage is None
        if kind == "PickN":
            status = result.plan.snapshot_status
            assert status is not None
            condition = status.status.condition(names.SCHEDULED_CONDITION)
            assert condition is not None
            assert (condition.status == names.TRUE) == (placed >= n)
