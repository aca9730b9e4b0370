"""Preemption bench (issue 37, docs/priority.md "Preemption"): on a full fleet, how long a
higher-class placement takes to be fully bound, how many victims it takes against the fewest that
would free its room, and whether any cluster is ever above its room meanwhile.

    python bench/preemption.py [--clusters 100] [--cpu 8] [--pick 10] [--repeats 5]
                               [--arms same,mixed] [--processes 2] [--timeout 600]
                               [--wait 120] [--profile DIR] [--keep]

Each arm runs on a stack of its own (bench/e2e_stack.py): devhub, the Temporal dev server
(SQLite) and one `fleet-scheduler run --processes 2` (worker, watcher and snapshotter in one
process, two activity processes), with the default profile (DefaultPreemption on). K member
clusters of --cpu CPUs each (heartbeats kept fresh) and three PriorityClasses: `scavenger` (0),
`batch` (1000) and `urgent` (100000).

- same: the fleet filled by K * cpu / 4 placements PickN-1 `cpu=4` of class `batch` (created
  at once, all bound before anything is measured): two per cluster, every cluster full.
- mixed: victims of two priorities. K placements PickN-1 `cpu=4` of `batch` first (bound),
  then K * (cpu - 4) / 2 placements `cpu=2` of `scavenger` (bound). Created at once, they do
  not spread evenly (cycles running together see the same free clusters): at K=100 the trial
  left 24 clusters with two `batch`, 52 with one `batch` and two `scavenger`, 24 with four
  `scavenger` (each repetition prints its `layout`).

Then, --repeats times: a PickN-(--pick) `cpu=4` placement of class `urgent` is created and the
bench waits until it has --pick active bindings (Scheduled or Bound, not deleting), seen on a
watch of bindings. The fleet is recycled between repetitions, not filled afresh: the urgent
placement is deleted, its room goes back (the watcher wakes the placements short of room), and
the bench waits until every fill placement is bound again and no nomination is left, so each
repetition starts from a full fleet of the same shape.

Figures, per repetition and as min/median/max over them:
- `bound_s`: creation -> the --pick-th active binding of the urgent placement (the target: 5 s);
  `nominated_s`: creation -> its first nomination seen on a CapacityLedger (its own turn
  planned); `released_s`: creation -> the last of its victims seen no longer active.
- `victims_taken`: the bindings named as victims in its nominations or marked
  `fleet-scheduler.io/preempted-by: crp/<it> ...`; `victims_minimum`: the fewest victims that
  would free --pick clusters for it, by exhaustive search per cluster
  (`scheduler.preemption.search.best_victims`) over the fleet as listed just before it was
  created (the --pick clusters with the smallest sets); `victims_kube_order`: the same search
  under kube-scheduler's order (lowest highest-victim priority, then lowest sum of priorities,
  then fewest victims). With victims of one priority the three agree; with two (mixed) the
  reprieve spares the higher priority first, so kube-scheduler's rule (ours) takes two
  `scavenger` bindings where one `batch` binding would have done: taken equals the kube-order
  count, above the plain minimum, by design.
- overcommit, checked at every event of the bindings' and ledgers' watches (every state devhub
  went through, in order), not only at intervals: `max_bound_ratio` (the most any cluster's
  active bindings asked, over its allocatable) and `max_reserved_ratio` (the same for its
  ledger's reservations), goal <= 1; `overcommitted_states`, goal 0.
- `preemptions_metric`: `fleet_scheduler_preemptions_total` at the end of the arm.

--profile DIR: py-spy (`--subprocesses`, 50 Hz) records the scheduler's processes and devhub
during the repetitions; summarise with bench/profile_top.py.

Prints `name value` lines; no figure is asserted. An arm that fails prints `<arm>.failed` and
the run goes on."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import aiohttp
import e2e_load as load
from e2e import _metrics_url, compile_bytecode, report
from e2e_load import GoneError, Hub, each
from e2e_stack import Child, Stack, run_bench
from priority import heartbeats, priority_class, trouble

from hub import names
from hub.types import CapacityLedger, ClusterResourceBinding, ClusterResourcePlacement
from hub.types import PriorityClass as PriorityClassType
from scheduler.preemption.inputs import rooms_from_ledgers
from scheduler.preemption.models import Occupant, Preemptor, Room
from scheduler.preemption.search import best_victims
from scheduler.room.quantity import parse_quantity
from scheduler.testing import member_cluster

TASK_QUEUE: Final = "bench-preemption"
READY: Final = r"^fleet-scheduler run: ready in"
LEDGERS_PATH: Final = CapacityLedger.api_path()
BINDINGS_PATH: Final = ClusterResourceBinding.api_path()
PLACEMENTS_PATH: Final = ClusterResourcePlacement.api_path()
CLASSES_PATH: Final = PriorityClassType.api_path()
CLASSES: Final = {"scavenger": 0, "batch": 1000, "urgent": 100_000}
ARMS: Final = ("same", "mixed")
URGENT_CPU: Final = 4
SELECTOR: Final = {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
# kube-scheduler adds MaxInt32 + 1 to each victim's priority before summing them.
PRIORITY_OFFSET: Final = 2**31
METRIC: Final = "fleet_scheduler_preemptions_total"


def cluster(index: int, cpu: int) -> dict[str, Any]:
    return member_cluster(
        load.cluster_name(index),
        datetime.now(UTC),
        allocatable={"cpu": str(cpu), "memory": "1Ti"},
        heartbeat_age=timedelta(0),
    ).to_wire()


def placement(name: str, pick: int, cpu: int, priority_class_: str) -> dict[str, Any]:
    return {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": "ClusterResourcePlacement",
        "metadata": {
            "name": name,
            "annotations": {
                names.REQUESTS_ANNOTATION: f"cpu={cpu}",
                names.PRIORITY_CLASS_ANNOTATION: priority_class_,
            },
        },
        "spec": {
            "resourceSelectors": [SELECTOR],
            "policy": {"placementType": "PickN", "numberOfClusters": pick},
        },
    }


# --- what the watches saw ----------------------------------------------------------------------


@dataclass
class Seen:
    """One binding as last seen."""

    parent: str
    cluster: str
    active: bool
    mark: str


@dataclass
class FleetWatch:
    """Bindings and ledgers from their watches, checked for overcommit at every event."""

    allocatable: Mapping[str, Fraction]
    cpu_of: dict[str, Fraction] = field(default_factory=dict)
    """Placement name -> the CPUs one of its bindings asks (the bench made them all)."""
    bindings: dict[str, Seen] = field(default_factory=dict)
    reserved: dict[str, Fraction] = field(default_factory=dict)
    nominations: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """Cluster -> preemptor -> the victims' binding names."""
    states: int = 0
    overcommitted: int = 0
    max_bound_ratio: float = 0.0
    max_reserved_ratio: float = 0.0
    problems: list[str] = field(default_factory=list)
    first_nominated: dict[str, float] = field(default_factory=dict)
    named: dict[str, set[str]] = field(default_factory=dict)
    """Preemptor -> every binding any of its nominations named."""
    inactive_at: dict[str, float] = field(default_factory=dict)
    """Binding -> when it was last seen turn inactive."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def on_binding(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        parent = (meta.get("labels") or {}).get(names.PARENT_PLACEMENT_LABEL)
        if parent is None:
            return
        spec = obj.get("spec") or {}
        active = (
            event != "DELETED"
            and spec.get("state") != names.STATE_UNSCHEDULED
            and not meta.get("deletionTimestamp")
        )
        name = meta["name"]
        before = self.bindings.get(name)
        if before is not None and before.active and not active:
            self.inactive_at[name] = time.monotonic()
        mark = (meta.get("annotations") or {}).get(names.PREEMPTED_BY_ANNOTATION, "")
        if event == "DELETED":
            self.bindings.pop(name, None)
        else:
            self.bindings[name] = Seen(parent, spec.get("targetCluster", ""), active, mark)
        self._check_bound(spec.get("targetCluster", ""))
        self.changed.set()

    def on_ledger(self, event: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        spec = {} if event == "DELETED" else obj.get("spec") or {}
        self.reserved[name] = sum(
            (
                parse_quantity(str(r.get("requests", {}).get("cpu", "0")))
                for r in (spec.get("reservations") or {}).values()
            ),
            Fraction(0),
        )
        nominated = {
            preemptor: [v["binding"] for v in n.get("victims") or []]
            for preemptor, n in (spec.get("nominations") or {}).items()
        }
        self.nominations[name] = nominated
        now = time.monotonic()
        for preemptor, victims in nominated.items():
            self.first_nominated.setdefault(preemptor, now)
            self.named.setdefault(preemptor, set()).update(victims)
        self.states += 1
        supply = self.allocatable.get(name)
        if supply:
            ratio = float(self.reserved[name] / supply)
            self.max_reserved_ratio = max(self.max_reserved_ratio, ratio)
            if ratio > 1:
                self.overcommitted += 1
                self.problems.append(f"{name}: {self.reserved[name]} CPUs reserved of {supply}")
        self.changed.set()

    def _check_bound(self, cluster_: str) -> None:
        self.states += 1
        supply = self.allocatable.get(cluster_)
        if not supply:
            return
        used = self.used(cluster_)
        ratio = float(used / supply)
        self.max_bound_ratio = max(self.max_bound_ratio, ratio)
        if ratio > 1:
            self.overcommitted += 1
            self.problems.append(f"{cluster_}: bindings ask {used} CPUs of {supply}")

    def used(self, cluster_: str) -> Fraction:
        return sum(
            (
                self.cpu_of.get(b.parent, Fraction(0))
                for b in self.bindings.values()
                if b.active and b.cluster == cluster_
            ),
            Fraction(0),
        )

    def active_of(self, placement_: str) -> int:
        return sum(1 for b in self.bindings.values() if b.active and b.parent == placement_)

    def any_nomination(self) -> bool:
        return any(self.nominations.values())

    def taken(self, preemptor: str) -> set[str]:
        """Bindings its nominations named, or marked as preempted by it."""
        prefix = f"crp/{preemptor} ("
        marked = {n for n, b in self.bindings.items() if b.mark.startswith(prefix)}
        return self.named.get(preemptor, set()) | marked

    async def until(self, done: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait until `done()` after some event; monotonic time when it was seen true."""
        deadline = time.monotonic() + timeout
        while True:  # bounded by: the deadline
            self.changed.clear()  # before looking, so that no event between is missed
            if done():
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what}: not after {timeout:.0f}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(remaining, 1.0))
        return time.monotonic()


