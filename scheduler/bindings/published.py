"""What a placement's PlacementDecisions (KEP-5313) say: one decision per active binding.

A placement's decisions are a pure function of its bindings: every active one (Scheduled or
Bound, not being deleted) is one decision, naming the ClusterProfile of its cluster, with a
short reason taken from the binding's own decision; sorted by cluster, in slices of at most
100, each slice named and labelled so a reader finds them all (docs/decisions.md). The turn
publishes what its plan leaves (`active_after`), the cleanup removes them, and
`scheduler.invariants` checks that what is published is what the bindings say (`problems`).

Pure: bindings in, objects out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import JsonValue

from hub import names
from hub.types import (
    ClusterProfileReference,
    ClusterResourceBinding,
    DuckDecision,
    ObjectMeta,
    PlacementDecision,
    PlacementDecisionStatus,
    ProfileDecision,
)
from hub.types.multicluster_v1alpha1 import MAX_DECISIONS_PER_SLICE
from scheduler.bindings.writes import apply_merge_patch
from scheduler.cycles.plan import BindingPlan

__all__ = [
    "DecisionTarget",
    "active_after",
    "active_decisions",
    "desired_slices",
    "problems",
    "published",
    "same_slice",
    "short_reason",
]

# A slice's name: "<prefix>-<placement name>-<index>", the prefix telling the kinds apart.
_PREFIXES: Final = {False: "crp", True: "rp"}
CLUSTER_PLACEMENT_KIND: Final = "ClusterResourcePlacement"
NAMESPACED_PLACEMENT_KIND: Final = "ResourcePlacement"


@dataclass(frozen=True)
class DecisionTarget:
    """Where one placement's slices live and what they reference.

    `namespace`: the slices' namespace (a ResourcePlacement's own; for a
    ClusterResourcePlacement, the one configured); `profile_namespace`: the ClusterProfiles'."""

    placement: str
    namespaced: bool
    namespace: str
    profile_namespace: str

    @property
    def kind(self) -> str:
        return NAMESPACED_PLACEMENT_KIND if self.namespaced else CLUSTER_PLACEMENT_KIND

    @property
    def selector(self) -> dict[str, str]:
        """The labels every slice of this placement carries, and only its slices."""
        return {
            names.DECISION_KEY_LABEL: self.placement,
            names.DECISION_PLACEMENT_KIND_LABEL: self.kind,
        }

    def slice_name(self, index: int) -> str:
        return f"{_PREFIXES[self.namespaced]}-{self.placement}-{index}"


@dataclass(frozen=True, slots=True)
class _Facts:
    """What a binding's decision depends on, as plain values (a patch edits them cheaply)."""

    name: str
    cluster: str
    state: str
    deleting: bool
    score: JsonValue  # the clusterDecision's clusterScore, wire form; None without one

    @classmethod
    def of(cls, binding: ClusterResourceBinding) -> _Facts:
        score = binding.spec.cluster_decision.cluster_score
        return cls(
            name=binding.metadata.name,
            cluster=binding.spec.target_cluster,
            state=binding.spec.state,
            deleting=binding.metadata.deleting,
            score=score.to_wire() if score is not None else None,
        )

    def patched(self, spec: Mapping[str, JsonValue]) -> _Facts:
        """These facts once a merge patch of the binding's spec has landed."""
        state, cluster, score = self.state, self.cluster, self.score
        if isinstance(spec.get("state"), str):
            state = str(spec["state"])
        if isinstance(spec.get("targetCluster"), str):
            cluster = str(spec["targetCluster"])
        if "clusterDecision" in spec:
            decision = spec["clusterDecision"]
            if decision is None:
                score = None
            elif isinstance(decision, dict) and "clusterScore" in decision:
                score = apply_merge_patch(score, decision["clusterScore"])
        return _Facts(self.name, cluster, state, self.deleting, score)

    @property
    def active(self) -> bool:
        return self.state != names.STATE_UNSCHEDULED and not self.deleting


def _reason(score: JsonValue) -> str:
    """Why the cluster was chosen, in a few words, from the binding's own decision."""
    if not isinstance(score, dict):
        return "picked by scheduling policy"
    return (
        f"picked by scheduling policy (affinity score {score.get('affinityScore') or 0}, "
        f"topology spread score {score.get('priorityScore') or 0})"
    )


def short_reason(binding: ClusterResourceBinding) -> str:
    """Why the binding's cluster was chosen, in a few words, from its own decision."""
    return _reason(_Facts.of(binding).score)


def _decisions(facts: Iterable[_Facts]) -> dict[str, str]:
    found: dict[str, str] = {}
    for fact in sorted(facts, key=lambda f: f.name):
        if fact.active and fact.cluster not in found:
            found[fact.cluster] = _reason(fact.score)
    return dict(sorted(found.items()))


def active_decisions(bindings: Iterable[ClusterResourceBinding]) -> dict[str, str]:
    """Cluster -> short reason for every active binding (Scheduled or Bound, not being
    deleted), by cluster name. Two active bindings on one cluster (a broken invariant of its
    own) are one decision: the first by name."""
    return _decisions(_Facts.of(b) for b in bindings)


