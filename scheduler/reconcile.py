"""What one run of the reconcile safety net does, as a pure function of what it read
(docs/operations.md, "Reconcile safety net"; the activity is activities/reconcile.py).

The watcher turns hub events into signals, but events can be missed: the watcher was down, or a
signal was refused for good. Every run of the reconcile checks, from the hub and Temporal's
visibility alone:

- every placement that wants the scheduler has a running workflow (missing ones are started);
- every running placement workflow has a placement (orphans get a `placement_deleting` signal;
  their next turn finds the placement gone and completes);
- every placement's scheduling is current: its latest policy snapshot was scheduled for the
  snapshot's and the placement's generation (`placement_scheduled_condition` says pending), and
  no binding of it is being deleted or targets a cluster that does not exist; if not, requeue;
- member clusters: each run records what scheduling reads of every cluster (labels, taints,
  properties, namespaces, resource usage, eligibility), hashed part by part
  (`scheduler.requeue_hints.record_of`); a cluster that is gone reaches the placements
  KubeFleet's cluster watcher would requeue for it (`placements_for_cluster_event`), and one
  whose record changed reaches those of them whose decision the change may alter, as the
  watcher's precise requeue judges it (`may_change_decision`; every one of them when a record
  is from before records);
- the decision annotations and the priority of every placement, by digest, against the
  previous run's: a change no event brought runs a turn, or tells the workflow its priority;
- the invariants (scheduler.invariants): a placement whose next turn repairs what was found is
  requeued.

Pure: hub types in, a plan out."""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from hub import names as hub_names
from hub.kinds import placement_key, split_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from hub.types.meta import HubObject, ObjectMeta
from scheduler.eligibility import EligibilityChecker
from scheduler.enforcement import gives_somewhere_to_go
from scheduler.framework.profile import Profile
from scheduler.framework.queue_sort import (
    PriorityClasses,
    QueueItem,
    QueuePriority,
    QueueSortPlugin,
    TurnCause,
)
from scheduler.invariants import (
    BINDING_COUNT,
    DUPLICATE_BINDING,
    RESERVATION,
    STALE_RESERVATION,
    STRANDED_SHORTAGE,
    WORKFLOW,
    Violation,
)
from scheduler.requeue_hints import change_between_records, may_change_decision, record_of
from scheduler.snapshots import placement_scheduled_condition
from scheduler.watch_rules import placements_for_cluster_event, wants_scheduler

__all__ = [
    "DEFAULT_PRIORITY_KEY",
    "GONE_REASON",
    "START_REASON",
    "ReconcilePlan",
    "annotations_digest",
    "cluster_digest",
    "placement_priorities",
    "plan_reconcile",
    "priority_changed",
    "priority_digests",
    "unrepaired",
]

START_REASON: Final = "reconcile: no workflow was running"
GONE_REASON: Final = "reconcile: the placement is gone"
# Broken invariants the placement's next turn repairs (its reservations made again, its bindings
# counted, its shortage decided again); the others are reported only.
REPAIRED_BY_A_TURN: Final = frozenset(
    {RESERVATION, DUPLICATE_BINDING, BINDING_COUNT, STRANDED_SHORTAGE}
)


@dataclass
class ReconcilePlan:
    """What a reconcile run does: placement -> the reason, per action."""

    start: dict[str, str] = field(default_factory=dict)
    finish: dict[str, str] = field(default_factory=dict)
    requeue: dict[str, str] = field(default_factory=dict)
    clusters: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    """Placement -> digest of its decision annotations (only placements that have any)."""


def cluster_digest(
    cluster: MemberCluster,
    ineligibility: Callable[[MemberCluster, datetime], str | None],
    now: datetime,
) -> str:
    """What scheduling reads of a cluster, hashed part by part (`record_of`): heartbeat times
    are left out (they change every minute), the eligibility verdict they make is kept."""
    return record_of(cluster, ineligibility(cluster, now))