async def watch(hub: Hub, path: str, handler: Callable[[str, dict[str, Any]], None]) -> None:
    """List, then watch from the list's version, forever (relisting when too far behind)."""
    while True:  # bounded by: cancelled when the arm ends
        listed = await hub.list(path)
        for obj in listed.get("items") or []:
            handler("MODIFIED", obj)
        rv = str(listed["metadata"]["resourceVersion"])
        try:
            while True:  # bounded by: cancelled when the arm ends
                rv = await hub.watch(path, rv, handler)
        except GoneError:
            continue
        except (aiohttp.ClientError, TimeoutError) as exc:
            print(f"# watch {path}: {exc!r}", file=sys.stderr, flush=True)
            await asyncio.sleep(load.REWATCH_PAUSE_S)


# --- the minimum, by search --------------------------------------------------------------------


def kube_key(victims: tuple[Occupant, ...]) -> tuple[int, int, int]:
    """kube-scheduler's pickOneNodeForPreemption order, the budgets aside (none here)."""
    priorities = [v.priority for v in victims]
    return (
        max(priorities, default=-(2**31) - 1),
        sum(p + PRIORITY_OFFSET for p in priorities),
        len(priorities),
    )


@dataclass(frozen=True)
class Yardstick:
    minimum: int
    kube_order: int
    candidates: int
    """Clusters where some set of lower-priority bindings frees enough."""


