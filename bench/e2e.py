"""End-to-end bench: fleet-scheduler against devhub and the Temporal dev server, and two
baselines on the same hub and the same burst, in one run.

    python bench/e2e.py --clusters K --placements P [--steady-rate 10 --steady-seconds 60]
                        [--churn] [--temporal-db sqlite|memory] [--skip queue,ceiling,steady]
                        [--processes N] [--local-cycles-up-to CLUSTERS]

The script starts what `fleet-scheduler dev` runs, each part as its own process so its peak
memory can be read from /proc: devhub (`fleet-scheduler devhub`), the Temporal dev server
(`workers.devserver.DevServer`, headless, SQLite in WAL mode or in memory), the worker
(`fleet-scheduler run --components workflows,activities`) and the watcher
(`fleet-scheduler run --components watcher`). It
puts K member clusters in devhub (heartbeats kept fresh), then runs, in this order:

1. ceiling: the real PlacementWorkflow on a worker built like ours but whose schedule_once
   does nothing (bench/baselines.py ceiling); the bench signal-with-starts P workflows as the
   watcher does (same call, 32 at once, local cycles as the watcher would say for K clusters)
   and times until every schedule_once has run.
2. queue: the same activity code driven by an asyncio work queue with KubeFleet's queue
   semantics and no Temporal (bench/baselines.py queue); P placements are created at once and
   timed until all are fully scheduled; then deleted and cleaned up by the queue, so the next
   phase starts from the same hub.
3. e2e burst: P placements created at once; time until every one is fully scheduled (its
   ClusterResourcePlacementScheduled condition True for its generation, which the cycle
   writes after its bindings), and where its cycles ran (`e2e.burst.cycles.<process>`:
   `worker`, the workflow worker's own local turns; `activities-N`, each activity process).
4. e2e steady: placements created at --steady-rate per second for --steady-seconds; per
   placement, creation -> last binding written (and -> fully scheduled).
5. churn (--churn): 1,000 of the burst's placements change policy at once (time until all are
   scheduled again and until no cycle has run for QUIET_S, cycles run); then one label change
   on the anchor cluster that every placement picks (cycles run, time until quiet).

Placement names carry a random run id, so runs never collide. Every child process is stopped
on the way out, also on Ctrl-C and SIGTERM. Prints `name value` lines; see bench/RESULTS.md."""

from __future__ import annotations

import argparse
import asyncio
import compileall
import functools
import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import aiohttp
import e2e_load as load
from e2e_load import Hub, Tracker, each
from e2e_stack import Child, Stack, run_bench, self_peak_rss_mb
from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from hub import names as hub_names
from workers.temporal_client import TemporalTarget, connect
from workflows import names
from workflows.models import HubEvent, PlacementInput
from workflows.placement import PlacementWorkflow
from workflows.starts import turn_execution_for

# The watcher's own bound on concurrent Temporal calls (control.sending.DEFAULT_MAX_IN_FLIGHT).
SIGNAL_CONCURRENCY: Final = 32
# Each member agent heartbeats every minute; the bench refreshes every cluster every
# HEARTBEAT_ROUND_S (well inside KubeFleet's 5-minute limit), a slice every HEARTBEAT_TICK_S.
HEARTBEAT_ROUND_S: Final = 240.0
HEARTBEAT_TICK_S: Final = 10.0
# "Quiet": no scheduling cycle finished for this long.
QUIET_S: Final = 3.0
METRICS_POLL_S: Final = 0.2
CHURN_PLACEMENTS: Final = 1000
CYCLES_METRIC: Final = "fleet_scheduler_cycles_total"
TEMPORAL_TASK_QUEUE: Final = "bench-e2e"
CEILING_TASK_QUEUE: Final = "bench-ceiling"
PHASES: Final = ("ceiling", "queue", "steady")
PACKAGES: Final = ("hub", "scheduler", "activities", "workflows", "workers", "devhub")


