"""`fleet-scheduler check`'s invariants (scheduler.invariants), each broken on purpose in devhub
after the real activities scheduled a healthy fleet: the check finds that one, in a person's
terms, and nothing before it was broken."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.capacity import reserve
from control.check import check_fleet, render_check
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    MemberCluster,
    ObjectMeta,
    Reservation,
)
from scheduler.bindings.writes import new_binding
from scheduler.invariants import INVARIANTS, WORKFLOW_GRACE
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    make_available,
    turn,
)
from workflows import names as wf_names
from workflows.models import MoveRequest, PlacementInput, TurnRequest

pytestmark = pytest.mark.asyncio(loop_scope="session")

PICK_ONE = {"placementType": "PickN", "numberOfClusters": 1}
CPU = names.REQUESTS_ANNOTATION


async def found(
    hub: HubClient, client: Client | None = None, task_queue: str = "", now: datetime | None = None
) -> dict[str, list[str]]:
    state, violations = await check_fleet(hub, client, task_queue, now=now)
    text = render_check(state, violations)
    by: dict[str, list[str]] = {}
    for violation in violations:
        assert violation.invariant in INVARIANTS
        assert violation.message in text
        by.setdefault(violation.invariant, []).append(violation.message)
    return by


def healthy(hub: HubClient, rig: Rig, env: ActivityEnvironment) -> None:
    """Two 8-CPU clusters and a capacity-aware PickN 1 placement `web` (cpu=4), scheduled."""
    for name in ("a", "b"):
        add_cluster(hub, name, allocatable={"cpu": "8"})
    add_placement(hub, "web", PICK_ONE, annotations={CPU: "cpu=4"})
    turn(env, rig.activities, "web")


def extra_binding(hub: HubClient, placement: str, cluster: str, suffix: str) -> None:
    """An active binding of `placement` made by hand, outside any cycle."""
    [binding] = [b for b in bindings_of(hub, placement)][:1]
    decision = ClusterDecision(cluster_name=cluster, selected=True, reason="by hand")
    hub.create(
        new_binding(
            f"{placement}-{cluster}-{suffix}",
            placement,
            cluster,
            binding.spec.scheduling_policy_snapshot_name,
            decision,
        )
    )


async def test_overcommit(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    healthy(hub, rig, env)
    assert await found(hub) == {}
    [binding] = bindings_of(hub, "web")
    shrink(hub, binding.spec.target_cluster, "3")  # the member reports less than is held there
    got = await found(hub)
    assert list(got) == ["overcommit"]
    [message] = got["overcommit"]
    assert message.startswith(
        f"cluster {binding.spec.target_cluster}: active capacity-aware bindings ask for cpu=4, "
        "its allocatable is cpu=3 (over by cpu=1)"
    )


def shrink(hub: HubClient, cluster: str, cpu: str) -> None:
    member = hub.get(MemberCluster, cluster)
    usage = member.status.resource_usage.model_copy(update={"allocatable": {"cpu": cpu}})
    status = member.status.model_copy(update={"resource_usage": usage})
    hub.update_status(member.model_copy(update={"status": status}))


async def test_reservation_missing_or_wrong(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    healthy(hub, rig, env)
    [binding] = bindings_of(hub, "web")
    cluster = binding.spec.target_cluster
    hub.delete(CapacityLedger, cluster)
    got = await found(hub)
    assert got == {
        "reservation": [
            f"binding {binding.name} of placement web on cluster {cluster} has no reservation"
        ]
    }
    turn(env, rig.activities, "web", 2)  # its next cycle makes it again
    assert await found(hub) == {}
    hub.patch(
        CapacityLedger,
        cluster,
        {"spec": {"reservations": {binding.name: {"requests": {"cpu": "1"}}}}},
    )
    [message] = (await found(hub))["reservation"]
    assert message.endswith(
        "has a reservation of cpu=1 for placement web, where its placement asks for cpu=4"
    )


async def test_stale_reservation(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    healthy(hub, rig, env)
    old = datetime.now(UTC) - timedelta(hours=2)
    hub.create(
        CapacityLedger(
            metadata=ObjectMeta(name="z"),
            spec=CapacityLedgerSpec(
                reservations={
                    "gone-z-1": Reservation(
                        placement="gone", requests={"cpu": "2"}, reserved_at=old
                    ),
                    "young-z-1": Reservation(
                        placement="gone", requests={"cpu": "2"}, reserved_at=datetime.now(UTC)
                    ),
                }
            ),
        )
    )
    got = await found(hub)
    assert list(got) == ["stale_reservation"]
    [message] = got["stale_reservation"]
    assert message.startswith(
        "cluster z: the reservation of binding gone-z-1 (placement gone, cpu=2) outlived its "
        "placement by more than 15m (reserved 2h00m ago)"
    )


async def test_duplicate_binding_and_binding_count(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    for name in ("a", "b"):
        add_cluster(hub, name)
    add_placement(hub, "web", PICK_ONE)
    turn(env, rig.activities, "web")
    [binding] = bindings_of(hub, "web")
    here = binding.spec.target_cluster
    there = ({"a", "b"} - {here}).pop()
    extra_binding(hub, "web", here, "twin")
    got = await found(hub)
    assert sorted(got) == ["binding_count", "duplicate_binding"]
    assert got["duplicate_binding"] == [
        f"placement web has 2 active bindings on cluster {here}: {binding.name}, web-{here}-twin"
    ]
    hub.delete(ClusterResourceBinding, f"web-{here}-twin")
    extra_binding(hub, "web", there, "extra")
    got = await found(hub)
    assert got == {
        "binding_count": ["placement web asks for 1 cluster(s) and has 2 active binding(s): a, b"]
    }


async def test_disruption_budget(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Two moves made at once where minAvailable 1 allows one (as a turn before issue 24's fix
    could, finishing a half-done move uncharged): the check sees two in flight."""
    rig = make_activities()
    for name in ("a", "b", "c", "d"):
        add_cluster(hub, name, allocatable={"cpu": "8"})
    add_placement(hub, "web", {"placementType": "PickN", "numberOfClusters": 2},
                  annotations={CPU: "cpu=4"})  # fmt: skip
    turn(env, rig.activities, "web")
    originals = [make_available(hub, b) for b in bindings_of(hub, "web")]
    hub.create(
        ClusterResourcePlacementDisruptionBudget.from_wire(
            {"metadata": {"name": "web"}, "spec": {"minAvailable": 1}}
        )
    )
    targets = sorted({"a", "b", "c", "d"} - {b.spec.target_cluster for b in originals})
    moves = [
        MoveRequest(binding=b.name, source=b.spec.target_cluster, target=t, reason=f"pack {i}")
        for i, (b, t) in enumerate(zip(originals, targets, strict=True))
    ]
    result = env.run(
        rig.activities.schedule_once, TurnRequest(placement="web", cycle=2, reason="t", moves=moves)
    )
    assert [line.split(" ")[0] for line in result.moves] == ["moved", "refused"]
    assert await found(hub) == {}  # one disruption in flight: within the budget
    # ... the second one made anyway, by hand, as the old arithmetic allowed:
    from activities.moves import REBALANCE, _create, unschedule

    [snapshot_name] = {b.spec.scheduling_policy_snapshot_name for b in originals}
    name = f"web-{moves[1].target}-moved"
    reserve(hub, moves[1].target, {"cpu": "8"}, name, "web", {"cpu": Fraction(4)},
            lambda: datetime.now(UTC))  # fmt: skip
    second = hub.get(ClusterResourceBinding, moves[1].binding)
    _create(
        hub, hub.get(ClusterResourcePlacement, "web"), moves[1], snapshot_name, name, second,
        REBALANCE,
    )  # fmt: skip
    unschedule(hub, second, "rebalanced: by hand")
    got = await found(hub)
    assert list(got) == ["disruption_budget"]
    [message] = got["disruption_budget"]
    assert message.startswith("placement web: 2 rebalance move(s) in flight (")
    assert message.endswith(
        "leave 0 of 2 binding(s) available, outside its disruption budget (minAvailable 1)"
    )


