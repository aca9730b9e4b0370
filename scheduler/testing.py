"""Builders and an in-memory plan applier, for tests and benchmarks.

`apply_plan` does to a list of bindings and a snapshot what the activities do to the hub, with
the hub's rules that matter for a plan: JSON merge patches (RFC 7386), resourceVersion checks
(a stale version is a conflict), AlreadyExists on create, and a deleting object vanishing once
its last finalizer is gone. It lets tests check cycle-after-cycle properties without a hub.
Pure like the rest of scheduler/: no clock, no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from pydantic import JsonValue

from hub import names
from hub.kinds import kinds_for
from hub.types import (
    ClusterResourceBinding,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    PlacementPolicy,
)
from scheduler.bindings.writes import apply_merge_patch
from scheduler.cycles.plan import BindingPatch, BindingPlan
from scheduler.framework.errors import SchedulerError

__all__ = [
    "PlanApplyError",
    "apply_plan",
    "binding",
    "member_cluster",
    "policy_snapshot",
]

JsonObject = dict[str, JsonValue]


class PlanApplyError(SchedulerError):
    """The plan does not apply cleanly: a conflict, a missing object, or a duplicate create."""


def member_cluster(
    name: str,
    now: datetime,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[tuple[str, str | None]] = (),
    properties: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    available: Mapping[str, str] | None = None,
    heartbeat_age: timedelta = timedelta(seconds=30),
    joined: bool = True,
    healthy: bool = True,
    deleting: bool = False,
) -> MemberCluster:
    """A MemberCluster whose member agent is joined and healthy unless told otherwise.
    `taints` are (key, value) pairs with effect NoSchedule."""
    stamp = (now - heartbeat_age).isoformat()
    conditions: list[JsonValue] = [
        {"type": names.AGENT_JOINED_CONDITION, "status": names.TRUE if joined else names.FALSE},
        {
            "type": names.AGENT_HEALTHY_CONDITION,
            "status": names.TRUE if healthy else names.FALSE,
            "lastTransitionTime": (now - timedelta(hours=1)).isoformat(),
        },
    ]
    metadata: JsonObject = {"name": name, "labels": dict(labels or {})}
    if deleting:
        metadata["deletionTimestamp"] = now.isoformat()
    return MemberCluster.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "taints": [
                    {"key": k, "value": v, "effect": names.EFFECT_NO_SCHEDULE} for k, v in taints
                ]
            },
            "status": {
                "agentStatus": [
                    {
                        "type": names.MEMBER_AGENT,
                        "lastReceivedHeartbeat": stamp,
                        "conditions": conditions,
                    }
                ],
                "properties": {k: {"value": v} for k, v in (properties or {}).items()},
                "resourceUsage": {
                    "capacity": dict(capacity or {}),
                    "allocatable": dict(allocatable or {}),
                    "available": dict(available or {}),
                },
            },
        }
    )


def policy_snapshot(
    placement: str,
    policy: PlacementPolicy | Mapping[str, object] | None,
    *,
    index: int = 0,
    crp_generation: int | str | None = 1,
    number_of_clusters: int | str | None = None,
    generation: int = 1,
    resource_version: str = "1",
    namespace: str | None = None,
) -> ClusterSchedulingPolicySnapshot:
    """The latest policy snapshot `<placement>-<index>` as the placement controller makes it
    (a ResourcePlacement's SchedulingPolicySnapshot in `namespace` when one is given).
    For PickN, `number_of_clusters` defaults to the policy's numberOfClusters."""
    if isinstance(policy, Mapping):
        policy = PlacementPolicy.model_validate(dict(policy))
    annotations: dict[str, str] = {}
    if crp_generation is not None:
        annotations[names.CRP_GENERATION_ANNOTATION] = str(crp_generation)
    if number_of_clusters is None and policy is not None and policy.placement_type == names.PICK_N:
        number_of_clusters = policy.number_of_clusters
    if number_of_clusters is not None:
        annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(number_of_clusters)
    return kinds_for(namespace).snapshot.model_validate(
        {
            "metadata": {
                "name": f"{placement}-{index}",
                "namespace": namespace,
                "generation": generation,
                "resourceVersion": resource_version,
                "labels": {
                    names.PARENT_PLACEMENT_LABEL: placement,
                    names.IS_LATEST_SNAPSHOT_LABEL: "true",
                    names.POLICY_INDEX_LABEL: str(index),
                },
                "annotations": annotations,
            },
            "spec": {
                "policy": None if policy is None else policy.to_wire(),
                "policyHash": "",
            },
        }
    )


def binding(
    placement: str,
    cluster: str,
    snapshot: str,
    *,
    state: str = names.STATE_SCHEDULED,
    name: str | None = None,
    score: tuple[int, int] | None = (0, 0),
    annotations: Mapping[str, str] | None = None,
    finalizers: Iterable[str] = (names.SCHEDULER_BINDING_CLEANUP_FINALIZER,),
    deleting: datetime | None = None,
    resource_version: str = "1",
    namespace: str | None = None,
) -> ClusterResourceBinding:
    """A binding as the scheduler leaves it (a ResourceBinding in `namespace` when one is
    given); `score` is (affinity, topology) or None."""
    decision: JsonObject = {
        "clusterName": cluster,
        "selected": True,
        "reason": f'picked "{cluster}"',
    }
    if score is not None:
        decision["clusterScore"] = {"affinityScore": score[0], "priorityScore": score[1]}
    metadata: JsonObject = {
        "name": name or f"{placement}-{cluster}-0",
        "namespace": namespace,
        "resourceVersion": resource_version,
        "labels": {names.PARENT_PLACEMENT_LABEL: placement},
        "annotations": dict(annotations or {}),
        "finalizers": list(finalizers),
    }
    if deleting is not None:
        metadata["deletionTimestamp"] = deleting.isoformat()
    return kinds_for(namespace).binding.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "state": state,
                "resourceSnapshotName": "",
                "schedulingPolicySnapshotName": snapshot,
                "targetCluster": cluster,
                "clusterDecision": decision,
            },
        }
    )


