"""Which hub events reach which placements: KubeFleet's scheduler watchers (kubefleet-rules section
7).

Pure functions of (old object, new object), so the watcher process stays a thin loop and every
rule is testable without a server. A rule answers "does this event matter?"; the watcher then
signals the placement workflows it names. Where KubeFleet drops events that we need because we
also run standalone (placement creation and spec changes, which KubeFleet's placement controller
turns into snapshot events), the extra rules are marked as such."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from hub import names
from hub.kinds import parent_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
    MemberCluster,
)
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.room.quantity import QuantityError, parse_quantity

__all__ = [
    "CLUSTER_CHANGE_ELIGIBLE",
    "CLUSTER_CHANGE_LABELS",
    "CLUSTER_CHANGE_NAMESPACES",
    "CLUSTER_CHANGE_PROPERTIES",
    "CLUSTER_CHANGE_RESOURCES",
    "CLUSTER_CHANGE_TAINTS",
    "CLUSTER_CHANGE_TAINT_ADDED",
    "binding_deletion_started",
    "cluster_update_matters",
    "cluster_update_reasons",
    "decision_annotations_changed",
    "is_fully_scheduled",
    "never_scheduled",
    "parse_bool_label",
    "placement_deletion_started",
    "placement_spec_changed",
    "scheduled_condition_current",
    "snapshot_event_placement",
    "taint_added",
    "wants_scheduler",
]


def parse_bool_label(value: str | None) -> bool | None:
    """Go's strconv.ParseBool, which the snapshot watcher uses: None when unparsable."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def snapshot_event_placement(
    old: ClusterSchedulingPolicySnapshot | None, new: ClusterSchedulingPolicySnapshot
) -> str | None:
    """The key of the placement to enqueue for a snapshot create (old=None) or update, else
    None: its parent-CRP label, in the snapshot's namespace for a SchedulingPolicySnapshot.

    Updates pass when the number-of-clusters or CRP-generation annotation changed, or the
    is-latest label went to true; then the reconcile skips deleting, non-latest and orphan
    snapshots."""
    if old is not None:
        old_ann, new_ann = old.metadata.annotations, new.metadata.annotations
        annotation_changed = any(
            old_ann.get(key) != new_ann.get(key)
            for key in (names.NUMBER_OF_CLUSTERS_ANNOTATION, names.CRP_GENERATION_ANNOTATION)
        )
        was_latest = parse_bool_label(old.metadata.labels.get(names.IS_LATEST_SNAPSHOT_LABEL))
        is_latest = parse_bool_label(new.metadata.labels.get(names.IS_LATEST_SNAPSHOT_LABEL))
        became_latest = is_latest is True and was_latest is not True
        if not (annotation_changed or became_latest):
            return None
    if new.metadata.deleting:
        return None
    if parse_bool_label(new.metadata.labels.get(names.IS_LATEST_SNAPSHOT_LABEL)) is not True:
        return None
    return parent_key(new) or None


def wants_scheduler(placement: ClusterResourcePlacement) -> bool:
    """The placement needs a workflow: it is live, or being deleted and still waiting for the
    scheduler's cleanup (our finalizer). Others need nothing from us."""
    meta = placement.metadata
    return not meta.deleting or names.SCHEDULER_CLEANUP_FINALIZER in meta.finalizers


def placement_deletion_started(
    old: ClusterResourcePlacement | None, new: ClusterResourcePlacement
) -> bool:
    """The placement got a deletionTimestamp and still needs the scheduler's cleanup."""
    started = new.metadata.deleting and (old is None or not old.metadata.deleting)
    return started and names.SCHEDULER_CLEANUP_FINALIZER in new.metadata.finalizers


def decision_annotations_changed(
    old: ClusterResourcePlacement | None, new: ClusterResourcePlacement
) -> list[str]:
    """Our annotations that decisions read (`hub.names.DECISION_ANNOTATIONS`: requests,
    rebalance, affinity enforcement, deadline) whose value changed, were added or removed, in
    that order; empty for a new placement (its creation runs a turn anyway) or a deleting one.

    KubeFleet has no such annotations, so a placement without them never matches: its events
    are routed exactly as KubeFleet routes them."""
    if old is None or new.metadata.deleting:
        return []
    before, after = old.metadata.annotations, new.metadata.annotations
    return [key for key in names.DECISION_ANNOTATIONS if before.get(key) != after.get(key)]


def placement_spec_changed(
    old: ClusterResourcePlacement | None, new: ClusterResourcePlacement
) -> bool:
    """Standalone mode only: a new placement, or a spec change (generation moved).

    KubeFleet's scheduler ignores these because its placement controller turns them into
    snapshot events; our snapshotter runs inside the workflow, so the workflow hears of them."""
    if new.metadata.deleting:
        return False
    return old is None or old.metadata.generation != new.metadata.generation


def binding_deletion_started(
    old: ClusterResourceBinding | None, new: ClusterResourceBinding
) -> str | None:
    """The key of the placement whose binding just got a deletionTimestamp while carrying our
    finalizer (the parent-CRP label, in the binding's namespace for a ResourceBinding)."""
    if old is None or old.metadata.deleting or not new.metadata.deleting:
        return None
    if names.SCHEDULER_BINDING_CLEANUP_FINALIZER not in new.metadata.finalizers:
        return None
    return parent_key(new) or None


