"""Priority bench: what placement priorities and tenant fairness buy a placement that arrives
behind a backlog, and what priority ordering costs a plain burst, every arm in one run.

    python bench/priority.py [--clusters 100] [--backlog 5000] [--high 50] [--tenant-b 100]
                             [--tenant-b-rate 2.0] [--burst 1000] [--pairs 2] [--processes 2]
                             [--arms backlog.priority,backlog.fifo,...] [--timeout S] [--keep]

Every arm runs on a stack of its own, started afresh and stopped after it (bench/e2e_stack.py):
devhub, the Temporal dev server (SQLite; `matching.enableFairness=true` for tenants.fair only)
and one `fleet-scheduler run` (worker and watcher in one process, standalone mode: our
snapshotter makes the policy snapshots; `--processes 2` activity processes, as the e2e matrix
runs, each with the arm's `--config`). No arm inherits another's history, backlog or caches.
Each puts K member clusters in devhub (bench/e2e_load.py's fleet, heartbeats kept fresh) and the
PriorityClasses `low` (-10) and `high` (1000), so every arm's watcher watches the same classes.

Placements are PickN 1 without affinity or spread: one binding each, a cycle over K clusters
costs milliseconds, so the figures are about queueing, not cycles. "Scheduled" is e2e.py's:
the placement's Scheduled condition True for its generation, seen on a watch.

- backlog.priority / backlog.fifo: B placements annotated `low` created at once (16 in flight,
  as e2e.py's burst), then, as soon as the last is created, H annotated `high`. Figures: the high
  ones' created -> scheduled p50/p99/max, the backlog still unscheduled when the high ones
  started and when the last high one was scheduled, the backlog's drain time (first create ->
  last scheduled). priority: the default profile (low -> key 4, high -> key 2); fifo: a
  PrioritySort with one band and no fan-out demotion (every turn key 3: as before priorities).
  backlog.priority.one_partition: priority with one task-queue partition; .window: priority
  with the watcher's admission window (`run --admission-window 16`; off by default); .auto:
  priority with the window sized from the drain rate (`run --admission-window auto`).
- tenants.fair / tenants.unfair: tenant A creates B placements at once (label
  `fleet-scheduler.io/tenant: a`) while tenant B creates --tenant-b at --tenant-b-rate per
  second (`tenant: b`), starting together. Figures: B's created -> scheduled p50/p99/max, A's
  drain time, A's placements still unscheduled when B's last one was scheduled. fair: a profile
  with PrioritySort's fairness on and the server's fairness on; unfair: the default profile,
  server fairness off; fair.window: fair with the admission window (16); fair.auto: fair with
  the automatic window.
- burst.default / burst.fifo / burst.auto: --burst plain placements (no annotation, no label)
  created at once; placements/s as e2e.py computes it (P / first create -> last scheduled).
  Alternated --pairs times, each on a fresh stack; `burst.ratio.fifo_over_default` and
  `burst.ratio.auto_over_default` are ratios of the means. Plain placements get key 3 under
  every profile: fifo differs from default only in the ordering code, auto only in the window
  (`run --admission-window auto`; burst.default has `run`'s default, config.run_admission_window).

An arm with a window on also reports what the watcher's /metrics said of it, sampled every
second while it measured: `<arm>.admission.window_min/_max/_last` and `.drain_rate_last`.

Prints `name value` lines (the machine's load before each arm, the config, each arm's figures,
the ratios last). An arm that fails prints `<arm>.failed` and the run goes on to the next."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import e2e_load as load
from e2e import (
    HEARTBEAT_ROUND_S,
    HEARTBEAT_TICK_S,
    QUIET_S,
    Cycles,
    _metrics_url,
    compile_bytecode,
    percentile,
    report,
)
from e2e_load import Hub, Tracker, each
from e2e_stack import Child, Stack, run_bench

from control.config import (
    ADMISSION_AUTO,
    DEFAULT_ADMISSION_WINDOW,
    AdmissionWindowSetting,
    parse_admission_window,
)
from hub.names import DEFAULT_TENANT_LABEL, PRIORITY_CLASS_ANNOTATION
from hub.types import ClusterResourcePlacement, PriorityClass
from workers.devserver import FAIRNESS_DYNAMIC_CONFIG

TASK_QUEUE: Final = "bench-priority"
READY: Final = r"^fleet-scheduler run: ready in"
PRIORITY_CLASSES_PATH: Final = PriorityClass.api_path()
PRIORITY_CLASSES: Final = {"low": -10, "high": 1000}
TENANT_A: Final = "a"
TENANT_B: Final = "b"
# Profiles by name; None is the built-in default profile (no --config).
PROFILES: Final[Mapping[str, str]] = {
    "fifo": (
        "name: fifo\n"
        "pluginConfig:\n"
        "  - name: PrioritySort\n"
        "    args: {bands: [{minValue: -2147483648, priorityKey: 3}], fanOutDemotion: 0}\n"
    ),
    "fair": (
        "name: fair\n"
        "pluginConfig:\n"
        "  - name: PrioritySort\n"
        "    args: {fairness: {enabled: true, weights: {}}}\n"
    ),
}
FAIRNESS_SERVER_ARGS: Final = ("--dynamic-config-value", f"{FAIRNESS_DYNAMIC_CONFIG}=true")
# The server's task-queue partition counts (docs/priority.md: the caveat).
PARTITION_SETTINGS: Final = (
    "matching.numTaskqueueReadPartitions",
    "matching.numTaskqueueWritePartitions",
)
# The admission window of the .window arms (docs/priority.md, "Admission").
WINDOW: Final = 16
# The watcher's gauges of its admission window, and how often an arm samples them.
WINDOW_METRIC: Final = "fleet_scheduler_admission_window"
DRAIN_RATE_METRIC: Final = "fleet_scheduler_admission_drain_rate"
GAUGE_SAMPLE_S: Final = 1.0
# A scheduler log line worth a look (it logs at WARNING; its children prefix their lines).
TROUBLE: Final = re.compile(r"WARNING|ERROR|CRITICAL|Traceback")


def admission_window(setup: Setup, args: argparse.Namespace) -> AdmissionWindowSetting | None:
    """The arm's `run --admission-window` (None: run's default)."""
    return setup.admission_window if setup.admission_window is not None else args.admission_window


@dataclass(frozen=True)
class Setup:
    """What an arm runs: its profile (None: the default), whether the server is fair, the
    task queues' partitions (None: the server's default, several; priority holds within one)
    and the watcher's admission window (None: --admission-window, else `run`'s default)."""

    profile: str | None
    server_fairness: bool = False
    partitions: int | None = None
    admission_window: AdmissionWindowSetting | None = None


SETUPS: Final[Mapping[str, Setup]] = {
    "backlog.priority": Setup(None),
    "backlog.fifo": Setup("fifo"),
    "backlog.priority.one_partition": Setup(None, partitions=1),
    "backlog.priority.window": Setup(None, admission_window=WINDOW),
    "backlog.priority.auto": Setup(None, admission_window=ADMISSION_AUTO),
    "tenants.fair": Setup("fair", server_fairness=True),
    "tenants.fair.window": Setup("fair", server_fairness=True, admission_window=WINDOW),
    "tenants.fair.auto": Setup("fair", server_fairness=True, admission_window=ADMISSION_AUTO),
    "tenants.unfair": Setup(None),
    "burst.default": Setup(None),
    "burst.fifo": Setup("fifo"),
    "burst.auto": Setup(None, admission_window=ADMISSION_AUTO),
}
ARMS: Final = tuple(SETUPS)


def placement(
    name: str, *, labels: Mapping[str, str] | None = None, priority_class: str | None = None
) -> dict[str, Any]:
    """A PickN 1 placement with no affinity: the cheapest cycle that still picks a cluster."""
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    if priority_class is not None:
        metadata["annotations"] = {PRIORITY_CLASS_ANNOTATION: priority_class}
    return {
        "apiVersion": f"{ClusterResourcePlacement.GROUP}/{ClusterResourcePlacement.VERSION}",
        "kind": ClusterResourcePlacement.KIND,
        "metadata": metadata,
        "spec": {
            "resourceSelectors": [
                {"group": "", "version": "v1", "kind": "Namespace", "name": name}
            ],
            "policy": {"placementType": "PickN", "numberOfClusters": 1},
        },
    }


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{PriorityClass.GROUP}/{PriorityClass.VERSION}",
        "kind": PriorityClass.KIND,
        "metadata": {"name": name},
        "value": value,
    }


class WindowGauges:
    """The watcher's admission window size and drain rate, from its /metrics."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self._session = session
        self._url = url
        self.windows: list[float] = []
        self.rate: float | None = None

    async def sample(self) -> None:
        async with self._session.get(self._url) as response:
            response.raise_for_status()
            text = await response.text()
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == WINDOW_METRIC:
                self.windows.append(float(value))
            elif name == DRAIN_RATE_METRIC:
                self.rate = float(value)

    async def sample_forever(self) -> None:
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                await self.sample()
            await asyncio.sleep(GAUGE_SAMPLE_S)

    def report(self, label: str) -> None:
        """Only where a window was on: a window of 0 throughout says nothing."""
        if not any(self.windows):
            return
        report(f"{label}.admission.window_min", min(self.windows))
        report(f"{label}.admission.window_max", max(self.windows))
        report(f"{label}.admission.window_last", self.windows[-1])
        if self.rate is not None:
            report(f"{label}.admission.drain_rate_last", self.rate)


