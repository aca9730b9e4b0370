"""Affinity enforced during execution (docs/enforcement.md): which of a placement's bindings sit
on clusters that no longer pass its required filters, and why, in a person's words.

KubeFleet's required affinity is "IgnoredDuringExecution": a cycle never takes a Scheduled or
Bound binding of the latest snapshot away because its cluster stopped matching (kubefleet-rules
4.5, 4.6). A placement annotated `fleet-scheduler.io/affinity-enforcement: DuringExecution` asks
for more: a binding whose cluster no longer passes one of the *required* filters below is moved
(PickN), unscheduled (PickAll) or reported (PickFixed) by its turn (activities.enforcement).

The required filters are the placement's own demands on a cluster: its required cluster
affinity terms (labels and properties), its tolerations (an untolerated taint) and, for a
ResourcePlacement, its namespace on the cluster. A cluster that is merely unhealthy, leaving,
short of room or out of spread is not "lost": those come and go, and KubeFleet's cycle already
handles the clusters that leave.

Pure: the bound clusters are judged by the profile's own filter plugins, in a PickAll cycle of
the same policy over those clusters alone (filters only, no scores), with no bindings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from hub import names
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    ClusterSelectorTerm,
    LabelSelector,
    LabelSelectorRequirement,
    MemberCluster,
    ObjectMeta,
    PlacementPolicy,
    PropertySelector,
    PropertySelectorRequirement,
    SchedulingPolicySnapshotSpec,
)
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.clusters.labels import SelectorError, compile_selector
from scheduler.cycles.models import CycleInput
from scheduler.cycles.schedule import schedule
from scheduler.framework.profile import Profile
from scheduler.opt_in.placement_annotations import (
    DURING_EXECUTION,
    IGNORED_DURING_EXECUTION,
    EnforcementError,
    parse_enforcement,
)
from scheduler.plugins import cluster_affinity, namespace_affinity, taint_toleration
from scheduler.plugins.cluster_affinity.filtering import (
    REASON_NO_MATCH,
    compile_required,
    filter_cluster,
    required_terms,
)
from scheduler.plugins.cluster_affinity.properties import QuantityCache

__all__ = [
    "DURING_EXECUTION",
    "ENFORCED_PLUGINS",
    "IGNORED_DURING_EXECUTION",
    "Lost",
    "enforcement_of",
    "enforces",
    "gives_somewhere_to_go",
    "lost_bindings",
    "replacement_order",
]

ENFORCED_PLUGINS: Final = frozenset(
    {cluster_affinity.NAME, taint_toleration.NAME, namespace_affinity.NAME}
)
# The reasons, as the history, the log and the bindings' Unscheduled state say them.
REASON_LOST: Final = "cluster lost {requirements}"
REASON_NO_LONGER_MATCHES: Final = "cluster no longer matches {requirements}"
REASON_OF_TERMS: Final = " (it matches none of the {count} required terms)"
REASON_AFFINITY: Final = "cluster no longer passes the required cluster affinity: {reason}"
REASON_TAINT: Final = "cluster has taint {taint}, which the placement does not tolerate"
REASON_NAMESPACE: Final = "namespace {namespace} is gone from the cluster"


def enforcement_of(placement: ClusterResourcePlacement) -> tuple[bool, str | None]:
    """(enforced, problem): is affinity enforced during execution for this placement, and what
    is wrong with its annotation if it has a value we do not know (then: not enforced). The
    problem quotes at most 40 characters of the value (scheduler.opt_in.placement_annotations)."""
    key = names.AFFINITY_ENFORCEMENT_ANNOTATION
    value = placement.metadata.annotations.get(key)
    if value is None:
        return False, None
    try:
        return parse_enforcement(value), None
    except EnforcementError as exc:
        return False, f"annotation {key}: {exc}"


def enforces(placement: ClusterResourcePlacement) -> bool:
    """Does the placement ask for its affinity to be enforced during execution?"""
    return enforcement_of(placement)[0]


@dataclass(frozen=True, slots=True)
class Lost:
    """An active binding of the latest snapshot on a cluster that no longer passes one of the
    placement's required filters."""

    binding: ClusterResourceBinding
    plugin: str
    reason: str
    """In a person's words, e.g. "cluster lost env=prod"."""

    @property
    def cluster(self) -> str:
        return self.binding.spec.target_cluster


def active_of(
    snapshot: ClusterSchedulingPolicySnapshot, binding: ClusterResourceBinding
) -> bool:
    """Scheduled or Bound, of the latest snapshot, not being deleted."""
    return (
        not binding.metadata.deleting
        and binding.spec.state in (names.STATE_SCHEDULED, names.STATE_BOUND)
        and binding.spec.scheduling_policy_snapshot_name == snapshot.name
    )


