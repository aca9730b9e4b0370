"""Capacity bench (issue 15, docs/capacity.md): no overcommit under real concurrency, and how
well the scoring strategies pack.

    python bench/capacity.py [--arms concurrency,packing] [--clusters 20] [--room 800]
                             [--placements 1000] [--processes 2] [--sample-s 0.25]
                             [--timeout 900] [--pack-clusters 50] [--pack-load 0.5]
                             [--seed 7] [--keep]

- concurrency: devhub, the Temporal dev server and one `fleet-scheduler run` (standalone, with
  `--processes` activity processes, so cycles of different placements run in different
  processes at once). K member clusters whose allocatable CPUs add up to exactly --room; then P
  placements (PickN 1, `fleet-scheduler.io/requests: cpu=1`) created at once. An oracle lists
  the bindings and the ledgers every --sample-s seconds throughout and checks, per cluster, that
  the CPUs of its active (Scheduled or Bound) bindings and the sum of its ledger's reservations
  never exceed its allocatable, and that every active binding holds a reservation. Figures: how
  many placements got scheduled and how many report the missing CPU in their condition (goal:
  exactly --room and P - --room), overcommitted samples (goal: 0), time to settle, cycles and
  those that failed and were retried by Temporal (a cycle that loses a race for room decides
  again by itself, up to 20 times, before it fails), the watcher's
  `fleet_scheduler_unschedulable_demand{resource="cpu"}` at the end (goal: P - --room).
- packing: the pure scheduler, no stack. A synthetic fleet (--pack-clusters clusters of 8-64
  CPUs and 32-256 GiB) and demand (placements of 1-3 bindings, 1-8 CPUs and 2-16 GiB each, until
  they ask for --pack-load of the fleet's CPUs), placed one after another, each cycle seeing
  the reservations of those before it (as the ledger makes it), once with MostAllocated and
  once with LeastAllocated. Figures:
  clusters in use, bindings placed and left unplaced for each, and first-fit-decreasing (the
  bindings sorted by size, largest first, each on the first cluster with room, clusters taken
  largest first) as the reference a packer is measured against, and the lower bound (fewest
  clusters whose combined size could hold the demand, per resource).
- compaction (with packing): after each strategy's placing, a random half of the placements is
  deleted and a pack rebalance planned over the rest (scheduler.moves.rebalance, what `rebalance`
  and the Schedule run; applying moves is tested end to end), a third of the placements without a
  disruption budget, a third allowed one disruption, a third none (and again without budgets).
  Figures: clusters in use before and after against the lower bound, moves, budget violations
  (goal: 0).

Prints `name value` lines; an arm that fails prints `<arm>.failed` and the run goes on."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import aiohttp
import e2e_load as load
from e2e import QUIET_S, _metrics_url, compile_bytecode, report
from e2e_load import Hub, each
from e2e_stack import Stack, stop_children_now
from priority import heartbeats, trouble

from hub import names
from hub.types import CapacityLedger, ClusterResourceBinding, ClusterResourcePlacement
from scheduler import CapacityInput, CycleInput, load_profile, schedule
from scheduler.moves.rebalance import Fleet, Movable, plan_moves
from scheduler.room.capacity import format_amount
from scheduler.room.quantity import parse_quantity
from scheduler.testing import apply_plan, member_cluster, policy_snapshot

TASK_QUEUE: Final = "bench-capacity"
READY: Final = r"^fleet-scheduler run: ready in"
LEDGERS_PATH: Final = CapacityLedger.api_path()
BINDINGS_PATH: Final = ClusterResourceBinding.api_path()
PLACEMENTS_PATH: Final = ClusterResourcePlacement.api_path()
SCHEDULED: Final = ClusterResourcePlacement.SCHEDULED_CONDITION
ARMS: Final = ("concurrency", "packing")
SELECTOR: Final = {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}


# --- concurrency -------------------------------------------------------------------------------


def sized_fleet(clusters: int, room: int) -> list[dict[str, Any]]:
    """`clusters` members whose allocatable CPUs add up to exactly `room` (uneven sizes)."""
    rng = random.Random(clusters * 7919 + room)
    weights = [rng.randint(1, 4) for _ in range(clusters)]
    sizes = [room * w // sum(weights) for w in weights]
    for i in range(room - sum(sizes)):  # the rounding's remainder, one CPU each
        sizes[i % clusters] += 1
    now = datetime.now(UTC)
    return [
        member_cluster(
            load.cluster_name(i),
            now,
            allocatable={"cpu": str(size), "memory": "1Ti"},
            heartbeat_age=timedelta(0),
        ).to_wire()
        for i, size in enumerate(sizes)
    ]


def capacity_placement(index: int) -> dict[str, Any]:
    return {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": "ClusterResourcePlacement",
        "metadata": {
            "name": f"cap-{index:05d}",
            "annotations": {names.REQUESTS_ANNOTATION: "cpu=1"},
        },
        "spec": {
            "resourceSelectors": [SELECTOR],
            "policy": {"placementType": "PickN", "numberOfClusters": 1},
        },
    }


@dataclass
class Oracle:
    """Samples the hub throughout: is any cluster ever overcommitted?"""

    hub: Hub
    allocatable: Mapping[str, Fraction]
    samples: int = 0
    overcommitted: int = 0
    unreserved: int = 0
    peak_utilisation: float = 0.0
    peak_bindings: int = 0
    problems: list[str] = field(default_factory=list)

    async def sample(self) -> None:
        bindings = (await self.hub.list(BINDINGS_PATH))["items"]
        ledgers = (await self.hub.list(LEDGERS_PATH))["items"]
        self.samples += 1
        reserved: dict[str, dict[str, Any]] = {
            ledger["metadata"]["name"]: ledger.get("spec", {}).get("reservations", {})
            for ledger in ledgers
        }
        used: dict[str, int] = {}
        active = 0
        bad = False
        for binding in bindings:
            spec = binding["spec"]
            if spec.get("state") == names.STATE_UNSCHEDULED or binding["metadata"].get(
                "deletionTimestamp"
            ):
                continue
            active += 1
            cluster = spec["targetCluster"]
            used[cluster] = used.get(cluster, 0) + 1  # every placement asks for cpu=1
            if binding["metadata"]["name"] not in reserved.get(cluster, {}):
                self.unreserved += 1
                bad = True
                self.problems.append(f"binding {binding['metadata']['name']} has no reservation")
        for cluster, supply in self.allocatable.items():
            held = sum(
                (
                    parse_quantity(r["requests"].get("cpu", "0"))
                    for r in reserved.get(cluster, {}).values()
                ),
                Fraction(0),
            )
            if used.get(cluster, 0) > supply or held > supply:
                bad = True
                self.problems.append(
                    f"{cluster}: {used.get(cluster, 0)} bound, {held} reserved, "
                    f"{supply} allocatable"
                )
            if supply:
                self.peak_utilisation = max(self.peak_utilisation, float(held / supply))
        self.overcommitted += bad
        self.peak_bindings = max(self.peak_bindings, active)

    async def run(self, every: float, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
        await self.sample()  # one more once everything settled


async def outcomes(hub: Hub) -> tuple[int, int, int]:
    """(scheduled, short of room, other) over the bench's placements, from their conditions."""
    scheduled = short = other = 0
    for crp in (await hub.list(PLACEMENTS_PATH))["items"]:
        generation = crp["metadata"].get("generation")
        condition = next(
            (c for c in crp.get("status", {}).get("conditions", []) if c["type"] == SCHEDULED),
            None,
        )
        if condition is None or condition.get("observedGeneration") != generation:
            other += 1
        elif condition["status"] == names.TRUE:
            scheduled += 1
        elif "not enough room" in condition.get("message", ""):
            short += 1
        else:
            other += 1
    return scheduled, short, other


