"""The scheduler process: a Temporal worker, the watcher and the health/metrics server, together.

`build_worker` is the registration (which workflow, which activities, on which executor);
`serve` runs the parts side by side until a stop event, and is what `fleet-scheduler run` and
`dev` call. The activities are plain `def`s because the kubernetes client blocks, so the worker
runs them on a thread pool sized to its activity slots: one thread per concurrent activity,
never a queue of activities waiting for a thread while holding a slot.

Readiness is truthful rather than optimistic: the worker part turns ready once the Temporal
server itself reports this process polling both the workflow and the activity task queue, and
the watcher part once the watcher has listed the hub and is watching. Shutdown goes in the
opposite order of need: the watcher stops sending signals, the worker finishes the activities
it holds (up to `SHUTDOWN_GRACE`) and the health server stops last, so a probe never sees a
half-stopped process as healthy for long."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import PatchActivationInput, Worker

from activities.advice import TurnAdvisor
from activities.cleanup import CleanupPlacement
from activities.clusters import ClusterCache
from activities.deadline import ReportDeadlineMiss
from activities.local_slots import LocalSlots
from activities.outage import HubGate
from activities.plumbing import ActivitySettings
from activities.rebalance import RebalanceFleet
from activities.reconcile import ReconcileFleet
from activities.turn import ScheduleOnce
from control.config import (
    DEFAULT_MAX_CONCURRENT_ACTIVITIES,
    RunConfig,
)
from control.watcher import Watcher
from hub.client import HubClient
from hub.types import MemberCluster
from workers.health import HealthServer, Readiness
from workers.metrics import SchedulerMetrics
from workers.processes import STOP_GRACE_S, ActivityProcesses
from workers.versioning import PromoteError, WorkerVersion, promote, worker_version
from workflows import names
from workflows.execution import activates_patch
from workflows.placement import PlacementWorkflow, ResourcePlacementWorkflow
from workflows.rebalance import RebalanceWorkflow
from workflows.reconcile import ReconcileWorkflow

__all__ = [
    "PART_ACTIVITIES",
    "PART_WATCHER",
    "PART_WORKER",
    "PlacementWorkers",
    "ServeError",
    "Serving",
    "build_worker",
    "serve",
    "split_workers",
]

log = logging.getLogger("fleet_scheduler.worker")

# Activity slots of the workflow worker: the reconcile activity, and placement activities that
# an earlier version scheduled on the workflow task queue (before they had a queue of their own).
WORKFLOW_WORKER_ACTIVITY_SLOTS: Final = 4
# How the workflow worker's task polls divide between the task queue itself (the first task of
# every new run) and its sticky queue (the tasks of runs it already holds); Temporal orders each
# by priority, but not one against the other. The SDK allows the task queue ratio x 5 pollers
# (at least 1) and the sticky queue the rest (at least 1): 1 and 4 at its default 0.2, 5 and 1
# here. At 0.2 a new placement of high priority waited behind the continuations of 2,000 older
# low ones (p99 25.2 s; 9.3 s at 1.0); 5 and 5 (0.5 of 10 pollers) measured no better (12.4 s
# against 11.3 s, back to back); the drain rate did not change measurably in any of them
# (bench/RESULTS.md, "Where the wait went, and admission").
WORKFLOW_TASK_POLL_RATIO: Final = 1.0
# How long activities in flight may finish after a stop before they are cancelled.
SHUTDOWN_GRACE: Final = timedelta(seconds=20)
# How often the readiness loop asks the server whether our pollers arrived.
READY_POLL_INTERVAL_S: Final = 0.25
READY_RPC_TIMEOUT: Final = timedelta(seconds=5)
# A task queue's partitions by default (the server's matching.numTaskqueueReadPartitions). The
# server lists the pollers of the partition it is asked about; a poll sits on one partition, and
# one that finds tasks there is not forwarded to the root: under load a worker's pollers may be
# seen on a child partition only, for up to a minute (a CI run timed out at 60 s that way).
TASK_QUEUE_PARTITIONS: Final = 4
# How long a promoting worker waits for the server to know its version before it gives up.
PROMOTE_TIMEOUT_S: Final = 120.0

PART_WORKER: Final = "worker"
PART_WATCHER: Final = "watcher"
PART_ACTIVITIES: Final = "activities"
# Local turns a workflow worker runs at once when other processes serve the activity queue
# (`local_slots`): a local turn saves Temporal an activity task, but the process's one core
# also runs every workflow task. Enough for a turn at a time to skip the queue, few enough
# that a burst's cycles run where the cores are (docs/operations.md, "Where turns run").
LOCAL_SLOTS_BESIDE_PROCESSES: Final = 2
# ... and how many more turns wait for them there, best first: only turns better than the worst
# one running (a new placement's behind edits), and a better one takes a worse waiting one's
# place, which runs on the activity queue. So a new placement waits about a turn for a local
# slot instead of queueing behind every edit in flight, while edits behind edits and a burst's
# equal first turns spill onto the queue at once. One per slot, and not long.
LOCAL_WAITING_PER_SLOT_BESIDE_PROCESSES: Final = 1
LOCAL_WAIT_BESIDE_PROCESSES_S: Final = 1.0
# The activity processes' stop: their SIGTERM grace, their SIGKILL, and a margin.
PROCESSES_GRACE_S: Final = STOP_GRACE_S + 5.0


class ServeError(RuntimeError):
    """A part of the process (worker or watcher) stopped on its own; the message names it."""


def worker_activities(hub: HubClient, settings: ActivitySettings) -> list[Callable[..., Any]]:
    """Every activity a placement workflow runs, bound to its HubClient and settings."""
    turn, cleanup = ScheduleOnce(hub, settings), CleanupPlacement(hub, settings)
    return [
        turn.schedule_once,
        cleanup.cleanup_placement,
        turn.schedule_once_rp,
        cleanup.cleanup_placement_rp,
        ReportDeadlineMiss(hub, settings).report_deadline_miss,
    ]


class PlacementWorkers:
    """The workers of one task queue, run and stopped together: the workflow worker (placement
    and reconcile workflows, on the task queue itself) and, unless the activities run in other
    processes, the activity worker (on `names.activity_task_queue`).

    Used like a `temporalio.worker.Worker`: `run()` until `shutdown()`, or `async with`."""

    def __init__(self, workers: Sequence[Worker]) -> None:
        if not workers:
            raise ValueError("no workers to run")
        self.workers = tuple(workers)

    def polled_queues(self) -> list[tuple[str, TaskQueueType.ValueType]]:
        """The (task queue, type) pairs these workers poll: workflow and activity tasks of a
        worker with workflows, activity tasks of one with activities."""
        queues: list[tuple[str, TaskQueueType.ValueType]] = []
        for worker in self.workers:
            config = worker.config()
            task_queue = config["task_queue"]
            if config.get("workflows"):
                queues.append((task_queue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))
            if config.get("activities"):
                queues.append((task_queue, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY))
        return queues

    async def run(self) -> None:
        """Run every worker until `shutdown`; when one ends by itself the others are shut
        down too, and its error (if any) is raised."""
        tasks = [asyncio.create_task(worker.run()) for worker in self.workers]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # Cancelled (a stop that outlived its grace): the workers go at once, as one
            # Worker.run would, instead of waiting for their graceful shutdown.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            for worker, task in zip(self.workers, tasks, strict=True):
                if not task.done():
                    with contextlib.suppress(Exception):
                        await worker.shutdown()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def shutdown(self) -> None:
        await asyncio.gather(*(worker.shutdown() for worker in self.workers))

    async def __aenter__(self) -> PlacementWorkers:
        self._stack = contextlib.AsyncExitStack()
        await self._stack.__aenter__()
        try:
            for worker in self.workers:
                await self._stack.enter_async_context(worker)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()


def build_worker(
    client: Client,
    hub: HubClient,
    *,
    task_queue: str = names.DEFAULT_TASK_QUEUE,
    settings: ActivitySettings | None = None,
    max_concurrent_activities: int = DEFAULT_MAX_CONCURRENT_ACTIVITIES,
    activity_executor: ThreadPoolExecutor | None = None,
    version: WorkerVersion | None = None,
    workflows: bool = True,
    activities: bool = True,
    **worker_options: Any,
) -> PlacementWorkers:
    """The workers for PlacementWorkflow and its activities on `task_queue`.

    `workflows` adds the workflow worker on `task_queue` (the workflows, the reconcile activity
    and, for activities scheduled there by an earlier version, the placement activities, in
    WORKFLOW_WORKER_ACTIVITY_SLOTS); `activities` adds the activity worker on
    `names.activity_task_queue(task_queue)` with `max_concurrent_activities` slots. The
    activities run on `activity_executor`, or on a new thread pool with one thread per activity
    slot; the caller owns a pool it passes in (`serve` shuts its own down).
    The workflow worker also has `max_concurrent_activities` slots for turns that run as local
    activities (docs/operations.md, "Where turns run"), and the activities an advisor
    (activities.advice) that knows them.
    `version` makes them versioned workers of a Worker Deployment (workers.versioning says why);
    without one they poll unversioned, as `fleet-scheduler dev` does. `worker_options` go to
    each `temporalio.worker.Worker` as they are (tests pass `max_cached_workflows=0`); with
    `max_cached_workflows=0` the workflow worker runs no turn local by its own choice, nor
    advises one (docs/operations.md, "Where turns run")."""
    if max_concurrent_activities < 1:
        raise ValueError(
            f"max_concurrent_activities must be at least 1, got {max_concurrent_activities}"
        )
    if not (workflows or activities):
        raise ValueError("a worker needs workflows, activities or both")
    executor = activity_executor or ThreadPoolExecutor(
        max_workers=activity_threads(
            max_concurrent_activities,
            workflows=workflows,
            activities=activities,
        ),
        thread_name_prefix="activity",
    )
    worker_options.setdefault("graceful_shutdown_timeout", SHUTDOWN_GRACE)
    settings = settings or ActivitySettings()
    if settings.hub_gate is None:
        settings = dataclasses.replace(settings, hub_gate=hub_gate(hub))
    if workflows and settings.local_slots is None:
        settings = dataclasses.replace(
            settings, local_slots=local_slots(max_concurrent_activities, activities=activities)
        )
    if settings.advisor is None:
        settings = dataclasses.replace(
            settings,
            advisor=TurnAdvisor(
                local_slots=settings.local_slots.slots if settings.local_slots else 0,
                fleet_size=settings.fleet_size or _fleet_size(settings.clusters),
                local_turns=runs_local_turns(worker_options),
            ),
        )
    deployment = version.deployment_config() if version is not None else None
    placement_activities = worker_activities(hub, settings)
    built = []
    if workflows:
        built.append(
            Worker(
                client,
                task_queue=task_queue,
                workflows=[
                    PlacementWorkflow,
                    ResourcePlacementWorkflow,
                    ReconcileWorkflow,
                    RebalanceWorkflow,
                ],
                activities=[
                    *placement_activities,
                    ReconcileFleet(hub, client, settings).reconcile_fleet,
                    RebalanceFleet(hub, client, lambda: settings.profile).rebalance_fleet,
                ],
                activity_executor=executor,
                max_concurrent_activities=WORKFLOW_WORKER_ACTIVITY_SLOTS,
                max_concurrent_local_activities=local_activity_slots(max_concurrent_activities),
                deployment_config=deployment,
                patch_activation_callback=turn_patches(worker_options),
                **{"nonsticky_to_sticky_poll_ratio": WORKFLOW_TASK_POLL_RATIO, **worker_options},
            )
        )
    if activities:
        built.append(
            Worker(
                client,
                task_queue=names.activity_task_queue(task_queue),
                activities=placement_activities,
                activity_executor=executor,
                max_concurrent_activities=max_concurrent_activities,
                deployment_config=deployment,
                **worker_options,
            )
        )
    return PlacementWorkers(built)


def split_workers(
    client: Client,
    task_queue: str,
    *,
    workflows: Sequence[type],
    activities: Sequence[Callable[..., Any]],
    **worker_options: Any,
) -> PlacementWorkers:
    """`workflows` on `task_queue` and `activities` on its activity queue, as `build_worker`
    splits ours: for other implementations of them (tests' stand-ins, the bench's no-ops). The
    workflow worker has the activities too, for placements with local cycles, and chooses
    where turns run as `build_worker`'s does. `worker_options` go to both workers."""
    return PlacementWorkers(
        [
            Worker(
                client,
                task_queue=task_queue,
                workflows=workflows,
                activities=activities,
                patch_activation_callback=turn_patches(worker_options),
                **worker_options,
            ),
            Worker(
                client,
                task_queue=names.activity_task_queue(task_queue),
                activities=activities,
                **worker_options,
            ),
        ]
    )


