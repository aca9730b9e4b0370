"""The watcher's routes for what KubeFleet does not know (issue 24): our decision annotations run
a turn, priority-only changes do not; room freed on a cluster wakes the capacity-aware
placements waiting for it, a deleted ledger those holding bindings there, and a shortage
reported while room is there is routed again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from control.routes import Room, route_change
from control.views import Change, routing_copy
from control.watcher import _priority_inputs_changed
from hub import names as hub_names
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourceBindingSpec,
    ClusterResourcePlacement,
    ClusterResourcePlacementSpec,
    ClusterResourcePlacementStatus,
    Condition,
    MemberCluster,
    ObjectMeta,
    PlacementPolicy,
    Reservation,
)
from hub.types.meta import HubObject
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.testing import member_cluster
from workflows import names

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SHORT = (
    "could not find all clusters needed as specified by the scheduling policy, found 0 "
    "cluster(s) instead; not enough room for 1 binding(s) of cpu=6: cpu short on 1 cluster(s) "
    "(at most 2 free); missing cpu=6"
)
PICK_1 = PlacementPolicy(placement_type="PickN", number_of_clusters=1)


def placement(
    name: str,
    *,
    requests: str | None = None,
    condition: str | None = None,
    generation: int = 1,
    condition_generation: int | None = None,
    **annotations: str,
) -> ClusterResourcePlacement:
    own = dict(annotations)
    if requests is not None:
        own[hub_names.REQUESTS_ANNOTATION] = requests
    conditions = []
    if condition is not None:
        conditions.append(
            Condition(
                type=hub_names.PLACEMENT_SCHEDULED_CONDITION,
                status="True" if "missing" not in condition else "False",
                reason="SchedulingPolicyUnfulfilled",
                message=condition,
                observed_generation=condition_generation or generation,
            )
        )
    return ClusterResourcePlacement(
        metadata=ObjectMeta(
            name=name,
            generation=generation,
            annotations=own,
            finalizers=[hub_names.SCHEDULER_CLEANUP_FINALIZER],
        ),
        spec=ClusterResourcePlacementSpec(policy=PICK_1),
        status=ClusterResourcePlacementStatus(conditions=conditions),
    )


def ledger(cluster: str, **cpus: str) -> CapacityLedger:
    when = NOW - timedelta(minutes=1)
    return CapacityLedger(
        metadata=ObjectMeta(name=cluster),
        spec=CapacityLedgerSpec(
            reservations={
                key: Reservation(
                    placement=key.split("-")[0], requests={"cpu": cpu}, reserved_at=when
                )
                for key, cpu in cpus.items()
            }
        ),
    )


def binding(placement: str, cluster: str, state: str = "Scheduled") -> ClusterResourceBinding:
    return ClusterResourceBinding(
        metadata=ObjectMeta(
            name=f"{placement}-{cluster}", labels={hub_names.PARENT_PLACEMENT_LABEL: placement}
        ),
        spec=ClusterResourceBindingSpec(
            state=state,
            scheduling_policy_snapshot_name=f"{placement}-0",
            target_cluster=cluster,
            cluster_decision=ClusterDecision(cluster_name=cluster, selected=True, reason="r"),
        ),
    )


CLUSTERS = {name: member_cluster(name, NOW, allocatable={"cpu": "8"}) for name in ("m1", "m2")}


def routed(
    kind: str,
    old: HubObject | None,
    new: HubObject,
    placements: list[ClusterResourcePlacement],
    *,
    ledgers: dict[str, CapacityLedger] | None = None,
    bindings: list[ClusterResourceBinding] = (),  # type: ignore[assignment]
    standalone: bool = True,
) -> list[tuple[str, str, str]]:
    """The routes of one change, over the watcher's routing copies (what its views keep)."""
    room = Room(
        clusters={n: routing_copy(c) for n, c in CLUSTERS.items()},
        ledgers=ledgers or {},
        bindings=[routing_copy(b) for b in bindings],
    )
    found = route_change(
        Change(kind, routing_copy(old) if old else None, routing_copy(new)),  # type: ignore[arg-type]
        placements={p.metadata.name: routing_copy(p) for p in placements},
        standalone=standalone,
        checker=EligibilityChecker(),
        now=NOW,
        room=room,
    )
    return [(r.placement, r.signal, r.reason) for r in found]


CHANGED = names.SIGNAL_PLACEMENT_CHANGED
CLUSTER = names.SIGNAL_CLUSTER_CHANGED