async def metric(
    session: aiohttp.ClientSession, url: str, name: str, having: str = ""
) -> float | None:
    """The sum of the samples whose line starts with `name` and contains `having`."""
    async with session.get(url) as response:
        text = await response.text()
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and having in line
    ]
    return sum(values) if values else None


async def concurrency(args: argparse.Namespace, workdir: Path) -> None:
    logs = workdir / "concurrency"
    logs.mkdir()
    stack = Stack(logs, temporal_db="sqlite", server_args=[])
    hub: Hub | None = None
    beats: asyncio.Task[None] | None = None
    try:
        stack.start_devhub()
        await stack.start_temporal()
        hub = Hub(stack.hub_url, stack.token)
        fleet = sized_fleet(args.clusters, args.room)
        await hub.add_clusters(fleet)
        allocatable = {
            c["metadata"]["name"]: Fraction(c["status"]["resourceUsage"]["allocatable"]["cpu"])
            for c in fleet
        }
        report("concurrency.allocatable_cpu", int(sum(allocatable.values())))
        report("concurrency.smallest_cluster_cpu", int(min(allocatable.values())))
        report("concurrency.largest_cluster_cpu", int(max(allocatable.values())))
        scheduler = stack.scheduler_part(
            "scheduler", TASK_QUEUE, "--processes", str(args.processes)
        ).start(ready=READY)
        url = _metrics_url(scheduler.wait_ready())
        beats = asyncio.create_task(heartbeats(hub, args.clusters))
        oracle = Oracle(hub, allocatable)
        stop = asyncio.Event()
        sampling = asyncio.create_task(oracle.run(args.sample_s, stop))

        began = time.monotonic()
        await each(
            range(args.placements), lambda i: hub.create(PLACEMENTS_PATH, capacity_placement(i))
        )
        report("concurrency.create_s", time.monotonic() - began)
        settled_at = None
        last = (-1, -1, -1)
        stable_since = time.monotonic()
        while time.monotonic() - began < args.timeout:
            await asyncio.sleep(1.0)
            now = await outcomes(hub)
            if now != last:
                last, stable_since = now, time.monotonic()
            scheduled, short, other = now
            if other == 0 and time.monotonic() - stable_since >= QUIET_S:
                settled_at = stable_since
                break
        stop.set()
        await sampling
        scheduled, short, other = last
        report("concurrency.settled", str(settled_at is not None).lower())
        if settled_at is not None:
            report("concurrency.settle_s", settled_at - began)
        report("concurrency.scheduled", scheduled)
        report("concurrency.short_of_room", short)
        report("concurrency.undecided", other)
        report("concurrency.goal.scheduled", min(args.room, args.placements))
        report("concurrency.goal.short_of_room", max(args.placements - args.room, 0))
        report("concurrency.oracle.samples", oracle.samples)
        report("concurrency.oracle.overcommitted_samples", oracle.overcommitted)
        report("concurrency.oracle.bindings_without_reservation", oracle.unreserved)
        report("concurrency.oracle.peak_active_bindings", oracle.peak_bindings)
        report("concurrency.oracle.peak_cluster_utilisation", oracle.peak_utilisation)
        for problem in oracle.problems[:10]:
            print(f"# oracle: {problem}", file=sys.stderr, flush=True)
        async with aiohttp.ClientSession() as session:
            report(
                "concurrency.cycles",
                await metric(session, url, "fleet_scheduler_cycles_total") or 0,
            )
            retried = await metric(session, url, "fleet_scheduler_cycles_total", 'outcome="error"')
            report("concurrency.cycles_failed_retryable", retried or 0)
            demand = await metric(
                session, url, 'fleet_scheduler_unschedulable_demand{resource="cpu"}'
            )
            report(
                "concurrency.metric.unschedulable_demand_cpu",
                demand if demand is not None else "none",
            )
        report("concurrency.scheduler_warnings", trouble(scheduler))
    finally:
        if beats is not None:
            beats.cancel()
        if hub is not None:
            await hub.close()
        await stack.stop_all()