def runs_local_turns(worker_options: dict[str, Any]) -> bool:
    """Whether a workflow worker with these options runs turns local by its own choice: not
    one that caches no workflow (workflows.execution.QUEUE_TURN_PATCH says why)."""
    return worker_options.get("max_cached_workflows") != 0


def turn_patches(worker_options: dict[str, Any]) -> Callable[[PatchActivationInput], bool]:
    """The workflow worker's patch activation callback: which new patches a run's first ask
    activates (workflows.execution.activates_patch). Takes the caller's own callback out of
    `worker_options`, if any, for the other patches (tests stand in for older workers so)."""
    local_turns = runs_local_turns(worker_options)
    others: Callable[[PatchActivationInput], bool] | None = worker_options.pop(
        "patch_activation_callback", None
    )

    def activates(ask: PatchActivationInput) -> bool:
        ours = activates_patch(ask.patch_id, local_turns=local_turns)
        if ours is not None:
            return ours
        return others(ask) if others is not None else True

    return activates


def local_slots(max_concurrent_activities: int, *, activities: bool) -> LocalSlots:
    """The local slots of a workflow worker whose turns run `max_concurrent_activities` at once
    (docs/operations.md, "Where turns run"). With the activity worker in the same process
    (`activities`: `dev`, `run --processes 0`) the queue adds no core: every slot is
    local, and as many more turns wait for one, best key first (the queue would bring them
    back to this process, one activity task dearer). Without it (`run --processes N`, the split
    Deployments) the workflow worker's one process also runs every workflow task, and other
    processes wait on the activity queue: it runs at most LOCAL_SLOTS_BESIDE_PROCESSES turns at
    once, and one more per slot may wait, for at most LOCAL_WAIT_BESIDE_PROCESSES_S, if it is
    better than the worst turn running (`better_only`); a turn that finds the room full runs
    on the activity queue at once unless it is better than the worst one waiting (which goes
    instead). So the best turns (a new placement's) get a local slot within about a turn under
    load, and a burst's equal turns spread over every process instead of piling onto this
    one."""
    if activities:
        return LocalSlots(slots=max_concurrent_activities, waiting=max_concurrent_activities)
    slots = min(max_concurrent_activities, LOCAL_SLOTS_BESIDE_PROCESSES)
    return LocalSlots(
        slots=slots,
        waiting=slots * LOCAL_WAITING_PER_SLOT_BESIDE_PROCESSES,
        max_wait_s=LOCAL_WAIT_BESIDE_PROCESSES_S,
        better_only=True,
    )


