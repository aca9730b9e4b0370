"""The two baselines of the end-to-end bench, each a process bench/e2e.py starts and stops.

`queue`: what KubeFleet's design costs in Python. The same scheduler framework and the very same
activity code (schedule_once and cleanup_placement, called directly in
an activity context, no Temporal server) driven by a plain asyncio work queue with client-go's
semantics: a key waiting is not added twice, a key being processed is never handed to a second
worker (added meanwhile, it is marked dirty and queued again when the first is done), a failed
turn is re-added with per-key backoff (5 ms x 2^n, capped), a cycle that asks to requeue is
re-added at once. Keys come from an informer-like list+watch of ClusterResourcePlacements:
creation, spec (generation) changes and deletion. N workers take keys; each turn runs in a
thread because the kubernetes client blocks, as in the real worker. MemberClusters come from
the same cache the worker uses (activities.clusters), bindings straight from the hub.

`ceiling`: Temporal's own ceiling for our workflow shape: the real PlacementWorkflow on a worker
built like ours (same thread pool and activity slots), whose schedule_once does nothing but
return a ready snapshot and a fulfilled report. Each finished schedule_once prints
`cycle <placement>` so the bench can time the burst; bench/e2e.py sends the signal-with-starts.

Both print `ready` once they can take work, and `stat <name> <value>` lines when stopped
(SIGTERM/SIGINT)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.cleanup import CleanupPlacement
from activities.clusters import ClusterCache
from activities.plumbing import ActivitySettings
from activities.translate import is_retryable
from activities.turn import ScheduleOnce
from control.config import DEFAULT_MAX_CONCURRENT_ACTIVITIES
from hub.client import HubClient, Resync, WatchEvent
from hub.types import ClusterResourcePlacement
from scheduler import Outcome
from workers.temporal_client import TemporalTarget, connect
from workers.worker import split_workers
from workflows.models import (
    CleanupReport,
    CleanupRequest,
    CycleReport,
    PrepareResult,
    TurnRequest,
    TurnResult,
)
from workflows.placement import PlacementWorkflow

# client-go's per-key exponential backoff (kubefleet-rules 1.11): 5 ms x 2^n, at most 1000 s.
BACKOFF_BASE_S: Final = 0.005
BACKOFF_MAX_S: Final = 1000.0
WATCH_SECONDS: Final = 300


# --- queue -------------------------------------------------------------------------------------


class KeyQueue:
    """client-go's workqueue on one asyncio loop: dedup, per-key exclusivity, dirty re-adds."""

    def __init__(self) -> None:
        self._order: collections.deque[str] = collections.deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._ready = asyncio.Event()

    def add(self, key: str) -> None:
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._order.append(key)
            self._ready.set()

    def add_after(self, key: str, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    def add_rate_limited(self, key: str) -> None:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, min(BACKOFF_BASE_S * 2**failures, BACKOFF_MAX_S))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    async def get(self) -> str:
        while not self._order:
            self._ready.clear()
            await self._ready.wait()
        key = self._order.popleft()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)


@dataclass
class QueueStats:
    turns: int = 0
    cycles: int = 0
    cleanups: int = 0
    retries: int = 0
    failures: int = 0


class QueueScheduler:
    """N workers over a KeyQueue; each turn is one PlacementWorkflow loop turn, no Temporal."""

    def __init__(self, hub: HubClient, workers: int) -> None:
        # Clusters from an informer-like cache, as the worker (and KubeFleet) reads them.
        self._clusters = ClusterCache(hub).start()
        settings = ActivitySettings(snapshotter=True, clusters=self._clusters.clusters)
        self._schedule_once = ScheduleOnce(hub, settings).schedule_once
        self._cleanup_placement = CleanupPlacement(hub, settings).cleanup_placement
        self._hub = hub
        self._workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="turn")
        self.queue = KeyQueue()
        self.stats = QueueStats()
        self._cycles: dict[str, int] = {}
        self.listed = asyncio.Event()

    def _turn(self, key: str, cycle: int) -> tuple[str, float]:
        """schedule_once, then cleanup_placement if deleting; what to do with the key next."""
        env = ActivityEnvironment()
        turn: TurnResult = env.run(
            self._schedule_once, TurnRequest(placement=key, cycle=cycle, reason="queue")
        )
        if turn.prepared.phase == "deleting":
            env.run(self._cleanup_placement, CleanupRequest(placement=key))
            return "cleaned", 0.0
        report = turn.report
        if report is None:
            return "forget", 0.0
        if report.requeue:
            return "requeue", 0.0
        if report.requeue_after_seconds:
            return "after", report.requeue_after_seconds
        return "forget", 0.0

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            key = await self.queue.get()
            cycle = self._cycles.get(key, 0) + 1
            try:
                action, delay = await loop.run_in_executor(self._pool, self._turn, key, cycle)
            except ApplicationError as err:
                if is_retryable(err):
                    self.stats.retries += 1
                    self.queue.add_rate_limited(key)
                else:
                    self.stats.failures += 1  # wait for the next event, as KubeFleet does
            except Exception as err:  # a bug in the bench must show, not stall a worker
                print(f"turn of {key} failed: {type(err).__name__}: {err}", file=sys.stderr)
                self.stats.failures += 1
            else:
                self.stats.turns += 1
                if action == "cleaned":
                    self.stats.cleanups += 1
                    self._cycles.pop(key, None)
                    self.queue.forget(key)
                else:
                    self._cycles[key] = cycle
                    self.stats.cycles += 1
                    self.queue.forget(key)
                    if action == "requeue":
                        self.queue.add(key)
                    elif action == "after":
                        self.queue.add_after(key, delay)
            finally:
                self.queue.done(key)

    def _watch(self, loop: asyncio.AbstractEventLoop, halt: threading.Event) -> None:
        """The informer: placements created, changed in spec, deleting or deleted are keys."""
        generations: dict[str, int] = {}
        deleting: set[str] = set()
        while not halt.is_set():
            try:
                for item in self._hub.list_then_watch(
                    ClusterResourcePlacement, timeout_seconds=WATCH_SECONDS, stop=halt
                ):
                    keys = []
                    if isinstance(item, Resync):
                        for obj in item.objects:
                            generations[obj.name] = obj.metadata.generation or 0
                            keys.append(obj.name)
                        loop.call_soon_threadsafe(self.listed.set)
                    elif isinstance(item, WatchEvent):
                        obj = item.object
                        generation = obj.metadata.generation or 0
                        if item.type == "DELETED":
                            generations.pop(obj.name, None)
                            deleting.discard(obj.name)
                            continue
                        newly_deleting = obj.metadata.deleting and obj.name not in deleting
                        if generations.get(obj.name) != generation or newly_deleting:
                            keys.append(obj.name)
                        if obj.metadata.deleting:
                            deleting.add(obj.name)
                        generations[obj.name] = generation
                    for key in keys:
                        loop.call_soon_threadsafe(self.queue.add, key)
            except Exception as exc:
                print(f"placement watch failed: {exc}; restarting", file=sys.stderr)
                halt.wait(0.5)

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        halt = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(loop, halt), daemon=True)
        watcher.start()
        workers = [asyncio.create_task(self._work()) for _ in range(self._workers)]
        await self.listed.wait()
        print("ready", flush=True)
        await stop.wait()
        halt.set()
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._clusters.stop()


