"""Preemption across clusters against a real devhub (docs/priority.md, "Preemption"): the issue's
fleet, three clusters of 8 CPUs filled by six `cpu=4` placements of a low class, and an urgent
PickN-2 `cpu=4` placement of a class 100,000 higher. Turns run as the workflows run them, the
victims' when the watcher's routes say so; after every step no cluster holds more than its
room."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.capacity import NOMINATION_GRACE, Ledgers
from activities.fleet_state import read_fleet_state
from activities.preemption import PREEMPTED_BY_ANNOTATION, nominations_of
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    Event,
    Namespace,
    ObjectMeta,
)
from scheduler.framework.profile import load_profile
from scheduler.invariants import find_violations
from scheduler.room.capacity import is_active
from tests.integration.activities.activity_helpers import (
    Rig,
    add_budget,
    add_cluster,
    add_placement,
    pick_n,
    placement_condition,
)
from tests.integration.activities.preemption_helpers import (
    LOW,
    LOWS,
    PROD,
    URGENT,
    Fleet,
    active_by_cluster,
    add_class,
    add_rp,
    asks,
    fill,
    owner,
    rp_turn,
)


@pytest.fixture
def full(hub: HubClient, env: ActivityEnvironment, make_activities: Callable[..., Rig]) -> Fleet:
    return fill(hub, env, make_activities())


def test_the_urgent_placement_takes_exactly_the_room_it_needs(full: Fleet, hub: HubClient) -> None:
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    first = full.turn("checkout")
    assert first.report is not None and first.report.writes.nominated == 2, first.moves
    nominated = nominations_of(Ledgers.read(hub), "checkout")
    assert len(nominated) == 2
    victims = {v.placement for n in nominated.values() for v in n.victims}
    assert len(victims) == 2  # one cpu=4 binding per cluster frees one cpu=4 binding's room
    assert all(
        v.priority == LOW and n.priority == URGENT for n in nominated.values() for v in n.victims
    )
    said = [line for line in first.moves if line.startswith("preempting on")]
    assert len(said) == 2 and all("1 victim(s)" in line for line in said), first.moves
    assert victims <= full.owed  # the watcher wakes the victims

    full.deliver()

    by_cluster = active_by_cluster(hub)
    urgent = sorted(
        b.spec.target_cluster for bs in by_cluster.values() for b in bs if owner(b) == "checkout"
    )
    assert urgent == sorted(nominated), by_cluster
    assert sum(len(b) for b in by_cluster.values()) == 6  # 4 low + 2 urgent: nothing extra freed
    assert not nominations_of(Ledgers.read(hub), "checkout")  # turned into reservations
    for victim in victims:
        gone = [
            b
            for b in hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: victim}).items
            if not is_active(b)
        ]
        assert len(gone) == 1
        cluster = gone[0].spec.target_cluster
        mark = gone[0].metadata.annotations[PREEMPTED_BY_ANNOTATION]
        assert mark == f"crp/checkout (priority {URGENT}) on {cluster}, over priority {LOW}"
        condition = placement_condition(hub, victim)
        assert condition is not None and condition.status == "False"
        assert f"preempted by crp/checkout (priority {URGENT}) on {cluster}" in condition.message
        assert any("preempted by crp/checkout" in line for line in full.lines[victim])
    events = [e for e in hub.list(Event, namespace="default").items if e.reason == "Preempted"]
    assert sorted(e.involved_object.name for e in events) == sorted(victims)
    sample = full.rig.metrics.registry.get_sample_value(
        "fleet_scheduler_preemptions_total", {"priority_class": "release-critical"}
    )
    assert sample == 2
    state = read_fleet_state(hub, resource_placements=False)
    assert not find_violations(state, datetime.now(UTC))
    assert full.samples >= 10  # 6 low turns, the urgent's 2, the victims' 2


def test_a_class_that_never_preempts_waits(full: Fleet, hub: HubClient) -> None:
    add_placement(hub, "gentle", pick_n(2), annotations=asks(4, "polite"))
    result = full.turn("gentle")
    assert result.report is not None and result.report.writes.nominated == 0
    assert not nominations_of(Ledgers.read(hub), "gentle")
    assert any("preemptionPolicy: Never" in line for line in result.moves), result.moves
    assert all(len(b) == 2 for b in active_by_cluster(hub).values())
    condition = placement_condition(hub, "gentle")
    assert condition is not None and "not enough room" in condition.message


def test_equal_priority_is_never_a_victim(full: Fleet, hub: HubClient) -> None:
    add_placement(hub, "peer", pick_n(1), annotations=asks(4, "batch"))
    result = full.turn("peer")
    assert result.report is not None and result.report.writes.nominated == 0
    assert any("only equal or higher priority" in line for line in result.moves), result.moves


def test_a_victim_with_room_elsewhere_moves_there_and_only_the_other_leaves(
    full: Fleet, hub: HubClient
) -> None:
    add_cluster(
        hub, "member-4", allocatable={"cpu": "4"}, labels=PROD
    )  # room for one cpu=4 binding
    add_placement(hub, "checkout", pick_n(1), annotations=asks(8, "release-critical"))
    first = full.turn("checkout")  # 8 CPUs fit nowhere: a whole cluster's two bindings go
    assert first.report is not None and first.report.writes.nominated == 1, first.moves
    ((cluster, nomination),) = nominations_of(Ledgers.read(hub), "checkout").items()
    assert len(nomination.victims) == 2
    full.deliver()
    lines = [line for p in (v.placement for v in nomination.victims) for line in full.lines[p]]
    moved = [line for line in lines if line.startswith("moved ")]
    gone = [line for line in lines if line.startswith("unscheduled ")]
    assert len(moved) == 1 and "-> member-4" in moved[0], lines
    assert len(gone) == 1, lines
    by_cluster = active_by_cluster(hub)
    assert [owner(b) for b in by_cluster[cluster]] == ["checkout"]
    assert len(by_cluster["member-4"]) == 1
    events = [e for e in hub.list(Event, namespace="default").items if e.reason == "Preempted"]
    assert len(events) == 2, [e.message for e in events]  # one per victim, moved or not
    assert sum("moved to member-4, preempted by crp/checkout" in e.message for e in events) == 1


def test_a_budget_that_allows_no_disruption_keeps_its_binding(full: Fleet, hub: HubClient) -> None:
    for name in LOWS:
        add_budget(hub, name, minAvailable=1)
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    result = full.turn("checkout")
    assert result.report is not None and result.report.writes.nominated == 0, result.moves
    assert any("disruption budget" in line for line in result.moves), result.moves


def test_waiting_on_victims_asks_for_a_turn_once_the_nominations_would_be_stale(
    full: Fleet, hub: HubClient
) -> None:
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    first = full.turn("checkout")
    assert first.report is not None and first.report.writes.nominated == 1
    assert first.report.requeue_after_seconds == NOMINATION_GRACE.total_seconds() + 15
    again = full.turn("checkout")  # woken before its victim left: it waits, it does not plan
    assert again.report is not None and again.report.writes.nominated == 0
    assert again.moves == []  # the first turn's lines, naming the victim, stay explain's
    assert again.report.requeue_after_seconds is not None


def test_a_change_of_demand_drops_the_nomination_and_preempts_for_the_new_one(
    full: Fleet, hub: HubClient
) -> None:
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    (before,) = nominations_of(Ledgers.read(hub), "checkout").values()
    assert len(before.victims) == 1
    crp = hub.get(ClusterResourcePlacement, "checkout")
    hub.patch(
        ClusterResourcePlacement,
        "checkout",
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: "cpu=8"}}},
        resource_version=crp.metadata.resource_version,
    )
    full.turn("checkout")
    (after,) = nominations_of(Ledgers.read(hub), "checkout").values()
    assert after.requests == {"cpu": "8"} and len(after.victims) == 2
    full.deliver()
    mine = [b for bs in active_by_cluster(hub).values() for b in bs if owner(b) == "checkout"]
    assert len(mine) == 1
    assert sum(len(bs) for bs in active_by_cluster(hub).values()) == 5  # 4 low + checkout


def test_a_resource_placement_preempts_only_in_its_own_namespace_by_default(
    hub: HubClient, env: ActivityEnvironment, make_activities: Callable[..., Rig]
) -> None:
    add_class(hub, "batch", LOW)
    add_class(hub, "release-critical", URGENT)
    for namespace in ("shop", "bank"):
        hub.create(Namespace(metadata=ObjectMeta(name=namespace)))
    fleet = Fleet(hub, env, make_activities(), cpu="4")
    # One cluster each: a CRP's, bank's and shop's own low-priority work.
    add_placement(hub, "crp-low", pick_n(1), annotations=asks(4, "batch"))
    fleet.turn("crp-low")
    add_rp(hub, "bank", "ledger", 1, asks(4, "batch"))
    rp_turn(fleet, "bank", "ledger")
    add_rp(hub, "shop", "batch-job", 1, asks(4, "batch"))
    rp_turn(fleet, "shop", "batch-job")
    assert all(len(bs) == 1 for bs in active_by_cluster(hub).values())

    add_rp(hub, "shop", "checkout", 1, asks(4, "release-critical"))
    result = rp_turn(fleet, "shop", "checkout")
    assert result.report is not None and result.report.writes.nominated == 1, result.moves
    (nomination,) = nominations_of(Ledgers.read(hub), "shop/checkout").values()
    assert [v.placement for v in nomination.victims] == ["shop/batch-job"]


def test_a_resource_placement_never_preempts_a_cluster_placement_unless_the_profile_says(
    hub: HubClient, env: ActivityEnvironment, make_activities: Callable[..., Rig]
) -> None:
    add_class(hub, "batch", LOW)
    add_class(hub, "release-critical", URGENT)
    hub.create(Namespace(metadata=ObjectMeta(name="shop")))
    fleet = Fleet(hub, env, make_activities(), cpu="4")
    for i in range(3):
        add_placement(hub, f"crp-low-{i}", pick_n(1), annotations=asks(4, "batch"))
        fleet.turn(f"crp-low-{i}")
    add_rp(hub, "shop", "checkout", 1, asks(4, "release-critical"))
    result = rp_turn(fleet, "shop", "checkout")
    assert result.report is not None and result.report.writes.nominated == 0
    assert any("does not preempt a ClusterResourcePlacement" in x for x in result.moves), (
        result.moves
    )

    profile = load_profile(
        "pluginConfig:\n  - name: DefaultPreemption\n    args: {resourcePlacementVictims: All}\n"
    )
    fleet.rig = make_activities(profile=profile)
    result = rp_turn(fleet, "shop", "checkout")
    assert result.report is not None and result.report.writes.nominated == 1, result.moves


def test_a_victim_turn_cut_short_before_its_release_is_finished_by_the_retry(
    full: Fleet, hub: HubClient, devhub: DevHub
) -> None:
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    ((cluster, nomination),) = nominations_of(Ledgers.read(hub), "checkout").items()
    (victim,) = nomination.victims
    fault = devhub.faults.inject(verb="update", resource="capacityledgers", status=500, count=1)
    try:
        with pytest.raises(ApplicationError):  # as Temporal sees it: the attempt failed
            full.turn(victim.placement)
    finally:
        fault.remove()
    binding = hub.get(ClusterResourceBinding, victim.binding)
    assert not is_active(binding)  # unscheduled, its room still held
    assert victim.binding in hub.get(CapacityLedger, cluster).spec.reservations
    retried = full.turn(victim.placement)
    assert victim.binding not in hub.get(CapacityLedger, cluster).spec.reservations
    assert not any(line.startswith("unscheduled") for line in retried.moves)  # not done twice
    assert "checkout" in full.owed  # the room it freed wakes the preemptor
    full.deliver()
    assert "checkout" in {owner(b) for b in active_by_cluster(hub)[cluster]}


def test_a_profile_without_default_preemption_preempts_nothing(
    full: Fleet, hub: HubClient, make_activities: Callable[..., Rig]
) -> None:
    profile = load_profile("plugins:\n  postFilter:\n    disabled: [{name: DefaultPreemption}]\n")
    assert profile.post_filter == ()
    full.rig = make_activities(profile=profile)
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    result = full.turn("checkout")
    assert result.report is not None and result.report.writes.nominated == 0
    assert not nominations_of(Ledgers.read(hub), "checkout")
    assert all(len(bs) == 2 for bs in active_by_cluster(hub).values())


def test_turns_that_wait_for_the_victims_keep_the_lines_that_name_them(
    full: Fleet, hub: HubClient
) -> None:
    """The workflow keeps the lines of the last turn that had any (`explain`'s "moves before
    cycle N"): the urgent placement's turns after the one that chose its victims, binding one
    cluster's room while the other victim has not yielded yet, say nothing new, so `explain`
    still names every victim."""
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    first = full.turn("checkout")
    nominated = nominations_of(Ledgers.read(hub), "checkout")
    assert len(nominated) == 2, first.moves
    (early, late) = sorted(v.placement for n in nominated.values() for v in n.victims)
    full.turn(early)
    half = full.turn("checkout")  # one cluster's room is free, the other is still nominated
    assert half.report is not None and half.report.writes.created == 1, half.moves
    assert half.moves == []
    full.turn(late)
    done = full.turn("checkout")
    assert done.report is not None and done.report.outcome.fulfilled, done.moves
    assert done.moves == []
