"""The watcher's routes for preemption (docs/priority.md, "Preemption"): a nomination made on a
ledger wakes the placements of the victims it names, at no later a place in the queues than the
preemptor's own turns; room nominated for one placement wakes no other waiter, but its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from control.routes import Room, Route, route_change
from control.views import Change, routing_copy
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourcePlacement,
    NominatedVictim,
    Nomination,
)
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.framework.queue_sort import QueuePriority, no_later_than
from tests.unit.control.test_watcher_capacity_routes import (
    CLUSTERS,
    NOW,
    SHORT,
    ledger,
    placement,
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
    got = routes(before, after, [placement("low", requests="cpu=4")])
    assert [(r.placement, r.for_placement) for r in got] == [("low", "checkout")]
    assert got[0].reason == "cluster m1: crp/checkout (priority 100000) takes room a binding holds"
    assert routes(after, after, []) == []  # the same nomination again: nothing new


def test_nominated_room_freed_wakes_its_nominee_and_no_other_waiter() -> None:
    """low leaves m1 (8 CPUs): 4 of them are nominated for checkout. A cpu=6 waiter does not
    fit beside the nomination; checkout itself does."""
    held = nominated(ledger("m1", **{"low-m1": "4", "other-m1": "4"}), "checkout", "4", "low-m1")
    freed = nominated(ledger("m1", **{"other-m1": "4"}), "checkout", "4", "low-m1")
    waiting = [
        placement("checkout", requests="cpu=4", condition=SHORT),
        placement("big", requests="cpu=6", condition=SHORT),
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