def _bump(version: str | None) -> str:
    return str(int(version or "0") + 1)


def _patch_one(store: dict[str, ClusterResourceBinding], patch: BindingPatch) -> None:
    current = store.get(patch.name)
    if current is None:
        raise PlanApplyError(f"binding {patch.name!r} not found")
    if (
        patch.resource_version is not None
        and patch.resource_version != current.metadata.resource_version
    ):
        raise PlanApplyError(
            f"conflict on binding {patch.name!r}: read version {patch.resource_version}, "
            f"now {current.metadata.resource_version}"
        )
    wire = apply_merge_patch(current.to_wire(), patch.merge_patch)
    metadata = wire.get("metadata") if isinstance(wire, dict) else None
    if not isinstance(wire, dict) or not isinstance(metadata, dict):
        raise PlanApplyError(f"patch of binding {patch.name!r} does not leave an object")
    metadata["resourceVersion"] = _bump(current.metadata.resource_version)
    updated = type(current).from_wire(wire)
    if updated.metadata.deletion_timestamp is not None and not updated.metadata.finalizers:
        del store[patch.name]  # the API server finishes a deletion once no finalizer is left
    else:
        store[patch.name] = updated


def apply_plan(
    bindings: Iterable[ClusterResourceBinding],
    snapshot: ClusterSchedulingPolicySnapshot,
    plan: BindingPlan,
) -> tuple[list[ClusterResourceBinding], ClusterSchedulingPolicySnapshot]:
    """The bindings (sorted by name) and snapshot after `plan`, applied in the plan's order."""
    store = {b.metadata.name: b for b in bindings}
    for patch in [*plan.remove_finalizers, *plan.unschedule_dangling]:
        _patch_one(store, patch)
    for new in plan.create:
        if new.metadata.name in store:
            raise PlanApplyError(f"binding {new.metadata.name!r} already exists")
        metadata = new.metadata.model_copy(update={"resource_version": "1"})
        store[new.metadata.name] = new.model_copy(update={"metadata": metadata})
    for patch in [*plan.patch, *plan.unschedule]:
        _patch_one(store, patch)
    write = plan.snapshot_status
    if write is not None:
        if write.name != snapshot.metadata.name:
            raise PlanApplyError(f"status write for {write.name!r}, not {snapshot.metadata.name!r}")
        if (
            write.resource_version is not None
            and write.resource_version != snapshot.metadata.resource_version
        ):
            raise PlanApplyError(f"conflict on policy snapshot {write.name!r}")
        metadata = snapshot.metadata.model_copy(
            update={"resource_version": _bump(snapshot.metadata.resource_version)}
        )
        snapshot = snapshot.model_copy(update={"status": write.status, "metadata": metadata})
    return sorted(store.values(), key=lambda b: b.metadata.name), snapshot
