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
  (`scheduler.requeue.requeue_hints.record_of`); a cluster that is gone, or whose record changed,
  reaches the placements the watcher's route would reach for it (`scheduler.requeue.reach`, the one
  answer of both: KubeFleet's rule, enforcement's, then the profile's requeue hints judging
  the change from the two records; not narrowed when a record is from before records);
- the decision annotations and the priority of every placement, by digest, against the
  previous run's: a change no event brought runs a turn, or tells the workflow its priority;
- the invariants (scheduler.invariants): a placement whose next turn repairs what was found is
  requeued.

Pure: hub types in, a plan out."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from hub import names as hub_names
from hub.kinds import parent_key, placement_key, split_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from hub.types.meta import HubObject, ObjectMeta
from scheduler.clusters.eligibility import EligibilityChecker
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
    PLACEMENT_DECISIONS,
    RESERVATION,
    STALE_NOMINATION,
    STALE_RESERVATION,
    STRANDED_SHORTAGE,
    WORKFLOW,
    Violation,
)
from scheduler.requeue.decided import moot_from, version_of
from scheduler.requeue.reach import Bindings, ClusterEvent, reach
from scheduler.requeue.requeue_hints import record_of
from scheduler.requeue.watch_rules import wants_scheduler
from scheduler.snapshots import placement_scheduled_condition

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
    {RESERVATION, DUPLICATE_BINDING, BINDING_COUNT, STRANDED_SHORTAGE, PLACEMENT_DECISIONS}
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
    unless_read: dict[str, int] = field(default_factory=dict)
    """Requeued placements whose every reason is a cluster's change: placement -> the version a
    cycle must have read to make the requeue moot (`moot_from`), sent with it, so that a turn
    already running or queued when it arrives, which reads the change, needs no second one."""
    already_decided: set[str] = field(default_factory=set)
    """Placements a cluster's change reached that are not requeued for it: their last cycle
    read every changed cluster as it is now (scheduler.requeue.decided)."""


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


def unrepaired(
    violations: Iterable[Violation], plan: ReconcilePlan, released: int, dropped: int = 0
) -> Counter[str]:
    """The violations a reconcile run found and could not repair on the spot, by invariant (the
    metric): the workflows it started or finished, the reservations its sweep released and the
    stale nominations it dropped are repaired; what it requeued is not yet (the placement's turn
    repairs it)."""
    left: Counter[str] = Counter()
    acted = plan.start.keys() | plan.finish.keys()
    for violation in violations:
        if violation.invariant == WORKFLOW and violation.placement in acted:
            continue
        left[violation.invariant] += 1
    left[STALE_RESERVATION] = max(left[STALE_RESERVATION] - released, 0)
    left[STALE_NOMINATION] = max(left[STALE_NOMINATION] - dropped, 0)
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
    decided_at: Mapping[str, int] | None = None,
    content_versions: Mapping[str, int] | None = None,
) -> ReconcilePlan:
    """The actions of one reconcile run (a pure function of what it read). Placements of both
    kinds are named by key (`hub.kinds.placement_key`), in `running` too. Without
    `resource_placements` (`--no-resource-placements`), running ResourcePlacement workflows are
    left alone: their RPs were not read, which does not make them gone.

    `previous_annotations`: the previous run's digests of our decision annotations (placements
    whose digest changed, or that lost them all, are requeued: an event missed). `violations`:
    the invariants broken now (scheduler.invariants); a placement whose next turn repairs what
    was found is requeued. `profile`: whose plugins' hints judge a cluster's change (None:
    KubeFleet's rule, every placement it would requeue). `decided_at`: placement -> the hub
    version of the clusters its last completed cycle read (scheduler.requeue.decided); a
    placement a cluster's change reaches is not requeued for it when that cycle read the cluster
    as it is now (absent: requeued). `content_versions`: cluster -> its content version as the
    reconcile knows it (`scheduler.requeue.decided.reconcile_versions`; None: each cluster's
    own resourceVersion, which every heartbeat moves)."""
    checker = checker or EligibilityChecker()
    # The verdict the records keep: the profile's, whose hints judge their changes.
    ineligible = profile.ineligibility if profile is not None else checker.check
    if not resource_placements:
        running = {key for key in running if split_key(key)[0] is None}
    by_name = {_key(p): p for p in placements}
    snapshots = {parent_key(s): s for s in latest_snapshots}
    plan = ReconcilePlan()
    for name, placement in sorted(by_name.items()):
        if wants_scheduler(placement) and name not in running:
            plan.start[name] = START_REASON
    for name in sorted(running - by_name.keys()):
        plan.finish[name] = GONE_REASON

    always: set[str] = set()  # requeued for a reason no cycle's version makes moot

    def requeue(name: str, reason: str, unless_read: int | None = None) -> None:
        if name not in running or name not in by_name:
            return
        plan.requeue.setdefault(name, f"reconcile: {reason}")
        if unless_read is None:
            always.add(name)
            plan.unless_read.pop(name, None)
        elif name not in always:
            plan.unless_read[name] = max(plan.unless_read.get(name, unless_read), unless_read)

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
    bindings = list(bindings)
    for binding in bindings:
        owner = parent_key(binding)
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
        held = Bindings(bindings)
        for cluster_name in sorted(set(previous_clusters) | set(plan.clusters)):
            current = plan.clusters.get(cluster_name)
            before = previous_clusters.get(cluster_name)
            if before == current:
                continue
            if current is None or current == "deleting":
                event, what = ClusterEvent.gone(cluster_name, now), "left the fleet"
            else:
                event = ClusterEvent.from_records(by_cluster[cluster_name], before, current, now)
                what = "changed"
            reached = reach(event, by_name.values(), profile, bindings=held, clusters=by_cluster)
            # The version a cycle must have read for the change (None: no version is enough).
            wanted = None
            if current not in (None, "deleting") and decided_at is not None:
                cluster = by_cluster[cluster_name]
                known = content_versions
                version = version_of(cluster) if known is None else known.get(cluster_name)
                wanted = moot_from(cluster, ineligible, now, version)
            for found in reached:
                read = decided_at.get(found.placement) if decided_at is not None else None
                if wanted is not None and read is not None and wanted <= read:
                    plan.already_decided.add(found.placement)
                    continue
                reason = f"cluster {cluster_name} {what} since the last reconcile"
                requeue(found.placement, reason, wanted)
        plan.already_decided -= plan.requeue.keys()
    return plan


def _key(obj: HubObject) -> str:
    return placement_key(obj.metadata.namespace, obj.metadata.name)
