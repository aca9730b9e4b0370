"""Affinity enforced during execution (docs/enforcement.md), turn by turn against devhub: a
placement annotated `fleet-scheduler.io/affinity-enforcement: DuringExecution` loses the
bindings on clusters that stop passing its required filters (PickN moves them, PickAll
unschedules them, PickFixed keeps and reports them), within its disruption budget; the same
placement without the annotation keeps them, exactly as KubeFleet does."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.enforcement import RETRY_AFTER_SECONDS, TARGETS_TRIED
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    MemberCluster,
    Taint,
)
from scheduler import invariants
from scheduler.moves.budgets import moved_from
from tests.integration.activities.activity_helpers import (
    ENFORCED,
    PROD,
    Rig,
    active,
    add_cluster,
    add_placement,
    bindings_of,
    make_available,
    pick_n,
    relabel,
    turn,
    violations,
)

COUNTS: Final = {
    invariants.BINDING_COUNT,
    invariants.DUPLICATE_BINDING,
    invariants.DISRUPTION_BUDGET,
}


def taint(hub: HubClient, cluster: str, key: str, value: str) -> None:
    found = hub.get(MemberCluster, cluster)
    added = Taint(key=key, value=value, effect="NoSchedule")
    spec = found.spec.model_copy(update={"taints": [*found.spec.taints, added]})
    hub.update(found.model_copy(update={"spec": spec}))


def states(hub: HubClient, placement: str) -> dict[str, str]:
    return {b.spec.target_cluster: b.spec.state for b in bindings_of(hub, placement)}


def half_done_move(hub: HubClient, binding: str, source: str, target: str) -> None:
    """What an attempt that died between an enforcement move's two writes leaves: the new
    binding on `target` (made by the moves' own code), the old one on `source` still Bound."""
    from activities.moves import ENFORCEMENT, apply_moves
    from activities.turn.cycle import read_clusters
    from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot
    from workflows.models import MoveRequest

    placement = hub.get(ClusterResourcePlacement, "web")
    [snapshot] = hub.list(ClusterSchedulingPolicySnapshot).items
    half = MoveRequest(binding=binding, source=source, target=target, reason="x")
    made = apply_moves(
        hub, placement, snapshot, [half], read_clusters(hub), None, lambda: datetime.now(UTC),
        cause=ENFORCEMENT,
    )  # fmt: skip
    assert made.moved == 1, made.lines
    old = hub.get(ClusterResourceBinding, binding)
    spec = old.spec.model_copy(update={"state": names.STATE_BOUND})
    hub.update(old.model_copy(update={"spec": spec}))


def scheduled(
    hub: HubClient,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
    name: str,
    policy: dict[str, Any],
    annotations: Mapping[str, str],
) -> Rig:
    """The placement created and scheduled by its first turn; the worker's activities."""
    add_placement(hub, name, policy, annotations=annotations)
    rig = make_activities()
    turn(env, rig.activities, name)
    return rig


@pytest.fixture
def prod_fleet(hub: HubClient) -> list[str]:
    names_ = ["a", "b", "c"]
    for name in names_:
        add_cluster(hub, name, labels={"env": "prod"})
    return names_


def test_a_pick_n_binding_moves_off_a_relabelled_cluster_new_binding_first(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), ENFORCED)
    before = active(hub, "web")
    assert len(before) == 2
    lost = sorted(before)[0]
    [spare] = set(prod_fleet) - set(before)
    relabel(hub, lost, {"env": "retired"})

    result = turn(env, rig.activities, "web", 2)

    old = before[lost]
    assert result.moves == [
        f"moved {old.name} {lost} -> {spare} as {active(hub, 'web')[spare].name}: "
        "cluster lost env=prod"
    ]
    assert states(hub, "web")[lost] == names.STATE_UNSCHEDULED
    assert set(active(hub, "web")) == (set(before) - {lost}) | {spare}
    assert moved_from(active(hub, "web")[spare]) == old.name
    assert result.report is not None and result.report.fulfilled
    assert violations(hub, COUNTS) == []
    # Done once: the next turn finds nothing lost and writes nothing.
    again = turn(env, rig.activities, "web", 3)
    assert again.moves == []
    assert len(bindings_of(hub, "web")) == 3