def lost_bindings(
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: Sequence[MemberCluster],
    bindings: Sequence[ClusterResourceBinding],
    profile: Profile | None,
    now: datetime,
) -> tuple[list[Lost], str | None]:
    """(lost bindings in name order, a problem that kept the judgement from being made). A
    binding on a cluster that is gone or leaving is not judged: KubeFleet's cycle unschedules
    it as dangling."""
    live = {c.metadata.name: c for c in clusters if not c.metadata.deleting}
    active = sorted(
        (b for b in bindings if active_of(snapshot, b) and b.spec.target_cluster in live),
        key=lambda b: b.metadata.name,
    )
    if not active:
        return [], None
    bound = sorted({b.spec.target_cluster for b in active})
    failed, error = _filtered(snapshot, [live[name] for name in bound], profile, now)
    if error is not None:
        return [], f"affinity enforcement could not judge the bound clusters: {error}"
    lost: list[Lost] = []
    for binding in active:
        said = _lost_reason(snapshot, failed, live[binding.spec.target_cluster])
        if said is not None:
            plugin = failed[binding.spec.target_cluster][0]
            lost.append(Lost(binding=binding, plugin=plugin, reason=said))
    return lost, None


def _filtered(
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: Sequence[MemberCluster],
    profile: Profile | None,
    now: datetime,
) -> tuple[dict[str, tuple[str, str]], str | None]:
    """(cluster -> (plugin, reason) of the filter that turned it down, the cycle's error): the
    snapshot's required filters, run over `clusters` as a PickAll of the same policy."""
    result = schedule(
        CycleInput(snapshot=_filters_only(snapshot), clusters=list(clusters), now=now), profile
    )
    if result.error is not None:
        return {}, result.error
    failed: dict[str, tuple[str, str]] = {}
    for group in result.explanation.filtered:
        for name in group.clusters:
            if name not in failed or group.plugin in ENFORCED_PLUGINS:
                failed[name] = (group.plugin, group.reason)
    return failed, None


def _lost_reason(
    snapshot: ClusterSchedulingPolicySnapshot,
    failed: Mapping[str, tuple[str, str]],
    cluster: MemberCluster,
) -> str | None:
    """Why a binding on `cluster` is lost, in a person's words (None: it is not)."""
    found = failed.get(cluster.metadata.name)
    if found is None or found[0] not in ENFORCED_PLUGINS:
        return None
    return _said(found[0], found[1], snapshot.spec.policy, cluster, snapshot)


def gives_somewhere_to_go(
    placement: ClusterResourcePlacement,
    bindings: Iterable[ClusterResourceBinding],
    clusters: Mapping[str, MemberCluster],
    changed: MemberCluster,
    profile: Profile | None,
    now: datetime,
) -> bool:
    """May a change to the cluster `changed` (as it is now) give an enforcing PickN placement's
    lost binding somewhere to go? True when the placement holds an active binding on a cluster
    that fails one of its required filters (a binding its turn kept for want of a target, or
    held back), holds none on `changed`, and `changed` passes every filter of its policy now
    (room aside). The watcher and the reconcile ask it of the placements KubeFleet's rule
    leaves alone (scheduler.requeue.watch_rules), from their caches of the placement's bindings (any
    snapshot: the caches do not keep which) and of the clusters (`clusters`, by name)."""
    policy = placement.spec.policy
    if policy is None or policy.effective_type != names.PICK_N or not enforces(placement):
        return False
    if changed.metadata.deleting:
        return False
    bound = {
        b.spec.target_cluster
        for b in bindings
        if not b.metadata.deleting and b.spec.state in (names.STATE_SCHEDULED, names.STATE_BOUND)
    }
    name = changed.metadata.name
    judged = [
        c
        for target in sorted(bound - {name})
        if (c := clusters.get(target)) is not None and not c.metadata.deleting
    ]
    if name in bound or not judged:
        return False
    snapshot = ClusterSchedulingPolicySnapshot(
        metadata=ObjectMeta(
            name=placement.metadata.name,
            namespace=placement.metadata.namespace,
            labels={names.PARENT_PLACEMENT_LABEL: placement.metadata.name},
            annotations={names.CRP_GENERATION_ANNOTATION: str(placement.metadata.generation or 0)},
        ),
        spec=SchedulingPolicySnapshotSpec(policy=policy, policy_hash=""),
    )
    failed, error = _filtered(snapshot, [*judged, changed], profile, now)
    if error is not None or name in failed:
        # A policy its cycles cannot run on moves nothing either (lost_bindings says why).
        return False
    return any(_lost_reason(snapshot, failed, cluster) is not None for cluster in judged)


def _filters_only(snapshot: ClusterSchedulingPolicySnapshot) -> ClusterSchedulingPolicySnapshot:
    """The snapshot as a PickAll of the same required filters: PickAll runs PreFilter and
    Filter only, over every cluster it is given."""
    policy = snapshot.spec.policy or PlacementPolicy()
    affinity = policy.affinity
    if affinity is not None and affinity.cluster_affinity is not None:
        kept = affinity.cluster_affinity.model_copy(
            update={"preferred_during_scheduling_ignored_during_execution": []}
        )
        affinity = affinity.model_copy(update={"cluster_affinity": kept})
    judged = policy.model_copy(
        update={
            "placement_type": names.PICK_ALL,
            "cluster_names": [],
            "number_of_clusters": None,
            "topology_spread_constraints": [],
            "affinity": affinity,
        }
    )
    spec = snapshot.spec.model_copy(update={"policy": judged})
    return snapshot.model_copy(update={"spec": spec})


