"""End to end: objects in devhub -> watcher -> PlacementWorkflow -> activities -> bindings.

Every part is real (see conftest.py). Each test builds its own small fleet in a reset devhub and
uses its own placement names, so workflows of other tests never interfere."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourceBinding, ClusterResourcePlacement, MemberCluster
from tests.support.fleet import (
    add_cluster,
    add_placement,
    bindings,
    latest_snapshot,
    live_targets,
    settled,
    status,
    unique,
)
from tests.support.history import completed_activities
from tests.support.waits import consistently_async, until_async
from workflows.models import PlacementStatus
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")


def prefer(weight: int, **labels: str) -> dict[str, object]:
    return {
        "clusterAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "preference": {"labelSelector": {"matchLabels": labels}}}
            ]
        }
    }


async def test_a_pick_n_placement_is_scheduled_and_rescheduled_on_policy_change(
    hub: HubClient, temporal_client: Client, system: Watcher
) -> None:
    for name, env in (("member-a", "prod"), ("member-b", "dev"), ("member-c", "prod")):
        add_cluster(hub, name, labels={"env": env})
    web = unique("web")
    add_placement(
        hub,
        web,
        {"placementType": "PickN", "numberOfClusters": 2, "affinity": prefer(50, env="prod")},
    )

    await until_async(
        lambda: live_targets(hub, web) == {"member-a": "Scheduled", "member-c": "Scheduled"},
        blocking=True,
    )
    snapshot = await until_async(
        lambda: (s := latest_snapshot(hub, web)) and s.status.conditions and s, blocking=True
    )
    assert snapshot.metadata.name == f"{web}-0"
    condition = snapshot.status.condition(names.SCHEDULED_CONDITION)
    assert condition is not None and condition.reason == names.POLICY_FULFILLED_REASON
    decisions = {d.cluster_name: d for d in snapshot.status.target_clusters}
    assert (
        decisions["member-a"].selected and decisions["member-a"].cluster_score.affinity_score == 50
    )
    # Later cycles take KubeFleet's steady branch (N bindings present), whose status lists
    # only the selected decisions (kubefleet-rules 4.6 branch B), so member-b need not appear.
    assert {n for n, d in decisions.items() if d.selected} == {"member-a", "member-c"}
    placement = hub.get(ClusterResourcePlacement, web)
    assert names.SCHEDULER_CLEANUP_FINALIZER in placement.metadata.finalizers
    assert placement.status.condition(names.PLACEMENT_SCHEDULED_CONDITION).status == "True"

    # A policy change: a new snapshot, and the placement moves toward env=dev. Between the
    # two former picks, the obsolete-binding preference ties, so the larger name stays.
    hub.patch(
        ClusterResourcePlacement, web, {"spec": {"policy": {"affinity": prefer(50, env="dev")}}}
    )
    await until_async(
        lambda: live_targets(hub, web) == {"member-b": "Scheduled", "member-c": "Scheduled"},
        blocking=True,
    )
    assert latest_snapshot(hub, web).metadata.name == f"{web}-1"
    states = {b.spec.target_cluster: b for b in bindings(hub, web)}
    assert states["member-a"].spec.state == names.STATE_UNSCHEDULED
    assert (
        states["member-a"].metadata.annotations[names.PREVIOUS_BINDING_STATE_ANNOTATION]
        == "Scheduled"
    )
    assert states["member-c"].spec.scheduling_policy_snapshot_name == f"{web}-1"

    final = await settled(temporal_client, web)
    assert final.last is not None and final.last.outcome.fulfilled


async def test_cluster_changes_reschedule_only_the_placements_they_affect(
    hub: HubClient, temporal_client: Client, system: Watcher
) -> None:
    add_cluster(hub, "member-a", labels={"zone": "1"})
    add_cluster(hub, "member-b", labels={"zone": "2"})
    everywhere, one = unique("all"), unique("one")
    # It reads the zone label (a preference of weight 0, which scores nothing): a changed zone
    # may change its decision, a changed label nobody reads may not
    # (scheduler.requeue.requeue_hints).
    reads_zone = {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {"labelSelector": {"matchExpressions": [
            {"key": "zone", "operator": "Exists"}]}}}
    ]}}  # fmt: skip
    add_placement(hub, everywhere, {"placementType": "PickAll", "affinity": reads_zone})
    add_placement(hub, one, {"placementType": "PickN", "numberOfClusters": 1})
    await until_async(
        lambda: len(live_targets(hub, everywhere)) == 2 and len(live_targets(hub, one)) == 1,
        blocking=True,
    )
    await until_async(
        lambda: hub.get(ClusterResourcePlacement, one).status.conditions, blocking=True
    )
    before_all = (await settled(temporal_client, everywhere)).cycles
    before_one = (await settled(temporal_client, one)).cycles

    # A label change reaches PickAll, not the fulfilled PickN.
    hub.patch(MemberCluster, "member-a", {"metadata": {"labels": {"zone": "3"}}})
    after = await _cycles_after(temporal_client, everywhere, before_all + 1)
    assert after >= before_all + 1
    assert (await settled(temporal_client, one)).cycles == before_one

    # A taint addition reaches nobody, nor does a label no placement reads.
    now_all = (await settled(temporal_client, everywhere)).cycles
    hub.patch(
        MemberCluster, "member-b", {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    )
    hub.patch(MemberCluster, "member-a", {"metadata": {"labels": {"team": "unread"}}})

    async def no_cycle() -> None:
        assert (await settled(temporal_client, everywhere)).cycles == now_all

    await consistently_async(no_cycle, duration=2.0)

    # A cluster that becomes healthy (fresh heartbeat) is picked up by PickAll.
    add_cluster(hub, "member-c", heartbeat_age=timedelta(minutes=30))

    def not_picked() -> None:
        assert "member-c" not in live_targets(hub, everywhere)

    await consistently_async(not_picked, duration=1.0, blocking=True)
    cluster = hub.get(MemberCluster, "member-c")
    agent = cluster.status.agent_status[0].model_copy(
        update={"last_received_heartbeat": datetime.now(UTC)}
    )
    hub.update_status(
        cluster.model_copy(
            update={"status": cluster.status.model_copy(update={"agent_status": [agent]})}
        )
    )
    await until_async(lambda: "member-c" in live_targets(hub, everywhere), blocking=True)
    assert (await settled(temporal_client, one)).cycles == before_one


async def _cycles_after(client: Client, placement: str, at_least: int) -> int:
    async def idle_after() -> int | None:
        current = await status(client, placement)
        if current and current.cycles >= at_least and current.phase == "idle":
            return current.cycles
        return None

    return await until_async(idle_after, what=f"{placement} idle after {at_least} cycles")


async def test_deleting_a_placement_cleans_up_and_completes_its_workflow(
    hub: HubClient, temporal_client: Client, system: Watcher
) -> None:
    add_cluster(hub, "member-a")
    add_cluster(hub, "member-b")
    gone = unique("gone")
    add_placement(hub, gone, {"placementType": "PickAll"})
    await until_async(lambda: len(live_targets(hub, gone)) == 2, blocking=True)

    hub.delete(ClusterResourcePlacement, gone)
    await until_async(lambda: not bindings(hub, gone), blocking=True)
    await until_async(lambda: not hub.list(ClusterResourcePlacement).items, blocking=True)
    handle = temporal_client.get_workflow_handle(workflow_id(gone), result_type=PlacementStatus)
    await asyncio.wait_for(handle.result(), timeout=60)
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    # The cleanup ran as an activity (a signal during it may add one more look, which then
    # finds the placement gone, so the final status need not mention the cleanup).
    ran = [kind for kind, _ in await completed_activities(handle)]
    assert "cleanup_placement" in ran


async def test_hub_faults_converge_without_duplicate_bindings(
    hub: HubClient, temporal_client: Client, system: Watcher, devhub
) -> None:
    faults = [
        devhub.faults.inject(
            verb="create", resource="clusterresourcebindings", status=503, count=3
        ),
        devhub.faults.inject(verb="patch", resource="*", status=409, count=2),
        devhub.faults.inject(verb="list", resource="memberclusters", status=500, count=2),
    ]
    for index in range(6):
        add_cluster(hub, f"member-{index}")
    flaky = unique("flaky")
    add_placement(hub, flaky, {"placementType": "PickAll"})

    await until_async(lambda: len(live_targets(hub, flaky)) == 6, timeout=90, blocking=True)
    assert all(fault.hits > 0 for fault in faults), faults
    devhub.faults.clear()
    final = await settled(temporal_client, flaky, timeout=60)
    targets = [b.spec.target_cluster for b in bindings(hub, flaky)]
    assert sorted(targets) == [f"member-{i}" for i in range(6)]  # one binding per cluster
    assert final.last_error is None
    assert all(
        b.metadata.finalizers == [names.SCHEDULER_BINDING_CLEANUP_FINALIZER]
        for b in hub.list(ClusterResourceBinding).items
    )
