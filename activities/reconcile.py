"""The reconcile safety net's activity (scheduler/requeue/reconcile.py says what one run decides):
it reads the hub and Temporal's visibility, checks the invariants, acts (starts, signals,
requeues), sweeps stale capacity reservations and reports what it did for the next run.

Started by the `fleet-reconcile` Schedule (control/schedules.py) every 5 minutes, and once at
each watcher start, so that a restarted watcher signals only what changed while nobody watched
(10,000 placements: one reconcile, not 10,000 cycles)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections import Counter
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from typing import Final

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError, RPCStatusCode

from activities.capacity import requests_of, sweep_ledgers, sweep_nominations_of_fleet
from activities.decisions import publishing
from activities.fleet_state import read_fleet_state
from activities.plumbing import ActivitySettings
from hub.client import HubClient
from hub.errors import NotFoundError, UnauthorizedError
from hub.kinds import placement_key, split_key
from hub.types import PriorityClass
from scheduler import default_profile
from scheduler.explain.readable import first_few
from scheduler.framework.queue_sort import PriorityClasses
from scheduler.invariants import find_violations
from scheduler.requeue.decided import ClusterView, reconcile_versions
from scheduler.requeue.reconcile import (
    DEFAULT_PRIORITY_KEY,
    ReconcilePlan,
    placement_priorities,
    plan_reconcile,
    priority_changed,
    priority_digests,
    unrepaired,
)
from workflows import names
from workflows.failures import TEMPORAL_UNAVAILABLE
from workflows.models import (
    HubEvent,
    PlacementInput,
    ReconcileInput,
    ReconcileReport,
    RenewRequest,
    RequeueRequest,
    TurnPriority,
)
from workflows.renewal import PATCH_GENERATION, RENEWALS_PER_PASS, stale_runs_query
from workflows.starts import start_options, turn_execution_for, turn_priority

__all__ = ["ReconcileFleet", "decided_versions", "renew_old_runs", "running_placements"]

log = logging.getLogger("fleet_scheduler.reconcile")

CALL_CONCURRENCY: Final = 32
HEARTBEAT_EVERY: Final = 100  # Temporal calls between heartbeats
MAX_LOGGED_VIOLATIONS: Final = 20
# Time the checks may take in one run (well inside the activity's 60 s heartbeat timeout): the
# shortage check runs a cycle per placement short of room, and stops there; the next run goes on.
CHECK_BUDGET_S: Final = 30.0
MAX_REPORTED_VIOLATIONS: Final = 50
# Placements the summary names per action before it counts the rest.
MAX_NAMED: Final = 3
PRIORITY_REASON: Final = "reconcile: its priority changed since the last reconcile"


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
        try:
            return await self._reconcile(request)
        except RPCError as exc:
            if exc.status != RPCStatusCode.UNAVAILABLE:
                raise
            # Temporal itself is going away (a restart, a dev server that exited): the next
            # attempt or the next scheduled run does the work; one line, not a traceback, as
            # `dev` already says why the server is gone.
            raise ApplicationError(
                f"Temporal is unavailable: {exc.message}",
                type=TEMPORAL_UNAVAILABLE,
                category=ApplicationErrorCategory.BENIGN,
            ) from None

    async def _reconcile(self, request: ReconcileInput) -> ReconcileReport:
        hub = self._hub
        state = await asyncio.to_thread(
            read_fleet_state,
            hub,
            resource_placements=request.resource_placements,
            decisions=publishing(self._settings.decisions),
        )
        activity.heartbeat("read the hub")
        versions = await decided_versions(self._client, request.task_queue)
        # Read after the list, so a cache that holds a cluster at or past the listed version
        # has applied every write up to it (scheduler.requeue.decided).
        cached = self._settings.clusters() if self._settings.clusters is not None else None
        content_versions = reconcile_versions(
            state.clusters, cached if isinstance(cached, ClusterView) else None
        )
        running = set(versions)
        state = dataclasses.replace(state, workflows=frozenset(running))
        now = self._settings.clock()
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
        profile = self._settings.profile or default_profile()
        plan = plan_reconcile(
            state.placements, state.snapshots, state.clusters, state.bindings, running,
            request.previous_clusters,
            standalone=request.standalone, now=now,
            resource_placements=request.resource_placements,
            previous_annotations=request.previous_annotations,
            violations=violations,
            profile=profile,
            decided_at={k: v for k, v in versions.items() if v is not None},
            content_versions=content_versions,
        )  # fmt: skip
        classes = await asyncio.to_thread(_priority_classes, hub)
        priorities = placement_priorities(state.placements, profile.queue_sorter, classes)
        digests = priority_digests(priorities)
        priorities_of = {
            key: turn_priority(answer)
            for key, answer in priorities.items()
            if key != DEFAULT_PRIORITY_KEY
        }
        reprioritise = {
            key: priorities_of[key]
            for key in priority_changed(digests, request.previous_priorities, priorities)
            if key in running and key in priorities_of and key not in plan.start
        }
        await self._act(plan, request, priorities_of, reprioritise)
        # Not those this pass starts or finishes, nor those the last pass asked.
        skip = plan.start.keys() | plan.finish.keys() | set(request.previous_renewed or ())
        renewed = await renew_old_runs(self._client, request.task_queue, now, skip=skip)
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
        dropped = await asyncio.to_thread(
            functools.partial(sweep_nominations_of_fleet, namespaced=state.namespaced),
            hub,
            aware,
            datetime.now(UTC),
        )
        left = unrepaired(violations, plan, released, dropped)
        metrics = self._settings.metrics
        if metrics is not None:
            metrics.set_invariant_violations(left)
        summary = (
            f"{len(state.placements)} placements, {len(running)} workflows: started "
            f"{len(plan.start)}{_named(plan.start)}, finished {len(plan.finish)}"
            f"{_named(plan.finish)}, requeued {len(plan.requeue)}{_named(plan.requeue)}"
        )
        if plan.already_decided:
            summary += (
                f"; left {len(plan.already_decided)}{_named(plan.already_decided)} alone: "
                "their last cycle read the changed clusters as they are now"
            )
        if released:
            summary += f"; released {released} stale capacity reservation(s)"
        if renewed:
            summary += f"; renewed {len(renewed)}{_named(renewed)} (older patch generation)"
        if violations:
            summary += "; invariants broken: " + ", ".join(
                f"{name} {count}" for name, count in sorted(counts.items())
            )
            for violation in violations[:MAX_LOGGED_VIOLATIONS]:
                log.warning("reconcile: invariant %s: %s", violation.invariant, violation.message)
        acted = plan.start or plan.finish or plan.requeue or plan.already_decided
        if acted or renewed or violations:
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
            reprioritised=sorted(reprioritise),
            renewed=renewed,
            summary=summary,
            reservations_released=released,
            violations=dict(sorted(counts.items())),
            violation_messages=[
                f"{v.invariant}: {v.message}" for v in violations[:MAX_REPORTED_VIOLATIONS]
            ],
        )

    async def _act(
        self,
        plan: ReconcilePlan,
        request: ReconcileInput,
        priorities: dict[str, TurnPriority],
        reprioritise: dict[str, TurnPriority],
    ) -> None:
        gate = asyncio.Semaphore(CALL_CONCURRENCY)
        done = 0
        start_signal = (
            names.SIGNAL_PLACEMENT_CHANGED if request.standalone else names.SIGNAL_SNAPSHOT_CHANGED
        )
        where = turn_execution_for(len(plan.clusters), request.local_cycles_up_to)

        async def call(name: str, signal: str, payload: HubEvent | RequeueRequest) -> None:
            priority = priorities.get(name)
            nonlocal done
            async with gate:
                namespace, placement = split_key(name)
                try:
                    if name in plan.start:
                        await self._client.start_workflow(
                            names.placement_workflow(namespace),
                            PlacementInput(
                                placement=placement, namespace=namespace, turn_execution=where
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
                    HubEvent(reason=r, turn_execution=where, priority=priorities.get(n)),
                )
                for n, r in plan.start.items()
            ),
            *(
                call(n, names.SIGNAL_PLACEMENT_DELETING, HubEvent(reason=r, turn_execution=where))
                for n, r in plan.finish.items()
            ),
            *(
                call(
                    n,
                    names.SIGNAL_REQUEUE,
                    RequeueRequest(reason=r, unless_read=plan.unless_read.get(n)),
                )
                for n, r in plan.requeue.items()
            ),
            *(
                call(
                    n,
                    names.SIGNAL_PRIORITY_CHANGED,
                    HubEvent(reason=PRIORITY_REASON, turn_execution=where, priority=p),
                )
                for n, p in reprioritise.items()
            ),
        )


def _named(keys: Iterable[str]) -> str:
    """` (a, b, c +4 more)`: the first placements acted on, for the summary; "" for none."""
    listed = sorted(keys)
    return f" ({first_few(listed, MAX_NAMED, more=' +{} more')})" if listed else ""


def _priority_classes(hub: HubClient) -> PriorityClasses:
    """The hub's PriorityClasses; none when it does not serve or let us read them (every
    placement then has the default priority, as the watcher says in /readyz)."""
    try:
        return PriorityClasses.of(hub.list(PriorityClass).items)
    except (NotFoundError, UnauthorizedError) as exc:
        log.info("reconcile: PriorityClasses not read: %s", exc)
        return PriorityClasses()


async def renew_old_runs(
    client: Client,
    task_queue: str,
    now: datetime,
    *,
    skip: Collection[str] = (),
    limit: int = RENEWALS_PER_PASS,
) -> list[str]:
    """Ask at most `limit` running placement workflows on `task_queue` that an older patch
    generation began to continue as new at their next idle point (workflows.renewal), each by
    its run id (a run that ended meanwhile is skipped), except the placements in `skip`; the
    keys of those asked.

    Renewals are never urgent, so Temporal refusing them (a visibility query it rejects, e.g.
    in a namespace that lacks FleetPatchGeneration; a signal it refuses) ends this pass's
    renewals with a warning, not the reconcile: its real work goes on, and the next pass asks
    again."""
    request = RenewRequest(
        reason=f"reconcile: begun before patch generation {PATCH_GENERATION}",
        generation=PATCH_GENERATION,
    )
    asked: list[str] = []
    try:
        async for execution in client.list_workflows(stale_runs_query(task_queue, now)):
            if len(asked) >= limit:
                break
            try:
                key = placement_key(*names.placement_of(execution.id))
            except ValueError:
                continue
            if key in skip:
                continue
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            try:
                await handle.signal(names.SIGNAL_RENEW_RUN, request)
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:  # it ended meanwhile: fine
                    raise
                continue
            asked.append(key)
    except RPCError as exc:
        log.warning(
            "reconcile: renewals of older patch generations stopped after %d: %s",
            len(asked),
            exc.message,
        )
    return sorted(asked)


async def running_placements(client: Client, task_queue: str) -> set[str]:
    """The keys of the placements whose workflow runs on `task_queue` (Temporal's visibility)."""
    return set(await decided_versions(client, task_queue))


async def decided_versions(client: Client, task_queue: str) -> dict[str, int | None]:
    """The placements whose workflow runs on `task_queue`, each with the hub version of the
    clusters its last completed cycle read (FleetClustersVersion: the largest content version
    among them, scheduler.requeue.decided; None: not recorded), from the
    visibility list the reconcile reads anyway. Visibility may lag a workflow's upsert: an older
    version only makes the reconcile requeue (scheduler.requeue.decided)."""
    query = (
        f"{names.PLACEMENT_WORKFLOWS_QUERY} AND ExecutionStatus = 'Running' "
        f"AND TaskQueue = '{task_queue}'"
    )
    found: dict[str, int | None] = {}
    async for execution in client.list_workflows(query):
        try:
            key = placement_key(*names.placement_of(execution.id))
        except ValueError:
            continue
        found[key] = execution.typed_search_attributes.get(names.SA_CLUSTERS_VERSION)
    return found
