"""Decisions and the Scheduled condition, written exactly as KubeFleet writes them (kubefleet-rules
1.9, 4.7 step 5, 4.10).

The templates are module constants so tests import them instead of retyping. One deliberate
difference: KubeFleet's decision cap lets up to 20 unselected decisions through once more than
1000 clusters are selected (10.10), which the CRD's maxItems then rejects forever; here the
list never exceeds 1000."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from hub import names
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterSchedulingPolicySnapshot,
    ClusterScore,
    Condition,
)
from scheduler.cycles.plan import SnapshotStatusWrite
from scheduler.framework.score import ClusterScore as Score

__all__ = [
    "FIXED_INVALID",
    "FIXED_NOT_FOUND",
    "NOT_PICKED",
    "SELECTED",
    "SELECTED_FIXED",
    "decisions_from_bindings",
    "equal_decisions",
    "fixed_decisions",
    "not_picked_decision",
    "scheduled_condition",
    "selected_decision",
    "selected_fixed_decision",
    "status_write",
]

SELECTED = (
    'Successfully scheduled resources for placement in "{cluster}" (affinity score: {affinity}, '
    "topology spread score: {topology}): picked by scheduling policy"
)
SELECTED_FIXED = (
    'Successfully scheduled resources for placement in "{cluster}": picked by scheduling policy'
)
NOT_PICKED = (
    'Cluster "{cluster}" does not score high enough (affinity score: {affinity}, '
    "topology spread score: {topology})"
)
FIXED_INVALID = 'Cluster "{cluster}" is not eligible for resource placement yet: {reason}'
FIXED_NOT_FOUND = 'Specified cluster "{cluster}" is not found'


def selected_decision(cluster: str, score: Score) -> ClusterDecision:
    return _scored(cluster, score, selected=True, template=SELECTED)


def selected_fixed_decision(cluster: str) -> ClusterDecision:
    return ClusterDecision(
        cluster_name=cluster, selected=True, reason=SELECTED_FIXED.format(cluster=cluster)
    )


def not_picked_decision(cluster: str, score: Score) -> ClusterDecision:
    return _scored(cluster, score, selected=False, template=NOT_PICKED)


def _scored(cluster: str, score: Score, *, selected: bool, template: str) -> ClusterDecision:
    """A PickN decision: the score as KubeFleet stores it (topology spread as priority) and in
    the reason."""
    affinity, topology = score.affinity_score, score.topology_spread_score
    return ClusterDecision(
        cluster_name=cluster,
        selected=selected,
        cluster_score=ClusterScore(affinity_score=affinity, priority_score=topology),
        reason=template.format(cluster=cluster, affinity=affinity, topology=topology),
    )


def decisions_from_bindings(
    groups: Sequence[Sequence[ClusterResourceBinding]],
    not_picked: Sequence[tuple[str, Score]],
    filtered: Sequence[tuple[str, str]],
    *,
    max_unselected: int = names.MAX_UNSELECTED_DECISIONS,
    max_decisions: int = names.MAX_DECISIONS,
) -> list[ClusterDecision]:
    """Reference 4.10 step 3: the bindings' stored decisions group by group, then not-picked
    clusters (best first), then filtered ones (`filtered` = (name, reason) sorted by name).

    The arithmetic is KubeFleet's, including its quirks (a whole group's size is charged
    against the slots; a skipped filtered cluster still uses up an index), except that no
    unselected decision is added once the slots are used up (10.10), and a cluster with two
    live bindings (left behind by KubeFleet, 10.20) gets one decision, not two: KubeFleet's
    set comparison then never matches and the status is rewritten every cycle."""
    decisions: list[ClusterDecision] = []
    seen: set[str] = set()
    slots = max_decisions
    for group in groups:
        for binding in group[: max(slots, 0)]:
            if binding.spec.target_cluster in seen:
                continue  # a second live binding of one cluster: one decision is enough
            decisions.append(binding.spec.cluster_decision)
            seen.add(binding.spec.target_cluster)
        slots -= len(group)
        if slots <= 0:
            break
    unselected = max_unselected
    for cluster, score in not_picked:
        if slots <= 0 or unselected <= 0:  # KubeFleet: `slots == 0`, overflowing past 1000
            break
        if cluster in seen:
            continue
        decisions.append(not_picked_decision(cluster, score))
        slots -= 1
        unselected -= 1
    for index in range(min(unselected, len(filtered), slots)):
        cluster, reason = filtered[index]
        if cluster in seen:
            continue
        decisions.append(ClusterDecision(cluster_name=cluster, selected=False, reason=reason))
    return decisions


def fixed_decisions(
    valid: Sequence[str], invalid: Sequence[tuple[str, str]], not_found: Sequence[str]
) -> list[ClusterDecision]:
    """Reference 4.7 step 5: valid, then invalid, then not found, each in target-list order."""
    out = [selected_fixed_decision(c) for c in valid]
    out += [
        ClusterDecision(
            cluster_name=c, selected=False, reason=FIXED_INVALID.format(cluster=c, reason=r)
        )
        for c, r in invalid
    ]
    out += [
        ClusterDecision(cluster_name=c, selected=False, reason=FIXED_NOT_FOUND.format(cluster=c))
        for c in not_found
    ]
    return out


def scheduled_condition(
    snapshot: ClusterSchedulingPolicySnapshot, *, fulfilled: bool, count: int
) -> Condition:
    """The policy snapshot's Scheduled condition (lastTransitionTime is set by status_write)."""
    if fulfilled:
        status, reason = names.TRUE, names.POLICY_FULFILLED_REASON
        message = names.POLICY_FULFILLED_MESSAGE.format(count=count)
    else:
        status, reason = names.FALSE, names.POLICY_UNFULFILLED_REASON
        message = names.POLICY_UNFULFILLED_MESSAGE.format(count=count)
    return Condition(
        type=names.SCHEDULED_CONDITION,
        status=status,
        reason=reason,
        message=message,
        observed_generation=snapshot.metadata.generation or 0,
    )