@pytest.mark.parametrize("standalone", [True, False])
@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        pytest.param(
            {},
            {hub_names.REQUESTS_ANNOTATION: "cpu=2"},
            "placement web: annotation fleet-scheduler.io/requests changed",
            id="requests-added",
        ),
        pytest.param(
            {hub_names.REQUESTS_ANNOTATION: "cpu=two"},
            {hub_names.REQUESTS_ANNOTATION: "cpu=2"},
            "placement web: annotation fleet-scheduler.io/requests changed",
            id="typo-fixed",
        ),
        pytest.param(
            {hub_names.REQUESTS_ANNOTATION: "cpu=2"},
            {},
            "placement web: annotation fleet-scheduler.io/requests changed",
            id="requests-removed",
        ),
        pytest.param(
            {},
            {hub_names.REBALANCE_ANNOTATION: "allowed"},
            "placement web: annotation fleet-scheduler.io/rebalance changed",
            id="rebalance",
        ),
        pytest.param(
            {},
            {
                hub_names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution",
                hub_names.SCHEDULE_DEADLINE_ANNOTATION: "10m",
            },
            "placement web: annotation fleet-scheduler.io/affinity-enforcement, "
            "fleet-scheduler.io/schedule-deadline changed",
            id="two-at-once",
        ),
    ],
)
def test_a_decision_annotation_change_runs_a_turn_in_both_modes(
    before: dict[str, str], after: dict[str, str], reason: str, standalone: bool
) -> None:
    old, new = placement("web", **before), placement("web", **after)
    assert routed("MODIFIED", old, new, [new], standalone=standalone) == [("web", CHANGED, reason)]
    assert _priority_inputs_changed(Change("MODIFIED", old, new)) is not None  # both count


@pytest.mark.parametrize(
    "after",
    [
        {hub_names.PRIORITY_CLASS_ANNOTATION: "high"},
        {"example.com/owner": "team-a"},
    ],
)
def test_a_change_only_priority_reads_runs_no_turn(after: dict[str, str]) -> None:
    old, new = placement("web"), placement("web", **after)
    assert routed("MODIFIED", old, new, [new]) == []
    moved = _priority_inputs_changed(Change("MODIFIED", old, new))
    assert moved is not None and moved.signal == names.SIGNAL_PRIORITY_CHANGED


def test_room_freed_wakes_the_placements_it_fits_and_only_those() -> None:
    """`big` (cpu=6) leaves m1: 8 CPUs free. `waiter` (cpu=6) and `small` (cpu=1), both short,
    fit and are woken; `huge` (cpu=9) would not fit and `done` is not waiting; `plain` is not
    capacity-aware."""
    placements = [
        placement("waiter", requests="cpu=6", condition=SHORT),
        placement("small", requests="cpu=1", condition=SHORT),
        placement("huge", requests="cpu=9", condition=SHORT),
        placement("done", requests="cpu=1", condition="found all cluster needed"),
        placement("plain"),
    ]
    before, after = ledger("m1", **{"big-m1": "6"}), ledger("m1")
    got = routed("MODIFIED", before, after, placements, ledgers={"m1": after})
    reason = "cluster m1: room freed (cpu=6)"
    assert got == [("waiter", CLUSTER, reason), ("small", CLUSTER, reason)]


def test_a_placement_whose_turn_has_not_ended_at_its_generation_is_woken_too() -> None:
    """It may be deciding on reads from before the room was freed; one more turn coalesces."""
    running = placement(
        "new", requests="cpu=2", generation=3, condition=SHORT, condition_generation=2
    )
    before, after = ledger("m1", **{"big-m1": "6"}), ledger("m1")
    assert [p for p, _, _ in routed("MODIFIED", before, after, [running])] == ["new"]


def test_a_reservation_made_wakes_nobody() -> None:
    waiting = placement("waiter", requests="cpu=1", condition=SHORT)
    before, after = ledger("m1"), ledger("m1", **{"other-m1": "2"})
    assert routed("MODIFIED", before, after, [waiting]) == []


def test_a_ledger_made_again_wakes_the_waiting_placements_that_fit_beside_it() -> None:
    """A ledger deleted and made again by its holders' turns: room given up while it was away
    (a placement that dropped its requests had no ledger to release from) shows only now. A
    waiter that fits beside the new ledger's reservations is woken; one that does not is not
    (found by the invariants machine: a placement short of room while room was there)."""
    waiting = placement("waiter", requests="cpu=6", condition=SHORT)
    too_big = placement("huge", requests="cpu=7", condition=SHORT)
    made = ledger("m1", **{"other-m1": "2"})
    assert routed("ADDED", None, made, [waiting, too_big]) == [
        ("waiter", CLUSTER, "cluster m1: capacity ledger made, cpu=6 free")
    ]


def test_a_deleted_ledger_reaches_the_capacity_aware_placements_holding_bindings_there() -> None:
    placements = [placement("web", requests="cpu=2", condition="ok"), placement("plain")]
    bindings = [
        binding("web", "m1"),
        binding("plain", "m1"),
        binding("web", "m2"),
    ]
    gone = ledger("m1", **{"web-m1": "2"})
    got = routed("DELETED", gone, gone, placements, bindings=bindings)
    assert got == [
        ("web", CLUSTER, "cluster m1: its capacity ledger was deleted; reservations are made again")
    ]


