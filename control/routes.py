"""Which placement workflows a hub change reaches, with which signal and why.

The decisions are KubeFleet's watcher filters (kubefleet-rules section 7, in
`scheduler.requeue.watch_rules`; whom a member cluster's change reaches, in
`scheduler.requeue.reach`); this module only names the signal and writes the reason a user reads in
the placement's history ("cluster member-3: labels changed"). Two additions, both because each
placement is a long-lived workflow here rather than a key in an in-memory queue:

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
from fractions import Fraction
from typing import Final, TypeVar

from control.views import Change
from hub import names as hub_names
from hub.kinds import parent_key, placement_key, placement_label
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from hub.types.meta import HubObject
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.explain.explanation import BEYOND_ROOM_MARKER
from scheduler.framework.profile import Profile
from scheduler.requeue.reach import Bindings, ClusterEvent, reach
from scheduler.requeue.watch_rules import (
    CLUSTER_CHANGE_TAINT_ADDED,
    binding_deletion_started,
    cluster_update_reasons,
    decision_annotations_changed,
    parse_bool_label,
    placement_deletion_started,
    placement_spec_changed,
    scheduled_condition_current,
    snapshot_event_placement,
    taint_added,
    wants_scheduler,
)
from scheduler.room.capacity import (
    ClusterCapacity,
    binding_key,
    held,
    is_active,
    missing_of,
    shortfalls,
    shown_requests,
)
from scheduler.room.requests import RequestsError, parse_requests
from workflows import names

__all__ = [
    "Room",
    "Route",
    "may_start",
    "orphan_snapshot_warning",
    "route_change",
    "startup_routes",
    "waiting_for_room",
]

T = TypeVar("T", bound=HubObject)

# Reason templates: the text after the signal name in the workflow's pending reasons.
REASON_STARTED: Final = "watcher started: placement {name} exists"
REASON_STARTED_DELETING: Final = "watcher started: placement {name} is being deleted"
REASON_PLACEMENT_CREATED: Final = "placement {name} created"
REASON_PLACEMENT_SPEC: Final = "placement {name}: spec changed (generation {old} -> {new})"
REASON_PLACEMENT_ANNOTATIONS: Final = "placement {name}: annotation {keys} changed"
REASON_PLACEMENT_DELETING: Final = "placement {name}: deletion started"
REASON_PLACEMENT_GONE: Final = "placement {name} was deleted"
REASON_SNAPSHOT_CREATED: Final = "policy snapshot {name} created"
REASON_SNAPSHOT_CHANGED: Final = "policy snapshot {name}: {changes}"
REASON_BINDING_DELETING: Final = "binding {name} (cluster {cluster}): deletion started"
REASON_CLUSTER_CHANGED: Final = "cluster {name}: {changes}"
REASON_CLUSTER_GONE: Final = "cluster {name} was deleted"
REASON_ROOM_FREED: Final = "cluster {cluster}: room freed ({freed})"
REASON_LEDGER_MADE: Final = "cluster {cluster}: capacity ledger made, {freed} free"
REASON_ROOM_GIVEN_UP: Final = "cluster {cluster}: {what} (no capacity ledger there)"
REASON_LEDGER_GONE: Final = (
    "cluster {cluster}: its capacity ledger was deleted; reservations are made again"
)
REASON_PREEMPTED: Final = (
    "cluster {cluster}: {preemptor} (priority {priority}) takes room a binding holds"
)
REASON_ROOM_WHILE_RUNNING: Final = "room on cluster {cluster} was freed while the last cycle ran"


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
    watcher's start), so its turn queues behind the placement's own (docs/priority.md).

    `for_placement`: the turn is another placement's wait (a preemptor's, on its victims): it
    queues no later than that placement's own turns would (docs/priority.md, "Preemption")."""

    placement: str
    signal: str
    reason: str
    may_start: bool = True
    fan_out: bool = False
    for_placement: str | None = None


@dataclass(frozen=True)
class Room:
    """The watcher's view of capacity (docs/capacity.md): every member cluster, every
    CapacityLedger, every binding, as its caches hold them. Only capacity-aware placements'
    routes read it."""

    clusters: Mapping[str, MemberCluster]
    ledgers: Mapping[str, CapacityLedger]
    bindings: Iterable[ClusterResourceBinding] = ()

    def fits(
        self,
        cluster: str,
        requests: Mapping[str, Fraction],
        ledger: CapacityLedger | None = None,
        placement: str | None = None,
    ) -> bool:
        """Would one binding asking `requests` fit on `cluster` beside its reservations (those
        of `ledger` if given, else of the cached one) and the room nominated for others than
        `placement`?"""
        member = self.clusters.get(cluster)
        if member is None or member.metadata.deleting:
            return False
        ledger = ledger if ledger is not None else self.ledgers.get(cluster)
        taken = held(ledger, nominee=placement) if ledger is not None else {}
        capacity = ClusterCapacity.of(member.status.resource_usage.allocatable, taken)
        return not shortfalls(requests, capacity)

    def anywhere(self, requests: Mapping[str, Fraction]) -> str | None:
        """A cluster where one binding asking `requests` fits now (None: none)."""
        return next((name for name in sorted(self.clusters) if self.fits(name, requests)), None)