def annotations_digest(placement: ClusterResourcePlacement) -> str | None:
    """A digest of the placement's annotations that decisions read (hub.names'
    DECISION_ANNOTATIONS); None when it has none."""
    read = {
        key: placement.metadata.annotations[key]
        for key in hub_names.DECISION_ANNOTATIONS
        if key in placement.metadata.annotations
    }
    if not read:
        return None
    text = json.dumps(read, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# The key under which a run records the priority a placement without one of its own gets (the
# global default PriorityClass's, or 0): when it changes, every such placement's does.
DEFAULT_PRIORITY_KEY: Final = ""


def placement_priorities(
    placements: Iterable[ClusterResourcePlacement],
    sorter: QueueSortPlugin,
    classes: PriorityClasses,
) -> dict[str, QueuePriority]:
    """The QueueSort plugin's answer for each live placement's own turns, as the watcher asks
    it, and under DEFAULT_PRIORITY_KEY its answer for a placement that names nothing; a plugin
    that fails gives the default priority, never a failed reconcile."""

    def ask(meta: ObjectMeta) -> QueuePriority:
        try:
            return sorter.queue_sort(QueueItem(meta, TurnCause.PLACEMENT, classes))
        except Exception:  # a third-party plugin may fail in any way
            return QueuePriority()

    found = {DEFAULT_PRIORITY_KEY: ask(ObjectMeta(name=""))}
    for placement in placements:
        if not placement.metadata.deleting:
            found[_key(placement)] = ask(placement.metadata)
    return found


def priority_digests(priorities: Mapping[str, QueuePriority]) -> dict[str, str]:
    """A digest of each priority that is not the default one, and of the default itself, so a
    fleet without priorities carries one entry from run to run."""
    default = priorities[DEFAULT_PRIORITY_KEY]
    return {
        key: hashlib.sha256(_digested(answer).encode()).hexdigest()[:16]
        for key, answer in priorities.items()
        if key == DEFAULT_PRIORITY_KEY or answer != default
    }


def _digested(answer: QueuePriority) -> str:
    """What a priority's digest hashes: its repr, and its aging limit only when it has one (a
    field added later: the digests of fleets without it stay as they were)."""
    text = repr(answer)
    return text if answer.aging_limit is None else f"{text}, aging_limit={answer.aging_limit}"


def priority_changed(
    current: Mapping[str, str], previous: Mapping[str, str] | None, placements: Iterable[str]
) -> set[str]:
    """Placements whose priority changed since the previous run (None: no previous run): their
    own digest moved, or they have the default priority and the default moved."""
    if previous is None:
        return set()
    changed = {k for k in current.keys() | previous.keys() if current.get(k) != previous.get(k)}
    if DEFAULT_PRIORITY_KEY in changed:
        changed |= {key for key in placements if key not in current}
    return changed - {DEFAULT_PRIORITY_KEY}


def unrepaired(violations: Iterable[Violation], plan: ReconcilePlan, released: int) -> Counter[str]:
    """The violations a reconcile run found and could not repair on the spot, by invariant (the
    metric): the workflows it started or finished and the reservations its sweep released are
    repaired; what it requeued is not yet (the placement's turn repairs it)."""
    left: Counter[str] = Counter()
    acted = plan.start.keys() | plan.finish.keys()
    for violation in violations:
        if violation.invariant == WORKFLOW and violation.placement in acted:
            continue
        left[violation.invariant] += 1
    left[STALE_RESERVATION] = max(left[STALE_RESERVATION] - released, 0)
    return +left


def plan_reconcile(
    placements: Iterable[ClusterResourcePlacement],
    latest_snapshots: Iterable[ClusterSchedulingPolicySnapshot],
    clusters: Iterable[MemberCluster],
    bindings: Iterable[ClusterResourceBinding],
    running: set[str],
    previous_clusters: Mapping[str, str] | None,
    *,
    standalone: bool,
    now: datetime,
    checker: EligibilityChecker | None = None,
    resource_placements: bool = True,
    previous_annotations: Mapping[str, str] | None = None,
    violations: Iterable[Violation] = (),
    profile: Profile | None = None,
) -> ReconcilePlan:
    """The actions of one reconcile run (a pure function of what it read). Placements of both
    kinds are named by key (`hub.kinds.placement_key`), in `running` too. Without
    `resource_placements` (`--no-resource-placements`), running ResourcePlacement workflows are
    left alone: their RPs were not read, which does not make them gone.

    `previous_annotations`: the previous run's digests of our decision annotations (placements
    whose digest changed, or that lost them all, are requeued: an event missed). `violations`:
    the invariants broken now (scheduler.invariants); a placement whose next turn repairs what
    was found is requeued. `profile`: whose plugins' hints judge a cluster's change (None:
    KubeFleet's rule, every placement it would requeue)."""
    checker = checker or EligibilityChecker()
    # The verdict the records keep: the profile's, whose hints judge their changes.
    ineligible = profile.ineligibility if profile is not None else checker.check
    if not resource_placements:
        running = {key for key in running if split_key(key)[0] is None}
    by_name = {_key(p): p for p in placements}
    snapshots = {_owner(s): s for s in latest_snapshots}
    plan = ReconcilePlan()
    for name, placement in sorted(by_name.items()):
        if wants_scheduler(placement) and name not in running:
            plan.start[name] = START_REASON
    for name in sorted(running - by_name.keys()):
        plan.finish[name] = GONE_REASON

    def requeue(name: str, reason: str) -> None:
        if name in running and name in by_name:
            plan.requeue.setdefault(name, f"reconcile: {reason}")

    for name, placement in sorted(by_name.items()):
        if placement.metadata.deleting:
            if wants_scheduler(placement):
                requeue(name, "the placement is being deleted and still has our finalizer")
            continue
        snapshot = snapshots.get(name)
        if snapshot is None:
            if standalone:
                requeue(name, "the placement has no latest policy snapshot")
            continue
        condition = placement_scheduled_condition(placement, snapshot, now)
        if condition.reason == hub_names.SCHEDULE_PENDING_REASON:
            requeue(name, f"snapshot {snapshot.metadata.name} is not scheduled for its generation")

    cluster_names = set()
    by_cluster: dict[str, MemberCluster] = {}
    for cluster in clusters:
        cluster_names.add(cluster.metadata.name)
        by_cluster[cluster.metadata.name] = cluster
        plan.clusters[cluster.metadata.name] = (
            "deleting" if cluster.metadata.deleting else cluster_digest(cluster, ineligible, now)
        )
    bound: defaultdict[str, set[str]] = defaultdict(set)  # cluster -> placements bound there
    owned: defaultdict[str, list[ClusterResourceBinding]] = defaultdict(list)
    for binding in bindings:
        owner = _owner(binding)
        owned[owner].append(binding)
        if not binding.metadata.deleting and binding.spec.state != hub_names.STATE_UNSCHEDULED:
            bound[binding.spec.target_cluster].add(owner)
        if binding.metadata.deleting:
            requeue(owner, f"binding {binding.metadata.name} is being deleted")
        elif binding.spec.target_cluster not in cluster_names:
            requeue(owner, f"binding {binding.metadata.name} targets a cluster that is gone")
    for name, placement in by_name.items():
        if not placement.metadata.deleting and (digest := annotations_digest(placement)):
            plan.annotations[name] = digest
    if previous_annotations is not None:
        for name in sorted(set(previous_annotations) | set(plan.annotations)):
            if previous_annotations.get(name) != plan.annotations.get(name):
                requeue(name, "its decision annotations changed since the last reconcile")
    for violation in violations:
        if violation.invariant in REPAIRED_BY_A_TURN and violation.placement is not None:
            requeue(violation.placement, violation.message)
    if previous_clusters is not None:
        live = [p for p in by_name.values() if not p.metadata.deleting]
        for cluster_name in sorted(set(previous_clusters) | set(plan.clusters)):
            current = plan.clusters.get(cluster_name)
            if previous_clusters.get(cluster_name) == current:
                continue
            left = current is None or current == "deleting"
            what = "left the fleet" if left else "changed"
            held = functools.partial(bound.__getitem__, cluster_name)
            somewhere_to_go = (
                None
                if left
                else functools.partial(
                    _gives_somewhere_to_go,
                    owned,
                    by_cluster,
                    by_cluster[cluster_name],
                    profile,
                    now,
                )
            )
            reached = placements_for_cluster_event(left, live, held, somewhere_to_go)
            before = previous_clusters.get(cluster_name)
            if not left and before is not None and current is not None and profile is not None:
                reached = _hinted(reached, by_name, profile, cluster_name, before, current, now)
            for name in reached:
                requeue(name, f"cluster {cluster_name} {what} since the last reconcile")
    return plan


def _hinted(
    reached: list[str],
    by_name: Mapping[str, ClusterResourcePlacement],
    profile: Profile,
    cluster: str,
    before: str,
    after: str,
    now: datetime,
) -> list[str]:
    """Of the placements a cluster's change reaches by KubeFleet's rule, those whose decision
    it may change (the watcher's precise requeue, control.routes), judged from the two records;
    all of them when a record is not one (a digest from before records)."""
    change = change_between_records(cluster, before, after, now)
    if change is None:
        return reached
    plugins = profile.cycle_plugins()
    return [
        name
        for name in reached
        if may_change_decision(
            plugins,
            by_name[name].spec.policy,
            change,
            capacity_aware=hub_names.REQUESTS_ANNOTATION in by_name[name].metadata.annotations,
        )
    ]


def _gives_somewhere_to_go(
    owned: Mapping[str, list[ClusterResourceBinding]],
    clusters: Mapping[str, MemberCluster],
    changed: MemberCluster,
    profile: Profile | None,
    now: datetime,
    placement: ClusterResourcePlacement,
) -> bool:
    """The watcher's question (control.routes), asked of what the reconcile read."""
    return gives_somewhere_to_go(
        placement, owned.get(_key(placement), []), clusters, changed, profile, now
    )


def _owner(obj: HubObject) -> str:
    """The key of the placement `obj` (a snapshot or binding) is labelled with ("" if none)."""
    parent = obj.metadata.labels.get(hub_names.PARENT_PLACEMENT_LABEL, "")
    return placement_key(obj.metadata.namespace, parent) if parent else ""


def _key(obj: HubObject) -> str:
    return placement_key(obj.metadata.namespace, obj.metadata.name)