def test_a_shortage_reported_while_room_is_there_is_routed_again() -> None:
    """The room was freed while the turn ran, and the freeing was routed before the shortage
    showed: when the condition arrives, the watcher's caches say a binding fits on m2."""
    ledgers: dict[str, Any] = {"m1": ledger("m1", **{"x-m1": "8"})}
    old = placement("waiter", requests="cpu=6", condition="found all cluster needed")
    new = placement("waiter", requests="cpu=6", condition=SHORT)
    assert routed("MODIFIED", old, new, [new], ledgers=ledgers) == [
        ("waiter", CLUSTER, "room on cluster m2 was freed while the last cycle ran")
    ]
    full = {**ledgers, "m2": ledger("m2", **{"y-m2": "8"})}
    assert routed("MODIFIED", old, new, [new], ledgers=full) == []
    same = placement("waiter", requests="cpu=6", condition=SHORT)
    assert routed("MODIFIED", same, new, [new], ledgers=ledgers) == []  # nothing new reported


def test_member_clusters_are_kept_whole_for_room() -> None:
    copy = routing_copy(CLUSTERS["m1"])
    assert isinstance(copy, MemberCluster)
    assert copy.status.resource_usage.allocatable == {"cpu": "8"}


def test_room_freed_where_a_placement_keeps_a_binding_beyond_the_room_reaches_it() -> None:
    over = placement(
        "over",
        requests="cpu=7",
        condition="found all cluster needed; kept beyond the room of 1 cluster(s): m1 (cpu: 7 "
        "requested, 6 free)",
    )
    elsewhere = placement("far", requests="cpu=7", condition=over.status.conditions[0].message)
    bindings = [binding("over", "m1"), binding("far", "m2")]
    before, after = ledger("m1", **{"over-m1": "7", "x-m1": "2"}), ledger("m1", **{"over-m1": "7"})
    got = routed("MODIFIED", before, after, [over, elsewhere], bindings=bindings)
    assert got == [("over", CLUSTER, "cluster m1: room freed (cpu=2)")]


def test_requests_dropped_where_no_ledger_is_wake_the_waiters_there() -> None:
    """`small` holds m1 with no ledger there (deleted, not made again): dropping its requests
    gives up its room with no release to see, so the waiter that fits is woken by the change
    itself. With a ledger on m1, the release that `small`'s turn makes wakes it instead."""
    old = placement("small", requests="cpu=2", condition="ok")
    new = placement("small", condition="ok")
    waiter = placement("waiter", requests="cpu=6", condition=SHORT)
    bindings = [binding("small", "m1")]
    got = routed("MODIFIED", old, new, [new, waiter], bindings=bindings)
    assert (
        "waiter",
        CLUSTER,
        "cluster m1: placement small dropped its requests (no capacity ledger there)",
    ) in got
    with_ledger = routed(
        "MODIFIED", old, new, [new, waiter], bindings=bindings,
        ledgers={"m1": ledger("m1", **{"small-m1": "2"})},
    )  # fmt: skip
    assert "waiter" not in [p for p, _, _ in with_ledger]


@pytest.mark.parametrize("ledgers", [{}, {"m1": ledger("m1")}], ids=["no-ledger", "ledger"])
def test_a_binding_given_up_where_no_ledger_is_wakes_the_waiters_there(
    ledgers: dict[str, CapacityLedger],
) -> None:
    web = placement("web", requests="cpu=2", condition="ok")
    waiter = placement("waiter", requests="cpu=6", condition=SHORT)
    before, after = binding("web", "m1"), binding("web", "m1", state="Unscheduled")
    got = [p for p, _, _ in routed("MODIFIED", before, after, [web, waiter], ledgers=ledgers)]
    assert got == ([] if ledgers else ["waiter"])


def test_a_deleted_ledger_frees_the_room_of_a_holder_whose_requests_cannot_be_read() -> None:
    """`typo` (cpu=two) kept its reservation while its ledger stood, but its turns fail and
    cannot make it again: with the ledger gone its binding counts as `check` counts it (room
    not declared), so the waiter that fits is woken and `typo` is not routed for a
    reservation it cannot make. Found by the invariants machine."""
    typo = placement("typo", requests="cpu=two", condition="ok")
    waiter = placement("waiter", requests="cpu=6", condition=SHORT)
    gone = ledger("m1", **{"typo-m1": "4"})
    got = routed("DELETED", gone, gone, [typo, waiter], bindings=[binding("typo", "m1")])
    assert got == [("waiter", CLUSTER, "cluster m1: room freed (cpu=4)")]


def test_a_binding_deleted_after_its_placement_is_gone_wakes_the_waiters_too() -> None:
    """A deleted placement's cleanup removes its bindings and then the placement: the binding
    events may come after the placement left the cache, and its room is still given up (found
    by the invariants machine)."""
    waiter = placement("waiter", requests="cpu=6", condition=SHORT)
    gone = binding("web", "m1")
    assert [p for p, _, _ in routed("DELETED", gone, gone, [waiter])] == ["waiter"]
    plain = placement("web", condition="ok")  # never declared requests: its room never counted
    assert routed("DELETED", gone, gone, [plain, waiter]) == []