async def test_workflows(
    hub: HubClient,
    temporal_client: Client,
    task_queue: str,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_cluster(hub, "a")
    add_placement(hub, "lonely", PICK_ONE)
    handle = await temporal_client.start_workflow(
        wf_names.PLACEMENT_WORKFLOW,
        PlacementInput(placement="ghost"),
        id=wf_names.workflow_id("ghost"),
        task_queue=task_queue,  # no worker polls it: the run just stays open
    )
    try:
        # Just created, `lonely`'s start may be on its way (WORKFLOW_GRACE): only the orphan.
        got = await found(hub, temporal_client, task_queue)
        assert got == {
            "workflow": [
                "workflow of placement ghost is running, but the placement does not exist",
            ]
        }
        later = datetime.now(UTC) + WORKFLOW_GRACE + timedelta(seconds=5)
        got = await found(hub, temporal_client, task_queue, now=later)
        assert got["workflow"] == [
            "workflow of placement ghost is running, but the placement does not exist",
            "placement lonely has no running workflow",
        ]
    finally:
        await handle.terminate("test over")


async def test_stranded_shortage(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """`waiter` reported it is short while `big` held the room; `big`'s room was then released
    with no turn to wake `waiter` (as before issue 24): the check runs waiter's cycle on what it
    reads and finds the room."""
    rig = make_activities()
    add_cluster(hub, "a", allocatable={"cpu": "8"})
    add_placement(hub, "big", PICK_ONE, annotations={CPU: "cpu=6"})
    add_placement(hub, "waiter", PICK_ONE, annotations={CPU: "cpu=6"})
    turn(env, rig.activities, "big")
    turn(env, rig.activities, "waiter")
    assert await found(hub) == {}
    [held] = bindings_of(hub, "big")
    # Its binding unscheduled and its room released, as a cycle of `big` would do them.
    hub.patch(ClusterResourceBinding, held.name, {"spec": {"state": "Unscheduled"}})
    hub.patch(CapacityLedger, "a", {"spec": {"reservations": {held.name: None}}})
    got = await found(hub)
    assert "stranded_shortage" in got
    assert got["stranded_shortage"] == [
        "placement waiter says it is short of cpu=6, but its cycle would place a binding on a "
        "now (a: cpu 8 free)"
    ]


async def test_overcommit_by_bindings_whose_requests_cannot_be_read(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Issue 33, finding 4: a placement whose requests annotation can no longer be read still
    holds the room it reserved, and its bindings count by it: the one a move made without a
    reservation (as moves did before) by the room its placement holds elsewhere, one written
    beyond the room by its own reservation."""
    rig = make_activities()
    for name in ("a", "b"):
        add_cluster(hub, name, allocatable={"cpu": "8"})
    for name, cluster in (("fill", "a"), ("web", "b")):
        add_placement(hub, name, {"placementType": "PickFixed", "clusterNames": [cluster]},
                      annotations={CPU: "cpu=6"})  # fmt: skip
        turn(env, rig.activities, name)
    assert await found(hub) == {}
    hub.patch(ClusterResourcePlacement, "web", {"metadata": {"annotations": {CPU: "cpu=6,,"}}})
    assert await found(hub) == {}  # unreadable, but its room is held where it is
    # What a move of web's binding to a left before: a new binding there with no reservation,
    # the old one Unscheduled, its reservation on b kept.
    [old] = bindings_of(hub, "web")
    extra_binding(hub, "web", "a", "moved")
    hub.patch(ClusterResourceBinding, old.name, {"spec": {"state": names.STATE_UNSCHEDULED}})
    got = await found(hub)
    assert list(got) == ["overcommit"], got
    [message] = got["overcommit"]
    assert message.startswith(
        "cluster a: active capacity-aware bindings ask for cpu=12, its allocatable is cpu=8 "
        "(over by cpu=4)"
    ), message
    assert "web-a-moved (web, requests unreadable: counted at its room)" in message
    # Its own reservation, once it holds one (written beyond the room), is what counts.
    hub.delete(ClusterResourceBinding, old.name)
    reserve(hub, "a", {"cpu": "8"}, "web-a-moved", "web", {"cpu": Fraction(5)},
            lambda: datetime.now(UTC), must_fit=False)  # fmt: skip
    hub.patch(CapacityLedger, "b", {"spec": {"reservations": {old.name: None}}})
    [message] = (await found(hub))["overcommit"]
    assert message.startswith("cluster a: active capacity-aware bindings ask for cpu=11"), message