def waiting_for_room(placement: ClusterResourcePlacement) -> Mapping[str, Fraction] | None:
    """What one binding of a capacity-aware placement asks for, if the placement may be
    waiting for room: its Scheduled condition at its generation says what is missing, or no
    turn at its generation has ended yet (one may be running on reads from before the room
    was freed). None for any other placement."""
    text = placement.metadata.annotations.get(hub_names.REQUESTS_ANNOTATION)
    if text is None or placement.metadata.deleting:
        return None
    try:
        requests = parse_requests(text)
    except RequestsError:
        return None
    condition = scheduled_condition_current(placement)
    if condition is not None and missing_of(condition.message) is None:
        return None
    return requests


def may_start(placement: ClusterResourcePlacement) -> bool:
    """A workflow may be started for this placement (scheduler.requeue.watch_rules'
    `wants_scheduler`)."""
    return wants_scheduler(placement)


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
    room: Room | None = None,
    profile: Profile | None = None,
) -> list[Route]:
    """The routes one change of any watched kind produces (often none).

    `placements` is the watcher's current placement cache, already updated with `change` when
    it is a placement change; member-cluster changes fan out over it, to the placements
    scheduler.requeue.reach answers (the reconcile asks it too). `room`: the capacity view, for the
    routes of capacity-aware placements (None: none of those), whose bindings also say where
    an enforcing placement is bound. `profile`: the profile the cycles run, whose plugins'
    requeue hints narrow a member cluster's update to the placements whose decision it may
    change (scheduler.requeue.requeue_hints; None: KubeFleet's rule alone)."""
    new, old = change.new, change.old
    if isinstance(new, ClusterResourcePlacement):
        routes = _placement(change.type, _as(old, ClusterResourcePlacement), new, standalone)
        if room is not None and not routes:
            routes = _short_while_room(_as(old, ClusterResourcePlacement), new, room)
        if room is not None:
            routes += _requests_dropped(_as(old, ClusterResourcePlacement), new, placements, room)
        return routes
    if isinstance(new, ClusterSchedulingPolicySnapshot):
        if standalone and _made_for_signalled_generation(new, placements):
            return []
        return _snapshot(change.type, _as(old, ClusterSchedulingPolicySnapshot), new)
    if isinstance(new, ClusterResourceBinding):
        routes = _binding(change.type, _as(old, ClusterResourceBinding), new)
        if room is not None:
            routes += _binding_gone_unreserved(
                change.type, _as(old, ClusterResourceBinding), new, placements, room
            )
        return routes
    if isinstance(new, MemberCluster):
        return _cluster(
            change.type, _as(old, MemberCluster), new, placements, checker, now, profile, room
        )
    if isinstance(new, CapacityLedger):
        return (
            []
            if room is None
            else _ledger(change.type, _as(old, CapacityLedger), new, placements, room)
        )
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
    reasons: list[str] = []
    if standalone and placement_spec_changed(old, new):
        if old is None:
            reasons.append(REASON_PLACEMENT_CREATED.format(name=name))
        else:
            reasons.append(
                REASON_PLACEMENT_SPEC.format(
                    name=name, old=old.metadata.generation, new=new.metadata.generation
                )
            )
    # In both modes: KubeFleet knows nothing of our annotations, so nothing else turns their
    # change into a turn, and they change decisions (requests, rebalance, ...).
    if changed := decision_annotations_changed(old, new):
        reasons.append(REASON_PLACEMENT_ANNOTATIONS.format(name=name, keys=", ".join(changed)))
    if not reasons:
        return []
    return [Route(name, names.SIGNAL_PLACEMENT_CHANGED, "; ".join(reasons))]


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
    profile: Profile | None,
    room: Room | None = None,
) -> list[Route]:
    """Whom a member cluster's change reaches is scheduler.requeue.reach's answer; here only whether
    the event is a change at all, and the reason the placements read."""
    name = new.metadata.name
    if event == "DELETED":
        change, reason = ClusterEvent.gone(name, now), REASON_CLUSTER_GONE.format(name=name)
    elif old is None:
        return []  # KubeFleet ignores new clusters until an update makes them matter
    else:
        reasons = cluster_update_reasons(old, new, checker, now)
        # A taint added matters only to placements that enforce their affinity during
        # execution (KubeFleet's rules ignore it): they alone hear of it.
        enforcing_only = not reasons and taint_added(old, new)
        if enforcing_only:
            reasons = [CLUSTER_CHANGE_TAINT_ADDED]
        if not reasons:
            return []
        change = ClusterEvent.updated(old, new, profile, now, enforcing_only=enforcing_only)
        reason = REASON_CLUSTER_CHANGED.format(name=name, changes=", ".join(reasons))
    reached = reach(
        change,
        placements.values(),
        profile,
        bindings=None if room is None else Bindings(room.bindings),
        clusters=None if room is None else room.clusters,
    )
    return [Route(r.placement, names.SIGNAL_CLUSTER_CHANGED, reason, fan_out=True) for r in reached]


