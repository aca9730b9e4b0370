"""Tiny builders and waits for end-to-end tests: put a fleet in devhub (and what a member agent
reports), read what happened."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.service import RPCError

from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
    MemberCluster,
    ObjectMeta,
    ResourceBinding,
)
from scheduler.testing import member_cluster
from tests.support.waits import until_async
from workflows.models import PlacementStatus
from workflows.names import workflow_id
from workflows.placement import PlacementWorkflow

T = TypeVar("T")
WAIT_SECONDS = 45.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def add_cluster(
    hub: HubClient, name: str, *, heartbeat_age: timedelta = timedelta(seconds=5), **kwargs: Any
) -> MemberCluster:
    """Create a MemberCluster and give it a member agent's status (create drops status)."""
    wanted = member_cluster(name, datetime.now(UTC), heartbeat_age=heartbeat_age, **kwargs)
    created = hub.create(
        wanted.model_copy(update={"metadata": ObjectMeta(name=name, labels=wanted.metadata.labels)})
    )
    return hub.update_status(created.model_copy(update={"status": wanted.status}))


def add_placement(
    hub: HubClient, name: str, policy: dict[str, Any] | None
) -> ClusterResourcePlacement:
    spec: dict[str, Any] = {
        "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": "app"}]
    }
    if policy is not None:
        spec["policy"] = policy
    return hub.create(
        ClusterResourcePlacement.from_wire({"metadata": {"name": name}, "spec": spec})
    )


def bindings(hub: HubClient, placement: str) -> list[ClusterResourceBinding]:
    return hub.list(
        ClusterResourceBinding, label_selector={names.PARENT_PLACEMENT_LABEL: placement}
    ).items


def live_targets(hub: HubClient, placement: str) -> dict[str, str]:
    """target cluster -> state, for bindings not Unscheduled and not deleting."""
    return {
        b.spec.target_cluster: b.spec.state
        for b in bindings(hub, placement)
        if b.spec.state != names.STATE_UNSCHEDULED and not b.metadata.deleting
    }


def latest_snapshot(hub: HubClient, placement: str) -> ClusterSchedulingPolicySnapshot | None:
    items = hub.list(
        ClusterSchedulingPolicySnapshot,
        label_selector={
            names.PARENT_PLACEMENT_LABEL: placement,
            names.IS_LATEST_SNAPSHOT_LABEL: "true",
        },
    ).items
    return items[0] if len(items) == 1 else None


async def status(client: Client, placement: str) -> PlacementStatus | None:
    try:
        return await client.get_workflow_handle(workflow_id(placement)).query(
            PlacementWorkflow.status
        )
    except RPCError:
        return None


async def settled(client: Client, placement: str, timeout: float = WAIT_SECONDS) -> PlacementStatus:
    """Wait until the placement's workflow is idle after at least one cycle."""

    async def idle() -> PlacementStatus | None:
        current = await status(client, placement)
        return current if current and current.cycles > 0 and current.phase == "idle" else None

    return await until_async(idle, what=f"{placement} settled", timeout=timeout)


# The member agent's condition that its namespaces were collected.
COLLECTED = Condition(type=names.NAMESPACE_COLLECTION_CONDITION, status=names.TRUE, reason="OK")


def report_namespaces(hub: HubClient, cluster: str, namespaces: dict[str, str]) -> None:
    """What KubeFleet's member agent writes with namespace collection on."""
    current = hub.get(MemberCluster, cluster)
    conditions = [c for c in current.status.conditions if c.type != COLLECTED.type]
    status = current.status.model_copy(
        update={"conditions": [*conditions, COLLECTED], "namespaces": namespaces}
    )
    hub.update_status(current.model_copy(update={"status": status}))


def rb_targets(hub: HubClient, namespace: str, name: str) -> dict[str, str]:
    """The ResourcePlacement's live bindings: their state by target cluster."""
    listed = hub.list(
        ResourceBinding, {names.PARENT_PLACEMENT_LABEL: name}, namespace=namespace
    ).items
    return {b.spec.target_cluster: b.spec.state for b in listed if not b.metadata.deleting}
