"""Precise requeue: whether a member cluster's update could change a placement's decision (our
QueueingHint, after kube-scheduler's).

KubeFleet requeues every PickAll placement, and every PickN and PickFixed one that is not fully
scheduled, on any change of a cluster's labels, taints, properties, namespaces or resources
(kubefleet-rules section 7; `scheduler.watch_rules`). Most of those cycles decide what was
decided before: a label no placement selects, a taint nobody tolerates being renamed. Here each
plugin of the profile may say, for one placement's policy and one cluster's (before, after),
whether its verdict or its score for that cluster could change. The placement is requeued when
any plugin says it could, or when any plugin has no hint at all: an out-of-tree plugin that
does not know about hints is always asked again, as KubeFleet asks every plugin.

What is never filtered here: a cluster that leaves or is deleted reaches every placement bound
there (`placements_for_cluster_event`), and placements KubeFleet would not requeue stay
unrequeued. A hint may only skip a cycle that would decide the same; the property test
tests/property/test_requeue_hint_properties.py holds every in-tree hint to that, over generated
fleets, policies and cluster changes.

A plugin's hint is a method

    requeue_hint(policy: PlacementPolicy | None, change: ClusterChange) -> bool

True: its verdict or score for `change.name` may differ after the change."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from hub import names
from hub.types import ClusterSelectorTerm, LabelSelector, MemberCluster, PlacementPolicy
from scheduler.facts import ClusterFacts, build

__all__ = [
    "ClusterChange",
    "affinity_may_change",
    "change_between_records",
    "may_change_decision",
    "record_of",
]


@dataclass(frozen=True)
class ClusterChange:
    """What a MemberCluster update changed, as the plugins read a cluster (its facts)."""

    name: str
    labels: frozenset[str]
    """Label keys added, removed or given another value."""
    taints: bool
    properties: frozenset[str]
    """Reported property names added, removed or given another value."""
    resources: bool
    """Capacity, allocatable or available changed."""
    namespaces: bool
    """The namespace list or the conditions (namespace collection among them) changed."""
    eligibility: bool
    """The profile's eligibility verdict or its reason differs at `now` (PickFixed's check)."""
    before: ClusterFacts | None
    after: ClusterFacts | None
    """The cluster as the plugins read it, before and after; None when the change is known only
    from digests of its parts (the reconcile's, `from_records`): a hint then answers from the
    fields above."""
    now: datetime

    @classmethod
    def between(
        cls,
        old: MemberCluster,
        new: MemberCluster,
        ineligibility: Callable[[MemberCluster, datetime], str | None],
        now: datetime,
    ) -> ClusterChange:
        before, after = build(old), build(new)
        return cls(
            name=new.metadata.name,
            labels=_changed_keys(before.labels, after.labels),
            taints=before.taints != after.taints,
            properties=_changed_keys(before.properties, after.properties),
            resources=_resources(before) != _resources(after),
            namespaces=(
                old.status.namespaces != new.status.namespaces
                or old.status.conditions != new.status.conditions
            ),
            eligibility=ineligibility(old, now) != ineligibility(new, now),
            before=before,
            after=after,
            now=now,
        )


# A cluster's record (`record_of`): what scheduling reads of it, hashed part by part, so that two
# records say which parts changed. Fields, "|"-separated: the version, a digest of the whole,
# the eligibility reason, taints, namespaces and conditions, resources, then the labels and the
# reported properties as comma-separated key=digest pairs (label keys and property names hold
# no "|", "," or "=").
RECORD_VERSION = "r1"


def record_of(cluster: MemberCluster, ineligible: str | None) -> str:
    """The record of `cluster`, whose eligibility reason now is `ineligible` (None: eligible)."""
    facts = build(cluster)
    status = cluster.status
    parts = [
        _digest(ineligible or ""),
        _digest([t.model_dump(mode="json") for t in facts.taints]),
        _digest(
            [
                status.namespaces,
                [c.model_dump(mode="json") for c in status.conditions],
            ]
        ),
        _digest(_resources(facts)),
        ",".join(f"{k}={_digest(v)}" for k, v in sorted(facts.labels.items())),
        ",".join(f"{k}={_digest(v)}" for k, v in sorted(facts.properties.items())),
    ]
    return "|".join([RECORD_VERSION, _digest(parts, 16), *parts])


def change_between_records(
    name: str, before: str, after: str, now: datetime
) -> ClusterChange | None:
    """The change between two records of cluster `name` (`record_of`), without the facts; None
    when either is not a record of this version (a digest from before records): what changed is
    not known, so every placement KubeFleet would requeue is requeued."""
    old, new = _parts(before), _parts(after)
    if old is None or new is None:
        return None
    return ClusterChange(
        name=name,
        labels=_changed_keys(_pairs(old[6]), _pairs(new[6])),
        taints=old[3] != new[3],
        properties=_changed_keys(_pairs(old[7]), _pairs(new[7])),
        resources=old[5] != new[5],
        namespaces=old[4] != new[4],
        eligibility=old[2] != new[2],
        before=None,
        after=None,
        now=now,
    )


def _parts(record: str) -> list[str] | None:
    parts = record.split("|")
    return parts if len(parts) == 8 and parts[0] == RECORD_VERSION else None


def _pairs(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split(",")) if text else {}


def _digest(value: object, length: int = 8) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def may_change_decision(
    plugins: Iterable[object],
    policy: PlacementPolicy | None,
    change: ClusterChange,
    *,
    capacity_aware: bool = False,
) -> bool:
    """Whether a cycle of a placement with `policy` could decide otherwise after `change`.

    A capacity-aware placement's cycle reads the clusters' resources itself, whatever the
    profile (room for PickFixed targets, "kept beyond the room" in the condition;
    docs/capacity.md): any resource change may change it. PickFixed runs no plugin: otherwise
    only its named clusters' eligibility decides. Else any plugin that may change its answer,
    or that gives no hint, makes it True."""
    if capacity_aware and change.resources:
        return True
    if policy is not None and policy.effective_type == names.PICK_FIXED:
        return change.eligibility and change.name in policy.cluster_names
    for plugin in plugins:
        # A plugin without the method has no hint (see the module docstring); this runs for
        # every placement of a fleet on every cluster update, so no costlier check.
        hint = getattr(plugin, "requeue_hint", None)
        if hint is None or hint(policy, change):
            return True
    return False


def _label_keys(selectors: Iterable[LabelSelector | None]) -> set[str]:
    """The label keys `selectors` (LabelSelectors, or None) read."""
    keys: set[str] = set()
    for selector in selectors:
        if selector is None:
            continue
        keys.update(selector.match_labels)
        keys.update(e.key for e in selector.match_expressions)
    return keys


def _property_names(terms: Iterable[ClusterSelectorTerm]) -> set[str]:
    """The property names the policy's cluster affinity reads (selectors and sorters)."""
    out: set[str] = set()
    for term in terms:
        if term.property_selector is not None:
            out.update(e.name for e in term.property_selector.match_expressions)
        if term.property_sorter is not None:
            out.add(term.property_sorter.name)
    return out


def affinity_may_change(policy: PlacementPolicy | None, change: ClusterChange) -> bool:
    """ClusterAffinity's hint: a label or property its terms read changed."""
    if policy is None or policy.affinity is None or policy.affinity.cluster_affinity is None:
        return False
    labels, properties, resources = _reads(policy)
    return bool(
        labels & change.labels
        or properties & change.properties
        or (resources and change.resources)
    )


# What each policy's affinity reads, by the policy object (the watcher keeps one per placement
# and asks about it on every cluster update): (label keys, property names, reads resources).
_READS: dict[int, tuple[PlacementPolicy, frozenset[str], frozenset[str], bool]] = {}
MAX_CACHED_POLICIES = 100_000


def _reads(policy: PlacementPolicy) -> tuple[frozenset[str], frozenset[str], bool]:
    cached = _READS.get(id(policy))
    if cached is not None and cached[0] is policy:
        return cached[1], cached[2], cached[3]
    terms = _terms(policy)
    labels = frozenset(_label_keys(term.label_selector for term in terms))
    read = _property_names(terms)
    resources = any(n.startswith(names.RESOURCE_PROPERTY_PREFIX) for n in read)
    properties = frozenset(n for n in read if not n.startswith(names.RESOURCE_PROPERTY_PREFIX))
    if len(_READS) >= MAX_CACHED_POLICIES:
        _READS.clear()
    _READS[id(policy)] = (policy, labels, properties, resources)
    return labels, properties, resources


def _terms(policy: PlacementPolicy | None) -> list[ClusterSelectorTerm]:
    if policy is None or policy.affinity is None or policy.affinity.cluster_affinity is None:
        return []
    affinity = policy.affinity.cluster_affinity
    terms: list[ClusterSelectorTerm] = []
    required = affinity.required_during_scheduling_ignored_during_execution
    if required is not None:
        terms.extend(required.cluster_selector_terms)
    preferred = affinity.preferred_during_scheduling_ignored_during_execution
    terms.extend(p.preference for p in preferred)
    return terms


def _changed_keys(before: Mapping[str, str], after: Mapping[str, str]) -> frozenset[str]:
    return frozenset(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _resources(facts: ClusterFacts) -> tuple[object, ...]:
    return (dict(facts.capacity), dict(facts.allocatable), dict(facts.available))