# --- packing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Demand:
    name: str
    bindings: int
    cpu: int
    memory_gi: int


def synthetic(args: argparse.Namespace) -> tuple[list[Any], list[Demand]]:
    rng = random.Random(args.seed)
    now = datetime.now(UTC)
    clusters = [
        member_cluster(
            f"pack-{i:03d}",
            now,
            allocatable={
                "cpu": str(rng.choice([8, 16, 32, 64])),
                "memory": f"{rng.choice([32, 64, 128, 256])}Gi",
            },
            heartbeat_age=timedelta(0),
        )
        for i in range(args.pack_clusters)
    ]
    supply = sum(int(c.status.resource_usage.allocatable["cpu"]) for c in clusters)
    demand: list[Demand] = []
    asked = 0
    while asked < supply * args.pack_load and len(demand) < args.pack_placements:
        item = Demand(
            f"p{len(demand):04d}", rng.randint(1, 3), rng.randint(1, 8), rng.choice([2, 4, 8, 16])
        )
        demand.append(item)
        asked += item.bindings * item.cpu
    return clusters, demand


def lower_bound(clusters: list[Any], demand: list[Demand]) -> int:
    """Fewest clusters that could hold the demand at all: the k largest, per resource."""
    needed = 0
    for resource, asked in (
        ("cpu", sum(d.bindings * d.cpu for d in demand)),
        ("memory", sum(d.bindings * d.memory_gi * 2**30 for d in demand)),
    ):
        sizes = sorted(
            (parse_quantity(c.status.resource_usage.allocatable[resource]) for c in clusters),
            reverse=True,
        )
        total, k = Fraction(0), 0
        while total < asked and k < len(sizes):
            total += sizes[k]
            k += 1
        needed = max(needed, k)
    return needed


