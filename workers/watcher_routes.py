"""Which placement workflows a hub change reaches, with which signal and why.

The decisions are KubeFleet's watcher filters (kubefleet-rules section 7, in
`scheduler.watch_rules`);
this module only names the signal and writes the reason a user reads in the placement's history
("cluster member-3: labels changed"). Two additions, both because each placement is a long-lived
workflow here rather than a key in an in-memory queue:

- At start-up every existing placement is signalled (with signal-with-start), not only those
  whose latest policy snapshot happens to be replayed: KubeFleet's start-up gap (kubefleet-rules
  10.18) would otherwise leave a placement that was deleted while the scheduler was down
  without its cleanup.
- A placement that is gone gets a plain signal (never a start), so a workflow still waiting for
  it runs one more turn, sees "gone" and completes.

And one omission, in standalone mode only: a policy snapshot change is not signalled when the
snapshot already carries the CRP-generation of the placement as the watcher's cache holds it.
Standalone, the placement's own workflow is the snapshotter: it writes snapshots only in the
first half of a turn (`schedule_once`), for the generation it read, and that turn goes on to
run a cycle on them. A snapshot at the cached generation was therefore made for a generation
the watcher has already signalled (`placement_changed`), and signalling it again only echoes
the workflow's own write: one redundant cycle per placement creation or policy change (measured:
2.1 cycles per new placement instead of 1.1, bench/RESULTS.md). Beside KubeFleet, snapshot
events are the trigger and are always routed. Should the cache lag behind the snapshot, it is
routed as before.

`Route.may_start` says whether the event may start a workflow when none runs; the watcher
decides at send time against its placement cache (`may_start`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeVar

from hub import names as hub_names
from hub.kinds import placement_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from hub.types.meta import HubObject
from scheduler.eligibility import EligibilityChecker
from scheduler.watch_rules import (
    binding_deletion_started,
    cluster_update_reasons,
    parse_bool_label,
    placement_deletion_started,
    placement_spec_changed,
    placements_for_cluster_event,
    snapshot_event_placement,
)
from workers.watcher_views import Change
from workflows import names

__all__ = ["Route", "may_start", "orphan_snapshot_warning", "route_change", "startup_routes"]

T = TypeVar("T", bound=HubObject)

# Reason templates: the text after the signal name in the workflow's pending reasons.
REASON_STARTED: Final = "watcher started: placement {name} exists"
REASON_STARTED_DELETING: Final = "watcher started: placement {name} is being deleted"
REASON_PLACEMENT_CREATED: Final = "placement {name} created"
REASON_PLACEMENT_SPEC: Final = "placement {name}: spec changed (generation {old} -> {new})"
REASON_PLACEMENT_DELETING: Final = "placement {name}: deletion started"
REASON_PLACEMENT_GONE: Final = "placement {name} was deleted"
REASON_SNAPSHOT_CREATED: Final = "policy snapshot {name} created"
REASON_SNAPSHOT_CHANGED: Final = "policy snapshot {name}: {changes}"
REASON_BINDING_DELETING: Final = "binding {name} (cluster {cluster}): deletion started"
REASON_CLUSTER_CHANGED: Final = "cluster {name}: {changes}"
REASON_CLUSTER_GONE: Final = "cluster {name} was deleted"


# Logged, not signalled: the snapshot names no placement, so no workflow can show it.
ORPHAN_SNAPSHOT_WARNING: Final = (
    "policy snapshot {name} is labelled {latest}=true but has no {parent} label, so it belongs "
    "to no placement and nothing is scheduled from it; its placement controller must set the "
    "label"
)


@dataclass(frozen=True, slots=True)
class Route:
    """Signal `signal` to the workflow of `placement` (a key, `hub.kinds.placement_key`: the
    name of a ClusterResourcePlacement, `<namespace>/<name>` of a ResourcePlacement), because of
    `reason`.

    `may_start`: start the workflow if none runs (signal-with-start). False only for events
    about a placement that is gone, which must never start a new run.

    `fan_out`: the route comes from outside the placement (a member cluster's change, the
    watcher's start), so its turn queues behind the placement's own (docs/priority.md)."""

    placement: str
    signal: str
    reason: str
    may_start: bool = True
    fan_out: bool = False


def may_start(placement: ClusterResourcePlacement) -> bool:
    """A workflow may be started for this placement: it is live, or being deleted and still
    waiting for the scheduler's cleanup (our finalizer). Others need nothing from us."""
    meta = placement.metadata
    return not meta.deleting or hub_names.SCHEDULER_CLEANUP_FINALIZER in meta.finalizers


def startup_routes(
    placements: Iterable[ClusterResourcePlacement], *, standalone: bool
) -> list[Route]:
    """One route per existing placement that may need the scheduler, sorted by key.

    Standalone, the workflow's snapshotter must look at the placement (placement_changed);
    beside KubeFleet, its latest snapshot is what matters (snapshot_changed), as KubeFleet
    replays snapshot creations at start."""
    routes: list[Route] = []
    for placement in sorted(placements, key=_key):
        if not may_start(placement):
            continue
        name = _key(placement)
        if placement.metadata.deleting:
            routes.append(
                Route(
                    name,
                    names.SIGNAL_PLACEMENT_DELETING,
                    REASON_STARTED_DELETING.format(name=name),
                    fan_out=True,
                )
            )
        else:
            signal = names.SIGNAL_PLACEMENT_CHANGED if standalone else names.SIGNAL_SNAPSHOT_CHANGED
            routes.append(Route(name, signal, REASON_STARTED.format(name=name), fan_out=True))
    return routes


def route_change(
    change: Change[HubObject],
    *,
    placements: Mapping[str, ClusterResourcePlacement],
    standalone: bool,
    checker: EligibilityChecker,
    now: datetime,
) -> list[Route]:
    """The routes one change of any watched kind produces (often none).

    `placements` is the watcher's current placement cache, already updated with `change` when
    it is a placement change; member-cluster changes fan out over it."""
    new, old = change.new, change.old
    if isinstance(new, ClusterResourcePlacement):
        return _placement(change.type, _as(old, ClusterResourcePlacement), new, standalone)
    if isinstance(new, ClusterSchedulingPolicySnapshot):
        if standalone and _made_for_signalled_generation(new, placements):
            return []
        return _snapshot(change.type, _as(old, ClusterSchedulingPolicySnapshot), new)
    if isinstance(new, ClusterResourceBinding):
        return _binding(change.type, _as(old, ClusterResourceBinding), new)
    if isinstance(new, MemberCluster):
        return _cluster(change.type, _as(old, MemberCluster), new, placements, checker, now)
    raise TypeError(f"the watcher does not watch {type(new).__name__}")


def orphan_snapshot_warning(change: Change[HubObject]) -> str | None:
    """What to log for a latest policy snapshot without a `parent-CRP` label, else None.

    KubeFleet's snapshot watcher drops such a snapshot with an error log (kubefleet-rules 7); the
    watcher does the same, so the one trace of the bad snapshot names it and the label."""
    new = change.new
    if change.type == "DELETED" or not isinstance(new, ClusterSchedulingPolicySnapshot):
        return None
    labels = new.metadata.labels
    if new.metadata.deleting or labels.get(hub_names.PARENT_PLACEMENT_LABEL):
        return None
    if parse_bool_label(labels.get(hub_names.IS_LATEST_SNAPSHOT_LABEL)) is not True:
        return None
    return ORPHAN_SNAPSHOT_WARNING.format(
        name=_key(new),
        latest=hub_names.IS_LATEST_SNAPSHOT_LABEL,
        parent=hub_names.PARENT_PLACEMENT_LABEL,
    )


def _key(obj: HubObject) -> str:
    return placement_key(obj.metadata.namespace, obj.metadata.name)


def _as(obj: HubObject | None, kind: type[T]) -> T | None:
    return obj if isinstance(obj, kind) else None


def _placement(
    event: str,
    old: ClusterResourcePlacement | None,
    new: ClusterResourcePlacement,
    standalone: bool,
) -> list[Route]:
    name = _key(new)
    if event == "DELETED":
        return [
            Route(
                name,
                names.SIGNAL_PLACEMENT_DELETING,
                REASON_PLACEMENT_GONE.format(name=name),
                may_start=False,
            )
        ]
    if placement_deletion_started(old, new):
        return [
            Route(
                name, names.SIGNAL_PLACEMENT_DELETING, REASON_PLACEMENT_DELETING.format(name=name)
            )
        ]
    if standalone and placement_spec_changed(old, new):
        if old is None:
            reason = REASON_PLACEMENT_CREATED.format(name=name)
        else:
            reason = REASON_PLACEMENT_SPEC.format(
                name=name, old=old.metadata.generation, new=new.metadata.generation
            )
        return [Route(name, names.SIGNAL_PLACEMENT_CHANGED, reason)]
    return []


def _snapshot(
    event: str,
    old: ClusterSchedulingPolicySnapshot | None,
    new: ClusterSchedulingPolicySnapshot,
) -> list[Route]:
    if event == "DELETED":
        return []  # KubeFleet ignores snapshot deletions
    placement = snapshot_event_placement(old, new)
    if placement is None:
        return []
    name = new.metadata.name
    if old is None:
        return [
            Route(
                placement, names.SIGNAL_SNAPSHOT_CHANGED, REASON_SNAPSHOT_CREATED.format(name=name)
            )
        ]
    changes = _snapshot_changes(old, new)
    reason = REASON_SNAPSHOT_CHANGED.format(name=name, changes=", ".join(changes))
    return [Route(placement, names.SIGNAL_SNAPSHOT_CHANGED, reason)]


def _made_for_signalled_generation(
    snapshot: ClusterSchedulingPolicySnapshot, placements: Mapping[str, ClusterResourcePlacement]
) -> bool:
    """The snapshot is at the generation of its placement in the cache (see the module doc)."""
    parent = snapshot.placement_name
    if not parent:
        return False
    placement = placements.get(placement_key(snapshot.metadata.namespace, parent))
    if placement is None or placement.metadata.generation is None:
        return False
    made_for = snapshot.metadata.annotations.get(hub_names.CRP_GENERATION_ANNOTATION)
    return made_for == str(placement.metadata.generation)


def _snapshot_changes(
    old: ClusterSchedulingPolicySnapshot, new: ClusterSchedulingPolicySnapshot
) -> list[str]:
    changes: list[str] = []
    for key, label in (
        (hub_names.NUMBER_OF_CLUSTERS_ANNOTATION, "number-of-clusters"),
        (hub_names.CRP_GENERATION_ANNOTATION, "CRP-generation"),
    ):
        before, after = old.metadata.annotations.get(key), new.metadata.annotations.get(key)
        if before != after:
            changes.append(f"{label} {before} -> {after}")
    latest = hub_names.IS_LATEST_SNAPSHOT_LABEL
    if parse_bool_label(old.metadata.labels.get(latest)) is not True:
        changes.append("became the latest")
    return changes


def _binding(
    event: str, old: ClusterResourceBinding | None, new: ClusterResourceBinding
) -> list[Route]:
    if event == "DELETED":
        return []  # the deletion finished; it started (and was signalled) earlier
    placement = binding_deletion_started(old, new)
    if placement is None:
        return []
    reason = REASON_BINDING_DELETING.format(name=new.metadata.name, cluster=new.spec.target_cluster)
    return [Route(placement, names.SIGNAL_BINDING_DELETING, reason)]


def _cluster(
    event: str,
    old: MemberCluster | None,
    new: MemberCluster,
    placements: Mapping[str, ClusterResourcePlacement],
    checker: EligibilityChecker,
    now: datetime,
) -> list[Route]:
    name = new.metadata.name
    if event == "DELETED":
        left, reason = True, REASON_CLUSTER_GONE.format(name=name)
    elif old is None:
        return []  # KubeFleet ignores new clusters until an update makes them matter
    else:
        reasons = cluster_update_reasons(old, new, checker, now)
        if not reasons:
            return []
        left, reason = False, REASON_CLUSTER_CHANGED.format(name=name, changes=", ".join(reasons))
    candidates = [p for p in placements.values() if may_start(p)]
    return [
        Route(placement, names.SIGNAL_CLUSTER_CHANGED, reason, fan_out=True)
        for placement in placements_for_cluster_event(left, candidates)
    ]
