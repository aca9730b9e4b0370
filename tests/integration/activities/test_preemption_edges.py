"""Preemption's edges against a real devhub (docs/priority.md, "Preemption"), as an adversarial
user would try them on the issue's full fleet: preemptors and victims that go away or change
while a preemption is under way, two preemptors racing for the same room, hand-edited ledgers,
and a preemptor's turn cut short between two nominations. After every step no cluster holds
more than its room (the Fleet's sample); at the end nothing waits for ever and `check` is
clean."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.capacity import (
    NOMINATION_GRACE,
    Ledgers,
    drop_nominations,
    sweep_nominations_of_fleet,
)
from activities.fleet_state import read_fleet_state
from activities.preemption import nominations_of
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.kinds import split_key
from hub.types import (
    CapacityLedger,
    ClusterResourcePlacement,
    Namespace,
    NominatedVictim,
    Nomination,
    ObjectMeta,
    ResourcePlacement,
)
from scheduler.invariants import find_violations
from tests.integration.activities.activity_helpers import (
    Rig,
    add_budget,
    add_cluster,
    add_placement,
    pick_n,
)
from tests.integration.activities.preemption_helpers import (
    LOW,
    URGENT,
    Fleet,
    active_by_cluster,
    add_class,
    asks,
    fill,
    owner,
)
from workflows.models.turn import CleanupRequest


@pytest.fixture
def full(hub: HubClient, env: ActivityEnvironment, make_activities: Callable[..., Rig]) -> Fleet:
    return fill(hub, env, make_activities())


def bound(hub: HubClient) -> dict[str, int]:
    """Placement -> how many active bindings it has."""
    out: dict[str, int] = {}
    for bindings in active_by_cluster(hub).values():
        for binding in bindings:
            out[owner(binding)] = out.get(owner(binding), 0) + 1
    return out


def lows_left(hub: HubClient) -> int:
    return sum(n for p, n in bound(hub).items() if p.startswith("low-"))


def clean(hub: HubClient, *, namespaced: bool = False) -> list[str]:
    state = read_fleet_state(hub, resource_placements=namespaced)
    return [f"{v.invariant}: {v.message}" for v in find_violations(state, datetime.now(UTC))]


def set_annotation(hub: HubClient, name: str, key: str, value: str) -> None:
    crp = hub.get(ClusterResourcePlacement, name)
    hub.patch(
        ClusterResourcePlacement,
        name,
        {"metadata": {"annotations": {key: value}}},
        resource_version=crp.metadata.resource_version,
    )


def delete_placement(full: Fleet, hub: HubClient, name: str) -> None:
    """Delete it and run its workflow's cleanup, as the workflow does when it sees it go."""
    hub.delete(ClusterResourcePlacement, name)
    full.env.run(full.rig.activities.cleanup_placement, CleanupRequest(placement=name))
    full.sample()


def age_nominations(hub: HubClient, placement: str, by: timedelta) -> None:
    for ledger in hub.list(CapacityLedger).items:
        nomination = ledger.spec.nominations.get(placement)
        if nomination is None:
            continue
        older = nomination.model_copy(update={"nominated_at": nomination.nominated_at - by})
        spec = ledger.spec.model_copy(
            update={"nominations": {**ledger.spec.nominations, placement: older}}
        )
        hub.update(ledger.model_copy(update={"spec": spec}))


def test_a_preemptor_deleted_after_nominating_leaves_its_victims_in_place(
    full: Fleet, hub: HubClient
) -> None:
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    assert len(nominations_of(Ledgers.read(hub), "checkout")) == 2
    owed = set(full.owed)
    delete_placement(full, hub, "checkout")
    assert not nominations_of(Ledgers.read(hub), "checkout")  # its cleanup dropped them
    for victim in sorted(owed - {"checkout"}):  # the turns the nominations had routed
        full.turn(victim)
    assert lows_left(hub) == 6  # nothing freed for a placement that is gone
    assert clean(hub) == []