async def yardstick(hub: Hub, preemptor: Preemptor, priorities: Mapping[str, int]) -> Yardstick:
    """The fewest victims that free `preemptor.short` clusters, over the fleet as listed now."""
    clusters = (await hub.list(load.CLUSTERS_PATH))["items"]
    ledgers = {
        ledger.name: ledger
        for ledger in (
            CapacityLedger.from_wire(item) for item in (await hub.list(LEDGERS_PATH))["items"]
        )
    }
    active = {
        b["metadata"]["name"]
        for b in (await hub.list(BINDINGS_PATH))["items"]
        if b["spec"].get("state") != names.STATE_UNSCHEDULED
        and not b["metadata"].get("deletionTimestamp")
    }
    rooms: list[Room] = rooms_from_ledgers(
        ((c["metadata"]["name"], c["status"]["resourceUsage"]["allocatable"]) for c in clusters),
        ledgers,
        active,
        priorities,
    )
    fewest: list[int] = []
    kube: list[tuple[tuple[int, int, int], int]] = []
    for room in rooms:
        smallest = best_victims(preemptor, room)
        if smallest is None:
            continue
        fewest.append(len(smallest))
        ordered = best_victims(preemptor, room, key=kube_key)
        assert ordered is not None
        kube.append((kube_key(ordered), len(ordered)))
    short = preemptor.short
    return Yardstick(
        minimum=sum(sorted(fewest)[:short]),
        kube_order=sum(n for _, n in sorted(kube)[:short]),
        candidates=len(fewest),
    )


