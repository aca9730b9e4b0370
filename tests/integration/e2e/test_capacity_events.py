"""Issue 24, findings 4 and 5, end to end (devhub, the dev server, the worker and the watcher):
room freed on a cluster wakes the placement waiting for it, and a change to the requests
annotation runs a turn (a typo shows at once, and fixing it schedules)."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement
from tests.support.fleet import add_cluster, live_targets, unique
from tests.support.waits import until_async

pytestmark = pytest.mark.asyncio(loop_scope="session")

SELECTOR = {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}


def capacity_placement(name: str, requests: str, cluster: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name, "annotations": {names.REQUESTS_ANNOTATION: requests}},
            "spec": {
                "resourceSelectors": [SELECTOR],
                "policy": {"placementType": "PickFixed", "clusterNames": [cluster]},
            },
        }
    )


def condition_message(hub: HubClient, placement: str) -> str:
    crp = hub.get(ClusterResourcePlacement, placement)
    condition = crp.status.condition(names.PLACEMENT_SCHEDULED_CONDITION)
    return condition.message if condition is not None else ""


async def test_freed_room_wakes_the_placement_waiting_for_it(
    hub: HubClient, system: Watcher, temporal_client: Client
) -> None:
    """`big` holds 6 of the cluster's 8 CPUs; `waiter` asks 6 and reports what is missing.
    Deleting `big` frees the room, and nothing else changes: the watcher sees the ledger
    release and `waiter` is scheduled."""
    prefix = unique("room")
    cluster = f"{prefix}-c"
    add_cluster(hub, cluster, allocatable={"cpu": "8", "memory": "64Gi"})
    big, waiter = f"{prefix}-big", f"{prefix}-waiter"
    hub.create(capacity_placement(big, "cpu=6", cluster))
    await until_async(lambda: live_targets(hub, big) == {cluster: "Scheduled"}, blocking=True)
    hub.create(capacity_placement(waiter, "cpu=6", cluster))
    await until_async(
        lambda: condition_message(hub, waiter).endswith("missing cpu=6"), blocking=True
    )
    assert live_targets(hub, waiter) == {}

    hub.delete(ClusterResourcePlacement, big)
    await until_async(lambda: live_targets(hub, waiter) == {cluster: "Scheduled"}, blocking=True)
    # The turn writes the binding, then the condition: wait for the turn's end.
    await until_async(lambda: "missing" not in condition_message(hub, waiter), blocking=True)


async def test_a_requests_typo_shows_at_once_and_fixing_it_schedules(
    hub: HubClient, system: Watcher, temporal_client: Client
) -> None:
    prefix = unique("typo")
    cluster = f"{prefix}-c"
    add_cluster(hub, cluster, allocatable={"cpu": "8", "memory": "64Gi"})
    name = f"{prefix}-web"
    hub.create(capacity_placement(name, "cpu=2", cluster))
    await until_async(lambda: live_targets(hub, name) == {cluster: "Scheduled"}, blocking=True)

    hub.patch(
        ClusterResourcePlacement,
        name,
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: "cpu=two"}}},
    )
    await until_async(
        lambda: "requests entry 'cpu=two'" in condition_message(hub, name), blocking=True
    )

    other = f"{prefix}-late"
    hub.create(
        ClusterResourcePlacement.from_wire(
            {
                "metadata": {"name": other},
                "spec": {
                    "resourceSelectors": [SELECTOR],
                    "policy": {"placementType": "PickFixed", "clusterNames": [cluster]},
                },
            }
        )
    )
    await until_async(lambda: live_targets(hub, other) == {cluster: "Scheduled"}, blocking=True)
    # Declared after it was scheduled, fixed: the kept binding now holds its room.
    hub.patch(
        ClusterResourcePlacement,
        other,
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: "cpu=7"}}},
    )
    await until_async(
        lambda: "kept beyond the room of 1 cluster(s)" in condition_message(hub, other),
        blocking=True,
    )
    hub.patch(
        ClusterResourcePlacement,
        name,
        {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: "cpu=1"}}},
    )
    await until_async(
        lambda: "scheduling failed" not in condition_message(hub, name), blocking=True
    )
    assert live_targets(hub, name) == {cluster: "Scheduled"}
    # 1 + 7 = 8: the room `other` lacked is there, and its condition stops saying so.
    await until_async(lambda: "kept beyond" not in condition_message(hub, other), blocking=True)
