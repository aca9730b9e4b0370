"""Issue 24's findings, each reproduced against a real devhub with the real activities: where
capacity, moves and sweeps meet, every count stays true (docs/invariants.md).

- a binding kept without a reservation (requests declared late, dropped and declared again, a
  lost ledger, requests changed) gets it at the placement's next cycle, and a cluster its kept
  bindings overfill is reported and takes nothing more;
- the fleet sweep releases only what it judged stale, never a reservation re-made meanwhile;
- a retried turn finishing a half-done move respects a `minAvailable` budget;
- a hand-written `reservedAt` without a zone, a hub without the CapacityLedger CRD, and
  ResourcePlacements not read by the reconcile are handled, not failed or swept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.capacity import Ledgers, release, stale_reservations, sweep_ledgers
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.errors import InvalidObjectError
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ObjectMeta,
    Reservation,
)
from scheduler.invariants import OVERCOMMIT, RESERVATION
from scheduler.room.capacity import held
from tests.crd_files import write_crds
from tests.integration.activities.activity_helpers import (
    Rig,
    add_budget,
    add_cluster,
    add_placement,
    bindings_of,
    make_available,
    new_binding_for_move,
    placement_condition,
    turn,
    violations,
)
from workflows.models import MoveRequest, TurnRequest

PICK_ONE = {"placementType": "PickN", "numberOfClusters": 1}


def annotate(hub: HubClient, placement: str, requests: str | None) -> None:
    """Set (or, with None, remove) the placement's requests annotation, as kubectl annotate."""
    hub.patch(
        ClusterResourcePlacement,
        placement,
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: requests}}},
    )


def cpu_held(hub: HubClient, cluster: str) -> Fraction:
    return held(hub.get(CapacityLedger, cluster)).get("cpu", Fraction(0))