def test_without_the_annotation_a_relabelled_cluster_keeps_its_binding_as_in_kubefleet(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(hub, "web", pick_n(2))
    add_placement(hub, "all", PROD)
    rig = make_activities()
    turn(env, rig.activities, "web")
    turn(env, rig.activities, "all")
    before = {p: bindings_of(hub, p) for p in ("web", "all")}
    for cluster in prod_fleet:
        relabel(hub, cluster, {"env": "retired"})

    for placement in ("web", "all"):
        result = turn(env, rig.activities, placement, 2)
        assert result.moves == []
        assert bindings_of(hub, placement) == before[placement]  # not one write


def test_a_pick_all_binding_on_a_tainted_cluster_is_unscheduled(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = scheduled(hub, make_activities, env, "all", PROD, ENFORCED)
    assert sorted(active(hub, "all")) == prod_fleet
    binding = active(hub, "all")["b"]
    taint(hub, "b", "fleet.example.com/maintenance", "true")

    result = turn(env, rig.activities, "all", 2)

    assert result.moves == [
        f"unscheduled {binding.name} on b: cluster has taint "
        "fleet.example.com/maintenance=true:NoSchedule, which the placement does not tolerate"
    ]
    assert states(hub, "all") == {
        "a": names.STATE_SCHEDULED,
        "b": names.STATE_UNSCHEDULED,
        "c": names.STATE_SCHEDULED,
    }
    assert turn(env, rig.activities, "all", 3).moves == []
    assert states(hub, "all")["b"] == names.STATE_UNSCHEDULED  # the cycle does not revive it


def test_a_pick_fixed_binding_is_kept_and_reported(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(
        hub, "pinned", {"placementType": "PickFixed", "clusterNames": ["a"]}, annotations=ENFORCED
    )
    rig = make_activities()
    turn(env, rig.activities, "pinned")
    [binding] = bindings_of(hub, "pinned")
    taint(hub, "a", "gpu", "true")

    result = turn(env, rig.activities, "pinned", 2)

    assert result.moves == [
        f"kept {binding.name} on a (a PickFixed placement keeps its targets): cluster has taint "
        "gpu=true:NoSchedule, which the placement does not tolerate"
    ]
    assert bindings_of(hub, "pinned") == [binding]


def test_the_disruption_budget_holds_a_move_back_and_the_turn_asks_to_try_again(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), ENFORCED)
    for binding in bindings_of(hub, "web"):
        make_available(hub, binding)
    hub.create(
        ClusterResourcePlacementDisruptionBudget.from_wire(
            {"metadata": {"name": "web"}, "spec": {"minAvailable": 2}}
        )
    )
    before = bindings_of(hub, "web")
    lost = before[0].spec.target_cluster
    relabel(hub, lost, {"env": "retired"})

    result = turn(env, rig.activities, "web", 2)

    [line] = result.moves
    assert line.startswith(f"refused {before[0].name} {lost} -> ")
    assert "the disruption budget allows 0 move(s) now (minAvailable 2, 2 of 2" in line
    assert [b.name for b in bindings_of(hub, "web")] == [b.name for b in before]
    assert result.report is not None
    assert result.report.requeue_after_seconds == RETRY_AFTER_SECONDS
    assert violations(hub, COUNTS) == []


def test_a_binding_with_nowhere_to_go_is_kept_said_and_moved_once_a_cluster_passes(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """No other cluster passes: the binding is kept and the turn says so, with no timer (a poll).
    The cluster change that gives it somewhere to go, c relabelled env=prod, reaches the
    placement although it holds nothing on c (the watcher's routes over what the hub holds),
    and the turn it causes moves the binding."""
    for name in ("a", "b"):
        add_cluster(hub, name, labels={"env": "prod"})
    add_cluster(hub, "c", labels={"env": "dev"})
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), ENFORCED)
    binding = active(hub, "web")["a"]
    relabel(hub, "a", {"env": "retired", "team": "x"})

    result = turn(env, rig.activities, "web", 2)

    assert result.moves == [
        f"kept {binding.name} on a: cluster lost env=prod; no other cluster passes the "
        "placement's filters"
    ]
    assert result.report is not None and result.report.requeue_after_seconds is None

    old = hub.get(MemberCluster, "c")
    relabel(hub, "c", {"env": "prod"})
    assert "web" in routed(hub, old, hub.get(MemberCluster, "c"))

    moved = turn(env, rig.activities, "web", 3)

    new = active(hub, "web")["c"]
    assert set(active(hub, "web")) == {"b", "c"}
    assert moved.moves == [f"moved {binding.name} a -> c as {new.name}: cluster lost env=prod"]
    assert violations(hub, COUNTS) == []


def routed(hub: HubClient, old: MemberCluster, new: MemberCluster) -> list[str]:
    """The placements the watcher's routes send a cluster's change to, over what the hub holds
    (its caches, in sync)."""
    from control.routes import Room, route_change
    from control.views import Change
    from scheduler import default_profile
    from scheduler.clusters.eligibility import EligibilityChecker

    placements = {p.name: p for p in hub.list(ClusterResourcePlacement).items}
    room = Room(
        clusters={c.name: c for c in hub.list(MemberCluster).items},
        ledgers={},
        bindings=hub.list(ClusterResourceBinding).items,
    )
    found = route_change(
        Change("MODIFIED", old, new), placements=placements, standalone=True,
        checker=EligibilityChecker(), now=datetime.now(UTC), room=room, profile=default_profile(),
    )  # fmt: skip
    return [r.placement for r in found]


def test_a_retried_turn_finishes_the_half_done_move_onto_the_same_target(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    """An earlier attempt created the new binding on `spare` and died before unscheduling the
    old one. The retry must not pick yet another cluster: it finishes that move."""
    add_cluster(hub, "d", labels={"env": "prod"})
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), ENFORCED)
    before = active(hub, "web")
    lost = sorted(before)[0]
    relabel(hub, lost, {"env": "retired"})
    # the earlier attempt's create: the least preferred spare (the retry would pick the other)
    spare = sorted({*prod_fleet, "d"} - set(before))[0]
    half_done_move(hub, before[lost].name, lost, spare)

    result = turn(env, rig.activities, "web", 2)

    assert len(result.moves) == 1 and f"-> {spare} as" in result.moves[0], result.moves
    assert set(active(hub, "web")) == (set(before) - {lost}) | {spare}
    assert len(bindings_of(hub, "web")) == 3
    assert violations(hub, COUNTS) == []


