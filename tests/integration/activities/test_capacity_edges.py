"""Where the invariants' promises met a review that tried to break them (issue 24): a retried
turn after a finished move, the budget read as KubeFleet reads it, a move in flight only while
its old binding is there, binding names made again, a deleted ledger, a sweep racing a
declaration, a placement dropping its requests. Each failed before its fix."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.capacity import release_placement, requests_of, sweep_ledgers
from control.views import Change
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    Reservation,
)
from scheduler.invariants import DISRUPTION_BUDGET, OVERCOMMIT, RESERVATION, STRANDED_SHORTAGE
from scheduler.moves.budgets import moved_bindings, moved_from
from tests.integration.activities.activity_helpers import (
    Rig,
    add_budget,
    add_cluster,
    add_placement,
    bindings_of,
    make_available,
    placement_condition,
    routes_for,
    turn,
    violations,
)
from workflows.models import MoveRequest, TurnRequest

CLUSTERS = ("a", "b", "c", "d", "e", "f")


def _web_on(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment, picks: int = 3
) -> tuple[Rig, list[ClusterResourceBinding]]:
    """Six clusters of 8 CPUs; `web` (PickN `picks`, cpu=4) scheduled, its bindings available
    (as a rollout reports them)."""
    for name in CLUSTERS:
        add_cluster(hub, name, allocatable={"cpu": "8"})
    add_placement(
        hub,
        "web",
        {"placementType": "PickN", "numberOfClusters": picks},
        annotations={names.REQUESTS_ANNOTATION: "cpu=4"},
    )
    rig = make_activities(on=hub)
    turn(env, rig.activities, "web")
    return rig, [make_available(hub, b) for b in bindings_of(hub, "web")]


def _budget_violations(hub: HubClient) -> list[str]:
    return violations(hub, {DISRUPTION_BUDGET})


def test_a_retried_turn_after_a_finished_move_respects_max_unavailable(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """PickN 3, maxUnavailable 2, all three available. KubeFleet's arithmetic move by move:
    move 1 allowed (2 - 0 = 2), then 4 bindings / 2 available: 2 - 2 = 0, move 2 refused.
    Attempt 1 finishes move 1 and fails on move 2's reservation (hub 500); the retry must
    still refuse move 2."""
    rig, originals = _web_on(hub, make_activities, env)
    assert len(originals) == 3
    add_budget(hub, "web", maxUnavailable=2)
    free = sorted(set(CLUSTERS) - {b.spec.target_cluster for b in originals})
    moves = [
        MoveRequest(binding=b.name, source=b.spec.target_cluster, target=t, reason=f"pack: {i}")
        for i, (b, t) in enumerate(zip(originals[:2], free[:2], strict=True))
    ]
    # Attempt 1: move 1's reservation (a ledger create), new binding, old one unscheduled, then
    # the release of the old one's room (the first ledger update) fails: the activity fails.
    devhub.faults.inject(verb="update", resource="capacityledgers", status=500, count=1)
    request = TurnRequest(placement="web", cycle=2, reason="rebalance", moves=moves)
    with pytest.raises(ApplicationError, match="500"):  # the activity fails: Temporal retries
        env.run(rig.activities.schedule_once, request)
    devhub.faults.clear()
    retried = env.run(rig.activities.schedule_once, request)
    assert retried.moves[0].endswith("(finished by an earlier attempt)"), retried.moves
    assert retried.moves[1].startswith(f"refused {moves[1].binding}"), retried.moves
    assert _budget_violations(hub) == []


def _remove(hub: HubClient, binding: ClusterResourceBinding) -> None:
    """What KubeFleet's rollout does with an Unscheduled binding once its work is gone."""
    current = hub.get(ClusterResourceBinding, binding.name)
    hub.patch(
        ClusterResourceBinding,
        binding.name,
        {"metadata": {"finalizers": []}},
        resource_version=current.metadata.resource_version,
    )
    hub.delete(ClusterResourceBinding, binding.name)


def test_check_agrees_with_the_turn_on_a_move_made_after_the_rollout_removed_an_old_binding(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """PickN 3, maxUnavailable 2. Turn 1 moves a -> x (allowed: 2). The rollout removes a; x is
    not Available yet. Turn 2 moves b -> y: the turn's arithmetic on (b, c, x) allows 2 - 1 = 1,
    so it is made. `check` must not call what the turn did by the documented rule a violation
    (or the turn must not make it)."""
    rig, originals = _web_on(hub, make_activities, env)
    add_budget(hub, "web", maxUnavailable=2)
    free = sorted(set(CLUSTERS) - {b.spec.target_cluster for b in originals})
    m1 = MoveRequest(
        binding=originals[0].name,
        source=originals[0].spec.target_cluster,
        target=free[0],
        reason="pack: 1",
    )
    r1 = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="rebalance", moves=[m1]),
    )
    assert r1.moves[0].startswith("moved"), r1.moves
    _remove(hub, originals[0])
    m2 = MoveRequest(
        binding=originals[1].name,
        source=originals[1].spec.target_cluster,
        target=free[1],
        reason="pack: 2",
    )
    r2 = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=3, reason="rebalance", moves=[m2]),
    )
    assert r2.moves[0].startswith("moved"), r2.moves  # (b, c, x): 2 - 1 = 1 allowed
    assert _budget_violations(hub) == []  # and check reads it as the turn did