@dataclass
class Arm:
    """One arm's fresh stack, as its measurement sees it."""

    label: str
    args: argparse.Namespace
    hub: Hub
    tracker: Tracker
    scheduler: Child
    cycles: Cycles
    gauges: WindowGauges
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))

    def names(self, group: str, count: int) -> list[str]:
        return [f"p{self.run_id}-{group}-{i:05d}" for i in range(count)]

    async def create(
        self, names_: list[str], make: Callable[[str], dict[str, Any]]
    ) -> dict[str, float]:
        """Create them all at once (WRITE_CONCURRENCY in flight); when each create was sent."""
        sent: dict[str, float] = {}

        async def create(name: str) -> None:
            sent[name] = time.monotonic()
            await self.hub.create(load.PLACEMENTS_PATH, make(name))

        await each(names_, create)
        return sent

    async def create_paced(
        self, names_: list[str], rate: float, make: Callable[[str], dict[str, Any]]
    ) -> dict[str, float]:
        """Create one every 1/rate seconds, each on time even when the hub is slow to answer."""
        sent: dict[str, float] = {}
        tasks = []
        started = time.monotonic()
        for index, name in enumerate(names_):
            await asyncio.sleep(max(0.0, started + index / rate - time.monotonic()))
            sent[name] = time.monotonic()
            tasks.append(asyncio.create_task(self.hub.create(load.PLACEMENTS_PATH, make(name))))
        await asyncio.gather(*tasks)
        return sent

    async def wait_scheduled(self, names_: list[str], what: str) -> None:
        await self.tracker.wait(
            lambda n: self.tracker.scheduled_at(n) is not None,
            names_,
            self.args.timeout,
            f"{self.label}: {what}",
        )

    def scheduled(self, name: str) -> float:
        at = self.tracker.scheduled_at(name)
        assert at is not None, name
        return at

    def unscheduled_at(self, names_: list[str], moment: float) -> int:
        """How many of `names_` were not yet seen scheduled at `moment` (monotonic)."""
        return sum(1 for n in names_ if (at := self.tracker.scheduled_at(n)) is None or at > moment)

    def latencies(self, created: Mapping[str, float]) -> list[float]:
        return [self.scheduled(n) - at for n, at in created.items()]

    def report_latencies(self, prefix: str, values: list[float]) -> None:
        report(f"{prefix}.p50_s", percentile(values, 0.50))
        report(f"{prefix}.p99_s", percentile(values, 0.99))
        report(f"{prefix}.max_s", max(values))