def local_activity_slots(max_concurrent_activities: int) -> int:
    """The SDK's local activity slots of a workflow worker whose turns run
    `max_concurrent_activities` at once: as many again wait for one of those, best key first,
    and as many again arrive to be shed to the activity queue when that room is full
    (activities.local_slots), so the SDK's own first-in-first-out line keeps moving."""
    return 3 * max_concurrent_activities


def activity_threads(
    max_concurrent_activities: int,
    *,
    workflows: bool,
    activities: bool,
) -> int:
    """Threads for the activity slots of `build_worker`'s workers: one per slot, local ones
    included."""
    workflow_worker = WORKFLOW_WORKER_ACTIVITY_SLOTS + local_activity_slots(
        max_concurrent_activities
    )
    return (max_concurrent_activities if activities else 0) + (workflow_worker if workflows else 0)


def _fleet_size(
    clusters: Callable[[], list[MemberCluster] | None] | None,
) -> Callable[[], int | None]:
    """The member clusters a process's cache holds, for its advisor (None: no cache, or not
    synced yet)."""

    def size() -> int | None:
        listed = clusters() if clusters is not None else None
        return len(listed) if listed is not None else None

    return size


def hub_gate(hub: HubClient) -> HubGate:
    """The worker's gate for hub outages, probing with the cheapest read the activities' RBAC
    allows: one MemberCluster."""
    return HubGate(lambda: hub.list(MemberCluster, limit=1))