def test_a_budget_the_hub_accepted_never_fails_a_turn_or_the_check(
    ruleless_hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """A hub whose budget CRD lacks KubeFleet's rule holds `maxUnavailable: "1"` (a string, no
    percentage). KubeFleet's eviction reads it as 0 (it ignores the parse error): the move is
    refused, the turn does not fail, and check reads it the same way."""
    hub = ruleless_hub
    rig, [old] = _web_on(hub, make_activities, env, picks=1)
    add_budget(hub, "web", maxUnavailable="1")
    target = sorted(set(CLUSTERS) - {old.spec.target_cluster})[0]
    move = MoveRequest(binding=old.name, source=old.spec.target_cluster, target=target, reason="x")
    result = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="rebalance", moves=[move]),
    )
    assert result.moves == [
        f"refused {old.name} {old.spec.target_cluster} -> {target}: the disruption budget "
        "allows 0 move(s) now (maxUnavailable 1, 1 of 1 binding(s) available)"
    ]
    assert _budget_violations(hub) == []


def test_a_finished_move_is_not_in_flight_again_when_its_binding_later_becomes_unavailable(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """A move finished long ago (its new binding became Available, its old one was removed by
    the rollout). Later the placement gets a budget, and its binding is unavailable for a while
    (a rollout re-points it, the member agent reports a failed apply). No move is in flight:
    check must not report the budget broken by one."""
    for name in CLUSTERS:
        add_cluster(hub, name, allocatable={"cpu": "8"})
    add_placement(
        hub,
        "web",
        {"placementType": "PickN", "numberOfClusters": 1},
        annotations={names.REQUESTS_ANNOTATION: "cpu=4"},
    )
    rig = make_activities()
    turn(env, rig.activities, "web")
    [old] = [make_available(hub, b) for b in bindings_of(hub, "web")]
    target = sorted(set(CLUSTERS) - {old.spec.target_cluster})[0]
    move = MoveRequest(binding=old.name, source=old.spec.target_cluster, target=target, reason="x")
    r = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="rebalance", moves=[move]),
    )
    assert r.moves[0].startswith("moved"), r.moves
    [new] = [b for b in bindings_of(hub, "web") if b.spec.target_cluster == target]
    new = make_available(hub, new)
    _remove(hub, old)
    assert _budget_violations(hub) == []
    add_budget(hub, "web", minAvailable=1)
    # the member agent reports the work failed to become available
    cond = {**new.status["conditions"][0], "status": "False", "reason": "NotAvailableYet"}
    hub.update_status(new.model_copy(update={"status": {**new.status, "conditions": [cond]}}))
    assert _budget_violations(hub) == []