def _ledger(
    event: str,
    old: CapacityLedger | None,
    new: CapacityLedger,
    placements: Mapping[str, ClusterResourcePlacement],
    room: Room,
) -> list[Route]:
    """Room freed on a cluster (a reservation released or shrunk, the ledger deleted or made
    again) reaches the capacity-aware placements waiting for room that one binding of theirs
    now fits (the outbox sends the best priority first); a deleted ledger also reaches every
    capacity-aware placement with an active binding there, whose next turn makes its
    reservation again."""
    cluster = new.metadata.name
    before = held(old) if old is not None else {}
    routes: dict[str, Route] = {}
    if event == "DELETED":
        # The bindings of capacity-aware placements still there consume what their
        # reservations held: only the room of the other reservations is free (no binding, or
        # one whose placement no longer declares requests). Their holders reserve it again.
        active = {
            binding_key(b): b
            for b in room.bindings
            if b.spec.target_cluster == cluster
            and b.spec.state != hub_names.STATE_UNSCHEDULED
            and not b.metadata.deleting
            and _capacity_aware(placements.get(parent_key(b)))
        }
        after = held(new, without=[k for k in new.spec.reservations if k not in active])
        holders = {parent_key(b) for b in active.values()}
        reason = REASON_LEDGER_GONE.format(cluster=cluster)
        for key in sorted(holders):
            routes[key] = Route(key, names.SIGNAL_CLUSTER_CHANGED, reason, fan_out=True)
    else:
        after = held(new)
        for route in _victims(cluster, old, new):
            routes.setdefault(route.placement, route)
        member = room.clusters.get(cluster)
        if old is None and member is not None:
            # A ledger made (again): a cluster's first reservation, or the first after its
            # ledger was deleted. What it does not hold is room that appeared with it; while
            # the ledger was away, room given up (a placement that dropped its requests) had
            # no ledger to free it from.
            before = dict(ClusterCapacity.of(member.status.resource_usage.allocatable).allocatable)
    freed = {r: amount - after.get(r, Fraction(0)) for r, amount in before.items()}
    freed = {r: amount for r, amount in freed.items() if amount > 0}
    if freed:
        gone = (
            new
            if event != "DELETED"
            else new.model_copy(
                update={
                    "spec": CapacityLedgerSpec(
                        reservations={k: r for k, r in new.spec.reservations.items() if k in active}
                    )
                }
            )
        )
        made = event != "DELETED" and old is None
        reason = (REASON_LEDGER_MADE if made else REASON_ROOM_FREED).format(
            cluster=cluster, freed=shown_requests(freed)
        )
        for route in _waiters(cluster, placements, room, reason, gone):
            routes.setdefault(route.placement, route)
        # Placements that said they keep a binding here beyond the room: the room they lacked
        # may be there now, and their condition should say so.
        beyond = {key for key, placement in placements.items() if _beyond_room(placement)}
        for binding in room.bindings if beyond else ():
            key = parent_key(binding)
            if key in beyond and binding.spec.target_cluster == cluster:
                routes.setdefault(
                    key, Route(key, names.SIGNAL_CLUSTER_CHANGED, reason, fan_out=True)
                )
    return list(routes.values())


def _victims(cluster: str, old: CapacityLedger | None, new: CapacityLedger) -> list[Route]:
    """A nomination made on the ledger (docs/priority.md, "Preemption") wakes the placements
    of the bindings it names, whose turns give the room up: the preemptor waits on them."""
    before = old.spec.nominations if old is not None else {}
    routes = []
    for preemptor, nomination in sorted(new.spec.nominations.items()):
        if before.get(preemptor) == nomination:
            continue
        label = placement_label(preemptor)
        reason = REASON_PREEMPTED.format(
            cluster=cluster, preemptor=label, priority=nomination.priority
        )
        for victim in sorted({v.placement for v in nomination.victims}):
            routes.append(
                Route(victim, names.SIGNAL_CLUSTER_CHANGED, reason, for_placement=preemptor)
            )
    return routes