async def run_queue(args: argparse.Namespace) -> None:
    stop = _stop_on_signals()
    hub = HubClient.from_kubeconfig(args.kubeconfig)
    scheduler = QueueScheduler(hub, args.workers)
    try:
        await scheduler.run(stop)
    finally:
        for name, value in vars(scheduler.stats).items():
            print(f"stat {name} {value}", flush=True)
        hub.close()


# --- ceiling -----------------------------------------------------------------------------------


class NoopActivities:
    """schedule_once/cleanup_placement by name and types, doing nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cycles = 0

    @activity.defn(name="schedule_once")
    def schedule_once(self, request: TurnRequest) -> TurnResult:
        with self._lock:
            self.cycles += 1
            sys.stdout.write(f"cycle {request.placement}\n")
            sys.stdout.flush()
        snapshot = f"{request.placement}-0"
        return TurnResult(
            prepared=PrepareResult(
                phase="ready",
                message="ceiling: nothing read",
                snapshot=snapshot,
                placement_type="PickN",
                placement_generation=1,
            ),
            report=CycleReport(
                cycle=request.cycle,
                placement=request.placement,
                snapshot=snapshot,
                outcome=Outcome(placement_type="PickN", wanted=3, picked=3, fulfilled=True),
                summary=f"cycle {request.cycle}: ceiling, nothing done",
            ),
        )

    @activity.defn(name="cleanup_placement")
    def cleanup_placement(self, request: CleanupRequest) -> CleanupReport:
        return CleanupReport(summary=f"placement {request.placement}: ceiling, nothing done")


async def run_ceiling(args: argparse.Namespace) -> None:
    stop = _stop_on_signals()
    client = await connect(TemporalTarget(args.temporal_address, args.namespace))
    noop = NoopActivities()
    slots = args.max_concurrent_activities
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="activity") as executor:
        worker = split_workers(
            client,
            args.task_queue,
            workflows=[PlacementWorkflow],
            activities=[noop.schedule_once, noop.cleanup_placement],
            activity_executor=executor,
            max_concurrent_activities=slots,
            max_concurrent_local_activities=slots,  # local turns: as many, on the same threads
        )
        async with worker:
            print("ready", flush=True)
            await stop.wait()
    print(f"stat cycles {noop.cycles}", flush=True)


# --- entry -------------------------------------------------------------------------------------


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="baseline", required=True)
    queue = sub.add_parser("queue", help="the activities driven by an asyncio work queue")
    queue.add_argument("--kubeconfig", type=Path, required=True)
    queue.add_argument("--workers", type=int, default=DEFAULT_MAX_CONCURRENT_ACTIVITIES)
    ceiling = sub.add_parser("ceiling", help="PlacementWorkflow with activities doing nothing")
    ceiling.add_argument("--temporal-address", required=True)
    ceiling.add_argument("--namespace", default="default")
    ceiling.add_argument("--task-queue", required=True)
    ceiling.add_argument(
        "--max-concurrent-activities", type=int, default=DEFAULT_MAX_CONCURRENT_ACTIVITIES
    )
    args = parser.parse_args()
    started = time.monotonic()
    runner = run_queue if args.baseline == "queue" else run_ceiling
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(runner(args))
    print(f"stat lifetime_s {time.monotonic() - started:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    # Skip interpreter finalisation, as `fleet-scheduler` does: the Temporal SDK's threads can
    # abort it (temporalio/sdk-python#300) after everything has been said.
    code = main()
    sys.stdout.flush()
    os._exit(code)