class Results:
    """The figures the closing ratios are made of, by name."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)

    def mean(self, name: str) -> float | None:
        found = self.values.get(name)
        return sum(found) / len(found) if found else None

    def ratio(self, name: str, top: str, bottom: str) -> None:
        upper, lower = self.mean(top), self.mean(bottom)
        if upper is not None and lower:
            report(name, upper / lower)


# --- the arms -------------------------------------------------------------------------------


async def backlog(arm: Arm, results: Results) -> None:
    low = arm.names("low", arm.args.backlog)
    high = arm.names("high", arm.args.high)
    low_created = await arm.create(low, lambda n: placement(n, priority_class="low"))
    highs_began = time.monotonic()
    report(f"{arm.label}.backlog.create_s", highs_began - min(low_created.values()))
    report(f"{arm.label}.backlog_left_at_high_start", arm.unscheduled_at(low, highs_began))
    high_created = await arm.create(high, lambda n: placement(n, priority_class="high"))
    report(f"{arm.label}.high.create_s", time.monotonic() - highs_began)
    await arm.wait_scheduled(high, "high placements")
    last_high = max(arm.scheduled(n) for n in high)
    to_scheduled = arm.latencies(high_created)
    arm.report_latencies(f"{arm.label}.high", to_scheduled)
    results.add(f"{arm.label}.high.p50_s", percentile(to_scheduled, 0.50))
    results.add(f"{arm.label}.high.p99_s", percentile(to_scheduled, 0.99))
    await arm.wait_scheduled(low, "backlog")
    report(f"{arm.label}.backlog_left_at_last_high", arm.unscheduled_at(low, last_high))
    drained = max(arm.scheduled(n) for n in low) - min(low_created.values())
    report(f"{arm.label}.backlog.drain_s", drained)
    report(f"{arm.label}.backlog.p50_s", percentile(arm.latencies(low_created), 0.50))


async def tenants(arm: Arm, results: Results) -> None:
    a_names = arm.names("a", arm.args.backlog)
    b_names = arm.names("b", arm.args.tenant_b)
    a_task = asyncio.create_task(
        arm.create(a_names, lambda n: placement(n, labels={DEFAULT_TENANT_LABEL: TENANT_A}))
    )
    await asyncio.sleep(0)  # A's first creates are on their way before B's first
    b_created = await arm.create_paced(
        b_names,
        arm.args.tenant_b_rate,
        lambda n: placement(n, labels={DEFAULT_TENANT_LABEL: TENANT_B}),
    )
    a_created = await a_task
    report(f"{arm.label}.a.create_s", max(a_created.values()) - min(a_created.values()))
    report(f"{arm.label}.b.create_s", max(b_created.values()) - min(b_created.values()))
    await arm.wait_scheduled(b_names, "tenant B")
    last_b = max(arm.scheduled(n) for n in b_names)
    to_scheduled = arm.latencies(b_created)
    arm.report_latencies(f"{arm.label}.b", to_scheduled)
    results.add(f"{arm.label}.b.p50_s", percentile(to_scheduled, 0.50))
    await arm.wait_scheduled(a_names, "tenant A")
    report(f"{arm.label}.a_left_at_last_b", arm.unscheduled_at(a_names, last_b))
    drained = max(arm.scheduled(n) for n in a_names) - min(a_created.values())
    report(f"{arm.label}.a.drain_s", drained)
    report(f"{arm.label}.a.p50_s", percentile(arm.latencies(a_created), 0.50))


async def burst(arm: Arm, results: Results) -> None:
    names_ = arm.names("e", arm.args.burst)
    created = await arm.create(names_, placement)
    started = min(created.values())
    report(f"{arm.label}.create_s", time.monotonic() - started)
    await arm.wait_scheduled(names_, "burst")
    elapsed = max(arm.scheduled(n) for n in names_) - started
    rate = len(names_) / elapsed
    report(f"{arm.label}.burst_s", elapsed)
    report(f"{arm.label}.placements_per_s", rate)
    # Rounds share one name for the closing mean: burst.default.r2 counts as burst.default.
    results.add(f"{arm.label.rsplit('.r', 1)[0]}.placements_per_s", rate)


MEASURES: Final[Mapping[str, Callable[[Arm, Results], Awaitable[None]]]] = {
    "backlog": backlog,
    "tenants": tenants,
    "burst": burst,
}


# --- a fresh stack per arm ------------------------------------------------------------------


async def heartbeats(hub: Hub, clusters: int) -> None:
    """What the member agents do: each cluster's heartbeat refreshed every HEARTBEAT_ROUND_S."""
    members = [load.cluster_name(i) for i in range(clusters)]
    per_tick = max(1, round(len(members) * HEARTBEAT_TICK_S / HEARTBEAT_ROUND_S))
    position = 0
    while True:
        await asyncio.sleep(HEARTBEAT_TICK_S)
        await hub.refresh_heartbeats(
            [members[(position + i) % len(members)] for i in range(per_tick)]
        )
        position = (position + per_tick) % len(members)