# --- an arm ------------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    if not values:
        return "none"
    return f"{min(values):.3f}/{statistics.median(values):.3f}/{max(values):.3f}"


@dataclass
class Arm:
    label: str
    args: argparse.Namespace
    hub: Hub
    fleet: FleetWatch
    fill: dict[str, int] = field(default_factory=dict)
    """Fill placement -> the active bindings it should have."""

    async def create_fill(self, prefix: str, count: int, cpu: int, class_: str) -> None:
        made = [f"{prefix}-{i:04d}" for i in range(count)]
        for name in made:
            self.fleet.cpu_of[name] = Fraction(cpu)
            self.fill[name] = 1
        began = time.monotonic()
        await each(made, lambda n: self.hub.create(PLACEMENTS_PATH, placement(n, 1, cpu, class_)))
        await self.fleet.until(
            lambda: all(self.fleet.active_of(n) == 1 for n in made),
            self.args.timeout,
            f"{self.label}: {prefix} fill bound",
        )
        report(f"{self.label}.fill.{prefix}.placements", count)
        report(f"{self.label}.fill.{prefix}.bound_s", time.monotonic() - began)

    def full(self) -> bool:
        return all(self.fleet.active_of(n) == want for n, want in self.fill.items())

    def layout(self) -> str:
        """How many clusters hold each mix of fill bindings, e.g. `batch+batch:100`."""
        mixes: dict[str, int] = {}
        by_cluster: dict[str, list[str]] = {}
        for seen in self.fleet.bindings.values():
            if seen.active and seen.parent in self.fill:
                by_cluster.setdefault(seen.cluster, []).append(seen.parent.split("-")[0])
        for name in self.fleet.allocatable:
            mix = "+".join(sorted(by_cluster.get(name, []))) or "empty"
            mixes[mix] = mixes.get(mix, 0) + 1
        return ",".join(f"{m}:{n}" for m, n in sorted(mixes.items()))

    async def repeat(self, index: int, figures: dict[str, list[float]]) -> None:
        args, fleet = self.args, self.fleet
        name = f"urgent-r{index}"
        preemptor = Preemptor(
            name, CLASSES["urgent"], {"cpu": Fraction(URGENT_CPU)}, short=args.pick
        )
        priorities = {n: CLASSES[n.split("-")[0]] for n in self.fill}
        yard = await yardstick(self.hub, preemptor, priorities)
        fleet.cpu_of[name] = Fraction(URGENT_CPU)
        prefix = f"{self.label}.r{index}"
        report(f"{prefix}.layout", self.layout())
        began = time.monotonic()
        await self.hub.create(PLACEMENTS_PATH, placement(name, args.pick, URGENT_CPU, "urgent"))
        bound = await fleet.until(
            lambda: fleet.active_of(name) >= args.pick, args.wait, f"{prefix}: urgent bound"
        )
        taken = fleet.taken(name)
        released = max((fleet.inactive_at.get(b, bound) for b in taken), default=bound)
        nominated = fleet.first_nominated.get(name)
        figures["bound_s"].append(bound - began)
        report(f"{prefix}.bound_s", bound - began)
        if nominated is not None:
            figures["nominated_s"].append(nominated - began)
            report(f"{prefix}.nominated_s", nominated - began)
        figures["released_s"].append(released - began)
        report(f"{prefix}.released_s", released - began)
        report(f"{prefix}.victims_taken", len(taken))
        report(f"{prefix}.victims_minimum", yard.minimum)
        report(f"{prefix}.victims_kube_order", yard.kube_order)
        report(f"{prefix}.candidate_clusters", yard.candidates)
        figures["victims_taken"].append(len(taken))
        figures["victims_minimum"].append(yard.minimum)
        figures["victims_kube_order"].append(yard.kube_order)
        if len(taken) > yard.kube_order:
            print(f"# {prefix}: took {len(taken)} > {yard.kube_order}", file=sys.stderr)
        # Recycle: the urgent placement goes, its room returns to the victims.
        began = time.monotonic()
        await self.hub.delete(PLACEMENTS_PATH, name)
        await fleet.until(
            lambda: fleet.active_of(name) == 0 and self.full() and not fleet.any_nomination(),
            args.timeout,
            f"{prefix}: fleet full again",
        )
        report(f"{prefix}.refill_s", time.monotonic() - began)