def _waiters(
    cluster: str,
    placements: Mapping[str, ClusterResourcePlacement],
    room: Room,
    reason: str,
    ledger: CapacityLedger | None = None,
) -> list[Route]:
    """The capacity-aware placements waiting for room that one binding of theirs fits on
    `cluster` (beside `ledger`'s reservations if given, else the cached ledger's)."""
    routes = []
    for placement in placements.values():
        requests = waiting_for_room(placement)
        key = _key(placement)
        if requests is None or not room.fits(cluster, requests, ledger, key):
            continue
        routes.append(Route(key, names.SIGNAL_CLUSTER_CHANGED, reason, fan_out=True))
    return routes


def _requests_dropped(
    old: ClusterResourcePlacement | None,
    new: ClusterResourcePlacement,
    placements: Mapping[str, ClusterResourcePlacement],
    room: Room,
) -> list[Route]:
    """A placement that stops declaring requests gives up the room its bindings took. Where a
    ledger holds their reservations, its turn releases them and the ledger's change wakes the
    waiters; on a cluster without a ledger (deleted, not made again yet) nothing would: wake
    them here."""
    if not (_capacity_aware(old) and not _capacity_aware(new)):
        return []
    key = _key(new)
    clusters = {
        b.spec.target_cluster
        for b in room.bindings
        if parent_key(b) == key and is_active(b) and b.spec.target_cluster not in room.ledgers
    }
    what = f"placement {key} dropped its requests"
    routes: dict[str, Route] = {}
    for cluster in sorted(clusters):
        reason = REASON_ROOM_GIVEN_UP.format(cluster=cluster, what=what)
        for route in _waiters(cluster, placements, room, reason):
            routes.setdefault(route.placement, route)
    return list(routes.values())


def _binding_gone_unreserved(
    event: str,
    old: ClusterResourceBinding | None,
    new: ClusterResourceBinding,
    placements: Mapping[str, ClusterResourcePlacement],
    room: Room,
) -> list[Route]:
    """A capacity-aware placement's binding that stops consuming room (unscheduled, deleted) on
    a cluster without a ledger: no release will be an event there, so wake the waiters here."""
    cluster = new.spec.target_cluster
    if cluster in room.ledgers or old is None or not is_active(old):
        return []
    if event != "DELETED" and is_active(new):
        return []
    owner = placements.get(parent_key(new))
    if owner is not None and not _capacity_aware(owner):
        return []  # its room was never counted; a gone owner's may have been (cleanup)
    what = f"binding {new.metadata.name} gave its room up"
    reason = REASON_ROOM_GIVEN_UP.format(cluster=cluster, what=what)
    return _waiters(cluster, placements, room, reason)


def _capacity_aware(placement: ClusterResourcePlacement | None) -> bool:
    """The placement declares requests that can be read: its bindings consume room by them. One
    whose annotation cannot be read keeps what its ledger holds but nothing more (its turns fail
    until it is fixed), as `check` counts it (scheduler.invariants)."""
    if placement is None:
        return False
    text = placement.metadata.annotations.get(hub_names.REQUESTS_ANNOTATION)
    if text is None:
        return False
    try:
        parse_requests(text)
    except RequestsError:
        return False
    return True


def _beyond_room(placement: ClusterResourcePlacement) -> bool:
    if hub_names.REQUESTS_ANNOTATION not in placement.metadata.annotations:
        return False
    condition = scheduled_condition_current(placement)
    return condition is not None and BEYOND_ROOM_MARKER in condition.message


def _short_while_room(
    old: ClusterResourcePlacement | None, new: ClusterResourcePlacement, room: Room
) -> list[Route]:
    """A capacity-aware placement's turn has just reported it is short of room, but room is
    there now by the watcher's caches: it was freed while the turn ran, and the freeing was
    routed before the shortage showed (`_ledger` saw the placement as not waiting)."""
    condition = scheduled_condition_current(new)
    if condition is None or not missing_of(condition.message):
        return []
    before = scheduled_condition_current(old) if old is not None else None
    if before is not None and before.message == condition.message:
        return []  # nothing new was reported: not a turn that just ended
    requests = waiting_for_room(new)
    cluster = room.anywhere(requests) if requests is not None else None
    if cluster is None:
        return []
    key = _key(new)
    return [
        Route(
            key,
            names.SIGNAL_CLUSTER_CHANGED,
            REASON_ROOM_WHILE_RUNNING.format(cluster=cluster),
            fan_out=True,
        )
    ]
