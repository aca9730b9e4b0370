"""Preemption's victims and order (scheduler/preemption/victims.py): kube-scheduler's
DefaultPreemption, with disruption budgets in the place of PodDisruptionBudgets."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

from hub.types import CapacityLedger, CapacityLedgerSpec, Nomination, ObjectMeta, Reservation
from scheduler.moves.budgets import BudgetState
from scheduler.preemption import (
    NEVER,
    Occupant,
    Preemptor,
    Room,
    budget_left,
    choose,
    plan_preemption,
)
from scheduler.preemption.inputs import rooms_from_ledgers
from scheduler.room.capacity import ClusterCapacity

URGENT = 100_000


def cpu(amount: int | str) -> dict[str, Fraction]:
    return {"cpu": Fraction(amount)}


def room(cluster: str, allocatable: int, *occupants: Occupant, extra: int = 0) -> Room:
    """A cluster of `allocatable` CPUs holding `occupants` (and `extra` CPUs reserved by no
    occupant, a reservation without a binding)."""
    held = sum((o.requests.get("cpu", Fraction(0)) for o in occupants), Fraction(extra))
    return Room(cluster, ClusterCapacity(cpu(allocatable), {"cpu": held}), occupants)


def occ(binding: str, priority: int, amount: int, placement: str | None = None) -> Occupant:
    return Occupant(binding, placement or f"crp-{binding}", priority, cpu(amount))


def preemptor(amount: int = 4, short: int = 1, priority: int = URGENT) -> Preemptor:
    return Preemptor("checkout", priority, cpu(amount), short)


def names(answer: object) -> list[str]:
    assert not isinstance(answer, str), answer
    return [v.binding for v in answer.victims]  # type: ignore[attr-defined]


def test_the_issues_fleet_frees_one_binding_on_each_of_two_clusters() -> None:
    rooms = [room(f"member-{i}", 8, occ(f"a{i}", 0, 4), occ(f"b{i}", 0, 4)) for i in (1, 2, 3)]
    plan = plan_preemption(preemptor(4, short=2), rooms, {})
    assert [c.cluster for c in plan.clusters] == ["member-1", "member-2"]
    assert [[v.binding for v in c.victims] for c in plan.clusters] == [["b1"], ["b2"]]
    assert [c.freed for c in plan.clusters] == ["cpu=4", "cpu=4"]
    assert plan.still_short == 0 and plan.rejected == []


def test_never_of_equal_or_higher_priority_and_never_its_own() -> None:
    cluster = room(
        "m",
        8,
        occ("same", URGENT, 4),
        occ("higher", URGENT + 1, 2),
        Occupant("mine", "checkout", 0, cpu(2)),
    )
    assert choose(preemptor(), cluster, {}) == "only equal or higher priority bindings"


def test_a_cluster_lower_bindings_cannot_free_says_by_how_much() -> None:
    cluster = room("m", 8, occ("low", 0, 2), occ("same", URGENT, 4), extra=1)
    assert choose(preemptor(4), cluster, {}) == (
        "even with every lower-priority binding gone, cpu short by 1"
    )
    unreported = Room("m", ClusterCapacity({}, {}), (occ("low", 0, 2),))
    assert choose(preemptor(4), unreported, {}) == (
        "even with every lower-priority binding gone, cpu not reported"
    )
    assert choose(preemptor(4), room("m", 2), {}) == "no binding to preempt, cpu short by 2"


def test_the_reprieve_spares_the_highest_priority_first() -> None:
    # 8 CPUs full; 4 needed. Taking all frees 8; giving back "high" (4) still fits, then
    # nothing else can come back.
    cluster = room("m", 8, occ("high", 50, 4), occ("mid", 10, 2), occ("low", 1, 2))
    assert names(choose(preemptor(4), cluster, {})) == ["mid", "low"]


def test_among_equal_priorities_the_smallest_are_spared_so_the_fewest_go() -> None:
    cluster = room("m", 8, occ("s1", 0, 1), occ("s2", 0, 1), occ("s3", 0, 2), occ("big", 0, 4))
    assert names(choose(preemptor(4), cluster, {})) == ["big"]


def test_priority_comes_before_count_as_in_kube_scheduler() -> None:
    # One victim of priority 5 would do; two of priority 1 are taken instead.
    cluster = room("m", 12, occ("a", 5, 6), occ("b", 1, 3), occ("c", 1, 3))
    assert names(choose(preemptor(6), cluster, {})) == ["b", "c"]


def test_budgets_are_hard_by_default() -> None:
    cluster = room("m", 8, occ("kept", 0, 4, "crp-a"), occ("free", 1, 4, "crp-b"))
    assert names(choose(preemptor(4), cluster, {"crp-a": 0})) == ["free"]
    assert choose(preemptor(8), cluster, {"crp-a": 0}) == (
        "even with every lower-priority binding gone, cpu short by 4 "
        "(1 lower-priority binding(s) kept by their placement's disruption budget)"
    )
    assert choose(preemptor(4), cluster, {"crp-a": 0, "crp-b": 0}) == (
        "every lower-priority binding (2) is kept by its placement's disruption budget"
    )


def test_overspending_budgets_spares_the_violating_first_as_kube_scheduler() -> None:
    cluster = room("m", 8, occ("kept", 0, 4, "crp-a"), occ("free", 1, 4, "crp-b"))
    # Highest priority first would spare "free" and take "kept"; the budget turns it round.
    answer = choose(preemptor(4), cluster, {"crp-a": 0}, overspend_budgets=True)
    assert names(answer) == ["free"]
    forced = choose(preemptor(8), cluster, {"crp-a": 0}, overspend_budgets=True)
    assert not isinstance(forced, str)
    assert forced.over_budget == {"kept"}


def test_clusters_in_kube_schedulers_order() -> None:
    p = preemptor(4)
    # 1. fewest budget violations beats a lower priority
    rooms = [room("a", 4, occ("a1", 0, 4, "crp-x")), room("b", 4, occ("b1", 9, 4))]
    plan = plan_preemption(p, rooms, {"crp-x": 0}, overspend_budgets=True)
    assert plan.clusters[0].cluster == "b"
    # 2. lowest highest-victim priority beats fewer victims
    rooms = [room("a", 4, occ("a1", 9, 4)), room("b", 4, occ("b1", 1, 2), occ("b2", 1, 2))]
    assert plan_preemption(p, rooms, {}).clusters[0].cluster == "b"
    # 3. lowest sum of priorities
    rooms = [
        room("a", 4, occ("a1", 5, 2), occ("a2", 5, 2)),
        room("b", 4, occ("b1", 5, 2), occ("b2", 1, 2)),
    ]
    assert plan_preemption(p, rooms, {}).clusters[0].cluster == "b"
    # ... offset so that more victims of a negative priority never sum lower
    rooms = [
        room("a", 4, occ("a1", -5, 2), occ("a2", -5, 2)),
        room("b", 4, occ("b1", -5, 4)),
    ]
    assert plan_preemption(p, rooms, {}).clusters[0].cluster == "b"
    # 4. fewest victims (the offset sums rarely tie when counts differ), 5. the name
    rooms = [room("b", 4, occ("b1", 0, 4)), room("a", 4, occ("a1", 0, 4))]
    assert [c.cluster for c in plan_preemption(preemptor(4, 2), rooms, {}).clusters] == ["a", "b"]


def test_a_cluster_with_room_already_needs_no_victim_and_comes_first() -> None:
    rooms = [room("a", 8, occ("a1", 0, 4)), room("b", 8, occ("b1", 0, 8))]
    plan = plan_preemption(preemptor(4), rooms, {})
    assert [(c.cluster, c.victims) for c in plan.clusters] == [("a", [])]


def test_only_what_it_is_short_of_and_says_what_is_left() -> None:
    rooms = [
        room("a", 4, occ("a1", 0, 4)),
        room("b", 4, occ("b1", URGENT, 4)),
        room("c", 4, occ("c1", 0, 4)),
        room("d", 4, occ("d1", 0, 4)),
    ]
    plan = plan_preemption(preemptor(4, short=2), rooms, {})
    assert [c.cluster for c in plan.clusters] == ["a", "c"]
    assert [(r.cluster, r.reason) for r in plan.rejected] == [
        ("b", "only equal or higher priority bindings")
    ]
    plan = plan_preemption(preemptor(4, short=5), rooms, {})
    assert [c.cluster for c in plan.clusters] == ["a", "c", "d"]
    assert plan.still_short == 2


def test_a_budget_spent_on_one_cluster_is_spent_for_the_next() -> None:
    rooms = [room(c, 4, occ(f"{c}1", 0, 4, "crp-low")) for c in ("a", "b", "c")]
    plan = plan_preemption(preemptor(4, short=3), rooms, {"crp-low": 2})
    assert [c.cluster for c in plan.clusters] == ["a", "b"]
    assert [(r.cluster, r.reason) for r in plan.rejected] == [
        ("c", "every lower-priority binding (1) is kept by its placement's disruption budget")
    ]
    assert plan.still_short == 1


def test_never_preempts_nothing() -> None:
    p = Preemptor("checkout", URGENT, cpu(4), 2, policy=NEVER)
    plan = plan_preemption(p, [room("a", 4, occ("a1", 0, 4))], {})
    assert plan.clusters == [] and plan.still_short == 2
    assert "preemptionPolicy: Never" in plan.reason


def test_the_plan_crosses_the_wire_in_camel_case() -> None:
    plan = plan_preemption(preemptor(4), [room("a", 4, occ("a1", 0, 4))], {})
    wire = plan.model_dump(mode="json")
    assert wire["stillShort"] == 0 and wire["clusters"][0]["budgetViolations"] == 0
    assert type(plan).model_validate({**wire, "addedLater": 1}) == plan


def test_budget_left_counts_unschedules_in_a_row() -> None:
    assert budget_left(BudgetState(desired=3, bindings=3, available=3), 5) is None
    state = BudgetState(desired=3, bindings=3, available=3, max_unavailable=1)
    assert budget_left(state, 5) == 1
    state = BudgetState(desired=4, bindings=4, available=4, min_available=2)
    assert budget_left(state, 5) == 2
    assert budget_left(state, 1) == 1


def test_rooms_from_ledgers_count_every_reservation_but_preempt_only_active_known_ones() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)

    def reserve(placement: str, amount: str) -> Reservation:
        return Reservation(placement=placement, requests={"cpu": amount}, reserved_at=when)

    ledger = CapacityLedger(
        metadata=ObjectMeta(name="m1"),
        spec=CapacityLedgerSpec(
            reservations={
                "low-m1": reserve("low", "2"),
                "gone-m1": reserve("gone", "1"),  # its placement's priority is not known
                "stale-m1": reserve("low2", "1"),  # its binding is not active
                "checkout-m1": reserve("checkout", "500m"),  # the preemptor's own, active
                "odd-m1": reserve("odd", "lots"),  # unreadable: frees nothing
            }
        ),
    )
    rooms = rooms_from_ledgers(
        [("m1", {"cpu": "8"}), ("m2", {"cpu": "4"})],
        {"m1": ledger},
        active={"low-m1", "gone-m1", "checkout-m1", "odd-m1"},
        priorities={"low": 0, "low2": 0, "checkout": URGENT, "odd": 0},
        own={"checkout-m1"},
    )
    m1, m2 = rooms
    assert [(o.binding, o.placement, o.priority, dict(o.requests)) for o in m1.occupants] == [
        ("low-m1", "low", 0, cpu(2)),
        ("odd-m1", "odd", 0, {}),
    ]
    assert m1.capacity.free("cpu") == 4  # 8 - (2 + 1 + 1): the preemptor's own left out
    assert m2.occupants == () and m2.capacity.free("cpu") == 4
    assert names(choose(preemptor(6), m1, {})) == ["low-m1"]


def test_room_nominated_for_the_preemptor_is_its_own_and_for_anyone_else_taken() -> None:
    """A preemptor whose demand changed plans again on the ledgers it read: the room nominated
    for it is free to it (it is dropping it), and room nominated for another is not."""
    when = datetime(2026, 1, 1, tzinfo=UTC)
    nomination = Nomination(priority=URGENT, requests={"cpu": "4"}, nominated_at=when)
    ledger = CapacityLedger(
        metadata=ObjectMeta(name="m1"),
        spec=CapacityLedgerSpec(
            reservations={
                "low-m1": Reservation(placement="low", requests={"cpu": "4"}, reserved_at=when)
            },
            nominations={"checkout": nomination, "other": nomination},
        ),
    )
    (room,) = rooms_from_ledgers(
        [("m1", {"cpu": "12"})],
        {"m1": ledger},
        active={"low-m1"},
        priorities={"low": 0},
        nominee="checkout",
    )
    assert room.capacity.free("cpu") == 4  # 12 - 4 (low) - 4 (other's nomination)