@contextlib.asynccontextmanager
async def fresh_stack(
    args: argparse.Namespace, label: str, setup: Setup, workdir: Path
) -> AsyncIterator[Arm]:
    """devhub, Temporal and `fleet-scheduler run` for one arm; all stopped on the way out."""
    logs = workdir / label
    logs.mkdir()
    server_args = list(FAIRNESS_SERVER_ARGS) if setup.server_fairness else []
    if setup.partitions is not None:
        for setting in PARTITION_SETTINGS:
            server_args += ["--dynamic-config-value", f"{setting}={setup.partitions}"]
    stack = Stack(logs, temporal_db="sqlite", server_args=server_args)
    hub: Hub | None = None
    tracker: Tracker | None = None
    beats: asyncio.Task[None] | None = None
    try:
        began = time.monotonic()
        stack.start_devhub()
        await stack.start_temporal()
        hub = Hub(stack.hub_url, stack.token)
        await hub.add_clusters(load.fleet(args.clusters))
        for name, value in PRIORITY_CLASSES.items():
            await hub.create(PRIORITY_CLASSES_PATH, priority_class(name, value))
        flags = ["--processes", str(args.processes)]
        window = admission_window(setup, args)
        if window is not None:
            flags += ["--admission-window", str(window)]
        if setup.profile is not None:
            profile = workdir / f"{setup.profile}.yaml"
            profile.write_text(PROFILES[setup.profile])
            flags += ["--config", str(profile)]
        scheduler = stack.scheduler_part("scheduler", TASK_QUEUE, *flags).start(ready=READY)
        url = _metrics_url(scheduler.wait_ready())
        tracker = Tracker(hub)
        await tracker.start()
        beats = asyncio.create_task(heartbeats(hub, args.clusters))
        async with aiohttp.ClientSession() as session:
            await _say_if_not_ready(session, url, label)
            report(f"{label}.setup_s", time.monotonic() - began)
            gauges = WindowGauges(session, url)
            yield Arm(label, args, hub, tracker, scheduler, Cycles(session, url), gauges)
    finally:
        if beats is not None:
            beats.cancel()
        if tracker is not None:
            await tracker.stop()
            if tracker.errors:
                report(f"{label}.tracker.watch_errors", len(tracker.errors))
        if hub is not None:
            await hub.close()
        await stack.stop_all()