@dataclass
class Placed:
    """Where `place_all` put the demand: placement -> its clusters."""

    where: dict[str, list[str]]
    placed: int
    unplaced: int

    def in_use(self) -> int:
        return len({c for cs in self.where.values() for c in cs})


def place_all(clusters: list[Any], demand: list[Demand], strategy: str) -> Placed:
    """Place `demand` in order, each cycle seeing what the ones before it hold."""
    profile = load_profile(
        "pluginConfig:\n  - name: ClusterResourcesFit\n"
        f"    args: {{scoringStrategy: {{type: {strategy}}}}}\n"
    )
    held: dict[str, dict[str, Fraction]] = {}
    where: dict[str, list[str]] = {}
    now = datetime.now(UTC)
    placed = unplaced = 0
    for item in demand:
        snapshot = policy_snapshot(
            item.name, {"placementType": "PickN", "numberOfClusters": item.bindings}, index=1
        )
        allocated = {
            c: {r: format_amount(a) for r, a in amounts.items()} for c, amounts in held.items()
        }
        result = schedule(
            CycleInput(
                snapshot=snapshot,
                clusters=clusters,
                now=now,
                capacity=CapacityInput(
                    requests=f"cpu={item.cpu},memory={item.memory_gi}Gi", allocated=allocated
                ),
            ),
            profile,
        )
        bindings, _ = apply_plan([], snapshot, result.plan)
        for binding in bindings:
            amounts = held.setdefault(binding.spec.target_cluster, {})
            amounts["cpu"] = amounts.get("cpu", Fraction(0)) + item.cpu
            amounts["memory"] = amounts.get("memory", Fraction(0)) + item.memory_gi * 2**30
        where[item.name] = [b.spec.target_cluster for b in bindings]
        placed += len(bindings)
        unplaced += item.bindings - len(bindings)
    return Placed(where, placed, unplaced)


def first_fit_decreasing(clusters: list[Any], demand: list[Demand]) -> tuple[int, int, int]:
    """The reference: bindings largest first, each on the first cluster (largest first) with
    room and without another binding of the same placement."""
    room = sorted(
        (
            [
                parse_quantity(c.status.resource_usage.allocatable["cpu"]),
                parse_quantity(c.status.resource_usage.allocatable["memory"]),
                set(),
            ]
            for c in clusters
        ),
        key=lambda r: (-r[0], -r[1]),
    )
    items = sorted(
        ((d.cpu, d.memory_gi * 2**30, d.name) for d in demand for _ in range(d.bindings)),
        reverse=True,
    )
    used: set[int] = set()
    placed = unplaced = 0
    for cpu, memory, owner in items:
        for index, slot in enumerate(room):
            if slot[0] >= cpu and slot[1] >= memory and owner not in slot[2]:
                slot[0] -= cpu
                slot[1] -= memory
                slot[2].add(owner)
                used.add(index)
                placed += 1
                break
        else:
            unplaced += 1
    return len(used), placed, unplaced


def packing(args: argparse.Namespace) -> None:
    clusters, demand = synthetic(args)
    report("packing.clusters", len(clusters))
    report("packing.placements", len(demand))
    report("packing.bindings_wanted", sum(d.bindings for d in demand))
    supply = sum(int(c.status.resource_usage.allocatable["cpu"]) for c in clusters)
    report("packing.cpu_supply", supply)
    report("packing.cpu_asked", sum(d.bindings * d.cpu for d in demand))
    report("packing.lower_bound.clusters_in_use", lower_bound(clusters, demand))
    results = {
        "most_allocated": place_all(clusters, demand, "MostAllocated"),
        "least_allocated": place_all(clusters, demand, "LeastAllocated"),
    }
    for label, done in results.items():
        report(f"packing.{label}.clusters_in_use", done.in_use())
        report(f"packing.{label}.bindings_placed", done.placed)
        report(f"packing.{label}.bindings_unplaced", done.unplaced)
    in_use, placed, unplaced = first_fit_decreasing(clusters, demand)
    report("packing.first_fit_decreasing.clusters_in_use", in_use)
    report("packing.first_fit_decreasing.bindings_placed", placed)
    report("packing.first_fit_decreasing.bindings_unplaced", unplaced)
    for label, done in results.items():
        compaction(args, clusters, demand, done, f"compaction.after_{label}")


