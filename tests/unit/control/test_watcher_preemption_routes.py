"""The watcher's routes for preemption (docs/priority.md, "Preemption"): a nomination made on a
ledger wakes the placements of the victims it names, at no later a place in the queues than the
preemptor's own turns; room nominated for one placement wakes no other waiter, but its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from control.routes import Room, Route, route_change
from control.views import Change, routing_copy
from hub import names as hub_names
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourcePlacement,
    ClusterResourcePlacementSpec,
    ClusterResourcePlacementStatus,
    Condition,
    NominatedVictim,
    Nomination,
    ObjectMeta,
    PlacementPolicy,
    Reservation,
)
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.framework.queue_sort import QueuePriority, no_later_than
from scheduler.testing import member_cluster

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CLUSTERS = {name: member_cluster(name, NOW, allocatable={"cpu": "8"}) for name in ("m1",)}
SHORT = (
    "could not find all clusters needed as specified by the scheduling policy, found 0 "
    "cluster(s) instead; not enough room for 1 binding(s) of cpu=4: cpu short on 1 cluster(s) "
    "(at most 0 free); missing cpu=4"
)


def placement(name: str, requests: str, condition: str | None = None) -> ClusterResourcePlacement:
    """A capacity-aware PickN-1 placement; `condition`: its Scheduled condition's message."""
    conditions = []
    if condition is not None:
        conditions.append(
            Condition(
                type=hub_names.PLACEMENT_SCHEDULED_CONDITION,
                status="False",
                reason="SchedulingPolicyUnfulfilled",
                message=condition,
                observed_generation=1,
            )
        )
    return ClusterResourcePlacement(
        metadata=ObjectMeta(
            name=name, generation=1, annotations={hub_names.REQUESTS_ANNOTATION: requests}
        ),
        spec=ClusterResourcePlacementSpec(
            policy=PlacementPolicy(placement_type="PickN", number_of_clusters=1)
        ),
        status=ClusterResourcePlacementStatus(conditions=conditions),
    )


def ledger(cluster: str, **cpus: str) -> CapacityLedger:
    """Reservations by binding key (`<placement>-<cluster>`) -> CPUs."""
    when = NOW - timedelta(minutes=1)
    reservations = {
        key: Reservation(placement=key.split("-")[0], requests={"cpu": cpu}, reserved_at=when)
        for key, cpu in cpus.items()
    }
    return CapacityLedger(
        metadata=ObjectMeta(name=cluster), spec=CapacityLedgerSpec(reservations=reservations)
    )


def nominated(base: CapacityLedger, preemptor: str, cpu: str, *victims: str) -> CapacityLedger:
    nomination = Nomination(
        priority=100000,
        requests={"cpu": cpu},
        victims=[
            NominatedVictim(binding=v, placement=v.split("-")[0], priority=0) for v in victims
        ],
        nominated_at=NOW - timedelta(seconds=1),
    )
    spec = CapacityLedgerSpec(
        reservations=dict(base.spec.reservations),
        nominations={**base.spec.nominations, preemptor: nomination},
    )
    return base.model_copy(update={"spec": spec})


def routes(
    old: CapacityLedger, new: CapacityLedger, placements: list[ClusterResourcePlacement]
) -> list[Route]:
    room = Room(clusters={n: routing_copy(c) for n, c in CLUSTERS.items()}, ledgers={"m1": new})
    return route_change(
        Change("MODIFIED", old, new),  # type: ignore[arg-type]
        placements={p.metadata.name: routing_copy(p) for p in placements},
        standalone=True,
        checker=EligibilityChecker(),
        now=NOW,
        room=room,
    )


def test_a_nomination_wakes_each_victims_placement_for_the_preemptor() -> None:
    before = ledger("m1", **{"low-m1": "4", "other-m1": "4"})
    after = nominated(before, "checkout", "4", "low-m1")
    got = routes(before, after, [placement("low", "cpu=4")])
    assert [(r.placement, r.for_placement) for r in got] == [("low", "checkout")]
    assert got[0].reason == "cluster m1: crp/checkout (priority 100000) takes room a binding holds"
    assert routes(after, after, []) == []  # the same nomination again: nothing new


def test_nominated_room_freed_wakes_its_nominee_and_no_other_waiter() -> None:
    """low leaves m1 (8 CPUs): 4 of them are nominated for checkout. A cpu=6 waiter does not
    fit beside the nomination; checkout itself does."""
    held = nominated(ledger("m1", **{"low-m1": "4", "other-m1": "4"}), "checkout", "4", "low-m1")
    freed = nominated(ledger("m1", **{"other-m1": "4"}), "checkout", "4", "low-m1")
    waiting = [
        placement("checkout", "cpu=4", SHORT),
        placement("big", "cpu=6", SHORT),
    ]
    assert [r.placement for r in routes(held, freed, waiting)] == ["checkout"]


def test_a_turn_another_placement_waits_on_queues_no_later_than_that_placements() -> None:
    victim = QueuePriority(priority_key=4, value=0, priority_class="batch", within_key=2)
    preemptor = QueuePriority(priority_key=2, value=100000, within_key=0)
    lifted = no_later_than(victim, preemptor)
    assert (lifted.priority_key, lifted.within_key) == (2, 0)
    assert (lifted.value, lifted.priority_class) == (0, "batch")  # its own priority stays
    assert no_later_than(preemptor, victim) is preemptor
    assert no_later_than(victim, replace(victim, within_key=0)).within_key == 0