@dataclass(frozen=True)
class Serving:
    """What `serve` tells its caller once every part is ready."""

    health_url: str | None
    metrics_url: str | None
    task_queue: str
    ready_after_s: float


async def _worker_polling(
    client: Client, queues: Sequence[tuple[str, TaskQueueType.ValueType]], identity: str
) -> str | None:
    """None once the server lists `identity` among the pollers of every queue (on any of its
    partitions, the root first); else the first queue it does not poll yet."""
    for task_queue, queue_type in queues:
        partitions = [task_queue] + [
            f"/_sys/{task_queue}/{n}" for n in range(1, TASK_QUEUE_PARTITIONS)
        ]
        for partition in partitions:
            response = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=partition),
                    task_queue_type=queue_type,
                ),
                timeout=READY_RPC_TIMEOUT,
            )
            if any(poller.identity == identity for poller in response.pollers):
                break
        else:
            return task_queue
    return None


async def _watch_worker_readiness(
    client: Client,
    queues: Sequence[tuple[str, TaskQueueType.ValueType]],
    identity: str,
    readiness: Readiness,
    version: WorkerVersion | None,
) -> None:
    """Ready once the server sees this worker polling and, for a worker that promotes its
    version, once that version is current: a rolling update then stops the old pod only after
    the new one receives the tasks."""
    while True:
        try:
            missing = await _worker_polling(client, queues, identity)
        except RPCError as exc:
            readiness.set(PART_WORKER, False, f"cannot describe task queue: {exc.message}")
        else:
            if missing is None:
                break
            readiness.set(PART_WORKER, False, f"not yet polling task queue {missing!r}")
        await asyncio.sleep(READY_POLL_INTERVAL_S)
    if version is not None and version.promote:
        readiness.set(PART_WORKER, False, f"making {version.label} the current version")
        try:
            await promote(client, version, timeout_s=PROMOTE_TIMEOUT_S)
        except PromoteError as exc:
            # Not ready, and /readyz says why: a rolling update stops here, the old version
            # keeps the tasks.
            log.error("%s", exc)
            readiness.set(PART_WORKER, False, str(exc))
            return
        log.info("worker version %s is current", version.label)
    readiness.set(PART_WORKER, True)