async def _say_if_not_ready(session: aiohttp.ClientSession, metrics: str, label: str) -> None:
    """/readyz names a PriorityClass watch that failed (placements then all get the default
    priority, which would make the arms alike): say so beside the figures."""
    async with session.get(metrics.rsplit("/", 1)[0] + "/readyz") as response:
        text = (await response.text()).strip()
    if response.status != 200 or "default priorities" in text:
        print(f"# {label}: /readyz {response.status} {text}", file=sys.stderr, flush=True)


def trouble(child: Child) -> int:
    """How many of the child's log lines are warnings or worse."""
    try:
        lines = child.log_path.read_text().splitlines()
    except OSError:
        return 0
    return sum(1 for line in lines if TROUBLE.search(line))


def schedule(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(label, arm) in running order: the backlog and tenant arms once each, then the burst arms
    alternated --pairs times (labels burst.default.r1, burst.fifo.r1, ...)."""
    order = [(arm, arm) for arm in ARMS if arm in args.arms and not arm.startswith("burst.")]
    for round_ in range(1, args.pairs + 1):
        for arm in ARMS:
            if arm in args.arms and arm.startswith("burst."):
                order.append((f"{arm}.r{round_}", arm))
    return order


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    compile_bytecode()
    report("config.clusters", args.clusters)
    report("config.backlog", args.backlog)
    report("config.high", args.high)
    report("config.tenant_b", args.tenant_b)
    report("config.tenant_b_rate", args.tenant_b_rate)
    report("config.burst", args.burst)
    report("config.pairs", args.pairs)
    report("config.processes", args.processes)
    report("config.run_admission_window", DEFAULT_ADMISSION_WINDOW)  # burst.default's
    report("config.scheduler", "standalone")  # one `run`: worker, watcher, snapshotter
    report("config.policy", "PickN-1")
    report("config.temporal_db", "sqlite")
    report("config.arms", ",".join(a for a in ARMS if a in args.arms))
    results = Results()
    ok = True
    for label, arm in schedule(args):
        setup = SETUPS[arm]
        # The machine is shared: the load before each arm says how quiet it was.
        report(f"machine.load1.before_{label}", os.getloadavg()[0])
        report(f"{label}.profile", setup.profile or "default")
        report(f"{label}.server_fairness", str(setup.server_fairness).lower())
        report(f"{label}.partitions", setup.partitions or "default")
        window = admission_window(setup, args)
        report(f"{label}.admission_window", "default" if window is None else window)
        began = time.monotonic()
        try:
            async with fresh_stack(args, label, setup, workdir) as stack:
                before = await stack.cycles.count()
                sampler = asyncio.create_task(stack.gauges.sample_forever())
                try:
                    await MEASURES[arm.split(".")[0]](stack, results)
                finally:
                    sampler.cancel()
                stack.gauges.report(label)
                await asyncio.sleep(QUIET_S)
                report(f"{label}.cycles", await stack.cycles.count() - before)
                report(f"{label}.scheduler_warnings", trouble(stack.scheduler))
        except (TimeoutError, RuntimeError, aiohttp.ClientError, OSError) as exc:
            ok = False
            report(f"{label}.failed", type(exc).__name__)
            print(f"# {label} failed: {exc}", file=sys.stderr, flush=True)
        report(f"{label}.arm_s", time.monotonic() - began)
    results.ratio(
        "backlog.ratio.high_p50_fifo_over_priority",
        "backlog.fifo.high.p50_s",
        "backlog.priority.high.p50_s",
    )
    results.ratio(
        "backlog.ratio.high_p99_default_partitions_over_one",
        "backlog.priority.high.p99_s",
        "backlog.priority.one_partition.high.p99_s",
    )
    results.ratio(
        "backlog.ratio.high_p99_no_window_over_window",
        "backlog.priority.high.p99_s",
        "backlog.priority.window.high.p99_s",
    )
    results.ratio(
        "backlog.ratio.high_p99_no_window_over_auto",
        "backlog.priority.high.p99_s",
        "backlog.priority.auto.high.p99_s",
    )
    results.ratio(
        "tenants.ratio.b_p50_unfair_over_fair", "tenants.unfair.b.p50_s", "tenants.fair.b.p50_s"
    )
    results.ratio(
        "tenants.ratio.b_p99_no_window_over_window",
        "tenants.fair.b.p99_s",
        "tenants.fair.window.b.p99_s",
    )
    results.ratio(
        "tenants.ratio.b_p99_no_window_over_auto",
        "tenants.fair.b.p99_s",
        "tenants.fair.auto.b.p99_s",
    )
    for name in ("burst.default", "burst.fifo", "burst.auto"):
        mean = results.mean(f"{name}.placements_per_s")
        if mean is not None:
            report(f"{name}.placements_per_s", mean)
    results.ratio(
        "burst.ratio.fifo_over_default",
        "burst.fifo.placements_per_s",
        "burst.default.placements_per_s",
    )
    # The second goal of an automatic window: at least 0.95 (no more than 5% of the rate lost).
    results.ratio(
        "burst.ratio.auto_over_default",
        "burst.auto.placements_per_s",
        "burst.default.placements_per_s",
    )
    report("machine.load1.end", os.getloadavg()[0])
    return ok


def _admission_window(value: str) -> AdmissionWindowSetting:
    try:
        window = parse_admission_window(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if window != ADMISSION_AUTO and window < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value!r}")
    return window


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100, metavar="K")
    parser.add_argument("--backlog", type=int, default=5000, metavar="B",
                        help="the low-priority backlog, and tenant A's placements (default 5000)")
    parser.add_argument("--high", type=int, default=50, metavar="H",
                        help="high-priority placements created behind the backlog (default 50)")
    parser.add_argument("--tenant-b", type=int, default=100, metavar="N",
                        help="tenant B's placements (default 100)")
    parser.add_argument("--tenant-b-rate", type=float, default=2.0, metavar="PER_S",
                        help="tenant B's creates per second (default 2)")
    parser.add_argument("--burst", type=int, default=1000, metavar="P",
                        help="placements of each burst arm (default 1000)")
    parser.add_argument("--pairs", type=int, default=2,
                        help="rounds of the burst arms, alternated (default 2)")
    parser.add_argument("--arms", default=",".join(ARMS),
                        help=f"comma-separated arms to run (default all: {','.join(ARMS)})")
    parser.add_argument("--processes", type=int, default=2, metavar="N",
                        help="`run --processes N`: activity processes (default 2, as the e2e "
                             "matrix)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds any one wait may take (default 1800)")
    parser.add_argument("--admission-window", type=_admission_window, default=None,
                        metavar="auto|off|N",
                        help="`run --admission-window` for the arms that do not set their own "
                             "(default: run's default)")
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    args = parser.parse_args(argv)
    args.arms = {a for a in args.arms.split(",") if a}
    unknown = args.arms - set(ARMS)
    if unknown or not args.arms:
        parser.error(f"--arms: unknown or none {sorted(unknown)}; choose from {ARMS}")
    sizes = (args.clusters, args.backlog, args.high, args.tenant_b, args.burst, args.pairs)
    if min(sizes) < 1:
        parser.error("--clusters, --backlog, --high, --tenant-b, --burst, --pairs: at least 1")
    if args.tenant_b_rate <= 0 or args.processes < 0:
        parser.error("--tenant-b-rate must be positive and --processes 0 or more")
    return args


def main() -> int:
    args = parse_args()
    return run_bench('priority', functools.partial(run, args), keep=args.keep)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip finalisation (temporalio/sdk-python#300), as fleet-scheduler does