def active_after(
    bindings: Sequence[ClusterResourceBinding], plan: BindingPlan
) -> dict[str, str]:
    """`active_decisions` of the bindings as they are once `plan`'s writes have landed: patched
    ones as patched, unscheduled ones gone, created ones added. Computed from the patches, not
    by rebuilding models: a first PickAll cycle at 5,000 clusters patches 5,000 bindings."""
    by_name = {b.metadata.name: _Facts.of(b) for b in bindings}
    for patch in [*plan.unschedule_dangling, *plan.patch, *plan.unschedule]:
        facts = by_name.get(patch.name)
        spec = patch.merge_patch.get("spec")
        if facts is not None and isinstance(spec, dict):
            by_name[patch.name] = facts.patched(spec)
    for created in plan.create:
        by_name[created.metadata.name] = _Facts.of(created)
    return _decisions(by_name.values())


def desired_slices(target: DecisionTarget, active: Mapping[str, str]) -> list[PlacementDecision]:
    """The slices that publish `active` (cluster -> reason): at least one, empty when the
    placement is bound nowhere (a reader then sees "nowhere", not "not decided")."""
    clusters = sorted(active)
    chunks = [
        clusters[start : start + MAX_DECISIONS_PER_SLICE]
        for start in range(0, len(clusters), MAX_DECISIONS_PER_SLICE)
    ] or [[]]
    slices = []
    for index, chunk in enumerate(chunks):
        labels = {
            **target.selector,
            names.DECISION_PLACEMENT_KEY_LABEL: target.placement,
            names.DECISION_INDEX_LABEL: str(index),
        }
        slices.append(
            PlacementDecision(
                metadata=ObjectMeta(
                    name=target.slice_name(index), namespace=target.namespace, labels=labels
                ),
                scheduler_name=names.DECISION_SCHEDULER_NAME,
                decisions=[
                    ProfileDecision(
                        cluster_profile_ref=ClusterProfileReference(
                            name=cluster, namespace=target.profile_namespace
                        ),
                        reason=active[cluster],
                    )
                    for cluster in chunk
                ],
                status=PlacementDecisionStatus(
                    decisions=[
                        DuckDecision(cluster_name=cluster, reason=active[cluster])
                        for cluster in chunk
                    ]
                ),
            )
        )
    return slices


def _content(decision: PlacementDecision) -> tuple[Any, ...]:
    status = decision.status.to_wire() if decision.status is not None else None
    return (
        decision.scheduler_name,
        [d.to_wire() for d in decision.decisions],
        status,
        {k: decision.metadata.labels.get(k) for k in _LABELS},
    )


_LABELS: Final = (
    names.DECISION_KEY_LABEL,
    names.DECISION_PLACEMENT_KIND_LABEL,
    names.DECISION_PLACEMENT_KEY_LABEL,
    names.DECISION_INDEX_LABEL,
)


def same_slice(existing: PlacementDecision, wanted: PlacementDecision) -> bool:
    """Does `existing` already publish what `wanted` says (its other labels aside)?"""
    return _content(existing) == _content(wanted)


def published(slices: Iterable[PlacementDecision]) -> list[str]:
    """The clusters the slices name, in slice order (duplicates kept: a problem to report)."""
    ordered = sorted(
        slices, key=lambda s: (_index(s) if _index(s) is not None else 1 << 30, s.metadata.name)
    )
    return [d.cluster_profile_ref.name for s in ordered for d in s.decisions]


def _index(decision: PlacementDecision) -> int | None:
    text = decision.metadata.labels.get(names.DECISION_INDEX_LABEL, "")
    return int(text) if text.isdigit() else None


def problems(
    target: DecisionTarget,
    slices: Sequence[PlacementDecision],
    bindings: Iterable[ClusterResourceBinding],
) -> list[str]:
    """What is wrong with a placement's published slices against its bindings, in a person's
    terms; [] when they say exactly what the bindings say."""
    found: list[str] = []
    active = active_decisions(bindings)
    if not slices:
        # Bound nowhere and never published (no cycle has run yet): nothing is claimed.
        if not active:
            return []
        return [
            f"has active binding(s) on {_few(list(active))} and no PlacementDecision in "
            f"namespace {target.namespace}"
        ]
    named = published(slices)
    missing = sorted(set(active) - set(named))
    extra = sorted(set(named) - set(active))
    if missing:
        found.append(f"active binding(s) on {_few(missing)} missing from its decisions")
    if extra:
        found.append(f"decisions name {_few(extra)} where it has no active binding")
    twice = sorted({c for c in named if named.count(c) > 1})
    if twice:
        found.append(f"decisions name {_few(twice)} more than once")
    indexes = sorted(i for s in slices if (i := _index(s)) is not None)
    if indexes != list(range(len(slices))):
        labelled = ", ".join(
            s.metadata.labels.get(names.DECISION_INDEX_LABEL, "?") for s in slices
        )
        found.append(f"slices are not indexed 0..{len(slices) - 1} (found {labelled})")
    for item in slices:
        refs = {d.cluster_profile_ref.namespace for d in item.decisions}
        if refs - {target.profile_namespace}:
            found.append(
                f"slice {item.metadata.name} references ClusterProfiles outside "
                f"{target.profile_namespace}"
            )
    return found


def _few(items: Sequence[str], shown: int = 5) -> str:
    head = ", ".join(items[:shown])
    return head + (f" +{len(items) - shown} more" if len(items) > shown else "")