async def preemptions_metric(url: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(METRIC)
    )


def start_profiles(
    args: argparse.Namespace, stack: Stack, label: str, *parts: Child
) -> list[Child]:
    if args.profile is None:
        return []
    args.profile.mkdir(parents=True, exist_ok=True)
    assert stack.devhub is not None
    spy = str(Path(sys.executable).with_name("py-spy"))
    return [
        stack.spawn(
            f"py-spy-{part.name}",
            [
                spy, "record", "--pid", str(part.pid), "--format", "raw", "--rate", "50",
                "--subprocesses", "--nonblocking", "--gil",
                "--output", str(args.profile / f"{label}-{part.name}.folded"),
            ],
        ).start()
        for part in (*parts, stack.devhub)
    ]  # fmt: skip


async def arm(args: argparse.Namespace, label: str, workdir: Path) -> None:
    logs = workdir / label
    logs.mkdir()
    stack = Stack(logs, temporal_db="sqlite", server_args=[])
    hub: Hub | None = None
    tasks: list[asyncio.Task[None]] = []
    try:
        began = time.monotonic()
        stack.start_devhub()
        await stack.start_temporal()
        hub = Hub(stack.hub_url, stack.token)
        fleet_ = [cluster(i, args.cpu) for i in range(args.clusters)]
        await hub.add_clusters(fleet_)
        for name, value in CLASSES.items():
            await hub.create(CLASSES_PATH, priority_class(name, value))
        scheduler = stack.scheduler_part(
            "scheduler", TASK_QUEUE, "--processes", str(args.processes)
        ).start(ready=READY)
        url = _metrics_url(scheduler.wait_ready())
        watched = FleetWatch({c["metadata"]["name"]: Fraction(args.cpu) for c in fleet_})
        tasks += [
            asyncio.create_task(heartbeats(hub, args.clusters)),
            asyncio.create_task(watch(hub, BINDINGS_PATH, watched.on_binding)),
            asyncio.create_task(watch(hub, LEDGERS_PATH, watched.on_ledger)),
        ]
        report(f"{label}.setup_s", time.monotonic() - began)
        run = Arm(label, args, hub, watched)
        if label == "same":
            await run.create_fill("batch", args.clusters * args.cpu // 4, 4, "batch")
        else:
            await run.create_fill("batch", args.clusters, 4, "batch")
            await run.create_fill("scavenger", args.clusters * (args.cpu - 4) // 2, 2, "scavenger")
        figures: dict[str, list[float]] = {
            k: []
            for k in (
                "bound_s", "nominated_s", "released_s",
                "victims_taken", "victims_minimum", "victims_kube_order",
            )
        }  # fmt: skip
        report(f"machine.load1.before_{label}.repeats", os.getloadavg()[0])
        profilers = start_profiles(args, stack, label, scheduler)
        try:
            for index in range(1, args.repeats + 1):
                await run.repeat(index, figures)
        finally:
            for profiler in profilers:
                profiler.stop(grace=60, sig=signal.SIGINT)  # py-spy writes its file on SIGINT
        for name, values in figures.items():
            report(f"{label}.{name}.min/median/max", spread(values))
        report(f"{label}.target_bound_s", 5)
        report(f"{label}.overcommit.states_checked", watched.states)
        report(f"{label}.overcommit.overcommitted_states", watched.overcommitted)
        report(f"{label}.overcommit.max_bound_ratio", watched.max_bound_ratio)
        report(f"{label}.overcommit.max_reserved_ratio", watched.max_reserved_ratio)
        for problem in watched.problems[:10]:
            print(f"# {label} overcommit: {problem}", file=sys.stderr, flush=True)
        report(f"{label}.preemptions_metric", await preemptions_metric(url))
        report(f"{label}.scheduler_warnings", trouble(scheduler))
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if hub is not None:
            await hub.close()
        await stack.stop_all()


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    compile_bytecode()
    report("config.clusters", args.clusters)
    report("config.cluster_cpu", args.cpu)
    report("config.pick", args.pick)
    report("config.repeats", args.repeats)
    report("config.recycle", "delete the urgent placement; victims rebind; fleet full again")
    report("config.processes", args.processes)
    report("config.scheduler", "standalone")
    report("config.temporal_db", "sqlite")
    ok = True
    for label in ARMS:
        if label not in args.arms:
            continue
        report(f"machine.load1.before_{label}", os.getloadavg()[0])
        began = time.monotonic()
        try:
            await arm(args, label, workdir)
        except (TimeoutError, RuntimeError, aiohttp.ClientError, OSError) as exc:
            ok = False
            report(f"{label}.failed", type(exc).__name__)
            print(f"# {label} failed: {exc}", file=sys.stderr, flush=True)
        report(f"{label}.arm_s", time.monotonic() - began)
    report("machine.load1.end", os.getloadavg()[0])
    return ok


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100, metavar="K")
    parser.add_argument(
        "--cpu",
        type=int,
        default=8,
        help="allocatable CPUs of each cluster, a multiple of 4 (default 8)",
    )
    parser.add_argument(
        "--pick", type=int, default=10, help="numberOfClusters of the urgent placement (default 10)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="urgent placements per arm, one after another (default 5)",
    )
    parser.add_argument(
        "--arms",
        default=",".join(ARMS),
        help=f"comma-separated arms (default all: {','.join(ARMS)})",
    )
    parser.add_argument(
        "--processes", type=int, default=2, metavar="N", help="`run --processes N` (default 2)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds a fill or a refill may take (default 600)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=120.0,
        help="seconds an urgent placement may take to be bound (default 120)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy the scheduler's processes and devhub during the repetitions",
    )
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    args = parser.parse_args(argv)
    args.arms = {a for a in args.arms.split(",") if a}
    unknown = args.arms - set(ARMS)
    if unknown or not args.arms:
        parser.error(f"--arms: unknown or none {sorted(unknown)}; choose from {ARMS}")
    if min(args.clusters, args.pick, args.repeats) < 1 or args.pick > args.clusters:
        parser.error("--clusters, --pick, --repeats: at least 1, and --pick <= --clusters")
    if args.cpu < 8 or args.cpu % 4:
        parser.error("--cpu: a multiple of 4, at least 8 (the mixed arm needs room for cpu=2s)")
    return args


def main() -> int:
    args = parse_args()
    return run_bench("preemption", functools.partial(run, args), keep=args.keep)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip finalisation (temporalio/sdk-python#300), as fleet-scheduler does
