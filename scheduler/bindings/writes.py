"""Builders for every binding write a cycle makes (kubefleet-rules 4.2, 4.8, 4.11).

Existing bindings are only ever changed by JSON merge patches naming our own fields, with the
resourceVersion read, so fields other controllers own (status, resourceSnapshotName, overrides,
their annotations) are never overwritten and a concurrent change is a Conflict. Two deliberate
differences from KubeFleet's writes:

* Marking a binding Unscheduled sets only the previous-binding-state annotation and
  spec.state; KubeFleet replaces all annotations with that one (10.7).
* Reviving an Unscheduled binding removes the previous-binding-state annotation (null in the
  merge patch); KubeFleet means to but never sends the removal (10.6)."""

from __future__ import annotations

from pydantic import JsonValue

from hub import names
from hub.kinds import kinds_for
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourceBindingSpec,
    ObjectMeta,
)
from scheduler.cycles.plan import BindingPatch

__all__ = [
    "apply_merge_patch",
    "mark_unscheduled",
    "merge_diff",
    "new_binding",
    "rebind",
    "remove_finalizer",
]

JsonObject = dict[str, JsonValue]


def merge_diff(old: JsonObject, new: JsonObject) -> JsonObject:
    """The RFC 7386 merge patch that turns `old` into `new` (null deletes a key)."""
    patch: JsonObject = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
            continue
        before = old[key]
        if before == value:
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            patch[key] = merge_diff(before, value)
        else:
            patch[key] = value
    return patch


def apply_merge_patch(target: JsonValue, patch: JsonValue) -> JsonValue:
    """RFC 7386, `merge_diff`'s inverse: objects merge recursively, null deletes, anything
    else replaces."""
    if not isinstance(patch, dict):
        return patch
    result: JsonObject = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def _with_version(binding: ClusterResourceBinding, patch: JsonObject) -> JsonObject:
    version = binding.metadata.resource_version
    if version is not None:
        current = patch.get("metadata")
        metadata: JsonObject = dict(current) if isinstance(current, dict) else {}
        metadata["resourceVersion"] = version
        patch["metadata"] = metadata
    return patch


def _patch(binding: ClusterResourceBinding, patch: JsonObject, why: str) -> BindingPatch:
    return BindingPatch(
        name=binding.metadata.name,
        resource_version=binding.metadata.resource_version,
        merge_patch=_with_version(binding, patch),
        why=why,
        namespace=binding.metadata.namespace or None,
    )


def remove_finalizer(binding: ClusterResourceBinding, why: str) -> BindingPatch | None:
    """Drop the scheduler's cleanup finalizer (None if it is not there: nothing to write).

    A merge patch replaces a list wholesale, so the patch carries the remaining finalizers;
    the resourceVersion makes it fail rather than drop a finalizer added meanwhile."""
    finalizers = binding.metadata.finalizers
    if names.SCHEDULER_BINDING_CLEANUP_FINALIZER not in finalizers:
        return None
    remaining: list[JsonValue] = [
        f for f in finalizers if f != names.SCHEDULER_BINDING_CLEANUP_FINALIZER
    ]
    return _patch(binding, {"metadata": {"finalizers": remaining}}, why)


def mark_unscheduled(binding: ClusterResourceBinding, why: str) -> BindingPatch:
    """State Unscheduled, remembering the previous state; other annotations are kept."""
    patch: JsonObject = {
        "metadata": {"annotations": {names.PREVIOUS_BINDING_STATE_ANNOTATION: binding.spec.state}},
        "spec": {"state": names.STATE_UNSCHEDULED},
    }
    return _patch(binding, patch, why)


def rebind(
    binding: ClusterResourceBinding,
    *,
    state: str,
    snapshot_name: str,
    decision: ClusterDecision,
    clear_previous_state: bool,
    why: str,
) -> tuple[ClusterResourceBinding, BindingPatch | None]:
    """Point a binding at the latest snapshot with a new decision and state.

    Returns the binding as it will be (its decision goes into the snapshot status) and the
    patch, or None when nothing would change (a `fresh` cycle re-picking a current binding)."""
    spec = binding.spec.model_copy(
        update={
            "state": state,
            "scheduling_policy_snapshot_name": snapshot_name,
            "cluster_decision": decision,
        }
    )
    annotations = binding.metadata.annotations
    if clear_previous_state and names.PREVIOUS_BINDING_STATE_ANNOTATION in annotations:
        annotations = {
            k: v for k, v in annotations.items() if k != names.PREVIOUS_BINDING_STATE_ANNOTATION
        }
    metadata = binding.metadata.model_copy(update={"annotations": annotations})
    updated = binding.model_copy(update={"spec": spec, "metadata": metadata})
    before: JsonObject = {
        "metadata": {"annotations": dict(binding.metadata.annotations)},
        "spec": binding.spec.to_wire(),
    }
    after: JsonObject = {"metadata": {"annotations": dict(annotations)}, "spec": spec.to_wire()}
    diff = merge_diff(before, after)
    if not diff:
        return updated, None
    return updated, _patch(binding, diff, why)


def new_binding(
    name: str,
    placement: str,
    cluster: str,
    snapshot_name: str,
    decision: ClusterDecision,
    namespace: str | None = None,
) -> ClusterResourceBinding:
    """A complete Scheduled binding as KubeFleet creates it (kubefleet-rules 1.7, 1.12): a
    ResourceBinding in `namespace` for a ResourcePlacement (its label still only the name)."""
    return kinds_for(namespace).binding(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace or None,
            labels={names.PARENT_PLACEMENT_LABEL: placement},
            finalizers=[names.SCHEDULER_BINDING_CLEANUP_FINALIZER],
        ),
        spec=ClusterResourceBindingSpec(
            state=names.STATE_SCHEDULED,
            resource_snapshot_name="",
            scheduling_policy_snapshot_name=snapshot_name,
            target_cluster=cluster,
            cluster_decision=decision,
        ),
    )
