"""Invariants of whole cycles with the real default profile, over generated fleets.

Each example is a small world (tests/property/worlds.py): member clusters (some ineligible,
tainted, leaving), a policy of any placement type with affinity, a property sorter, topology
spread and tolerations, and existing bindings in every state (current, obsolete, unscheduled,
deleting, dangling). Plans are applied with `scheduler.testing.apply_plan`, the same rules the
hub enforces."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from hub import names
from hub.types import ClusterResourceBinding, ClusterSchedulingPolicySnapshot
from scheduler import CycleInput, default_profile, schedule
from scheduler.bindings import published
from scheduler.clusters import facts
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.testing import apply_plan
from tests.property.worlds import LATEST, NOW, SETTINGS, World, per_cluster, worlds

CHECKER = EligibilityChecker()


def current(bindings: list[ClusterResourceBinding]) -> list[ClusterResourceBinding]:
    return [
        b
        for b in bindings
        if b.spec.scheduling_policy_snapshot_name == LATEST
        and b.spec.state in (names.STATE_SCHEDULED, names.STATE_BOUND)
        and b.metadata.deletion_timestamp is None
    ]


def converge(world: World) -> tuple[list[ClusterResourceBinding], ClusterSchedulingPolicySnapshot]:
    bindings, snapshot = world.bindings, world.snapshot
    fresh = world.fresh
    for _ in range(20):
        result = schedule(
            CycleInput(
                snapshot=snapshot, clusters=world.clusters, bindings=bindings, now=NOW, fresh=fresh
            ),
            default_profile(),
        )
        assert result.error is None, result.error
        bindings, snapshot = apply_plan(bindings, snapshot, result.plan)
        fresh = False  # fresh applies to one cycle; requeued follow-ups are ordinary
        if not result.requeue:
            return bindings, snapshot
    raise AssertionError("no fixpoint after 20 cycles")


@SETTINGS
@given(worlds(names.PICK_N))
def test_pick_n_never_leaves_more_than_n_bindings_selected(world: World) -> None:
    n = int(world.snapshot.metadata.annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION])
    result = world.run()
    assert result.error is None, result.error
    after, _ = apply_plan(world.bindings, world.snapshot, result.plan)
    assert len(current(after)) <= max(n, 0)
    final, _ = converge(world)
    assert len(current(final)) <= n


@SETTINGS
@given(worlds())
def test_a_cycle_after_the_last_one_changes_nothing(world: World) -> None:
    bindings, snapshot = converge(world)
    calm = World(snapshot, world.clusters, bindings, fresh=False)
    again = calm.run()
    assert again.plan.binding_writes == 0, again.plan
    assert not again.requeue
    # PickN's steady branch may rewrite the status once with only the selected decisions
    # (KubeFleet: "only the known facts"); after that, nothing at all.
    bindings, snapshot = apply_plan(bindings, snapshot, again.plan)
    assert World(snapshot, world.clusters, bindings, fresh=False).run().plan.is_empty


@SETTINGS
@given(worlds(), st.randoms(use_true_random=False))
def test_input_order_does_not_change_the_result(world: World, rng: random.Random) -> None:
    expected = world.run()
    clusters, bindings = list(world.clusters), list(world.bindings)
    rng.shuffle(clusters)
    rng.shuffle(bindings)
    assert world.run(clusters=clusters, bindings=bindings) == expected


@SETTINGS
@given(worlds(names.PICK_N))
def test_pick_n_keeps_current_bindings_on_eligible_clusters_when_n_allows(world: World) -> None:
    present = len(current(world.bindings))
    n = int(world.snapshot.metadata.annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION])
    if world.fresh or n < present:
        return
    alive = {c.metadata.name for c in world.clusters if CHECKER.check(c, NOW) is None}
    keep = {b.metadata.name for b in current(world.bindings) if b.spec.target_cluster in alive}
    result = world.run()
    touched = {
        p.name
        for p in [*result.plan.unschedule, *result.plan.unschedule_dangling, *result.plan.patch]
    }
    assert not keep & touched


@SETTINGS
@given(worlds())
def test_ineligible_clusters_are_never_newly_picked(world: World) -> None:
    ineligible = {c.metadata.name for c in world.clusters if CHECKER.check(c, NOW) is not None}
    result = world.run()
    by_name = {b.metadata.name: b for b in world.bindings}
    newly = [b.spec.target_cluster for b in result.plan.create]
    newly += [by_name[p.name].spec.target_cluster for p in result.plan.patch]
    assert not ineligible & set(newly)


@SETTINGS
@given(worlds())
def test_batched_plugins_decide_exactly_as_per_cluster_ones(world: World) -> None:
    """The built-in plugins' filter_all/score_all are a faster path to the same fates, scores,
    reasons and explanation as their per-cluster methods."""
    batched = default_profile()
    assert all(hasattr(p, "filter_all") for p in batched.filter)
    assert all(hasattr(p, "score_all") for p in batched.score)
    data = CycleInput(
        snapshot=world.snapshot,
        clusters=world.clusters,
        bindings=world.bindings,
        now=NOW,
        fresh=world.fresh,
    )
    assert schedule(data, batched) == schedule(data, per_cluster(batched))


@SETTINGS
@given(worlds())
def test_a_cycle_decides_the_same_with_a_cold_or_warm_facts_cache(world: World) -> None:
    facts.forget()
    cold = world.run()
    assert world.run() == cold


@SETTINGS
@given(worlds())
def test_the_decisions_a_turn_publishes_are_the_bindings_its_plan_leaves(world: World) -> None:
    """PlacementDecisions (docs/decisions.md) are predicted from the plan, not read back: the
    prediction must be what the hub holds once the plan has been applied."""
    result = world.run()
    assert result.error is None, result.error
    after, _ = apply_plan(world.bindings, world.snapshot, result.plan)
    assert published.active_after(world.bindings, result.plan) == published.active_decisions(
        after
    )