def test_a_victim_does_not_yield_to_a_preemptor_that_is_gone(full: Fleet, hub: HubClient) -> None:
    """The preemptor is deleted before its workflow's cleanup ran (or its cleanup is late): the
    victims' turns the nominations routed must not free room for nobody."""
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    owed = set(full.owed) - {"checkout"}
    assert len(owed) == 2
    hub.delete(ClusterResourcePlacement, "checkout")
    for victim in sorted(owed):
        kept = full.turn(victim)
        assert any("crp/checkout: it is " in line for line in kept.moves), kept.moves
    assert lows_left(hub) == 6
    assert sweep_nominations_of_fleet(hub, [], datetime.now(UTC)) == 2  # the reconcile's sweep
    assert clean(hub) == []


def test_a_victim_placement_deleted_while_nominated_still_lets_the_preemptor_bind(
    full: Fleet, hub: HubClient
) -> None:
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    ((cluster, nomination),) = nominations_of(Ledgers.read(hub), "checkout").items()
    (victim,) = nomination.victims
    delete_placement(full, hub, victim.placement)
    full.turn("checkout")
    full.deliver()
    assert bound(hub).get("checkout") == 1
    assert "checkout" in {owner(b) for b in active_by_cluster(hub)[cluster]}
    assert lows_left(hub) == 5
    assert not nominations_of(Ledgers.read(hub), "checkout")
    assert clean(hub) == []


@pytest.mark.parametrize("first", ["urgent", "critical"])
def test_two_preemptors_of_different_priorities_racing_for_the_same_fleet(
    full: Fleet, hub: HubClient, first: str
) -> None:
    add_class(hub, "critical", URGENT * 2)
    add_placement(hub, "urgent", pick_n(1), annotations=asks(4, "release-critical"))
    add_placement(hub, "critical", pick_n(2), annotations=asks(4, "critical"))
    second = "critical" if first == "urgent" else "urgent"
    full.turn(first)
    owed = set(full.owed)
    full.turn(second)
    full.owed |= owed
    full.deliver()
    for _ in range(3):  # bounded by: each turn binds what its room now lets it
        if bound(hub).get("urgent") == 1 and bound(hub).get("critical") == 2:
            break
        full.turn("urgent")
        full.turn("critical")
        full.deliver()
    assert bound(hub).get("urgent") == 1 and bound(hub).get("critical") == 2, bound(hub)
    assert lows_left(hub) == 3  # exactly the room of three cpu=4 bindings freed
    ledgers = Ledgers.read(hub)
    assert not nominations_of(ledgers, "urgent") and not nominations_of(ledgers, "critical")
    assert clean(hub) == []


def test_a_preemptor_that_no_longer_needs_the_room_drops_it(full: Fleet, hub: HubClient) -> None:
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    assert len(nominations_of(Ledgers.read(hub), "checkout")) == 2
    crp = hub.get(ClusterResourcePlacement, "checkout")
    hub.patch(
        ClusterResourcePlacement,
        "checkout",
        {"spec": {"policy": {"numberOfClusters": 0}}},
        resource_version=crp.metadata.resource_version,
    )
    full.turn("checkout")
    assert not nominations_of(Ledgers.read(hub), "checkout")
    full.deliver()
    assert lows_left(hub) == 6
    assert clean(hub) == []


def test_a_victim_whose_budget_tightens_keeps_its_binding_and_another_is_chosen_later(
    full: Fleet, hub: HubClient
) -> None:
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    ((_, nomination),) = nominations_of(Ledgers.read(hub), "checkout").items()
    (victim,) = nomination.victims
    add_budget(hub, victim.placement, minAvailable=1)
    kept = full.turn(victim.placement)
    assert any("disruption budget" in line for line in kept.moves), kept.moves
    assert lows_left(hub) == 6
    # The nomination goes stale; the preemptor's own sweep drops it and it chooses again.
    age_nominations(hub, "checkout", NOMINATION_GRACE + timedelta(seconds=1))
    again = full.turn("checkout")
    assert again.report is not None and again.report.writes.nominated == 1, again.moves
    (renewed,) = nominations_of(Ledgers.read(hub), "checkout").values()
    assert victim.placement not in {v.placement for v in renewed.victims}
    full.deliver()
    assert bound(hub).get("checkout") == 1 and bound(hub).get(victim.placement) == 1
    assert lows_left(hub) == 5
    assert clean(hub) == []