def report(name: str, value: float | int | str) -> None:
    if isinstance(value, float):
        text = f"{value:.3f}" if value < 10 else f"{value:.1f}"
    else:
        text = str(value)
    print(f"{name} {text}", flush=True)


def report_cpu(
    phase: str, before: dict[str, float], after: dict[str, float], elapsed: float
) -> None:
    """CPU seconds each process spent in a phase, and as a share of one core over it."""
    for name, seconds in after.items():
        used = seconds - before.get(name, 0.0)
        report(f"cpu.{phase}.{name}_s", used)
        report(f"cpu.{phase}.{name}_cores", used / elapsed)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[rank]


class Bench:
    def __init__(self, args: argparse.Namespace, stack: Stack, hub: Hub, client: Client) -> None:
        self.args = args
        self.stack = stack
        self.hub = hub
        self.client = client
        self.tracker = Tracker(hub)
        self.run_id = secrets.token_hex(3)
        self.rates: dict[str, float] = {}

    def names(self, phase: str, count: int) -> list[str]:
        return [f"b{self.run_id}-{phase}-{i:05d}" for i in range(count)]

    async def create_placements(self, names_: list[str]) -> float:
        """Create them all at once (WRITE_CONCURRENCY in flight); returns when the first went."""
        started = time.monotonic()
        indexed = list(enumerate(names_))

        async def create(item: tuple[int, str]) -> None:
            index, name = item
            await self.hub.create(
                load.PLACEMENTS_PATH, load.placement(name, index, self.args.clusters)
            )

        await each(indexed, create)
        return started

    async def wait_scheduled(self, names_: list[str], what: str, generation: int = 1) -> float:
        return await self.tracker.wait_scheduled(names_, self.args.timeout, what, generation)

    async def delete_and_wait(self, names_: list[str], what: str) -> float:
        started = time.monotonic()
        await each(names_, lambda n: self.hub.delete(load.PLACEMENTS_PATH, n))

        def gone(name: str) -> bool:
            state = self.tracker.placements.get(name)
            return state is not None and state.deleted is not None and not state.bindings

        await self.tracker.wait(gone, names_, self.args.timeout, what)
        return time.monotonic() - started

    # --- phases ------------------------------------------------------------------------------

    async def ceiling(self) -> None:
        done: dict[str, float] = {}

        def on_line(line: str) -> None:
            if line.startswith("cycle "):
                done.setdefault(line[6:], time.monotonic())

        assert self.stack.server is not None
        child = self.stack.spawn(
            "ceiling",
            [
                sys.executable, str(Path(__file__).with_name("baselines.py")), "ceiling",
                "--temporal-address", self.stack.server.target,
                "--task-queue", CEILING_TASK_QUEUE,
            ],
            on_line=on_line,
        ).start(ready=r"^ready$")  # fmt: skip
        child.wait_ready()
        names_ = self.names("c", self.args.placements)
        cpu_before = self.stack.cpu(child)
        started = time.monotonic()
        await each(names_, lambda n: self._signal_with_start(n), SIGNAL_CONCURRENCY)
        last = await self.tracker.wait(
            lambda n: n in done, names_, self.args.timeout, "ceiling cycles"
        )
        elapsed = last - started
        report_cpu("ceiling.burst", cpu_before, self.stack.cpu(child), elapsed)
        self.rates["ceiling"] = len(names_) / elapsed
        report("baseline.ceiling.burst_s", elapsed)
        report("baseline.ceiling.placements_per_s", self.rates["ceiling"])
        child.stop()
        report("rss.ceiling_worker.peak_mb", child.peak_mb or float("nan"))

    async def _signal_with_start(self, name: str) -> None:
        # The watcher's call (control.sending.Delivery._signal_with_start), on the ceiling queue,
        # with what it would say about local cycles for this fleet.
        where = turn_execution_for(self.args.clusters, self.args.local_cycles_up_to)
        await self.client.start_workflow(
            PlacementWorkflow.run,
            PlacementInput(placement=name, turn_execution=where),
            id=names.workflow_id(name),
            task_queue=CEILING_TASK_QUEUE,
            start_signal=names.SIGNAL_PLACEMENT_CHANGED,
            start_signal_args=[HubEvent(reason="placement created", turn_execution=where)],
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(names.SA_PLACEMENT_NAME, name)]
            ),
            static_summary=f"placement {name}",
        )

    async def queue(self) -> None:
        child = self.stack.baseline(
            "queue", "queue", "--kubeconfig", str(self.stack.kubeconfig),
            "--workers", str(self.args.queue_workers),
        ).start(ready=r"^ready$")  # fmt: skip
        child.wait_ready()
        names_ = self.names("q", self.args.placements)
        cpu_before = self.stack.cpu(child)
        started = await self.create_placements(names_)
        last = await self.wait_scheduled(names_, "queue baseline burst")
        elapsed = last - started
        report_cpu("queue.burst", cpu_before, self.stack.cpu(child), elapsed)
        self.rates["queue"] = len(names_) / elapsed
        report("baseline.queue.burst_s", elapsed)
        report("baseline.queue.placements_per_s", self.rates["queue"])
        report("baseline.queue.cleanup_s", await self.delete_and_wait(names_, "queue cleanup"))
        child.stop()
        stats = child.stats()
        report("baseline.queue.cycles", stats.get("cycles", "nan"))
        report("baseline.queue.workers", self.args.queue_workers)
        report("rss.queue.peak_mb", child.peak_mb or float("nan"))

    async def e2e(self) -> None:
        up_to = self.args.local_cycles_up_to
        local = () if up_to is None else ("--local-cycles-up-to", str(up_to))
        worker = self.stack.scheduler_part(
            "worker", TEMPORAL_TASK_QUEUE, "--components", "workflows,activities",
            "--processes", str(self.args.processes), *local,
        )  # fmt: skip
        watcher = self.stack.scheduler_part(
            "watcher", TEMPORAL_TASK_QUEUE, "--components", "watcher", *local
        )
        # At a line's start: the worker's activity processes echo their own, prefixed.
        worker.start(ready=r"^fleet-scheduler run: ready in")
        watcher.start(ready=r"^fleet-scheduler run: ready in")
        report("e2e.processes", self.args.processes)
        report("e2e.local_cycles_up_to", "auto" if up_to is None else up_to)
        metrics = _metrics_url(worker.wait_ready())
        watcher.wait_ready()
        async with aiohttp.ClientSession() as session:
            cycles = Cycles(session, metrics)
            profilers = self.start_profiles(worker, watcher)
            await self.burst(cycles, worker, watcher)
            for profiler in profilers:
                profiler.stop(grace=60, sig=signal.SIGINT)  # py-spy writes its file on SIGINT
            if "steady" not in self.args.skip:
                await self.steady()
            if self.args.churn:
                await self.churn_policy(cycles)
                await self.churn_label(cycles)
            report("e2e.cycles_total", await cycles.count())
        for child in (worker, watcher):
            child.stop()
            report(f"rss.{child.name}.peak_mb", child.peak_mb or float("nan"))
            for name, peak in sorted(child.descendant_peaks_mb.items()):
                report(f"rss.{name}.peak_mb", peak)

    def start_profiles(self, *parts: Child) -> list[Child]:
        """py-spy record of each scheduler part and devhub during the burst (--profile DIR):
        collapsed stacks, one file per process, for bench/profile_top.py or a flame graph."""
        if self.args.profile is None:
            return []
        self.args.profile.mkdir(parents=True, exist_ok=True)
        assert self.stack.devhub is not None
        profilers = []
        for part in (*parts, self.stack.devhub):
            output = self.args.profile / f"{part.name}.folded"
            profilers.append(
                self.stack.spawn(
                    f"py-spy-{part.name}",
                    [
                        str(Path(sys.executable).with_name("py-spy")), "record",
                        "--pid", str(part.pid), "--format", "raw", "--rate", "50",
                        "--nonblocking", "--gil", "--output", str(output),
                    ],
                ).start()
            )  # fmt: skip
        return profilers

    async def burst(self, cycles: Cycles, *parts: Child) -> None:
        self.burst_names = self.names("e", self.args.placements)
        before = await cycles.by_process()
        cpu_before = self.stack.cpu(*parts)
        started = await self.create_placements(self.burst_names)
        created = time.monotonic()
        last = await self.wait_scheduled(self.burst_names, "e2e burst")
        elapsed = last - started
        report_cpu("e2e.burst", cpu_before, self.stack.cpu(*parts), elapsed)
        rate = len(self.burst_names) / elapsed
        self.rates["e2e"] = rate
        report("e2e.create_s", created - started)
        report("e2e.burst_s", elapsed)
        report("e2e.placements_per_s", rate)
        await asyncio.sleep(QUIET_S)
        after = await cycles.by_process()
        report("e2e.burst.cycles", sum(after.values()) - sum(before.values()))
        # Where the burst's cycles ran: the workflow worker's process, each activity process.
        for process in sorted(after):
            report(f"e2e.burst.cycles.{process}", after[process] - before.get(process, 0))
        if "queue" in self.rates:
            report("e2e.ratio.vs_queue", rate / self.rates["queue"])
        if "ceiling" in self.rates:
            report("e2e.ratio.vs_ceiling", rate / self.rates["ceiling"])

    async def steady(self) -> None:
        count = round(self.args.steady_rate * self.args.steady_seconds)
        names_ = self.names("s", count)
        created: dict[str, float] = {}
        tasks = []
        started = time.monotonic()
        for index, name in enumerate(names_):
            at = started + index / self.args.steady_rate
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            created[name] = time.monotonic()
            body = load.placement(name, index, self.args.clusters)
            tasks.append(asyncio.create_task(self.hub.create(load.PLACEMENTS_PATH, body)))
        await asyncio.gather(*tasks)
        await self.wait_scheduled(names_, "e2e steady")
        to_binding = []
        to_scheduled = []
        for name in names_:
            state = self.tracker.placements[name]
            scheduled = self.tracker.scheduled_at(name)
            assert scheduled is not None
            to_scheduled.append(scheduled - created[name])
            if state.last_binding is not None:
                to_binding.append(state.last_binding - created[name])
        report("e2e.steady.placements", count)
        report("e2e.steady.p50_s", percentile(to_binding, 0.50))
        report("e2e.steady.p99_s", percentile(to_binding, 0.99))
        report("e2e.steady.max_s", max(to_binding))
        report("e2e.steady.scheduled_p50_s", percentile(to_scheduled, 0.50))
        report("e2e.steady.scheduled_p99_s", percentile(to_scheduled, 0.99))

    async def churn_policy(self, cycles: Cycles) -> None:
        chosen = self.burst_names[:CHURN_PLACEMENTS]
        report("churn.policy.placements", len(chosen))
        bodies = {n: load.placement(n, i, self.args.clusters) for i, n in enumerate(chosen)}
        await self._quiet(cycles)
        before = await cycles.count()
        started = time.monotonic()
        generations: dict[str, int] = {}

        async def change(name: str) -> None:
            patched = await self.hub.patch(
                load.PLACEMENTS_PATH, name, load.policy_change(bodies[name])
            )
            generations[name] = int(patched["metadata"]["generation"])

        await each(chosen, change)
        unchanged = [n for n, g in generations.items() if g < 2]
        if unchanged:
            raise RuntimeError(f"policy change left the generation of {unchanged[:5]} as it was")
        scheduled = await self.tracker.wait(
            lambda n: self.tracker.scheduled_at(n, generations[n]) is not None,
            chosen,
            self.args.timeout,
            "churn: policy change",
        )
        report("churn.policy.scheduled_s", scheduled - started)
        last_cycle = await self._quiet(cycles)
        report("churn.policy.quiet_s", last_cycle - started)
        report("churn.policy.cycles", await cycles.count() - before)

    async def churn_label(self, cycles: Cycles) -> None:
        listed = await self.hub.list(load.BINDINGS_PATH)
        sharing = {
            b["metadata"]["labels"].get(hub_names.PARENT_PLACEMENT_LABEL)
            for b in listed.get("items") or []
            if b["spec"].get("targetCluster") == load.ANCHOR
        }
        report("churn.label.placements_sharing_cluster", len(sharing))
        await self._quiet(cycles)
        before = await cycles.count()
        started = time.monotonic()
        label = {"metadata": {"labels": {load.CHURN_LABEL: self.run_id}}}
        await self.hub.patch(load.CLUSTERS_PATH, load.ANCHOR, label)
        last_cycle = await self._quiet(cycles, since=started)
        report("churn.label.cycles", await cycles.count() - before)
        report("churn.label.quiet_s", max(0.0, last_cycle - started))

    async def _quiet(self, cycles: Cycles, since: float | None = None) -> float:
        return await cycles.quiet(since)

    async def heartbeats(self) -> None:
        clusters = [load.cluster_name(i) for i in range(self.args.clusters)]
        per_tick = max(1, round(len(clusters) * HEARTBEAT_TICK_S / HEARTBEAT_ROUND_S))
        position = 0
        while True:
            await asyncio.sleep(HEARTBEAT_TICK_S)
            batch = [clusters[(position + i) % len(clusters)] for i in range(per_tick)]
            position = (position + per_tick) % len(clusters)
            await self.hub.refresh_heartbeats(batch)


