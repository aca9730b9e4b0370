"""The `preemption` and `stale_nomination` invariants (docs/invariants.md): a preemption takes
room only from strictly lower priorities and never holds room twice; nominated room is held only
for a live capacity-aware placement, and not for long."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hub import names
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    NominatedVictim,
    Nomination,
    ObjectMeta,
)
from scheduler.invariants import (
    PREEMPTION,
    STALE_NOMINATION,
    FleetState,
    find_violations,
)
from scheduler.room.capacity import NOMINATION_GRACE

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def placement(name: str, requests: str | None = "cpu=4") -> ClusterResourcePlacement:
    annotations = {names.REQUESTS_ANNOTATION: requests} if requests else {}
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"policy": {"placementType": "PickN", "numberOfClusters": 1}},
        }
    )


def binding(
    placement: str, cluster: str, state: str = "Scheduled", mark: str | None = None
) -> ClusterResourceBinding:
    annotations = {names.PREEMPTED_BY_ANNOTATION: mark} if mark is not None else {}
    return ClusterResourceBinding.from_wire(
        {
            "metadata": {
                "name": f"{placement}-{cluster}",
                "labels": {names.PARENT_PLACEMENT_LABEL: placement},
                "annotations": annotations,
            },
            "spec": {
                "state": state,
                "targetCluster": cluster,
                "schedulingPolicySnapshotName": f"{placement}-0",
                "clusterDecision": {"clusterName": cluster, "selected": True, "reason": "picked"},
            },
        }
    )


def ledger(
    cluster: str,
    nominee: str,
    priority: int,
    *victims: tuple[str, int],
    age: timedelta = timedelta(seconds=5),
) -> CapacityLedger:
    nomination = Nomination(
        priority=priority,
        requests={"cpu": "4"},
        victims=[
            NominatedVictim(binding=f"{v}-{cluster}", placement=v, priority=p) for v, p in victims
        ],
        nominated_at=NOW - age,
    )
    return CapacityLedger(
        metadata=ObjectMeta(name=cluster),
        spec=CapacityLedgerSpec(nominations={nominee: nomination}),
    )


def found(kind: str, *, placements=(), bindings=(), ledgers=(), namespaced=True) -> list[str]:  # type: ignore[no-untyped-def]
    state = FleetState(
        placements=placements, snapshots=(), bindings=bindings, clusters=(), ledgers=ledgers,
        namespaced=namespaced,
    )  # fmt: skip
    return [v.message for v in find_violations(state, NOW) if v.invariant == kind]


def test_a_nomination_of_lower_victims_only_breaks_nothing() -> None:
    held = ledger("m1", "checkout", 100000, ("low", 1000), ("lower", -5))
    assert found(PREEMPTION, placements=[placement("checkout")], ledgers=[held]) == []
    assert found(STALE_NOMINATION, placements=[placement("checkout")], ledgers=[held]) == []


def test_a_victim_of_equal_or_higher_priority_is_a_violation() -> None:
    held = ledger("m1", "checkout", 1000, ("peer", 1000), ("low", 0))
    assert found(PREEMPTION, placements=[placement("checkout")], ledgers=[held]) == [
        "cluster m1: the room nominated for crp/checkout (priority 1000) names victim "
        "peer-m1 of crp/peer at priority 1000, not lower"
    ]


def test_a_nomination_beside_an_active_binding_of_its_placement_counts_room_twice() -> None:
    held = ledger("m1", "checkout", 100000, ("low", 0))
    gone = binding("checkout", "m1", state="Unscheduled")
    assert (
        found(PREEMPTION, placements=[placement("checkout")], bindings=[gone], ledgers=[held]) == []
    )
    twice = found(
        PREEMPTION,
        placements=[placement("checkout")],
        bindings=[binding("checkout", "m1")],
        ledgers=[held],
    )
    assert twice == [
        "cluster m1: crp/checkout holds room twice there, its nomination beside its active "
        "binding(s) checkout-m1"
    ]


def test_a_victims_mark_must_record_a_lower_priority_and_read() -> None:
    fine = binding("low", "m1", "Unscheduled", "crp/checkout (priority 10) on m1, over priority 0")
    equal = binding(
        "peer", "m1", "Unscheduled", "crp/checkout (priority 10) on m1, over priority 10"
    )
    hand = binding("odd", "m1", "Unscheduled", "someone, a long time ago, for reasons")
    hand_long = binding("long", "m1", "Unscheduled", "x" * 60)
    assert found(PREEMPTION, bindings=[fine, equal, hand, hand_long]) == [
        "binding long-m1 of crp/long says it was preempted, but its "
        f"fleet-scheduler.io/preempted-by {'x' * 39 + '…'!r} cannot be read",
        "binding odd-m1 of crp/odd says it was preempted, but its fleet-scheduler.io/preempted-by "
        "'someone, a long time ago, for reasons' cannot be read",
        "binding peer-m1 of crp/peer was preempted by crp/checkout (priority 10) on m1, at its "
        "own priority 10: not lower",
    ]


def test_room_nominated_for_a_placement_gone_changed_or_too_long_is_stale() -> None:
    ledgers = [
        ledger("m1", "gone", 10, ("low", 0)),
        ledger("m2", "plain", 10, ("low", 0)),
        ledger("m3", "old", 10, ("low", 0), age=2 * NOMINATION_GRACE + timedelta(seconds=1)),
        ledger("m4", "young", 10, ("low", 0), age=2 * NOMINATION_GRACE),
    ]
    placements = [placement("plain", None), placement("old"), placement("young")]
    messages = found(STALE_NOMINATION, placements=placements, ledgers=ledgers)
    assert len(messages) == 3, messages
    assert "crp/gone does not exist" in messages[0]
    assert "crp/plain does not declare fleet-scheduler.io/requests" in messages[1]
    assert "crp/old" in messages[2] and "longer than 10 minutes" in messages[2]


def test_a_resource_placements_nomination_is_judged_by_age_alone_when_they_were_not_read() -> None:
    held = ledger("m1", "shop/checkout", 10, ("shop/low", 0))
    assert found(STALE_NOMINATION, ledgers=[held], namespaced=False) == []
    assert len(found(STALE_NOMINATION, ledgers=[held], namespaced=True)) == 1