def test_a_pick_all_preemptor_takes_one_bindings_room_on_every_cluster(
    full: Fleet, hub: HubClient
) -> None:
    policy = {"placementType": "PickAll", **{k: v for k, v in pick_n(1).items() if k == "affinity"}}
    add_placement(hub, "agent", policy, annotations=asks(4, "release-critical"))
    full.turn("agent")
    full.deliver()
    full.turn("agent")
    full.deliver()
    assert bound(hub).get("agent") == 3, (bound(hub), full.lines.get("agent"))
    assert lows_left(hub) == 3
    assert clean(hub) == []


def test_a_resource_placement_victim_with_room_elsewhere_moves(
    hub: HubClient, env: ActivityEnvironment, make_activities: Callable[..., Rig]
) -> None:
    """A CRP preempts a ResourcePlacement's binding (anything lower); the victim, whose policy
    takes any cluster, moves to one the preemptor's affinity leaves out, rather than leave."""
    add_class(hub, "batch", LOW)
    add_class(hub, "release-critical", URGENT)
    hub.create(Namespace(metadata=ObjectMeta(name="shop")))
    fleet = Fleet(hub, env, make_activities(), cpu="4")
    for i in range(3):
        hub.create(
            ResourcePlacement.from_wire(
                {
                    "metadata": {
                        "name": f"job-{i}",
                        "namespace": "shop",
                        "annotations": asks(4, "batch"),
                    },
                    "spec": {
                        "resourceSelectors": [
                            {"group": "", "version": "v1", "kind": "ConfigMap", "name": "app"}
                        ],
                        "policy": {"placementType": "PickN", "numberOfClusters": 1},
                    },
                }
            )
        )
        fleet.turn(f"shop/job-{i}")
    assert all(len(bs) == 1 for bs in active_by_cluster(hub).values())
    add_cluster(hub, "spare", allocatable={"cpu": "4"}, labels={"env": "dev"})
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    fleet.turn("checkout")
    ((cluster, nomination),) = nominations_of(Ledgers.read(hub), "checkout").items()
    (victim,) = nomination.victims
    fleet.deliver()
    moved = [line for line in fleet.lines[victim.placement] if line.startswith("moved ")]
    assert len(moved) == 1 and "-> spare" in moved[0], fleet.lines[victim.placement]
    by_cluster = active_by_cluster(hub)
    assert [owner(b) for b in by_cluster[cluster]] == ["checkout"]
    assert [owner(b) for b in by_cluster["spare"]] == [split_key(victim.placement)[1]]
    assert clean(hub, namespaced=True) == []


def hand_nominate(hub: HubClient, cluster: str, preemptor: str, nomination: Nomination) -> None:
    ledger = hub.get(CapacityLedger, cluster)
    spec = ledger.spec.model_copy(
        update={"nominations": {**ledger.spec.nominations, preemptor: nomination}}
    )
    hub.update(ledger.model_copy(update={"spec": spec}))


def test_a_hand_edited_nomination_of_an_equal_priority_victim_is_flagged_and_not_obeyed(
    full: Fleet, hub: HubClient
) -> None:
    ledger = hub.get(CapacityLedger, "member-1")
    key, reservation = sorted(ledger.spec.reservations.items())[0]
    add_placement(hub, "peer", pick_n(1), annotations=asks(4, "batch"))
    hand_nominate(
        hub,
        "member-1",
        "peer",
        Nomination(
            priority=LOW,
            requests={"cpu": "4"},
            victims=[NominatedVictim(binding=key, placement=reservation.placement, priority=LOW)],
            nominated_at=datetime.now(UTC),
        ),
    )
    found = clean(hub)
    assert any("not lower" in v for v in found), found
    full.turn(reservation.placement)
    assert lows_left(hub) == 6  # a victim of equal priority never yields


def test_a_victim_reclassed_to_the_preemptors_priority_does_not_yield(
    full: Fleet, hub: HubClient
) -> None:
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    ((_, nomination),) = nominations_of(Ledgers.read(hub), "checkout").items()
    (victim,) = nomination.victims
    set_annotation(hub, victim.placement, names.PRIORITY_CLASS_ANNOTATION, "release-critical")
    full.turn(victim.placement)
    assert bound(hub).get(victim.placement) == 1