def test_a_deleted_ledger_does_not_send_waiters_into_the_holders_room(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Cluster a (cpu 8) holds web's binding (cpu=6, reserved). waiter (cpu=6) is short. The
    ledger of a is deleted (kubectl delete, a CRD reinstall). No room was freed: web's binding
    still runs there. The watcher must not wake waiter as for freed room, or waiter's turn (it
    may well run first: best priority first) takes the room web's turn is about to re-reserve,
    and the cluster is overcommitted."""
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(
        hub,
        "web",
        {"placementType": "PickN", "numberOfClusters": 1},
        annotations={names.REQUESTS_ANNOTATION: "cpu=6"},
    )
    rig = make_activities()
    turn(env, rig.activities, "web")
    add_placement(
        hub,
        "waiter",
        {"placementType": "PickN", "numberOfClusters": 1},
        annotations={names.REQUESTS_ANNOTATION: "cpu=6"},
    )
    turn(env, rig.activities, "waiter")
    assert bindings_of(hub, "waiter") == []
    ledger = hub.get(CapacityLedger, "a")
    hub.delete(CapacityLedger, "a")
    routes = routes_for(hub, Change("DELETED", ledger, ledger), ledgers={})
    assert routes == [
        ("web", "cluster a: its capacity ledger was deleted; reservations are made again")
    ]
    turn(env, rig.activities, "web", 5)  # the routed turn makes its reservation again
    turn(env, rig.activities, "waiter", 5)  # a later turn of waiter finds no room
    over = violations(hub, {OVERCOMMIT})
    assert over == []
    assert bindings_of(hub, "waiter") == []


def test_the_reconcile_sweep_keeps_a_reservation_its_placement_declared_again_meanwhile(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The reconcile reads the hub (T0), acts (signals, requeues: seconds at scale), then sweeps
    with what it read at T0. web dropped its requests annotation just before T0 and declares it
    again just after; its turn finds its (old, right) reservation and writes nothing. The sweep
    then releases it as 'its placement is no longer capacity-aware', web's running binding is
    no longer counted, nothing wakes web, and the next placement overcommits the cluster."""

    add_cluster(hub, "a", allocatable={"cpu": "8"})
    one = {"placementType": "PickN", "numberOfClusters": 1}
    add_placement(hub, "web", one, annotations={names.REQUESTS_ANNOTATION: "cpu=4"})
    rig = make_activities()
    turn(env, rig.activities, "web")
    [binding] = bindings_of(hub, "web")
    ledger = hub.get(CapacityLedger, "a")  # steady state: the reservation is old
    old = Reservation(
        placement="web", requests={"cpu": "4"}, reserved_at=datetime.now(UTC) - timedelta(hours=1)
    )
    hub.update(
        ledger.model_copy(update={"spec": CapacityLedgerSpec(reservations={binding.name: old})})
    )

    hub.patch(
        ClusterResourcePlacement,
        "web",
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: None}}},
    )
    t0_placements = hub.list(ClusterResourcePlacement).items  # the reconcile's read
    t0_bindings = hub.list(ClusterResourceBinding).items
    hub.patch(
        ClusterResourcePlacement,
        "web",
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: "cpu=4"}}},
    )
    turn(env, rig.activities, "web", 2)  # the watcher routes the annotation change: a turn
    aware = {p.name for p in t0_placements if requests_of(p) is not None}
    assert sweep_ledgers(hub, aware, t0_bindings, datetime.now(UTC)) == 0
    add_placement(hub, "other", one, annotations={names.REQUESTS_ANNOTATION: "cpu=8"})
    turn(env, rig.activities, "other")
    found = violations(hub, {OVERCOMMIT, RESERVATION})
    assert found == []


def test_a_placement_that_drops_its_requests_is_routed_as_kubefleet_routes_it(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """`old` keeps its binding beyond the room (declared cpu=6 late on a full cluster), then drops
    the annotation: it is a placement without fleet-scheduler.io annotations again. Its
    condition must stop saying "kept beyond the room", and the watcher must not route it on
    ledger events (KubeFleet parity: it knows nothing of ledgers)."""

    one = {"placementType": "PickN", "numberOfClusters": 1}
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(hub, "old", one)
    add_placement(hub, "new", one, annotations={names.REQUESTS_ANNOTATION: "cpu=6"})
    rig = make_activities()
    turn(env, rig.activities, "old")
    turn(env, rig.activities, "new")
    hub.patch(
        ClusterResourcePlacement,
        "old",
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: "cpu=6"}}},
    )
    turn(env, rig.activities, "old", 2)
    kept = placement_condition(hub, "old")
    assert kept is not None and "kept beyond the room" in kept.message
    hub.patch(
        ClusterResourcePlacement,
        "old",
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: None}}},
    )
    turn(env, rig.activities, "old", 3)  # the watcher routes the annotation change
    dropped = placement_condition(hub, "old")
    assert dropped is not None
    message = dropped.message
    # room is freed on a: `new` goes away
    before = hub.get(CapacityLedger, "a")
    hub.delete(ClusterResourcePlacement, "new")

    release_placement(hub, "new")
    after = hub.get(CapacityLedger, "a")
    routes = routes_for(hub, Change("MODIFIED", before, after), ledgers={"a": after})
    assert "kept beyond the room" not in message
    assert "old" not in [placement for placement, _ in routes]