class Cycles:
    """The worker's count of scheduling cycles, from its /metrics."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self._session = session
        self._url = url

    async def count(self) -> int:
        return sum((await self.by_process()).values())

    async def by_process(self) -> dict[str, int]:
        """Cycles run by each process: "worker" (the workflow worker's own, local turns and
        any activity worker in it) and each activity process by its `fleet_process` label."""
        async with self._session.get(self._url) as response:
            response.raise_for_status()  # a wrong URL must not read as "no cycles"
            text = await response.text()
        counts: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith(CYCLES_METRIC + "{"):
                found = re.search(r'fleet_process="([^"]+)"', line)
                process = found.group(1) if found else "worker"
                counts[process] = counts.get(process, 0.0) + float(line.rsplit(" ", 1)[1])
        return {process: int(count) for process, count in counts.items()}

    async def quiet(self, since: float | None = None) -> float:
        """Wait until no cycle has finished for QUIET_S; when the last one did (monotonic).
        With `since`, wait at least QUIET_S after it too, so a slow first signal is not missed."""
        last_count = await self.count()
        last_change = since if since is not None else time.monotonic()
        while time.monotonic() - last_change < QUIET_S:
            await asyncio.sleep(METRICS_POLL_S)
            count = await self.count()
            if count != last_count:
                last_count, last_change = count, time.monotonic()
        return last_change


def _metrics_url(ready_line: str) -> str:
    found = re.search(r"metrics (http://[^\s,]+)", ready_line)
    if found is None:
        raise RuntimeError(f"no metrics URL in {ready_line!r}")
    return found.group(1)


def compile_bytecode() -> None:
    """Write the project's bytecode, as installing a wheel does. Temporal's sandbox re-imports
    the workflow module for every new workflow; without bytecode (PYTHONDONTWRITEBYTECODE is set
    on this machine and the project is installed editable) each import compiles the source,
    about a tenth of the worker's CPU in a burst. Python still reads bytecode under that flag."""
    root = Path(__file__).resolve().parent.parent
    for package in PACKAGES:
        compileall.compile_dir(root / package, quiet=1)


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    compile_bytecode()
    stack = Stack(workdir, temporal_db=args.temporal_db, server_args=args.server_arg)
    hub: Hub | None = None
    bench: Bench | None = None
    beats: asyncio.Task[None] | None = None
    try:
        stack.start_devhub()
        server = await stack.start_temporal()
        hub = Hub(stack.hub_url, stack.token)
        client = await connect(TemporalTarget(server.target, server.namespace))
        report("config.clusters", args.clusters)
        report("config.placements", args.placements)
        report("config.temporal_db", args.temporal_db)
        if args.server_arg:
            report("config.server_args", "_".join(args.server_arg).replace(" ", ""))
        started = time.monotonic()
        await hub.add_clusters(load.fleet(args.clusters))
        report("setup.clusters_s", time.monotonic() - started)
        bench = Bench(args, stack, hub, client)
        report("config.run_id", bench.run_id)
        await bench.tracker.start()
        beats = asyncio.create_task(bench.heartbeats())
        phases: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("ceiling", bench.ceiling),
            ("queue", bench.queue),
            ("e2e", bench.e2e),
        ]
        for name, phase in phases:
            if name in args.skip:
                continue
            began = time.monotonic()
            # The machine is shared: the load before each phase says how quiet it was.
            report(f"machine.load1.before_{name}", os.getloadavg()[0])
            await phase()
            stack.sample_peaks()
            report(f"phase.{name}_s", time.monotonic() - began)
        if bench.tracker.errors:
            report("tracker.watch_errors", len(bench.tracker.errors))
        return True  # a phase that fails raises
    finally:
        report("machine.load1.end", os.getloadavg()[0])
        if beats is not None:
            beats.cancel()
        stack.sample_peaks()
        if stack.devhub is not None and stack.devhub.peak_mb is not None:
            report("rss.devhub.peak_mb", stack.devhub.peak_mb)
        if stack.temporal_peak_mb is not None:
            report("rss.temporal.peak_mb", stack.temporal_peak_mb)
        report("rss.bench.peak_mb", self_peak_rss_mb())
        if bench is not None:
            await bench.tracker.stop()
        if hub is not None:
            await hub.close()
        await stack.stop_all()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, required=True, metavar="K")
    parser.add_argument("--placements", type=int, required=True, metavar="P")
    parser.add_argument("--steady-rate", type=float, default=10.0, metavar="PER_S")
    parser.add_argument("--steady-seconds", type=float, default=60.0)
    parser.add_argument("--churn", action="store_true",
                        help="policy change of 1,000 placements, then one cluster label change")
    parser.add_argument("--temporal-db", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for `temporal server start-dev` (repeatable), "
                             "e.g. --server-arg=--dynamic-config-value --server-arg=KEY=VALUE")
    parser.add_argument("--processes", type=int, default=0, metavar="N",
                        help="the worker's activity processes (`run --processes N`; default 0: "
                             "activities in the worker process)")
    parser.add_argument("--local-cycles-up-to", type=int, default=None, metavar="CLUSTERS",
                        help="`run --local-cycles-up-to` for the worker and the watcher, to "
                             "force where turns run; the ceiling's turns follow the same word "
                             "(default: none, the workers choose)")
    parser.add_argument("--queue-workers", type=int, default=16,
                        help="workers of the queue baseline (default 16, the worker's "
                             "activity slots)")
    parser.add_argument("--skip", default="", help=f"comma-separated phases to skip: {PHASES}")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds any one wait may take (default 1800)")
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="py-spy the worker, watcher and devhub during the e2e burst")
    args = parser.parse_args(argv)
    args.skip = {s for s in args.skip.split(",") if s}
    unknown = args.skip - set(PHASES)
    if unknown:
        parser.error(f"--skip: unknown phases {sorted(unknown)}; choose from {PHASES}")
    if args.clusters < 1 or args.placements < 1:
        parser.error("--clusters and --placements must be at least 1")
    if args.steady_rate <= 0 or args.steady_seconds <= 0:
        parser.error("--steady-rate and --steady-seconds must be positive")
    return args


def main() -> int:
    args = parse_args()
    return run_bench("e2e", functools.partial(run, args), keep=args.keep)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip finalisation (temporalio/sdk-python#300), as fleet-scheduler does
