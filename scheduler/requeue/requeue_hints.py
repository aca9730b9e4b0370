"""Precise requeue: whether a member cluster's update could change a placement's decision (our
QueueingHint, after kube-scheduler's).

KubeFleet requeues every PickAll placement, and every PickN and PickFixed one that is not fully
scheduled, on any change of a cluster's labels, taints, properties, namespaces or resources
(kubefleet-rules section 7; `scheduler.requeue.watch_rules`). Most of those cycles decide what was
decided before: a label no placement selects, a taint nobody tolerates being renamed. Here each
plugin of the profile may say, for one placement's policy and one cluster's (before, after),
whether its verdict or its score for that cluster could change. The placement is requeued when
any plugin says it could, or when any plugin has no hint at all: an out-of-tree plugin that
does not know about hints is always asked again, as KubeFleet asks every plugin.

What is never filtered here: a cluster that leaves or is deleted reaches every placement bound
there, and placements KubeFleet would not requeue stay unrequeued (`scheduler.requeue.reach`, which
asks these hints for the watcher and the reconcile alike). A hint may only skip a cycle that
would decide the same; the property test tests/property/test_requeue_hint_properties.py holds
every in-tree hint to that, over generated fleets, policies and cluster changes.

A plugin's hint is a method

    requeue_hint(policy: PlacementPolicy | None, change: ClusterChange) -> bool

True: its verdict or score for `change.name` may differ after the change."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from hub import names
from hub.types import ClusterSelectorTerm, LabelSelector, MemberCluster, PlacementPolicy
from scheduler.clusters.facts import ClusterFacts, build

__all__ = [
    "ClusterChange",
    "affinity_may_change",
    "change_between_records",
    "may_change_decision",
    "record_of",
    "verdict",
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
            # Figures aside, as the reconcile's records judge it: "no heartbeat for 10.00
            # minutes" and "... 3.00 minutes" are one verdict (KubeFleet requeues neither).
            eligibility=verdict(ineligibility(old, now)) != verdict(ineligibility(new, now)),
            before=before,
            after=after,
            now=now,
        )


# A cluster's record (`record_of`): what scheduling reads of it, hashed part by part, so that two
# records say which parts changed, in a few dozen bytes whatever the cluster holds (the reconcile
# keeps one per member cluster in its result: thousands of them). "r1:" then hex digests: the
# whole (12), the eligibility reason, the taints, the namespaces and conditions, the resources
# (6 each), then the labels and the reported properties, each as BUCKETS two-digit digests: a
# key's bucket is fixed by its name, and holds the keys of that bucket with their values. Two
# records name the buckets that changed; a key reads as changed when its bucket did. When the
# whole changed and no part did (two digests that collide), the change is not known.
RECORD_VERSION: Final = "r1"
_FIGURES: Final = re.compile(r"[0-9.]+")
BUCKETS: Final = 16
_PART = 6
_BUCKET = 2


def verdict(ineligible: str | None) -> str | None:
    """An eligibility reason without its figures (None: eligible)."""
    return None if ineligible is None else _FIGURES.sub("", ineligible)


def record_of(cluster: MemberCluster, ineligible: str | None) -> str:
    """The record of `cluster`, whose eligibility reason now is `ineligible` (None: eligible)."""
    facts = build(cluster)
    status = cluster.status
    parts = [
        # The reason without its figures: "no heartbeat for 12.00 minutes" is the verdict it was
        # five minutes ago, for the reconcile's next run as for the cycle.
        _digest(verdict(ineligible) or "", _PART),
        _digest([t.model_dump(mode="json") for t in facts.taints], _PART),
        _digest(
            [status.namespaces, [c.model_dump(mode="json") for c in status.conditions]], _PART
        ),
        _digest(_resources(facts), _PART),
        _buckets(facts.labels),
        _buckets(facts.properties),
    ]
    whole = _digest([dict(facts.labels), dict(facts.properties), parts[:4]], 12)
    return f"{RECORD_VERSION}:{whole}:{''.join(parts)}"


def change_between_records(
    name: str, before: str, after: str, now: datetime
) -> ClusterChange | None:
    """The change between two records of cluster `name` (`record_of`), without the facts; None
    when either is not a record of this version (a digest from before records), or when what
    changed cannot be told: every placement KubeFleet would requeue is then requeued."""
    old, new = _parts(before), _parts(after)
    if old is None or new is None:
        return None
    labels, properties = _BucketKeys(_changed(old[5], new[5])), _BucketKeys(
        _changed(old[6], new[6])
    )
    change = ClusterChange(
        name=name,
        labels=labels,
        taints=old[2] != new[2],
        properties=properties,
        resources=old[4] != new[4],
        namespaces=old[3] != new[3],
        eligibility=old[1] != new[1],
        before=None,
        after=None,
        now=now,
    )
    parts_changed = (
        labels or properties or change.taints or change.resources or change.namespaces
        or change.eligibility
    )  # fmt: skip
    if old[0] != new[0] and not parts_changed:
        return None
    return change


class _BucketKeys(frozenset[str]):
    """The keys of the buckets that changed, as a set of key names: a name is in it when its
    bucket is (an over-approximation, never an under-one). Empty as a frozenset, so `bool` and
    the set operations the hints use are defined here."""

    def __new__(cls, buckets: frozenset[int]) -> _BucketKeys:
        made = super().__new__(cls)
        made._buckets = buckets  # type: ignore[attr-defined]
        return made

    def __contains__(self, key: object) -> bool:
        buckets: frozenset[int] = self._buckets  # type: ignore[attr-defined]
        return isinstance(key, str) and _bucket(key) in buckets

    def __bool__(self) -> bool:
        return bool(self._buckets)  # type: ignore[attr-defined]

    def __and__(self, other: AbstractSet[object]) -> frozenset[str]:
        return frozenset(k for k in other if isinstance(k, str) and k in self)

    __rand__ = __and__


def _bucket(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:4], 16) % BUCKETS


def _buckets(values: Mapping[str, str]) -> str:
    grouped: list[list[tuple[str, str]]] = [[] for _ in range(BUCKETS)]
    for key, value in sorted(values.items()):
        grouped[_bucket(key)].append((key, value))
    return "".join(_digest(group, _BUCKET) for group in grouped)


def _changed(before: str, after: str) -> frozenset[int]:
    return frozenset(
        i
        for i in range(BUCKETS)
        if before[i * _BUCKET : (i + 1) * _BUCKET] != after[i * _BUCKET : (i + 1) * _BUCKET]
    )


def _parts(record: str) -> list[str] | None:
    """The record's digests (whole, eligibility, taints, namespaces, resources, labels,
    properties); None for anything else (a digest from before records)."""
    head = f"{RECORD_VERSION}:"
    body = record[len(head) :]
    fixed, buckets = 4 * _PART, BUCKETS * _BUCKET
    if not record.startswith(head) or len(body) != 13 + fixed + 2 * buckets:
        return None
    rest = body[13:]
    return [
        body[:12],
        *(rest[i * _PART : (i + 1) * _PART] for i in range(4)),
        rest[fixed : fixed + buckets],
        rest[fixed + buckets :],
    ]


def _digest(value: object, length: int) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def may_change_decision(
    hints: Iterable[Callable[[PlacementPolicy | None, ClusterChange], bool] | None],
    policy: PlacementPolicy | None,
    change: ClusterChange,
    *,
    capacity_aware: bool = False,
) -> bool:
    """Whether a cycle of a placement with `policy` could decide otherwise after `change`.

    `hints`: the profile's, one per cycle plugin as `Profile.requeue_hints` resolved them when
    it was built (None: a plugin without one). A capacity-aware placement's cycle reads the
    clusters' resources itself, whatever the profile (room for PickFixed targets, "kept beyond
    the room" in the condition; docs/capacity.md): any resource change may change it. PickFixed
    runs no plugin: otherwise only its named clusters' eligibility decides. Else any plugin
    that may change its answer, or that gives no hint, makes it True."""
    if capacity_aware and change.resources:
        return True
    if policy is not None and policy.effective_type == names.PICK_FIXED:
        return change.eligibility and change.name in policy.cluster_names
    # A plugin without a hint (see the module docstring) may change anything.
    return any(hint is None or hint(policy, change) for hint in hints)


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
    # `in`, not `&`: a change known from records answers membership by bucket.
    return (
        any(key in change.labels for key in labels)
        or any(name in change.properties for name in properties)
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