def test_nominations_naming_nothing_or_a_missing_binding_crash_nothing(
    full: Fleet, hub: HubClient
) -> None:
    now = datetime.now(UTC)
    hand_nominate(
        hub,
        "member-2",
        "ghost",
        Nomination(priority=URGENT, requests={"cpu": "4"}, victims=[], nominated_at=now),
    )
    add_placement(hub, "checkout", pick_n(1), annotations=asks(4, "release-critical"))
    hand_nominate(
        hub,
        "member-3",
        "checkout",
        Nomination(
            priority=URGENT,
            requests={"cpu": "4"},
            victims=[NominatedVictim(binding="no-such-binding", placement="low-0", priority=LOW)],
            nominated_at=now,
        ),
    )
    found = clean(hub)
    assert any("ghost does not exist" in v for v in found), found
    full.turn("low-0")
    waiting = full.turn("checkout")
    assert waiting.report is not None and waiting.report.requeue_after_seconds is not None
    age_nominations(hub, "checkout", NOMINATION_GRACE + timedelta(seconds=1))
    full.turn("checkout")  # its sweep drops the nomination nobody can satisfy; it preempts
    full.deliver()
    assert bound(hub).get("checkout") == 1
    assert lows_left(hub) == 5


def settle(full: Fleet, hub: HubClient, placement: str, want: int) -> None:
    """Deliver the routed turns, and the preemptor's own requeued turns, until it has `want`."""
    full.deliver()
    for _ in range(3):  # bounded by: each round binds what was freed and nominates the rest
        if bound(hub).get(placement) == want:
            return
        full.turn(placement)
        full.deliver()


def test_a_preemptor_turn_failing_at_its_first_nomination_is_retried_whole(
    full: Fleet, hub: HubClient, devhub: DevHub
) -> None:
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    fault = devhub.faults.inject(verb="update", resource="capacityledgers", status=500, count=1)
    try:
        with pytest.raises(ApplicationError):  # as Temporal sees it: the attempt failed
            full.turn("checkout")
    finally:
        fault.remove()
    assert not nominations_of(Ledgers.read(hub), "checkout")
    retried = full.turn("checkout")
    assert retried.report is not None and retried.report.writes.nominated == 2, retried.moves
    settle(full, hub, "checkout", 2)
    assert bound(hub).get("checkout") == 2, full.lines.get("checkout")
    assert lows_left(hub) == 4
    assert clean(hub) == []


def test_a_preemptor_turn_cut_short_between_two_nominations_never_chooses_twice(
    full: Fleet, hub: HubClient
) -> None:
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    owed = set(full.owed)  # the watcher routed the victims on the first nomination
    nominated = nominations_of(Ledgers.read(hub), "checkout")
    assert len(nominated) == 2
    # As if the attempt died after its first nomination: the second never made it.
    drop_nominations(hub, "checkout", [sorted(nominated)[1]])
    retried = full.turn("checkout")
    assert retried.report is not None and retried.report.writes.nominated == 0, retried.moves
    full.owed |= owed
    settle(full, hub, "checkout", 2)
    assert bound(hub).get("checkout") == 2, full.lines.get("checkout")
    assert lows_left(hub) == 4  # one victim a cluster, never a second set
    assert clean(hub) == []


def test_a_change_of_requests_while_victims_are_half_gone(full: Fleet, hub: HubClient) -> None:
    add_placement(hub, "checkout", pick_n(2), annotations=asks(4, "release-critical"))
    full.turn("checkout")
    nominated = nominations_of(Ledgers.read(hub), "checkout")
    (early, _late) = sorted(v.placement for n in nominated.values() for v in n.victims)
    full.turn(early)
    set_annotation(hub, "checkout", names.REQUESTS_ANNOTATION, "cpu=2")
    full.turn("checkout")
    settle(full, hub, "checkout", 2)
    assert bound(hub).get("checkout") == 2, full.lines.get("checkout")
    assert lows_left(hub) == 4  # every cluster is full: cpu=2 on two of them takes two victims
    assert not nominations_of(Ledgers.read(hub), "checkout")
    assert clean(hub) == []
