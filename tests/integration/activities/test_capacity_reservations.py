"""Capacity reservations against a real devhub (docs/capacity.md): the ledger a capacity-aware
placement writes around its bindings, compare-and-swap under real concurrency, releases,
sweeps, and the placements that never touch a ledger."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from temporalio.testing import ActivityEnvironment

from activities.capacity import NoRoomError, held, reserve
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ObjectMeta,
    Reservation,
)
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    make_available,
    new_binding_for_move,
    placement_condition,
    targets,
    turn,
)
from tests.support.waits import WAIT_S, until
from workflows.models import CleanupRequest

CPU4 = {names.REQUESTS_ANNOTATION: "cpu=4"}


def put_ledger(hub: HubClient, cluster: str, reservations: dict[str, Reservation]) -> None:
    hub.create(
        CapacityLedger(
            metadata=ObjectMeta(name=cluster), spec=CapacityLedgerSpec(reservations=reservations)
        )
    )


def held_for(placement: str, cpu: str, when: datetime) -> Reservation:
    return Reservation(placement=placement, requests={"cpu": cpu}, reserved_at=when)


def scale_to(hub: HubClient, placement: str, n: int) -> None:
    crp = hub.get(ClusterResourcePlacement, placement)
    hub.patch(
        ClusterResourcePlacement,
        placement,
        {"spec": {"policy": {"numberOfClusters": n}}},
        resource_version=crp.metadata.resource_version,
    )


def ledger(hub: HubClient, cluster: str) -> dict[str, Reservation]:
    return hub.get(CapacityLedger, cluster).spec.reservations


def ledgers(hub: HubClient) -> dict[str, dict[str, Reservation]]:
    return {item.name: dict(item.spec.reservations) for item in hub.list(CapacityLedger)}


def fleet(hub: HubClient, cpus: dict[str, str]) -> None:
    for name, cpu in cpus.items():
        add_cluster(hub, name, allocatable={"cpu": cpu, "memory": "64Gi"})


def assert_never_overcommitted(hub: HubClient, cpus: dict[str, str]) -> None:
    """Both sides of the invariant: bindings' requests <= reservations <= allocatable."""
    by_cluster = ledgers(hub)
    for binding in hub.list(ClusterResourceBinding):
        if binding.spec.state != names.STATE_UNSCHEDULED:
            assert binding.name in by_cluster[binding.spec.target_cluster]
    for cluster, reservations in by_cluster.items():
        total = sum(
            (Fraction(r.requests.get("cpu", "0")) for r in reservations.values()), Fraction(0)
        )
        assert total <= Fraction(cpus[cluster]), (cluster, reservations)


