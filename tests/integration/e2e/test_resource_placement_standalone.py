"""A namespaced ResourcePlacement end to end in standalone mode (fleet-scheduler also makes its
SchedulingPolicySnapshots): namespace -> ResourcePlacement -> watcher -> workflow
`rp/<namespace>/<name>` -> ResourceBindings in the namespace, then a policy change, a namespace
appearing on a cluster, and the deletion of the namespace itself (kubefleet-rules 9).

Every part is real (see conftest.py): devhub with namespaces, the Temporal dev server, the
worker and the watcher."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.errors import NotFoundError
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    Namespace,
    ResourcePlacement,
    SchedulingPolicySnapshot,
)
from tests.support.fleet import add_cluster, add_placement, rb_targets, report_namespaces, unique
from tests.support.waits import until_async
from workflows.models import PlacementStatus
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")


def add_rp(hub: HubClient, namespace: str, name: str, policy: dict[str, Any]) -> ResourcePlacement:
    spec = {
        "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": name}],
        "policy": policy,
    }
    return hub.create(
        ResourcePlacement.from_wire(
            {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
        )
    )


def latest_sps(hub: HubClient, namespace: str, name: str) -> SchedulingPolicySnapshot | None:
    selector = {names.PARENT_PLACEMENT_LABEL: name, names.IS_LATEST_SNAPSHOT_LABEL: "true"}
    found = hub.list(SchedulingPolicySnapshot, selector, namespace=namespace).items
    return found[0] if len(found) == 1 else None


async def test_an_rp_is_snapshotted_scheduled_rescheduled_and_cleaned_up_with_its_namespace(
    hub: HubClient, temporal_client: Client, system: Watcher
) -> None:
    namespace, web = unique("team"), "web"
    hub.create(Namespace(metadata={"name": namespace}))
    for cluster in ("member-a", "member-b", "member-c"):
        add_cluster(hub, cluster, labels={"env": "prod"})
    report_namespaces(hub, "member-a", {namespace: ""})
    report_namespaces(hub, "member-b", {"other": ""})  # collection on, our namespace absent
    # member-c reports no namespace collection at all: it passes (KubeFleet's compatibility).
    # A ClusterResourcePlacement of the same name: scheduled on its own, namespaces or not.
    add_placement(hub, web, {"placementType": "PickAll"})
    add_rp(hub, namespace, web, {"placementType": "PickAll"})

    await until_async(
        lambda: (
            rb_targets(hub, namespace, web) == {"member-a": "Scheduled", "member-c": "Scheduled"}
        ),
        blocking=True,
    )
    crbs = await until_async(
        lambda: (
            len(found := hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: web})) == 3
            and found
        ),
        blocking=True,
    )
    assert all(b.metadata.namespace is None for b in crbs)
    snapshot = await until_async(
        lambda: (s := latest_sps(hub, namespace, web)) and s, blocking=True
    )
    assert snapshot.metadata.name == f"{web}-0"
    assert snapshot.metadata.labels[names.PARENT_PLACEMENT_LABEL] == web
    (owner,) = snapshot.metadata.owner_references
    assert (owner.kind, owner.name) == ("ResourcePlacement", web)
    rp = await until_async(
        lambda: (
            (p := hub.get(ResourcePlacement, web, namespace=namespace))
            and (c := p.status.condition(names.RP_SCHEDULED_CONDITION))
            and c.status == names.TRUE
            and p
        ),
        blocking=True,
    )
    assert names.SCHEDULER_CLEANUP_FINALIZER in rp.metadata.finalizers
    assert rp.status.condition(names.PLACEMENT_SCHEDULED_CONDITION) is None
    reported = await until_async(
        lambda: (s := latest_sps(hub, namespace, web)) and s.status.target_clusters and s,
        blocking=True,
    )
    decisions = {d.cluster_name: d for d in reported.status.target_clusters}
    assert not decisions["member-b"].selected
    assert "target namespace does not exist on cluster" in decisions["member-b"].reason

    # The namespace appears on member-b: the cluster watcher reaches the RP, a binding follows.
    report_namespaces(hub, "member-b", {"other": "", namespace: "work-1"})
    await until_async(
        lambda: set(rb_targets(hub, namespace, web)) == {"member-a", "member-b", "member-c"},
        blocking=True,
    )

    # A policy change: a new snapshot in the namespace; no cluster matches any more, so every
    # binding is unscheduled.
    hub.patch(
        ResourcePlacement,
        web,
        {"spec": {"policy": {"placementType": "PickAll", "affinity": {"clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [
                {"labelSelector": {"matchLabels": {"env": "none"}}}]}}}}}},
        namespace=namespace,
    )  # fmt: skip
    await until_async(
        lambda: (s := latest_sps(hub, namespace, web)) and s.metadata.name == f"{web}-1",
        blocking=True,
    )
    await until_async(
        lambda: set(rb_targets(hub, namespace, web).values()) == {"Unscheduled"}, blocking=True
    )

    # Deleting the namespace deletes the RP: its cleanup runs, then the namespace is gone; the
    # CRP of the same name is untouched.
    hub.delete(Namespace, namespace)

    def namespace_gone() -> bool:
        try:
            hub.get(Namespace, namespace)
        except NotFoundError:
            return True
        return False

    await until_async(namespace_gone, blocking=True)
    handle = temporal_client.get_workflow_handle(
        workflow_id(web, namespace), result_type=PlacementStatus
    )
    await asyncio.wait_for(handle.result(), timeout=60)
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert hub.get(ClusterResourcePlacement, web).metadata.deletion_timestamp is None
    assert len(hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: web})) == 3