def test_an_unknown_annotation_value_is_said_and_enforces_nothing(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(
        hub, "web", pick_n(2), annotations={names.AFFINITY_ENFORCEMENT_ANNOTATION: "Always"}
    )
    rig = make_activities()
    turn(env, rig.activities, "web")
    before = bindings_of(hub, "web")
    relabel(hub, before[0].spec.target_cluster, {"env": "retired"})
    result = turn(env, rig.activities, "web", 2)
    assert result.moves == [
        "annotation fleet-scheduler.io/affinity-enforcement: affinity enforcement 'Always' is "
        "neither 'DuringExecution' nor 'IgnoredDuringExecution': write one of them (affinity "
        "is not enforced during execution until then)"
    ]
    assert bindings_of(hub, "web") == before


def test_huge_bad_values_cross_temporal_bounded_and_are_said_on_the_condition(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    """Issue 33, findings 1 and 6: two 120 KB values were copied whole into every turn's result
    (the enforcement problem quoted the value twice, PrepareResult carried the raw deadline),
    0.36 MB of history per turn; a zero-padded deadline (legal: 1s) raised a bare ValueError.
    Now the turn carries the parsed deadline or a stand-in, every problem quotes at most 40
    characters, and the placement's Scheduled condition says what is wrong."""
    huge = "x" * 120_000
    add_placement(
        hub,
        "web",
        pick_n(2),
        annotations={
            names.AFFINITY_ENFORCEMENT_ANNOTATION: huge,
            names.SCHEDULE_DEADLINE_ANNOTATION: "9" * 120_000 + "s",
        },
    )
    padded = {names.SCHEDULE_DEADLINE_ANNOTATION: "0" * 5000 + "1s"}
    add_placement(hub, "padded", pick_n(1), annotations=padded)
    rig = make_activities()
    result = turn(env, rig.activities, "web")
    payload = result.model_dump_json()
    assert len(payload) < 20_000, len(payload)
    assert "x" * 41 not in payload and "9" * 41 not in payload
    prepared = result.prepared
    assert prepared.schedule_deadline is not None
    assert prepared.schedule_deadline.startswith("invalid:")
    assert prepared.schedule_deadline_problem is not None
    assert "must be between 1s and" in prepared.schedule_deadline_problem
    placement = hub.get(ClusterResourcePlacement, "web")
    condition = placement.status.condition(placement.SCHEDULED_CONDITION)
    assert condition is not None
    assert f"annotation {names.AFFINITY_ENFORCEMENT_ANNOTATION}: affinity enforcement" in (
        condition.message
    )
    assert f"annotation {names.SCHEDULE_DEADLINE_ANNOTATION}: schedule deadline" in (
        condition.message
    )
    assert "x" * 41 not in condition.message and "9" * 41 not in condition.message
    assert turn(env, rig.activities, "padded").prepared.schedule_deadline == "1s"

    # Fixed annotations: the next turn's condition is KubeFleet's own again.
    fixed = hub.get(ClusterResourcePlacement, "web")
    meta = fixed.metadata.model_copy(update={"annotations": {}})
    hub.update(fixed.model_copy(update={"metadata": meta}))
    turn(env, rig.activities, "web", 2)
    placement = hub.get(ClusterResourcePlacement, "web")
    condition = placement.status.condition(placement.SCHEDULED_CONDITION)
    assert condition is not None and names.OWN_PREFIX not in condition.message


# --- breaking it (review of issue 27) ---------------------------------------------------------


def test_a_move_whose_old_binding_write_failed_and_whose_cluster_came_back_leaves_n(
    hub: HubClient,
    devhub: DevHub,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    """The turn dies between the move's two writes (the old binding's Unscheduled patch fails);
    before the retry the cluster is labelled env=prod again. The retry judges nothing lost, so
    the half-done move's new binding is the placement's N+1st: the turn must leave N."""
    add_cluster(hub, "d", labels={"env": "prod"})
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), ENFORCED)
    for binding in active(hub, "web").values():
        make_available(hub, binding)
    before = active(hub, "web")
    lost = sorted(before)[0]
    relabel(hub, lost, {"env": "retired"})
    devhub.faults.inject(verb="patch", resource="clusterresourcebindings", status=500, count=1)
    with pytest.raises(ApplicationError):
        turn(env, rig.activities, "web", 2)
    devhub.faults.clear()
    assert len(active(hub, "web")) == 3  # half done: the new binding, the old one still active
    relabel(hub, lost, {"env": "prod"})

    retried = turn(env, rig.activities, "web", 2)

    assert len(active(hub, "web")) == 2, (retried.moves, states(hub, "web"))
    assert violations(hub, COUNTS) == []


def test_scaled_down_while_a_binding_is_lost_moves_nothing_it_then_drops(
    hub: HubClient,
    prod_fleet: list[str],
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    """PickN 2 -> 1 while one of its two clusters is lost: the lost binding is the one to go.
    Moving it (a new binding on a third cluster) only for the cycle to scale that away is a
    binding created for nothing, and a disruption of the kept one if the cycle trims it."""
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), ENFORCED)
    for binding in active(hub, "web").values():
        make_available(hub, binding)
    before = active(hub, "web")
    lost = sorted(before)[0]
    kept = sorted(before)[1]
    relabel(hub, lost, {"env": "retired"})
    placement = hub.get(ClusterResourcePlacement, "web")
    policy = placement.spec.policy
    assert policy is not None
    spec = placement.spec.model_copy(
        update={"policy": policy.model_copy(update={"number_of_clusters": 1})}
    )
    hub.update(placement.model_copy(update={"spec": spec}))

    result = turn(env, rig.activities, "web", 2)

    assert set(active(hub, "web")) == {kept}, (result.moves, states(hub, "web"))
    assert len(bindings_of(hub, "web")) == 2, (result.moves, states(hub, "web"))
    assert violations(hub, COUNTS) == []