def compaction(
    args: argparse.Namespace, clusters: list[Any], demand: list[Demand], done: Placed, label: str
) -> None:
    """Delete a random half of the placements, then plan a pack rebalance (the planner the
    `rebalance` command and the Schedule run; applying moves is tested end to end) with random
    disruption budgets, and count what it frees and whether any budget is exceeded."""
    rng = random.Random(args.seed + 1)
    kept = [d for d in demand if rng.random() >= 0.5 and done.where.get(d.name)]
    fleet = Fleet(
        {
            c.metadata.name: {
                "cpu": parse_quantity(c.status.resource_usage.allocatable["cpu"]),
                "memory": parse_quantity(c.status.resource_usage.allocatable["memory"]),
            }
            for c in clusters
        },
        {},
    )
    everywhere = frozenset(fleet.allocatable)
    movable: list[Movable] = []
    for item in kept:
        requests = {"cpu": Fraction(item.cpu), "memory": Fraction(item.memory_gi * 2**30)}
        for cluster in done.where[item.name]:
            fleet.add(cluster, requests, +1)
            movable.append(
                Movable(item.name, f"{item.name}@{cluster}", cluster, requests, everywhere)
            )
    # a third without a budget, a third with 1 disruption, a third with none allowed
    budgets: dict[str, int | None] = {d.name: rng.choice([None, 1, 0]) for d in kept}
    began = time.monotonic()
    moves = plan_moves(fleet, movable, budgets, "pack")
    elapsed = time.monotonic() - began
    spent: dict[str, int] = {}
    where = {m.binding: m.cluster for m in movable}
    for move in moves:
        spent[move.placement] = spent.get(move.placement, 0) + 1
        where[move.binding] = move.target
    violations = sum(
        1
        for p, n in spent.items()
        if budgets.get(p) is not None and n > budgets[p]  # type: ignore[operator]
    )
    before = len({m.cluster for m in movable})
    after = len(set(where.values()))
    report(f"{label}.placements_kept", len(kept))
    report(f"{label}.clusters_in_use_before", before)
    report(f"{label}.clusters_in_use_after", after)
    report(f"{label}.lower_bound", lower_bound(clusters, kept))
    report(f"{label}.moves", len(moves))
    report(f"{label}.budget_violations", violations)
    report(f"{label}.plan_s", elapsed)
    free = plan_moves(fleet, movable, {}, "pack")  # the same without any budget
    where = {m.binding: m.cluster for m in movable}
    for move in free:
        where[move.binding] = move.target
    report(f"{label}.no_budgets.clusters_in_use_after", len(set(where.values())))
    report(f"{label}.no_budgets.moves", len(free))


# --- main --------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    compile_bytecode()
    for key in (
        "clusters",
        "room",
        "placements",
        "processes",
        "pack_clusters",
        "pack_placements",
        "seed",
    ):
        report(f"config.{key}", getattr(args, key))
    ok = True
    for arm in ARMS:
        if arm not in args.arms:
            continue
        report(f"machine.load1.before_{arm}", os.getloadavg()[0])
        began = time.monotonic()
        try:
            if arm == "concurrency":
                await concurrency(args, workdir)
            else:
                packing(args)
        except (TimeoutError, RuntimeError, aiohttp.ClientError, OSError) as exc:
            ok = False
            report(f"{arm}.failed", type(exc).__name__)
            print(f"# {arm} failed: {exc}", file=sys.stderr, flush=True)
        report(f"{arm}.arm_s", time.monotonic() - began)
    return ok


async def main_async(args: argparse.Namespace, workdir: Path) -> bool:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    return await run(args, workdir)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--room", type=int, default=800, help="total allocatable CPUs")
    parser.add_argument("--placements", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--sample-s", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--pack-clusters", type=int, default=50)
    parser.add_argument("--pack-placements", type=int, default=1000, help="at most")
    parser.add_argument(
        "--pack-load", type=float, default=0.5, help="CPU asked as a share of the fleet's"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the logs' directory")
    args = parser.parse_args(argv)
    args.arms = {a.strip() for a in args.arms.split(",") if a.strip()}
    unknown = args.arms - set(ARMS)
    if unknown:
        parser.error(f"unknown arm(s) {', '.join(sorted(unknown))}; known: {', '.join(ARMS)}")
    return args


def main() -> int:
    args = parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    try:
        return 0 if asyncio.run(main_async(args, workdir)) else 1
    except asyncio.CancelledError:
        return 130
    finally:
        stop_children_now()
        if args.keep:
            print(f"# logs kept in {workdir}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