def _taint_removed_or_changed(old: MemberCluster, new: MemberCluster) -> bool:
    current = {(t.key, t.value or "", t.effect) for t in new.spec.taints}
    return any((t.key, t.value or "", t.effect) not in current for t in old.spec.taints)


def taint_added(old: MemberCluster, new: MemberCluster) -> bool:
    """A taint the cluster did not have before. KubeFleet's rules ignore it (an added taint
    never lets a cluster in, and its affinity is ignored during execution); a placement that
    enforces its affinity during execution (scheduler.moves.enforcement) may lose a binding to
    it."""
    before = {(t.key, t.value or "", t.effect) for t in old.spec.taints}
    return any((t.key, t.value or "", t.effect) not in before for t in new.spec.taints)


def _properties_changed(old: MemberCluster, new: MemberCluster) -> bool:
    before, after = old.status.properties, new.status.properties
    if len(before) != len(after):
        return True
    return any(name not in after or after[name].value != p.value for name, p in before.items())


def _resource_usage_changed(old: MemberCluster, new: MemberCluster) -> bool:
    def same(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
        if a.keys() != b.keys():
            return False
        for key, value in a.items():
            try:
                if parse_quantity(value) != parse_quantity(b[key]):
                    return False
            except QuantityError:
                if value != b[key]:
                    return False
        return True

    o, n = old.status.resource_usage, new.status.resource_usage
    return not (
        same(o.capacity, n.capacity)
        and same(o.allocatable, n.allocatable)
        and same(o.available, n.available)
    )


def cluster_update_matters(
    old: MemberCluster, new: MemberCluster, checker: EligibilityChecker, now: datetime
) -> bool:
    """A MemberCluster update that can let a placement pick it (kubefleet-rules section 7).

    Ignored when the new object is leaving; otherwise passes on label changes, taint changes or
    removals (not additions), property changes, namespace changes, resource usage changes, and
    the cluster becoming eligible. Becoming ineligible never matters: picks are kept."""
    if new.metadata.deleting:
        return False
    return (
        old.metadata.labels != new.metadata.labels
        or _taint_removed_or_changed(old, new)
        or _properties_changed(old, new)
        or old.status.namespaces != new.status.namespaces
        or _resource_usage_changed(old, new)
        or (checker.check(old, now) is not None and checker.check(new, now) is None)
    )


# What `cluster_update_reasons` reports, in the order it checks; the watcher puts them in the
# signal's reason ("cluster member-3: labels changed"), so a history says why a cycle ran.
CLUSTER_CHANGE_LABELS = "labels changed"
CLUSTER_CHANGE_TAINTS = "a taint was removed or changed"
CLUSTER_CHANGE_TAINT_ADDED = "a taint was added"
CLUSTER_CHANGE_PROPERTIES = "properties changed"
CLUSTER_CHANGE_NAMESPACES = "namespaces changed"
CLUSTER_CHANGE_RESOURCES = "resource usage changed"
CLUSTER_CHANGE_ELIGIBLE = "became eligible"


def cluster_update_reasons(
    old: MemberCluster, new: MemberCluster, checker: EligibilityChecker, now: datetime
) -> list[str]:
    """Why a MemberCluster update matters, one phrase per rule that fired; empty when it does not.

    The same rules as `cluster_update_matters` (non-empty exactly when it is True), all of them
    evaluated, for the watcher's signal reasons."""
    if new.metadata.deleting:
        return []
    fired = (
        (CLUSTER_CHANGE_LABELS, old.metadata.labels != new.metadata.labels),
        (CLUSTER_CHANGE_TAINTS, _taint_removed_or_changed(old, new)),
        (CLUSTER_CHANGE_PROPERTIES, _properties_changed(old, new)),
        (CLUSTER_CHANGE_NAMESPACES, old.status.namespaces != new.status.namespaces),
        (CLUSTER_CHANGE_RESOURCES, _resource_usage_changed(old, new)),
        (
            CLUSTER_CHANGE_ELIGIBLE,
            checker.check(old, now) is not None and checker.check(new, now) is None,
        ),
    )
    return [reason for reason, changed in fired if changed]


def scheduled_condition_current(placement: ClusterResourcePlacement) -> Condition | None:
    """The placement's Scheduled condition if a turn at its current generation has ended with
    it (True or False), else None. SchedulePending at the current generation does not count: a
    turn whose cycle failed writes it (as KubeFleet's placement controller would show it) while
    Temporal still retries the turn."""
    condition = placement.status.condition(placement.SCHEDULED_CONDITION)
    if condition is None or condition.observed_generation != placement.metadata.generation:
        return None
    if condition.reason == names.SCHEDULE_PENDING_REASON:
        return None
    return condition


def never_scheduled(placement: ClusterResourcePlacement) -> bool:
    """The placement has no Scheduled condition at all: no turn has ended for it yet (a new
    placement, PrioritySort's new first)."""
    return placement.status.condition(placement.SCHEDULED_CONDITION) is None


def is_fully_scheduled(placement: ClusterResourcePlacement) -> bool:
    """The placement's Scheduled condition is True for its current generation."""
    condition = scheduled_condition_current(placement)
    return condition is not None and condition.status == names.TRUE