def test_a_rebalance_move_of_a_binding_enforcement_is_moving_is_refused(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """An enforcement move half done (new binding on `spare`, the lost one still active) and a
    rebalance proposal for the same binding to another cluster, in one turn: the proposal is
    refused, enforcement finishes its own move, and the placement never holds N+1."""
    from workflows.models import MoveRequest, TurnRequest

    for name in ("a", "b", "c", "d"):
        add_cluster(hub, name, labels={"env": "prod"}, allocatable={"cpu": "8", "memory": "8Gi"})
    requests = {names.REQUESTS_ANNOTATION: "cpu=1", **ENFORCED}
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), requests)
    before = active(hub, "web")
    lost = sorted(before)[0]
    spare, other = sorted({"a", "b", "c", "d"} - set(before))
    relabel(hub, lost, {"env": "retired"})
    half_done_move(hub, before[lost].name, lost, spare)
    old = hub.get(ClusterResourceBinding, before[lost].name)
    proposal = MoveRequest(binding=old.name, source=lost, target=other, reason="pack: test")

    result = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="test", moves=[proposal]),
    )

    assert result.moves[0] == (
        f"refused {old.name} {lost} -> {other}: another move of the binding is under way "
        f"(to {spare})"
    )
    assert len(result.moves) == 2 and f"-> {spare} as" in result.moves[1], result.moves
    assert set(active(hub, "web")) == (set(before) - {lost}) | {spare}
    assert other not in states(hub, "web")
    assert violations(hub, COUNTS) == []


