"""Builders for hub objects the activity tests start from, and small readers of the result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.testing import ActivityEnvironment

from activities.hub import HubActivities
from activities.models import CycleReport, CycleRequest, PrepareRequest, PrepareResult
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
    MemberCluster,
)
from scheduler.testing import member_cluster, policy_snapshot
from workers.metrics import SchedulerMetrics

SELECTOR: Final = {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
WRITE_VERBS: Final = ("create", "update", "patch", "delete", "deletecollection")


@dataclass
class Rig:
    """One HubActivities and what it reports on the side."""

    activities: HubActivities
    metrics: SchedulerMetrics
    spans: InMemorySpanExporter


def add_cluster(
    hub: HubClient,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[tuple[str, str | None]] = (),
) -> MemberCluster:
    """A joined, healthy MemberCluster with a fresh heartbeat (status written as an agent would)."""
    wanted = member_cluster(name, datetime.now(UTC), labels=labels, taints=taints)
    created = hub.create(wanted)  # the hub drops status on create
    return hub.update_status(created.model_copy(update={"status": wanted.status}))


def add_placement(
    hub: HubClient, name: str, policy: Mapping[str, Any] | None
) -> ClusterResourcePlacement:
    spec: dict[str, Any] = {"resourceSelectors": [SELECTOR]}
    if policy is not None:
        spec["policy"] = dict(policy)
    return hub.create(
        ClusterResourcePlacement.from_wire({"metadata": {"name": name}, "spec": spec})
    )


def add_snapshot(
    hub: HubClient,
    placement: str,
    policy: Mapping[str, Any] | None,
    *,
    index: int = 0,
    latest: bool = True,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> ClusterSchedulingPolicySnapshot:
    """A policy snapshot as KubeFleet's placement controller makes it (for --no-snapshotter)."""
    model = policy_snapshot(placement, policy, index=index)
    meta = model.metadata.model_copy(
        update={
            "resource_version": None,
            "generation": None,
            "labels": {
                **model.metadata.labels,
                names.IS_LATEST_SNAPSHOT_LABEL: "true" if latest else "false",
                **(labels or {}),
            },
            "annotations": {**model.metadata.annotations, **(annotations or {})},
        }
    )
    return hub.create(model.model_copy(update={"metadata": meta}))


def bindings_of(hub: HubClient, placement: str) -> list[ClusterResourceBinding]:
    listed = hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: placement})
    return sorted(listed, key=lambda b: b.spec.target_cluster)


def targets(bindings: Sequence[ClusterResourceBinding], state: str | None = None) -> list[str]:
    return [b.spec.target_cluster for b in bindings if state is None or b.spec.state == state]


def placement_condition(hub: HubClient, placement: str) -> Condition | None:
    crp = hub.get(ClusterResourcePlacement, placement)
    return crp.status.condition(names.PLACEMENT_SCHEDULED_CONDITION)


def writes(devhub: DevHub, resource: str = "*") -> int:
    """Every write request devhub served for `resource` since its stats were cleared."""
    return sum(devhub.stats.count(verb, resource) for verb in WRITE_VERBS)


def prepare(env: ActivityEnvironment, activities: HubActivities, placement: str) -> PrepareResult:
    return env.run(activities.prepare_cycle, PrepareRequest(placement=placement))


def cycle(
    env: ActivityEnvironment,
    activities: HubActivities,
    placement: str,
    snapshot: str,
    number: int = 1,
    *,
    fresh: bool = False,
) -> CycleReport:
    request = CycleRequest(placement=placement, snapshot=snapshot, cycle=number, fresh=fresh)
    return env.run(activities.run_cycle, request)


def prepare_and_cycle(
    env: ActivityEnvironment, activities: HubActivities, placement: str, number: int = 1
) -> tuple[PrepareResult, CycleReport]:
    """One workflow loop turn that finds the placement ready."""
    prepared = prepare(env, activities, placement)
    assert prepared.phase == "ready", prepared
    assert prepared.snapshot is not None
    return prepared, cycle(env, activities, placement, prepared.snapshot, number)