def test_a_turn_retried_after_its_cycle_failed_does_not_make_the_move_it_refused(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """As above, but the ordinary way: attempt 1 makes move 1 and refuses move 2 (the budget),
    then its cycle fails on the snapshot's status write (a 500, a conflict with the rollout):
    Temporal retries the whole turn, moves included. The retry makes move 2."""
    rig, originals = _web_on(hub, make_activities, env)
    add_budget(hub, "web", maxUnavailable=2)
    free = sorted(set(CLUSTERS) - {b.spec.target_cluster for b in originals})
    moves = [
        MoveRequest(binding=b.name, source=b.spec.target_cluster, target=t, reason=f"pack: {i}")
        for i, (b, t) in enumerate(zip(originals[:2], free[:2], strict=True))
    ]
    devhub.faults.inject(
        verb="update", resource="clusterschedulingpolicysnapshots", status=500, count=1
    )
    request = TurnRequest(placement="web", cycle=2, reason="rebalance", moves=moves)
    with pytest.raises(ApplicationError, match="500"):  # the status write fails after the moves
        env.run(rig.activities.schedule_once, request)
    devhub.faults.clear()
    retried = env.run(rig.activities.schedule_once, request)
    assert retried.moves[0].endswith("(finished by an earlier attempt)"), retried.moves
    assert retried.moves[1].startswith(f"refused {moves[1].binding}"), retried.moves


def test_check_and_the_reconcile_survive_a_budget_the_hub_accepted(
    ruleless_hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """One move in flight, then a budget `maxUnavailable: "1"` on a hub without KubeFleet's rule:
    find_violations (check's and every reconcile's) reads it as KubeFleet does (0) and reports
    the move outside it instead of raising, which would fail every reconcile run."""
    hub = ruleless_hub
    rig, [old] = _web_on(hub, make_activities, env, picks=1)
    target = sorted(set(CLUSTERS) - {old.spec.target_cluster})[0]
    move = MoveRequest(binding=old.name, source=old.spec.target_cluster, target=target, reason="x")
    env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="rebalance", moves=[move]),
    )
    add_budget(hub, "web", maxUnavailable="1")
    [found] = _budget_violations(hub)
    assert found.endswith("outside its disruption budget (maxUnavailable 1)")


def test_a_binding_made_after_a_finished_move_is_not_taken_for_the_moves_source(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Binding names are deterministic: once the rollout has removed a move's old binding, the
    next binding the placement gets on that cluster (same snapshot) takes the old one's name,
    and the move's new binding (moved-from: that name) reads as a move in progress forever:
    binding_count no longer counts it."""
    for name in ("a", "b", "c"):
        add_cluster(hub, name, allocatable={"cpu": "8"})
    add_placement(
        hub,
        "web",
        {"placementType": "PickN", "numberOfClusters": 1},
        annotations={names.REQUESTS_ANNOTATION: "cpu=4"},
    )
    rig = make_activities()
    turn(env, rig.activities, "web")
    [old] = [make_available(hub, b) for b in bindings_of(hub, "web")]
    target = sorted({"a", "b", "c"} - {old.spec.target_cluster})[0]
    move = MoveRequest(binding=old.name, source=old.spec.target_cluster, target=target, reason="x")
    env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="rebalance", moves=[move]),
    )
    _remove(hub, old)
    hub.patch(ClusterResourcePlacement, "web", {"spec": {"policy": {"numberOfClusters": 3}}})
    turn(env, rig.activities, "web", 3)
    now = {
        b.name: (b.spec.target_cluster, b.spec.state, moved_from(b))
        for b in bindings_of(hub, "web")
    }
    # The name was made again (deterministic naming, same snapshot): the uid tells them apart.
    assert now[old.name] == (old.spec.target_cluster, "Scheduled", None)
    active = [b for b in bindings_of(hub, "web") if b.spec.state != "Unscheduled"]
    assert moved_bindings(active) == []  # no move in progress: nothing hides from the count


def test_room_given_up_while_a_ledger_was_deleted_wakes_the_waiter_when_it_is_made_again(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Found by the invariants machine (soak): cluster a (cpu 6) holds `small` (cpu=2) and
    `all` (PickAll, cpu=1); `big` (cpu=5) is short. a's ledger is deleted; `small` then drops
    its requests, so its turn has no ledger to release from; `all`'s turn makes the ledger
    again holding cpu 1 only. Nothing was released as an event, but 5 CPUs are free by the
    ledger: the ledger's creation must wake `big`, whose turn then places it."""
    one = {"placementType": "PickN", "numberOfClusters": 1}
    add_cluster(hub, "a", allocatable={"cpu": "6"})
    add_placement(hub, "small", one, annotations={names.REQUESTS_ANNOTATION: "cpu=2"})
    add_placement(
        hub, "all", {"placementType": "PickAll"}, annotations={names.REQUESTS_ANNOTATION: "cpu=1"}
    )
    add_placement(hub, "big", one, annotations={names.REQUESTS_ANNOTATION: "cpu=5"})
    rig = make_activities()
    for name in ("small", "all", "big"):
        turn(env, rig.activities, name)
    assert bindings_of(hub, "big") == []
    hub.delete(CapacityLedger, "a")
    hub.patch(
        ClusterResourcePlacement,
        "small",
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: None}}},
    )
    turn(env, rig.activities, "small", 2)
    turn(env, rig.activities, "all", 2)  # routed by the deletion: reserves again
    made = hub.get(CapacityLedger, "a")
    # what `check` sees until big's next turn: big short while room is there for it
    assert violations(hub, {STRANDED_SHORTAGE}) != []
    routes = routes_for(hub, Change("ADDED", None, made))
    assert [placement for placement, _ in routes] == ["big"]
    turn(env, rig.activities, "big", 2)
    assert [b.spec.target_cluster for b in bindings_of(hub, "big")] == ["a"]