def test_a_capacity_aware_move_tries_the_next_target_when_the_first_has_no_room(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The targets are ranked without room (scheduler.moves.enforcement.replacement_order): c, the
    larger name, comes first but has 2 CPUs for a binding asking 4. The turn tries the next
    target, a, instead of trying c again every 30 s (docs/enforcement.md)."""
    for name, cpu in (("a", "8"), ("b", "8"), ("c", "2")):
        add_cluster(hub, name, labels={"env": "prod"}, allocatable={"cpu": cpu})
    aware = {**ENFORCED, names.REQUESTS_ANNOTATION: "cpu=4"}
    rig = scheduled(hub, make_activities, env, "web", pick_n(1), aware)
    [lost] = active(hub, "web")
    assert lost == "b"  # the larger name of those with room
    old = active(hub, "web")["b"]
    relabel(hub, "b", {"env": "retired"})

    result = turn(env, rig.activities, "web", 2)

    assert set(active(hub, "web")) == {"a"}, result.moves
    new = active(hub, "web")["a"]
    assert moved_from(new) == old.name
    assert result.moves[-1] == f"moved {old.name} b -> a as {new.name}: cluster lost env=prod"
    [refused] = result.moves[:-1]
    assert refused.startswith(f"refused {old.name}: cluster 'c' has no room for binding"), refused
    assert result.report is not None and result.report.requeue_after_seconds is None
    assert violations(hub, {*COUNTS, invariants.RESERVATION}) == []


def test_targets_without_room_are_tried_a_bounded_number_of_times_then_again_later(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Every other cluster that passes is too small: the turn tries TARGETS_TRIED of them, keeps
    the binding, and asks to be run again (room may be freed; no event of ours says so)."""
    add_cluster(hub, "a", labels={"env": "prod"}, allocatable={"cpu": "8"})
    small = [f"s{i}" for i in range(TARGETS_TRIED + 2)]
    for name in small:
        add_cluster(hub, name, labels={"env": "prod"}, allocatable={"cpu": "2"})
    aware = {**ENFORCED, names.REQUESTS_ANNOTATION: "cpu=4"}
    rig = scheduled(hub, make_activities, env, "web", pick_n(1), aware)
    before = active(hub, "web")
    assert set(before) == {"a"}
    relabel(hub, "a", {"env": "retired"})

    result = turn(env, rig.activities, "web", 2)

    assert len(result.moves) == TARGETS_TRIED, result.moves
    assert all(" has no room for binding " in line for line in result.moves), result.moves
    assert active(hub, "web") == before
    assert result.report is not None
    assert result.report.requeue_after_seconds == RETRY_AFTER_SECONDS
    assert violations(hub, {*COUNTS, invariants.RESERVATION}) == []


@pytest.mark.parametrize("requests", [None, "cpu=4"], ids=["plain", "capacity-aware"])
def test_a_lost_binding_moves_back_onto_a_cluster_it_once_left_by_reviving_that_binding(
    hub: HubClient,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
    requests: str | None,
) -> None:
    """A binding moved off x leaves an Unscheduled one there, which nothing removes standalone
    (no KubeFleet rollout). x passes again, then y is relabelled: x is the only cluster the lost
    binding may go to. Before, the turn kept it on y for ever, saying 'no other cluster passes
    the placement's filters', since a move never adds a second binding on a cluster; now the
    move revives x's binding (as a cycle would) and then unschedules y's, as a new binding."""
    room = {"cpu": "8"} if requests is not None else None
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster, labels={"env": "prod"}, allocatable=room)
    annotations = dict(ENFORCED)
    if requests is not None:
        annotations[names.REQUESTS_ANNOTATION] = requests
    rig = scheduled(hub, make_activities, env, "web", pick_n(2), annotations)
    x, y = sorted(active(hub, "web"))
    relabel(hub, x, {"env": "retired"})
    turn(env, rig.activities, "web", 2)
    stale = {b.spec.target_cluster: b for b in bindings_of(hub, "web")}[x]
    assert stale.spec.state == names.STATE_UNSCHEDULED
    relabel(hub, x, {"env": "prod"})
    turn(env, rig.activities, "web", 3)
    lost = active(hub, "web")[y]
    relabel(hub, y, {"env": "retired"})

    result = turn(env, rig.activities, "web", 4)

    revived = active(hub, "web").get(x)
    assert revived is not None and revived.name == stale.name, result.moves
    assert result.moves == [f"moved {lost.name} {y} -> {x} as {stale.name}: cluster lost env=prod"]
    assert revived.spec.state == names.STATE_SCHEDULED
    assert moved_from(revived) == lost.name
    assert names.PREVIOUS_BINDING_STATE_ANNOTATION not in revived.metadata.annotations
    assert states(hub, "web")[y] == names.STATE_UNSCHEDULED
    assert len(active(hub, "web")) == 2
    assert result.report is not None and result.report.fulfilled
    assert violations(hub, {*COUNTS, invariants.RESERVATION}) == []
    # Done once: the next turn finds nothing lost and writes nothing.
    assert turn(env, rig.activities, "web", 5).moves == []