def _said(
    plugin: str,
    reason: str,
    policy: PlacementPolicy | None,
    cluster: MemberCluster,
    snapshot: ClusterSchedulingPolicySnapshot,
) -> str | None:
    """The reason in a person's words; None for a filter result that is not a lost demand (a
    cluster that reports no namespaces yet)."""
    if plugin == taint_toleration.NAME:
        taint = taint_toleration.untolerated(policy, facts_of(cluster).taints)
        if taint is None:
            return None
        value = f"={taint.value}" if taint.value else ""
        return REASON_TAINT.format(taint=f"{taint.key}{value}:{taint.effect}")
    if plugin == namespace_affinity.NAME:
        if not reason.endswith(namespace_affinity.REASON_NAMESPACE_MISSING):
            return None
        return REASON_NAMESPACE.format(namespace=snapshot.metadata.namespace or "")
    if not reason.endswith(REASON_NO_MATCH):
        return REASON_AFFINITY.format(reason=reason.split(", ", 1)[-1])
    return _affinity_loss(required_terms(policy), cluster)


def _affinity_loss(terms: Sequence[ClusterSelectorTerm], cluster: MemberCluster) -> str:
    """What the cluster lacks of the required term it comes closest to, e.g. "cluster lost
    env=prod"."""
    facts = facts_of(cluster)
    cache = QuantityCache()
    best: list[tuple[str, bool]] | None = None
    for term in terms:
        missing = _missing(term, facts, cache)
        if best is None or len(missing) < len(best):
            best = missing
    if not best:
        return REASON_AFFINITY.format(reason=REASON_NO_MATCH)
    text = ", ".join(requirement for requirement, _ in best)
    positive = all(is_positive for _, is_positive in best)
    said = (REASON_LOST if positive else REASON_NO_LONGER_MATCHES).format(requirements=text)
    return said + (REASON_OF_TERMS.format(count=len(terms)) if len(terms) > 1 else "")


def _missing(
    term: ClusterSelectorTerm, facts: ClusterFacts, cache: QuantityCache
) -> list[tuple[str, bool]]:
    """(requirement as written, is it a "has" rather than a "has not") for each requirement of
    the term the cluster fails."""
    out: list[tuple[str, bool]] = []
    selector = term.label_selector
    if selector is not None:
        for key, value in sorted(selector.match_labels.items()):
            if facts.labels.get(key) != value:
                out.append((f"{key}={value}", True))
        for requirement in selector.match_expressions:
            if not _holds(requirement, facts.labels):
                out.append(_written(requirement))
    if term.property_selector is not None:
        for expression in term.property_selector.match_expressions:
            alone = ClusterSelectorTerm(
                property_selector=PropertySelector(match_expressions=[expression])
            )
            if not filter_cluster(compile_required([alone]), facts, cache).is_success:
                out.append((_property(expression), True))
    return out


def _holds(requirement: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    try:
        matches = compile_selector(LabelSelector(match_expressions=[requirement]))
    except SelectorError:
        return False
    return matches(labels)


def _written(requirement: LabelSelectorRequirement) -> tuple[str, bool]:
    values = ",".join(requirement.values)
    match requirement.operator:
        case "In":
            return f"{requirement.key} in ({values})", True
        case "NotIn":
            return f"{requirement.key} notin ({values})", False
        case "Exists":
            return requirement.key, True
        case "DoesNotExist":
            return f"!{requirement.key}", False
    return f"{requirement.key} {requirement.operator} ({values})", True


def _property(expression: PropertySelectorRequirement) -> str:
    value = expression.values[0] if expression.values else ""
    return f"{expression.name} {expression.operator} {value}"


def replacement_order(
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: Sequence[MemberCluster],
    bindings: Sequence[ClusterResourceBinding],
    lost: Sequence[Lost],
    profile: Profile | None,
    now: datetime,
) -> list[str]:
    """PickN: the clusters a lost binding may move to, best first: what the placement's own
    cycle would pick for the missing places were the lost bindings gone (picked, then not
    picked, each in rank order), less every cluster where the placement holds a binding that
    is not Unscheduled (a move onto one it left revives its binding there, as a cycle would:
    activities.moves)."""
    gone = {item.binding.metadata.name for item in lost}
    result = schedule(
        CycleInput(
            snapshot=snapshot,
            clusters=list(clusters),
            bindings=[b for b in bindings if b.metadata.name not in gone],
            now=now,
        ),
        profile,
    )
    explanation = result.explanation
    ranked = [c for g in (*explanation.picked, *explanation.not_picked) for c in g.clusters]
    held = {
        b.spec.target_cluster
        for b in bindings
        if not b.metadata.deleting and b.spec.state != names.STATE_UNSCHEDULED
    }
    return [c for c in ranked if c not in held]