def test_placements_reserve_before_they_bind_and_the_last_one_reports_what_is_short(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    cpus = {"a": "6", "b": "6", "c": "6"}
    fleet(hub, cpus)
    add_placement(hub, "first", {"placementType": "PickN", "numberOfClusters": 2}, annotations=CPU4)
    add_placement(
        hub, "second", {"placementType": "PickN", "numberOfClusters": 2}, annotations=CPU4
    )
    rig = make_activities()

    one = turn(env, rig.activities, "first")
    assert one.report is not None and one.report.outcome.fulfilled
    two = turn(env, rig.activities, "second")
    assert two.report is not None and not two.report.outcome.fulfilled

    first, second = targets(bindings_of(hub, "first")), targets(bindings_of(hub, "second"))
    assert len(first) == 2 and len(second) == 1
    assert set(first).isdisjoint(second)  # 4 + 4 > 6: never two on one cluster
    assert_never_overcommitted(hub, cpus)
    for binding in bindings_of(hub, "second"):
        reservation = ledger(hub, binding.spec.target_cluster)[binding.name]
        assert (reservation.placement, reservation.requests) == ("second", {"cpu": "4"})

    condition = placement_condition(hub, "second")
    assert condition is not None and condition.status == names.FALSE
    assert condition.message.endswith(
        "not enough room for 1 binding(s) of cpu=4: cpu short on 2 cluster(s) "
        "(at most 2 free); missing cpu=4"
    )


def test_a_placement_without_requests_never_reads_a_ledger(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    fleet(hub, {"a": "1"})
    add_placement(hub, "plain", {"placementType": "PickN", "numberOfClusters": 1})
    devhub.stats.clear()
    result = turn(env, make_activities().activities, "plain")
    assert result.report is not None and result.report.outcome.fulfilled
    assert devhub.stats.count("list", "capacityledgers") == 0
    assert devhub.stats.count("get", "capacityledgers") == 0
    assert ledgers(hub) == {}


def test_a_bad_requests_annotation_is_a_condition_and_writes_nothing(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    fleet(hub, {"a": "8"})
    add_placement(
        hub,
        "typo",
        {"placementType": "PickN", "numberOfClusters": 1},
        annotations={names.REQUESTS_ANNOTATION: "cpu=2,memory=4GB"},
    )
    result = turn(env, make_activities().activities, "typo")
    assert result.report is not None and result.report.error is not None
    condition = placement_condition(hub, "typo")
    assert condition is not None and condition.status == names.FALSE
    assert "requests entry 'memory=4GB'" in condition.message
    assert bindings_of(hub, "typo") == [] and ledgers(hub) == {}


def test_concurrent_reservations_on_one_cluster_never_exceed_its_allocatable(
    hub: HubClient, hub_kubeconfig: object
) -> None:
    """Twelve threads, each with its own connection, race for room for exactly five."""
    start = threading.Barrier(12)
    outcomes: list[str] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=(2.0, 10.0))  # type: ignore[arg-type]
        try:
            start.wait(timeout=WAIT_S)
            reserve(
                client,
                "busy",
                {"cpu": "10"},
                f"b{index}",
                f"p{index}",
                {"cpu": Fraction(2)},
                lambda: datetime.now(UTC),
            )
            outcome = "reserved"
        except NoRoomError:
            outcome = "no room"
        finally:
            client.close()
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["no room"] * 7 + ["reserved"] * 5
    assert held(hub.get(CapacityLedger, "busy")) == {"cpu": Fraction(10)}


def test_scaling_down_releases_the_room_after_the_unschedule(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    fleet(hub, {"a": "4", "b": "4"})
    add_placement(hub, "web", {"placementType": "PickN", "numberOfClusters": 2}, annotations=CPU4)
    rig = make_activities()
    turn(env, rig.activities, "web")
    assert sum(len(r) for r in ledgers(hub).values()) == 2

    scale_to(hub, "web", 1)
    turn(env, rig.activities, "web", 2)
    active = [b for b in bindings_of(hub, "web") if b.spec.state != names.STATE_UNSCHEDULED]
    assert len(active) == 1
    assert {k for r in ledgers(hub).values() for k in r} == {active[0].name}


def test_a_reservation_that_outlived_its_binding_is_swept_after_the_grace_only(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    fleet(hub, {"a": "8"})
    add_placement(hub, "web", {"placementType": "PickN", "numberOfClusters": 1}, annotations=CPU4)
    now = datetime.now(UTC)
    old, young = now - timedelta(hours=1), now - timedelta(seconds=5)
    put_ledger(
        hub,
        "a",
        {
            # a release lost to a crash: its binding is long gone
            "web-a-lost": held_for("web", "2", old),
            # a reservation a cycle just made, its create still in flight
            "web-a-inflight": held_for("web", "2", young),
            # another placement's: not this placement's sweep to judge
            "other-a-x": held_for("other", "2", old),
        },
    )
    result = turn(env, make_activities().activities, "web")
    # 8 - 2 (in flight) - 2 (other) leaves 4: room for the placement once the lost one goes.
    assert result.report is not None and result.report.outcome.fulfilled
    [binding] = bindings_of(hub, "web")
    assert set(ledger(hub, "a")) == {"web-a-inflight", "other-a-x", binding.name}


def test_deleting_a_placement_releases_all_its_room(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    fleet(hub, {"a": "4", "b": "4"})
    add_placement(hub, "web", {"placementType": "PickAll"}, annotations=CPU4)
    add_placement(hub, "api", {"placementType": "PickN", "numberOfClusters": 1},
                  annotations={names.REQUESTS_ANNOTATION: "cpu=0"})  # fmt: skip
    rig = make_activities()
    turn(env, rig.activities, "web")
    turn(env, rig.activities, "api")
    assert {r.placement for rs in ledgers(hub).values() for r in rs.values()} == {"web", "api"}
    hub.delete(ClusterResourcePlacement, "web")
    report = env.run(rig.activities.cleanup_placement, CleanupRequest(placement="web"))
    assert "2 reservation(s) released" in report.summary
    assert {r.placement for rs in ledgers(hub).values() for r in rs.values()} == {"api"}


def test_losing_a_race_for_room_decides_again_from_fresh_reads(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The cycle planned on room another process took between its read and its reservation:
    it decides again from fresh reads in the same activity (no failure, no retry by Temporal),
    sees the cluster full, writes no binding and reports what is short."""
    fleet(hub, {"a": "4"})
    add_placement(hub, "web", {"placementType": "PickN", "numberOfClusters": 1}, annotations=CPU4)
    # The rival's reservation lands after the cycle listed the ledgers, before it reserves:
    # the reservation's first read of ledger "a" hangs until the rival is in.
    rival = Reservation(placement="rival", requests={"cpu": "1"}, reserved_at=datetime.now(UTC))
    hang = devhub.faults.inject(verb="get", resource="capacityledgers", hang=True, count=1)
    done = threading.Event()

    def slip_in() -> None:
        until(lambda: hang.hits > 0, what="the turn's ledger read", timeout=10)
        put_ledger(hub, "a", {"rival-a": rival})
        done.set()
        hang.remove()

    thread = threading.Thread(target=slip_in)
    thread.start()
    result = turn(env, make_activities().activities, "web")
    thread.join(10)
    assert done.is_set()
    assert result.report is not None and not result.report.outcome.fulfilled
    assert bindings_of(hub, "web") == []
    assert set(ledger(hub, "a")) == {"rival-a"}
    condition = placement_condition(hub, "web")
    assert condition is not None and "cpu: 4 requested" not in condition.message
    assert condition.message.endswith("missing cpu=4")


def test_an_own_reservation_without_its_binding_still_counts_against_the_placement(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The filter and the reservation agree: a young reservation of the placement whose binding
    never appeared (a create in flight, or lost) holds room for the cycle's own check too, so
    the cycle reports the shortage instead of failing its reservation over and over."""
    fleet(hub, {"a": "7"})
    add_placement(hub, "web", {"placementType": "PickN", "numberOfClusters": 1}, annotations=CPU4)
    young = datetime.now(UTC) - timedelta(seconds=5)
    put_ledger(hub, "a", {"web-a-older": held_for("web", "4", young)})
    result = turn(env, make_activities().activities, "web")
    assert result.report is not None and not result.report.outcome.fulfilled
    assert result.report.error is None
    assert bindings_of(hub, "web") == []
    condition = placement_condition(hub, "web")
    assert condition is not None and condition.message.endswith("missing cpu=4")


def test_the_fleet_wide_sweep_releases_what_no_placement_can(hub: HubClient) -> None:
    """The reconcile's sweep: reservations of placements that are gone or no longer
    capacity-aware, and of bindings that are not active, once older than the grace."""
    from activities.capacity import sweep_ledgers
    from scheduler.testing import binding as make_binding

    fleet(hub, {"a": "8"})
    old = datetime.now(UTC) - timedelta(hours=1)
    young = datetime.now(UTC) - timedelta(seconds=5)
    made = make_binding("keep", "a", "keep-0", name="keep-a")
    live = hub.create(
        made.model_copy(
            update={"metadata": made.metadata.model_copy(update={"resource_version": None})}
        )
    )

    put_ledger(
        hub,
        "a",
        {
            live.name: held_for("keep", "1", old),  # capacity-aware, binding active: kept
            "gone-a": held_for("gone", "1", old),  # placement gone: released
            "dropped-a": held_for("dropped", "1", old),  # no longer capacity-aware: released
            "keep-b": held_for("keep", "1", old),  # its binding does not exist: released
            "fresh-a": held_for("gone", "1", young),  # too young to judge: kept
        },
    )
    released = sweep_ledgers(
        hub, {"keep"}, hub.list(ClusterResourceBinding).items, datetime.now(UTC)
    )
    assert released == 3
    assert set(ledger(hub, "a")) == {live.name, "fresh-a"}


def test_a_move_half_done_by_an_earlier_attempt_is_finished_within_the_budget(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """An attempt created the new binding, then failed before unscheduling the old one. The
    retried turn finishes the move although the budget, read now, counts the new binding as
    unavailable (maxUnavailable 1): the move is weighed on the state from before it began (its
    old binding available, as the rollout made it), where KubeFleet's arithmetic allows it."""
    from hub.types import ClusterResourcePlacementDisruptionBudget
    from workflows.models import MoveRequest, TurnRequest

    fleet(hub, {"a": "8", "b": "8"})
    add_placement(hub, "web", {"placementType": "PickN", "numberOfClusters": 1}, annotations=CPU4)
    rig = make_activities()
    turn(env, rig.activities, "web")
    [old] = bindings_of(hub, "web")
    old = make_available(hub, old)
    source, target = old.spec.target_cluster, ({"a", "b"} - {old.spec.target_cluster}).pop()
    hub.create(
        ClusterResourcePlacementDisruptionBudget.from_wire(
            {"metadata": {"name": "web"}, "spec": {"maxUnavailable": 1}}
        )
    )
    move = MoveRequest(binding=old.name, source=source, target=target, reason="pack: test")
    # the earlier attempt's create, as it made it (reservation first)
    hub.create(new_binding_for_move(hub, "web", target, move))
    request = TurnRequest(placement="web", cycle=2, reason="test", moves=[move])
    result = env.run(rig.activities.schedule_once, request)
    assert any(line.startswith(f"moved {old.name} {source} -> {target}") for line in result.moves)
    states = {b.spec.target_cluster: b.spec.state for b in bindings_of(hub, "web")}
    assert states == {source: names.STATE_UNSCHEDULED, target: names.STATE_SCHEDULED}
    assert old.name not in ledger(hub, source)


def test_a_move_onto_a_cluster_the_placement_still_holds_is_refused(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """An Unscheduled binding of the placement on the target: a cycle would revive it; a move
    must not add a second binding for the same cluster."""
    from workflows.models import MoveRequest, TurnRequest

    fleet(hub, {"a": "8", "b": "8"})
    add_placement(hub, "web", {"placementType": "PickN", "numberOfClusters": 2}, annotations=CPU4)
    rig = make_activities()
    turn(env, rig.activities, "web")
    scale_to(hub, "web", 1)
    turn(env, rig.activities, "web", 2)
    states = {b.spec.target_cluster: b for b in bindings_of(hub, "web")}
    [kept] = [b for b in states.values() if b.spec.state != names.STATE_UNSCHEDULED]
    [gone] = [c for c, b in states.items() if b.spec.state == names.STATE_UNSCHEDULED]
    move = MoveRequest(binding=kept.name, source=kept.spec.target_cluster, target=gone, reason="x")
    result = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=3, reason="test", moves=[move]),
    )
    assert result.moves == [
        f"refused {kept.name} {kept.spec.target_cluster} -> {gone}: the placement already has a "
        f"binding on {gone} (Unscheduled)"
    ]
    assert len(bindings_of(hub, "web")) == 2


def test_endless_conflicts_on_a_ledger_end_in_a_retryable_conflict(
    hub: HubClient, devhub: DevHub
) -> None:
    """CAS_ATTEMPTS conflicting writers in a row: the reservation gives up as a hub Conflict
    (Temporal retries the activity from fresh reads), not an error of ours."""
    from activities.capacity import CAS_ATTEMPTS
    from hub.errors import ConflictError

    put_ledger(hub, "busy", {})
    devhub.faults.inject(verb="update", resource="capacityledgers", status=409)
    with pytest.raises(ConflictError, match=f"{CAS_ATTEMPTS} conflicting writers"):
        reserve(
            hub, "busy", {"cpu": "4"}, "b", "p", {"cpu": Fraction(1)}, lambda: datetime.now(UTC)
        )
    assert devhub.stats.count("update", "capacityledgers") == CAS_ATTEMPTS