def test_requests_declared_after_scheduling_reserve_for_the_kept_binding(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The issue's example: an 8-CPU cluster, `old` scheduled without requests and annotated
    cpu=6 afterwards, then `new` asks cpu=6. The kept binding reserves at old's next cycle, so
    `new` finds the cluster full instead of binding 12 CPUs onto 8."""
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(hub, "old", PICK_ONE)
    rig = make_activities()
    turn(env, rig.activities, "old")
    annotate(hub, "old", "cpu=6")
    turn(env, rig.activities, "old", 2)
    assert cpu_held(hub, "a") == 6

    add_placement(hub, "new", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=6"})
    result = turn(env, rig.activities, "new")
    assert result.report is not None and not result.report.outcome.fulfilled
    assert bindings_of(hub, "new") == []
    assert violations(hub, {OVERCOMMIT, RESERVATION}) == []


def test_a_kept_binding_beyond_the_room_is_reserved_reported_and_blocks_the_cluster(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """`new` took 6 of 8 CPUs before `old` declared cpu=6 for the binding it already had: the
    ledger says what the bindings consume (12), the condition and explain say which cluster is
    over and by how much, and a third placement finds no room there."""
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(hub, "old", PICK_ONE)
    add_placement(hub, "new", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=6"})
    rig = make_activities()
    turn(env, rig.activities, "old")
    turn(env, rig.activities, "new")
    annotate(hub, "old", "cpu=6")
    result = turn(env, rig.activities, "old", 2)

    assert cpu_held(hub, "a") == 12
    report = result.report
    assert report is not None and report.outcome.fulfilled
    condition = placement_condition(hub, "old")
    assert condition is not None
    assert condition.message.endswith(
        "kept beyond the room of 1 cluster(s): a (cpu: 6 requested, 2 free)"
    )
    [over] = violations(hub, {OVERCOMMIT})
    assert over.startswith("cluster a: active capacity-aware bindings ask for cpu=12")
    assert "(over by cpu=4)" in over

    add_placement(hub, "third", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=1"})
    third = turn(env, rig.activities, "third")
    assert third.report is not None and not third.report.outcome.fulfilled
    assert bindings_of(hub, "third") == []


@pytest.mark.parametrize("how", ["ledger deleted", "annotation dropped and declared again"])
def test_a_lost_reservation_is_made_again_by_the_next_cycle(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment, how: str
) -> None:
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(hub, "web", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=4"})
    rig = make_activities()
    turn(env, rig.activities, "web")
    [binding] = bindings_of(hub, "web")
    if how == "ledger deleted":
        hub.delete(CapacityLedger, "a")
    else:
        annotate(hub, "web", None)
        release(hub, "a", [binding.name])  # as the reconcile's sweep does, past the grace
        annotate(hub, "web", "cpu=4")
    assert violations(hub, {RESERVATION}) != []
    turn(env, rig.activities, "web", 2)
    reservation = hub.get(CapacityLedger, "a").spec.reservations[binding.name]
    assert (reservation.placement, reservation.requests) == ("web", {"cpu": "4"})
    assert violations(hub, {RESERVATION, OVERCOMMIT}) == []


def test_changed_requests_resize_the_reservations_of_kept_bindings(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(hub, "web", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=2"})
    rig = make_activities()
    turn(env, rig.activities, "web")
    annotate(hub, "web", "cpu=5")
    turn(env, rig.activities, "web", 2)
    assert cpu_held(hub, "a") == 5
    annotate(hub, "web", "cpu=1")
    turn(env, rig.activities, "web", 3)
    assert cpu_held(hub, "a") == 1


def test_a_sweep_never_releases_a_reservation_made_again_after_it_was_judged(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The fleet sweep judges staleness on one read of the ledgers and releases later. A cycle
    that revived the binding in between re-stamped its reservation: the release, a compare on
    what was judged, leaves it."""
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(hub, "web", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=4"})
    rig = make_activities()
    turn(env, rig.activities, "web")
    [binding] = bindings_of(hub, "web")
    # The binding was unscheduled (as a cycle does, its state kept for a revival) and its
    # reservation stayed, old.
    hub.patch(
        ClusterResourceBinding,
        binding.name,
        {
            "metadata": {"annotations": {names.PREVIOUS_BINDING_STATE_ANNOTATION: "Scheduled"}},
            "spec": {"state": "Unscheduled"},
        },
    )
    old = datetime.now(UTC) - timedelta(hours=1)
    ledger = hub.get(CapacityLedger, "a")
    stamped = Reservation(placement="web", requests={"cpu": "4"}, reserved_at=old)
    hub.update(ledger.model_copy(update={"spec": CapacityLedgerSpec(
        reservations={binding.name: stamped})}))  # fmt: skip

    judged = stale_reservations(
        Ledgers.read(hub), lambda *_: False, datetime.now(UTC)
    )  # what the reconcile's sweep reads
    assert set(judged["a"]) == {binding.name}
    turn(env, rig.activities, "web", 2)  # the cycle revives the binding: re-stamped
    [revived] = bindings_of(hub, "web")
    assert revived.spec.state == names.STATE_SCHEDULED

    assert release(hub, "a", judged["a"], judged=judged["a"]) == 0
    assert binding.name in hub.get(CapacityLedger, "a").spec.reservations


def test_finishing_a_half_done_move_respects_a_min_available_budget(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """PickN 2 with minAvailable 1, both bindings available: one disruption at a time. An
    attempt made move 1's new binding and failed; the retried turn carries both moves. Move 1
    is weighed on the state from before it began and finished; move 2 is then refused, so one
    original binding stays."""

    for name in ("a", "b", "c", "d"):
        add_cluster(hub, name, allocatable={"cpu": "8"})
    add_placement(
        hub,
        "web",
        {"placementType": "PickN", "numberOfClusters": 2},
        annotations={names.REQUESTS_ANNOTATION: "cpu=4"},
    )
    rig = make_activities()
    turn(env, rig.activities, "web")
    originals = [make_available(hub, b) for b in bindings_of(hub, "web")]
    add_budget(hub, "web", minAvailable=1)
    free = sorted({"a", "b", "c", "d"} - {b.spec.target_cluster for b in originals})
    moves = [
        MoveRequest(
            binding=b.name, source=b.spec.target_cluster, target=target, reason=f"pack: {i}"
        )
        for i, (b, target) in enumerate(zip(originals, free, strict=True))
    ]
    hub.create(new_binding_for_move(hub, "web", moves[0].target, moves[0]))  # the failed attempt
    result = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="retry", moves=moves),
    )
    assert result.moves[0].startswith(f"moved {moves[0].binding}")
    assert result.moves[1].startswith(f"refused {moves[1].binding}")
    assert "the disruption budget allows 0 move(s) now" in result.moves[1]
    states = {b.name: b.spec.state for b in bindings_of(hub, "web")}
    assert states[originals[1].name] != names.STATE_UNSCHEDULED


def test_a_half_done_move_the_budget_no_longer_allows_is_withdrawn(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The new binding of a half-done move whose budget is spent meanwhile is taken back, so
    the placement is left with as many bindings as it asks for, not one more."""

    for name in ("a", "b"):
        add_cluster(hub, name, allocatable={"cpu": "8"})
    add_placement(hub, "web", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=4"})
    rig = make_activities()
    turn(env, rig.activities, "web")
    [old] = bindings_of(hub, "web")  # never Available: minAvailable 1 allows no disruption
    add_budget(hub, "web", minAvailable=1)
    target = ({"a", "b"} - {old.spec.target_cluster}).pop()
    move = MoveRequest(binding=old.name, source=old.spec.target_cluster, target=target, reason="x")
    new = hub.create(new_binding_for_move(hub, "web", target, move))
    result = env.run(
        rig.activities.schedule_once,
        TurnRequest(placement="web", cycle=2, reason="retry", moves=[move]),
    )
    assert result.moves == [
        f"refused {old.name} {old.spec.target_cluster} -> {target}: the disruption budget "
        "allows 0 move(s) now (minAvailable 1, 0 of 1 binding(s) available); its new binding "
        f"{new.name} was withdrawn"
    ]
    active = [b.name for b in bindings_of(hub, "web") if b.spec.state != "Unscheduled"]
    assert active == [old.name]
    assert new.name not in hub.get(CapacityLedger, target).spec.reservations


def test_a_reservation_time_without_a_zone_is_refused_by_the_hub(hub: HubClient) -> None:
    """Suspected: a hand-written `reservedAt` without a zone would make every cycle and sweep
    raise TypeError. Not reachable: the CRD declares the field `format: date-time`, which the
    API server checks as RFC 3339, a zone required (devhub as kube-apiserver), so the write is
    refused. The model reads such a time as UTC all the same (tests/unit/hub)."""
    hub.create(CapacityLedger(metadata=ObjectMeta(name="a")))
    with pytest.raises(InvalidObjectError, match="reservedAt in body must be of type date-time"):
        hub.patch(
            CapacityLedger,
            "a",
            {"spec": {"reservations": {"gone": {
                "placement": "gone", "requests": {"cpu": "2"},
                "reservedAt": "2026-01-01T00:00:00",
            }}}},
        )  # fmt: skip


def test_the_fleet_sweep_leaves_resource_placements_alone_when_they_were_not_read(
    hub: HubClient,
) -> None:
    """`--no-resource-placements`, or a hub that refuses ResourceBindings: their reservations
    (keys `<namespace>/<name>`) are not judged, since not reading a binding does not make it
    gone."""
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    old = datetime.now(UTC) - timedelta(hours=1)
    hub.create(
        CapacityLedger(
            metadata=ObjectMeta(name="a"),
            spec=CapacityLedgerSpec(
                reservations={
                    "shop/checkout-a-1": Reservation(
                        placement="shop/checkout", requests={"cpu": "2"}, reserved_at=old
                    ),
                    "gone-a-1": Reservation(
                        placement="gone", requests={"cpu": "2"}, reserved_at=old
                    ),
                }
            ),
        )
    )
    assert sweep_ledgers(hub, set(), [], datetime.now(UTC), namespaced=False) == 1
    assert set(hub.get(CapacityLedger, "a").spec.reservations) == {"shop/checkout-a-1"}


def test_a_hub_without_the_ledger_crd_says_so_in_the_condition(
    devhub_factory: Callable[..., DevHub],
    tmp_path: Path,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    """No CapacityLedger CRD: a capacity-aware placement's turn ends with a False condition
    naming the missing kind and how to install it, instead of retrying "vanished" forever."""
    crds = write_crds(tmp_path / "crds", leave_out={"fleet-scheduler.io_capacityledgers.yaml"})
    bare = devhub_factory(crd_dir=crds)
    client = HubClient.from_kubeconfig(bare.write_kubeconfig(tmp_path / "kubeconfig"))
    try:
        add_cluster(client, "a", allocatable={"cpu": "8"})
        add_placement(client, "web", PICK_ONE, annotations={names.REQUESTS_ANNOTATION: "cpu=4"})
        result = turn(env, make_activities(on=client).activities, "web")
        assert result.report is not None and result.report.error is not None
        assert "does not serve capacityledgers.fleet-scheduler.io" in result.report.error
        assert "deploy/crds/fleet-scheduler.io_capacityledgers.yaml" in result.report.error
        condition = placement_condition(client, "web")
        assert condition is not None and condition.status == names.FALSE
        assert "does not serve capacityledgers" in condition.message
        assert bindings_of(client, "web") == []
    finally:
        client.close()
