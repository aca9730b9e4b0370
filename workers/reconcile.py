"""The reconcile safety net: a Temporal Schedule (`fleet-reconcile`, every 5 minutes, overlap
skip) compares the hub with the running workflows and acts on what events did not reach.

The watcher turns hub events into signals, but events can be missed: the watcher was down, or a
signal was refused for good. Every run of the reconcile checks, from the hub and Temporal's
visibility alone:

- every placement that wants the scheduler has a running workflow (missing ones are started);
- every running placement workflow has a placement (orphans get a `placement_deleting` signal;
  their next turn finds the placement gone and completes);
- every placement's scheduling is current: its latest policy snapshot was scheduled for the
  snapshot's and the placement's generation (`placement_scheduled_condition` says pending), and
  no binding of it is being deleted or targets a cluster that does not exist; if not, requeue;
- member clusters: each run records a digest of what scheduling reads of every cluster (labels,
  taints, properties, namespaces, resource usage, eligibility); a cluster whose digest changed
  since the previous run, or that is gone, reaches the placements KubeFleet's cluster watcher
  would requeue for it (`placements_for_cluster_event`).

This is what lets a watcher restart stay quiet: its first list no longer signals every placement
(10,000 placements: 10,000 cycles); it triggers one reconcile instead, which acts on what changed
while nobody watched, and leaves the rest alone. `fleet-scheduler run` and `dev` create or
update the Schedule; `run --reconcile-every 0` removes nothing but stops creating it (delete it
with `temporal schedule delete --schedule-id fleet-reconcile`), while `dev --reconcile-every 0`
deletes it: dev's Temporal is its own."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final, TypeVar

from temporalio import activity
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.capacity import requests_of, sweep_ledgers
from activities.fleet_state import read_fleet_state
from activities.plumbing import ActivitySettings
from hub import names as hub_names
from hub.client import HubClient
from hub.errors import NotFoundError, UnauthorizedError
from hub.kinds import placement_key, split_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    PriorityClass,
)
from hub.types.meta import HubObject, ObjectMeta
from scheduler import default_profile
from scheduler.eligibility import EligibilityChecker
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
    find_violations,
)
from scheduler.snapshots import placement_scheduled_condition
from scheduler.watch_rules import placements_for_cluster_event
from workers.starts import local_cycles_for, start_options, turn_priority
from workers.watcher_routes import may_start
from workers.watcher_views import key_of
from workflows import names
from workflows.models import (
    HubEvent,
    PlacementInput,
    ReconcileInput,
    ReconcileReport,
    RequeueRequest,
    TurnPriority,
)

__all__ = [
    "DEFAULT_RECONCILE_EVERY",
    "ReconcileFleet",
    "ReconcilePlan",
    "ensure_reconcile_schedule",
    "plan_reconcile",
    "remove_reconcile_schedule",
    "running_placements",
    "trigger_reconcile",
    "unrepaired",
]

log = logging.getLogger("fleet_scheduler.reconcile")

T = TypeVar("T", bound=HubObject)

DEFAULT_RECONCILE_EVERY: Final = timedelta(minutes=5)
CALL_CONCURRENCY: Final = 32
HEARTBEAT_EVERY: Final = 100  # Temporal calls between heartbeats
START_REASON: Final = "reconcile: no workflow was running"
# Broken invariants the placement's next turn repairs (its reservations made again, its bindings
# counted, its shortage decided again); the others are reported only.
REPAIRED_BY_A_TURN: Final = frozenset(
    {RESERVATION, DUPLICATE_BINDING, BINDING_COUNT, STRANDED_SHORTAGE}
)
MAX_LOGGED_VIOLATIONS: Final = 20
# Time the checks may take in one run (well inside the activity's 60 s heartbeat timeout): the
# shortage check runs a cycle per placement short of room, and stops there; the next run goes on.
CHECK_BUDGET_S: Final = 30.0
MAX_REPORTED_VIOLATIONS: Final = 50
GONE_REASON: Final = "reconcile: the placement is gone"
PRIORITY_REASON: Final = "reconcile: its priority changed since the last reconcile"


@dataclass
class ReconcilePlan:
    """What a reconcile run does: placement -> the reason, per action."""

    start: dict[str, str] = field(default_factory=dict)
    finish: dict[str, str] = field(default_factory=dict)
    requeue: dict[str, str] = field(default_factory=dict)
    clusters: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    """Placement -> digest of its decision annotations (only placements that have any)."""
    reprioritise: dict[str, TurnPriority] = field(default_factory=dict)
    """Placement -> its new priority, for a `priority_changed` signal (no turn)."""
    priorities: dict[str, TurnPriority] = field(default_factory=dict)
    """Placement -> its priority, for the workflows this run starts."""


def cluster_digest(cluster: MemberCluster, checker: EligibilityChecker, now: datetime) -> str:
    """What scheduling reads of a cluster, hashed: heartbeat times are left out (they change
    every minute), whether they make the cluster eligible is kept."""
    status = cluster.status
    read = {
        "labels": cluster.metadata.labels,
        "taints": [t.model_dump(mode="json") for t in cluster.spec.taints],
        "properties": {k: v.value for k, v in status.properties.items()},
        "namespaces": status.namespaces,
        "usage": status.resource_usage.model_dump(mode="json"),
        "eligible": checker.check(cluster, now) is None,
    }
    text = json.dumps(read, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
            found[key_of(placement)] = ask(placement.metadata)
    return found


def priority_digests(priorities: Mapping[str, QueuePriority]) -> dict[str, str]:
    """A digest of each priority that is not the default one, and of the default itself, so a
    fleet without priorities carries one entry from run to run."""
    default = priorities[DEFAULT_PRIORITY_KEY]
    return {
        key: hashlib.sha256(repr(answer).encode()).hexdigest()[:16]
        for key, answer in priorities.items()
        if key == DEFAULT_PRIORITY_KEY or answer != default
    }


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
) -> ReconcilePlan:
    """The actions of one reconcile run (a pure function of what it read). Placements of both
    kinds are named by key (`hub.kinds.placement_key`), in `running` too. Without
    `resource_placements` (`--no-resource-placements`), running ResourcePlacement workflows are
    left alone: their RPs were not read, which does not make them gone.

    `previous_annotations`: the previous run's digests of our decision annotations (placements
    whose digest changed, or that lost them all, are requeued: an event missed). `violations`:
    the invariants broken now (scheduler.invariants); a placement whose next turn repairs what
    was found is requeued."""
    checker = checker or EligibilityChecker()
    if not resource_placements:
        running = {key for key in running if split_key(key)[0] is None}
    by_name = {key_of(p): p for p in placements}
    snapshots = {_owner(s): s for s in latest_snapshots}
    plan = ReconcilePlan()
    for name, placement in sorted(by_name.items()):
        if may_start(placement) and name not in running:
            plan.start[name] = START_REASON
    for name in sorted(running - by_name.keys()):
        plan.finish[name] = GONE_REASON

    def requeue(name: str, reason: str) -> None:
        if name in running and name in by_name:
            plan.requeue.setdefault(name, f"reconcile: {reason}")

    for name, placement in sorted(by_name.items()):
        if placement.metadata.deleting:
            if may_start(placement):
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
    for cluster in clusters:
        cluster_names.add(cluster.metadata.name)
        plan.clusters[cluster.metadata.name] = (
            "deleting" if cluster.metadata.deleting else cluster_digest(cluster, checker, now)
        )
    for binding in bindings:
        owner = _owner(binding)
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
            for name in placements_for_cluster_event(left, live):
                requeue(name, f"cluster {cluster_name} {what} since the last reconcile")
    return plan


def _owner(obj: HubObject) -> str:
    """The key of the placement `obj` (a snapshot or binding) is labelled with ("" if none)."""
    parent = obj.metadata.labels.get(hub_names.PARENT_PLACEMENT_LABEL, "")
    return placement_key(obj.metadata.namespace, parent) if parent else ""


class ReconcileFleet:
    """The reconcile activity; one per worker, holding the hub and Temporal clients and the
    worker's settings (its profile, for the invariants' cycles, and its metrics)."""

    def __init__(
        self, hub: HubClient, client: Client, settings: ActivitySettings | None = None
    ) -> None:
        self._hub = hub
        self._client = client
        self._settings = settings or ActivitySettings()

    @activity.defn(name=names.ACTIVITY_RECONCILE_FLEET)
    async def reconcile_fleet(self, request: ReconcileInput) -> ReconcileReport:
        hub = self._hub
        state = await asyncio.to_thread(
            read_fleet_state, hub, resource_placements=request.resource_placements
        )
        activity.heartbeat("read the hub")
        running = await running_placements(self._client, request.task_queue)
        state = dataclasses.replace(state, workflows=frozenset(running))
        now = datetime.now(UTC)
        deadline = time.monotonic() + CHECK_BUDGET_S
        violations = await asyncio.to_thread(
            functools.partial(
                find_violations,
                profile=self._settings.profile,
                keep_going=lambda: time.monotonic() < deadline,
            ),
            state,
            now,
        )
        activity.heartbeat("checked the invariants")
        counts = Counter(v.invariant for v in violations)
        plan = plan_reconcile(
            state.placements, state.snapshots, state.clusters, state.bindings, running,
            request.previous_clusters,
            standalone=request.standalone, now=now,
            resource_placements=request.resource_placements,
            previous_annotations=request.previous_annotations,
            violations=violations,
        )  # fmt: skip
        classes = await asyncio.to_thread(_priority_classes, hub)
        profile = self._settings.profile or default_profile()
        priorities = placement_priorities(state.placements, profile.queue_sorter, classes)
        digests = priority_digests(priorities)
        plan.priorities = {
            key: turn_priority(answer)
            for key, answer in priorities.items()
            if key != DEFAULT_PRIORITY_KEY
        }
        for key in priority_changed(digests, request.previous_priorities, priorities):
            if key in running and key in priorities and key not in plan.start:
                plan.reprioritise[key] = plan.priorities[key]
        await self._act(plan, request)
        aware = {
            placement_key(p.metadata.namespace, p.name)
            for p in state.placements
            if requests_of(p) is not None
        }
        released = await asyncio.to_thread(
            functools.partial(sweep_ledgers, namespaced=state.namespaced),
            hub,
            aware,
            state.bindings,
            datetime.now(UTC),
        )
        left = unrepaired(violations, plan, released)
        metrics = self._settings.metrics
        if metrics is not None:
            metrics.set_invariant_violations(left)
        summary = (
            f"{len(state.placements)} placements, {len(running)} workflows: started "
            f"{len(plan.start)}, finished {len(plan.finish)}, requeued {len(plan.requeue)}"
        )
        if released:
            summary += f"; released {released} stale capacity reservation(s)"
        if violations:
            summary += "; invariants broken: " + ", ".join(
                f"{name} {count}" for name, count in sorted(counts.items())
            )
            for violation in violations[:MAX_LOGGED_VIOLATIONS]:
                log.warning("reconcile: invariant %s: %s", violation.invariant, violation.message)
        if plan.start or plan.finish or plan.requeue or violations:
            log.info("reconcile: %s", summary)
        return ReconcileReport(
            placements=len(state.placements),
            running=len(running),
            started=sorted(plan.start),
            finished=sorted(plan.finish),
            requeued=sorted(plan.requeue),
            reasons={**plan.requeue, **plan.finish, **plan.start},
            clusters=plan.clusters,
            annotations=plan.annotations,
            priorities=digests,
            reprioritised=sorted(plan.reprioritise),
            summary=summary,
            reservations_released=released,
            violations=dict(sorted(counts.items())),
            violation_messages=[
                f"{v.invariant}: {v.message}" for v in violations[:MAX_REPORTED_VIOLATIONS]
            ],
        )

    async def _act(self, plan: ReconcilePlan, request: ReconcileInput) -> None:
        gate = asyncio.Semaphore(CALL_CONCURRENCY)
        done = 0
        start_signal = (
            names.SIGNAL_PLACEMENT_CHANGED if request.standalone else names.SIGNAL_SNAPSHOT_CHANGED
        )
        local = local_cycles_for(len(plan.clusters), request.local_cycles_up_to)

        async def call(name: str, signal: str, payload: HubEvent | RequeueRequest) -> None:
            priority = plan.priorities.get(name)
            nonlocal done
            async with gate:
                namespace, placement = split_key(name)
                try:
                    if name in plan.start:
                        await self._client.start_workflow(
                            names.placement_workflow(namespace),
                            PlacementInput(
                                placement=placement, namespace=namespace, local_cycles=local
                            ),
                            start_signal=signal,
                            start_signal_args=[payload],
                            **start_options(placement, request.task_queue, namespace, priority),
                        )
                    else:
                        handle = self._client.get_workflow_handle(
                            names.workflow_id(placement, namespace)
                        )
                        await handle.signal(signal, payload)
                except RPCError as exc:
                    if exc.status != RPCStatusCode.NOT_FOUND:  # it ended meanwhile: fine
                        raise
            done += 1
            if done % HEARTBEAT_EVERY == 0:
                activity.heartbeat(f"{done} placements acted on")

        await asyncio.gather(
            *(
                call(
                    n,
                    start_signal,
                    HubEvent(reason=r, local_cycles=local, priority=plan.priorities.get(n)),
                )
                for n, r in plan.start.items()
            ),
            *(
                call(n, names.SIGNAL_PLACEMENT_DELETING, HubEvent(reason=r, local_cycles=local))
                for n, r in plan.finish.items()
            ),
            *(
                call(n, names.SIGNAL_REQUEUE, RequeueRequest(reason=r))
                for n, r in plan.requeue.items()
            ),
            *(
                call(
                    n,
                    names.SIGNAL_PRIORITY_CHANGED,
                    HubEvent(reason=PRIORITY_REASON, local_cycles=local, priority=p),
                )
                for n, p in plan.reprioritise.items()
            ),
        )


def _priority_classes(hub: HubClient) -> PriorityClasses:
    """The hub's PriorityClasses; none when it does not serve or let us read them (every
    placement then has the default priority, as the watcher says in /readyz)."""
    try:
        return PriorityClasses.of(hub.list(PriorityClass).items)
    except (NotFoundError, UnauthorizedError) as exc:
        log.info("reconcile: PriorityClasses not read: %s", exc)
        return PriorityClasses()


async def running_placements(client: Client, task_queue: str) -> set[str]:
    """The keys of the placements whose workflow runs on `task_queue` (Temporal's visibility)."""
    query = (
        f"{names.PLACEMENT_WORKFLOWS_QUERY} AND ExecutionStatus = 'Running' "
        f"AND TaskQueue = '{task_queue}'"
    )
    found: set[str] = set()
    async for execution in client.list_workflows(query):
        try:
            found.add(placement_key(*names.placement_of(execution.id)))
        except ValueError:
            continue
    return found


def _schedule(
    task_queue: str,
    every: timedelta,
    standalone: bool,
    local_cycles_up_to: int,
    resource_placements: bool = True,
) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            names.RECONCILE_WORKFLOW,
            ReconcileInput(
                task_queue=task_queue,
                standalone=standalone,
                local_cycles_up_to=local_cycles_up_to,
                resource_placements=resource_placements,
            ),
            id=names.reconcile_schedule_id(task_queue),
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_reconcile_schedule(
    client: Client,
    task_queue: str,
    every: timedelta,
    *,
    standalone: bool,
    local_cycles_up_to: int = 0,
    resource_placements: bool = True,
) -> str:
    """Create the reconcile Schedule, or update it to these settings; returns its id."""
    schedule_id = names.reconcile_schedule_id(task_queue)
    wanted = _schedule(task_queue, every, standalone, local_cycles_up_to, resource_placements)
    await upsert_schedule(client, schedule_id, wanted)
    return schedule_id


async def upsert_schedule(client: Client, schedule_id: str, wanted: Schedule) -> None:
    """Create the Schedule, or replace an existing one's settings with `wanted`."""
    try:
        await client.create_schedule(schedule_id, wanted)
    except ScheduleAlreadyRunningError:

        def update(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=wanted)

        await client.get_schedule_handle(schedule_id).update(update)


async def remove_reconcile_schedule(client: Client, task_queue: str) -> bool:
    """Delete the reconcile Schedule of `task_queue`; False when there was none."""
    try:
        await client.get_schedule_handle(names.reconcile_schedule_id(task_queue)).delete()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def trigger_reconcile(client: Client, task_queue: str) -> bool:
    """Run the reconcile now (a watcher start does, instead of signalling every placement);
    False when there is no such Schedule."""
    try:
        await client.get_schedule_handle(names.reconcile_schedule_id(task_queue)).trigger(
            overlap=ScheduleOverlapPolicy.SKIP
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True