async def _mirror_readiness(
    part: str, check: Callable[[], tuple[bool, str]], readiness: Readiness
) -> None:
    # The watcher and the activity processes know why they are not ready ("waiting for the
    # first list of ...", "activities-2: starting"); /readyz shows their words under their part.
    while True:
        ready, reason = check()
        readiness.set(part, ready, reason)
        await asyncio.sleep(READY_POLL_INTERVAL_S)


async def serve(
    client: Client,
    hub: HubClient,
    stop: asyncio.Event,
    config: RunConfig,
    *,
    settings: ActivitySettings | None = None,
    metrics: SchedulerMetrics | None = None,
    activity_processes: ActivityProcesses | None = None,
    on_ready: Callable[[Serving], None] | None = None,
) -> None:
    """Run the components `config` names, and the health server, until `stop` is set; then
    stop them.

    `workflows` runs the workflow worker; `activities` the activity worker, in this process
    unless `activity_processes` run it in `config.processes` children (`run` builds them from
    `config.for_child()`), which `serve` starts, supervises and stops; `watcher` the watcher,
    which reads its part of `config`. `config.metrics_port` None serves no health endpoints;
    0 picks a free port. `settings` default to the config's (snapshotter, no profile);
    `on_ready` is called once, when every part is ready. Returns after a clean stop.

    Raises:
        ServeError: the worker or the watcher ended by itself (the cause is chained).
        OSError: the health port cannot be bound.
        ValueError: activity processes without `config.processes`, or the other way round.
    """
    if (activity_processes is not None) != (config.processes > 0):
        raise ValueError(
            f"config.processes is {config.processes} but activity processes were "
            + ("given" if activity_processes is not None else "not given")
        )
    if settings is not None and settings.snapshotter != config.snapshotter:
        raise ValueError("settings.snapshotter and config.snapshotter disagree")
    run_worker = config.workflows
    run_watcher = config.watcher
    run_activities = config.activities_here
    version = worker_version(config.version)
    task_queue = config.task_queue
    health_host, health_port = config.metrics_host, config.metrics_port
    max_concurrent_activities = config.max_concurrent_activities
    started = time.monotonic()
    metrics = metrics if metrics is not None else SchedulerMetrics()
    settings = (
        settings
        if settings is not None
        else ActivitySettings(
            snapshotter=config.snapshotter, metrics=metrics, decisions=config.decisions
        )
    )
    in_process = run_worker or run_activities
    parts = [
        name
        for name, on in (
            (PART_WORKER, in_process),
            (PART_WATCHER, run_watcher),
            (PART_ACTIVITIES, activity_processes is not None),
        )
        if on
    ]
    readiness = Readiness(*parts)
    health = (
        HealthServer(health_host, health_port, readiness, metrics)
        if health_port is not None
        else None
    )
    if health is not None:
        await health.start()
    executor: ThreadPoolExecutor | None = None
    cache: ClusterCache | None = None
    if in_process and settings.clusters is None:
        # KubeFleet's cycles read clusters from an informer (activities.clusters says why);
        # until its first list lands, cycles list them from the hub.
        profile = settings.profile
        cache = ClusterCache(
            hub, ineligibility=profile.ineligibility if profile is not None else None
        ).start()
        settings = dataclasses.replace(settings, clusters=cache.clusters, fleet_size=cache.size)
    tasks: dict[str, asyncio.Task[None]] = {}
    helpers: list[asyncio.Task[None]] = []
    worker: PlacementWorkers | None = None
    try:
        if in_process:
            threads = activity_threads(
                max_concurrent_activities,
                workflows=run_worker,
                activities=run_activities,
            )
            executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="activity")
            worker = build_worker(
                client,
                hub,
                task_queue=task_queue,
                settings=settings,
                max_concurrent_activities=max_concurrent_activities,
                activity_executor=executor,
                version=version,
                workflows=run_worker,
                activities=run_activities,
                max_cached_workflows=config.max_cached_workflows,
            )
            tasks[PART_WORKER] = asyncio.create_task(worker.run(), name=PART_WORKER)
            # Only the workflow worker promotes its version: the activity processes join it.
            promoting = version if run_worker else None
            helpers.append(
                asyncio.create_task(
                    _watch_worker_readiness(
                        client, worker.polled_queues(), client.identity, readiness, promoting
                    ),
                    name="worker readiness",
                )
            )
        if activity_processes is not None:
            metrics.children = activity_processes.metrics_sources
            tasks[PART_ACTIVITIES] = asyncio.create_task(
                activity_processes.run(stop), name=PART_ACTIVITIES
            )
            helpers.append(
                asyncio.create_task(
                    _mirror_readiness(PART_ACTIVITIES, activity_processes.readiness, readiness)
                )
            )
        if run_watcher:
            watcher = Watcher(
                hub,
                client,
                config,
                metrics=metrics,
                profile=settings.profile,
            )
            tasks[PART_WATCHER] = asyncio.create_task(watcher.run(stop), name=PART_WATCHER)
            helpers.append(
                asyncio.create_task(_mirror_readiness(PART_WATCHER, watcher.readiness, readiness))
            )
        if on_ready is not None:
            helpers.append(
                asyncio.create_task(
                    _announce_when_ready(readiness, on_ready, health, task_queue, started)
                )
            )
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait(
            [stopper, *tasks.values()], return_when=asyncio.FIRST_COMPLETED
        )
        stopper.cancel()
        ended = [name for name, task in tasks.items() if task in done]
        if ended and not stop.is_set():
            stop.set()  # one part ended by itself: take the others down too
            name = ended[0]
            error = tasks[name].exception() if not tasks[name].cancelled() else None
            raise ServeError(
                f"the {name} stopped unexpectedly"
                + (f": {type(error).__name__}: {error}" if error else "")
            ) from error
    finally:
        stop.set()
        for helper in helpers:
            helper.cancel()
        # The watcher stops sending signals while the worker finishes the activities it holds:
        # both take a while (watch streams, in-flight hub writes), so they stop side by side.
        # Activity processes get their own grace and then SIGKILL (workers.processes).
        await asyncio.gather(
            *(
                _finish(task, name, PROCESSES_GRACE_S if name == PART_ACTIVITIES else None)
                for name, task in tasks.items()
                if name != PART_WORKER
            ),
            _stop_worker(worker, tasks.get(PART_WORKER)),
        )
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        if cache is not None:
            await asyncio.to_thread(cache.stop)
        if health is not None:
            await health.stop()


async def _stop_worker(worker: PlacementWorkers | None, task: asyncio.Task[None] | None) -> None:
    if worker is None or task is None:
        return
    if not task.done():
        with contextlib.suppress(Exception):
            await worker.shutdown()
    await _finish(task, PART_WORKER)


async def _finish(task: asyncio.Task[None], name: str, grace_s: float | None = None) -> None:
    grace_s = grace_s if grace_s is not None else SHUTDOWN_GRACE.total_seconds()
    if not task.done():
        try:
            await asyncio.wait_for(asyncio.shield(task), grace_s)
        except TimeoutError:
            log.warning("the %s did not stop within %gs; cancelling it", name, grace_s)
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _announce_when_ready(
    readiness: Readiness,
    on_ready: Callable[[Serving], None],
    health: HealthServer | None,
    task_queue: str,
    started: float,
) -> None:
    while not readiness()[0]:
        await asyncio.sleep(READY_POLL_INTERVAL_S)
    on_ready(
        Serving(
            health_url=health.url if health is not None else None,
            metrics_url=f"{health.url}/metrics" if health is not None else None,
            task_queue=task_queue,
            ready_after_s=time.monotonic() - started,
        )
    )