def equal_decisions(current: Sequence[ClusterDecision], desired: Sequence[ClusterDecision]) -> bool:
    """KubeFleet's equalDecisions: same length, and every current decision has a field-for-field
    equal desired decision for the same cluster (order ignored)."""
    if len(current) != len(desired):
        return False
    by_cluster = {d.cluster_name: d for d in desired}
    return all(by_cluster.get(d.cluster_name) == d for d in current)


def _same_condition(current: Condition | None, desired: Condition, *, message: bool) -> bool:
    # KubeFleet's condition.EqualCondition: type, status, reason, and an observedGeneration at
    # least as new; message and lastTransitionTime are ignored.
    return (
        current is not None
        and current.type == desired.type
        and current.status == desired.status
        and current.reason == desired.reason
        and (current.observed_generation or 0) >= (desired.observed_generation or 0)
        and (not message or current.message == desired.message)
    )


def status_write(
    snapshot: ClusterSchedulingPolicySnapshot,
    crp_generation: int,
    decisions: list[ClusterDecision],
    condition: Condition,
    now: datetime,
    *,
    compare_message: bool = False,
) -> SnapshotStatusWrite | None:
    """The status write, or None when KubeFleet's skip rule says nothing changed (4.10 step 5).

    The condition is upserted with Kubernetes semantics: lastTransitionTime (metav1.Time, whole
    seconds) becomes `now` only when the status changes; other conditions are kept."""
    status = snapshot.status
    existing = status.condition(names.SCHEDULED_CONDITION)
    if (
        (status.observed_crp_generation or 0) == crp_generation
        and equal_decisions(status.target_clusters, decisions)
        and _same_condition(existing, condition, message=compare_message)
    ):
        return None
    if existing is not None and existing.status == condition.status:
        transition = existing.last_transition_time
    else:
        transition = now.replace(microsecond=0)
    written = condition.model_copy(update={"last_transition_time": transition})
    conditions = [written if c.type == written.type else c for c in status.conditions]
    if existing is None:
        conditions.append(written)
    new_status = status.model_copy(
        update={
            "observed_crp_generation": crp_generation,
            "conditions": conditions,
            "target_clusters": decisions,
        }
    )
    return SnapshotStatusWrite(
        name=snapshot.metadata.name,
        resource_version=snapshot.metadata.resource_version,
        status=new_status,
    )
