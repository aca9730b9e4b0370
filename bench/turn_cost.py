"""CPU per turn, per process: what one scheduling turn costs the whole stack at 1,000 clusters.

    python bench/turn_cost.py [--clusters 1000] [--placements 300] [--turns 400 | --seconds S]
        [--editors 50] [--pick-n 10] [--profile DIR] [--temporal-db sqlite|memory]
        [--scheduler-flag=--FLAG=VALUE ...] [--worker-flag=...] [--watcher-flag=...] [--keep]

The stack is bench/kubefleet_report.py's, started by its own code: devhub, the Temporal dev
server, the worker (`run --components workflows,activities --processes 2`), the watcher
(`run --components watcher`), K clusters of bench/e2e_load.py's fleet with their heartbeats
kept fresh, and P placements of KubeFleet's mix (`e2e_load.region_env_placement`; the report's
1,000 with `--placements 1000`, a few hundred by default so the stack is set up in about a
minute). Once every placement is scheduled and no cycle has run for a while, the bench

1. measures the stack idle for --idle-s seconds (heartbeats, the watcher's and the worker's own
   timers): `idle.<process>_ms_per_s`;
2. drives turns as the report's churn does (`kubefleet_report.churn_edit`: --editors
   placements, each edited again as soon as its previous edit is fully scheduled) until
   --turns edits are out (or --seconds have passed), waits until every edit is scheduled and
   no cycle has run for 3 s, and prints, per process, the CPU (bench/e2e_stack.cpu_seconds)
   it used over that window divided by the cycles the worker counted in it (its
   fleet_scheduler_cycles_total, as the report's Cycles reads it):
   `turn.<process>_ms` for devhub, temporal, worker (the workflow worker), worker.1 ..
   (its activity processes), watcher, and `turn.total_ms` (the bench itself not counted);
   `turn.<process>_net_ms` subtracts the idle rate over the same window.

Every figure is CPU time, not wall time, so a busy machine bends it little (contention still
costs some cache and lock time). `--profile DIR` records each Python process (the worker, its
activity processes, the watcher, devhub) with py-spy during step 2 only: summarise a file with
`python bench/profile_top.py DIR/worker.folded`."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import signal
import sys
import time
from pathlib import Path
from typing import Final

import e2e_load as load
from e2e import _metrics_url, compile_bytecode, report
from e2e_stack import Child, Stack, run_bench
from kubefleet_report import (
    Deployment,
    check_fleet,
    churn_edit,
    git_commit,
    part_flags,
    setup,
    start_deployment,
    stop_deployment,
)
from priority import heartbeats

# Processes whose CPU counts towards a turn; the bench's own does not.
OWN: Final = "bench"
BINDING_WRITES_METRIC: Final = "fleet_scheduler_binding_writes_total"
PROFILE_RATE: Final = "100"


def start_profiles(d: Deployment, directory: Path) -> list[Child]:
    """py-spy record of every Python process of the stack (not Temporal, a Go binary)."""
    directory.mkdir(parents=True, exist_ok=True)
    assert d.stack.devhub is not None
    pids = {"devhub": d.stack.devhub.pid, "watcher": d.watcher.pid, "worker": d.worker.pid}
    pids.update(d.worker.descendants())
    profilers = []
    for name, pid in pids.items():
        argv = [
            str(Path(sys.executable).with_name("py-spy")), "record",
            "--pid", str(pid), "--format", "raw", "--rate", PROFILE_RATE,
            "--nonblocking", "--gil", "--output", str(directory / f"{name}.folded"),
        ]  # fmt: skip
        profilers.append(d.stack.spawn(f"py-spy-{name}", argv).start())
    return profilers


def cpu(d: Deployment) -> dict[str, float]:
    used = d.stack.cpu(d.worker, d.watcher)
    used.pop(OWN, None)
    return used


def per_unit(
    prefix: str, before: dict[str, float], after: dict[str, float], units: float, suffix: str
) -> dict[str, float]:
    """Each process's CPU milliseconds between the two readings, per unit, and the total."""
    figures = {name: 1000 * (after[name] - before.get(name, 0.0)) / units for name in sorted(after)}
    for name, value in figures.items():
        report(f"{prefix}.{name}_{suffix}", value)
    report(f"{prefix}.total_{suffix}", sum(figures.values()))
    return figures


async def binding_writes(d: Deployment) -> dict[str, float]:
    """The worker's binding writes so far, by operation (its /metrics, children included)."""
    async with d.session.get(_metrics_url(d.worker.ready_line)) as response:
        response.raise_for_status()
        text = await response.text()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(BINDING_WRITES_METRIC + "{"):
            operation = line.split('operation="', 1)[1].split('"', 1)[0]
            found[operation] = found.get(operation, 0.0) + float(line.rsplit(" ", 1)[1])
    return found


async def idle(d: Deployment, seconds: float) -> dict[str, float]:
    """Each process's CPU milliseconds per second while nothing is edited."""
    await d.cycles.quiet()
    before_cycles = await d.cycles.count()
    before, began = cpu(d), time.monotonic()
    await asyncio.sleep(seconds)
    after, elapsed = cpu(d), time.monotonic() - began
    report("idle.seconds", elapsed)
    report("idle.cycles", await d.cycles.count() - before_cycles)
    return per_unit("idle", before, after, elapsed, "ms_per_s")


async def drive(d: Deployment, setup_names: list[str], idle_rates: dict[str, float]) -> None:
    """Edits as the report's churn makes them, --editors at a time, until --turns are out or
    --seconds have passed; then CPU per cycle over the whole window."""
    args = d.args
    chosen = setup_names[: args.editors]
    edits = 0
    stop = asyncio.Event()
    stop_at = None if args.seconds is None else time.monotonic() + args.seconds

    def enough() -> bool:
        if stop_at is not None:
            return time.monotonic() >= stop_at
        return edits >= args.turns

    async def editor(name: str) -> None:
        nonlocal edits
        policy = d.bodies[name]["spec"]["policy"]
        edit = 0
        while not stop.is_set():
            if enough():
                stop.set()
                return
            edits += 1
            patch = churn_edit(policy, edit, args.pick_n)
            patched = await d.hub.patch(load.PLACEMENTS_PATH, name, patch)
            generation = int(patched["metadata"]["generation"])
            edit += 1
            await d.wait_scheduled([name], f"turns: {name} generation {generation}", generation)

    await d.cycles.quiet()
    profilers = start_profiles(d, args.profile) if args.profile is not None else []
    before_cycles = await d.cycles.count()
    writes_before = await binding_writes(d)
    before, began = cpu(d), time.monotonic()
    try:
        await asyncio.gather(*(editor(n) for n in chosen))
        await d.cycles.quiet()
        after, elapsed = cpu(d), time.monotonic() - began
        cycles = await d.cycles.count() - before_cycles
        writes_after = await binding_writes(d)
    finally:
        for profiler in profilers:
            profiler.stop(grace=60, sig=signal.SIGINT)  # py-spy writes its file on SIGINT
    report("turn.edits", edits)
    report("turn.cycles", cycles)
    report("turn.seconds", elapsed)
    report("turn.cycles_per_s", cycles / elapsed)
    if cycles == 0:
        raise RuntimeError("turns: the worker counted no cycle")
    for operation in sorted(writes_after):
        written = writes_after[operation] - writes_before.get(operation, 0.0)
        report(f"turn.binding_writes.{operation}_per_turn", written / cycles)
    figures = per_unit("turn", before, after, cycles, "ms")
    net = {
        name: value - idle_rates.get(name, 0.0) * elapsed / cycles
        for name, value in figures.items()
    }
    for name, value in net.items():
        report(f"turn.{name}_net_ms", value)
    report("turn.total_net_ms", sum(net.values()))


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    compile_bytecode()
    worker_flags, watcher_flags = part_flags(args)
    report("config.commit", git_commit())
    report("config.worker_flags", " ".join(worker_flags))
    report("config.watcher_flags", " ".join(watcher_flags))
    report("config.clusters", args.clusters)
    report("config.placements", args.placements)
    report("config.editors", args.editors)
    report("config.temporal_db", args.temporal_db)
    report("machine.load1.before", os.getloadavg()[0])
    stack = Stack(workdir, temporal_db=args.temporal_db, server_args=[])
    deployment: Deployment | None = None
    beats: asyncio.Task[None] | None = None
    try:
        deployment = await start_deployment(args, stack, args.clusters, "setup")
        beats = asyncio.create_task(heartbeats(deployment.hub, args.clusters))
        setup_names = await setup(deployment, "setup", args.placements)
        idle_rates = await idle(deployment, args.idle_s)
        await drive(deployment, setup_names, idle_rates)
    finally:
        if beats is not None:
            beats.cancel()
        await stop_deployment(deployment, stack, "stack")
    report("machine.load1.end", os.getloadavg()[0])
    return True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000, metavar="K")
    parser.add_argument(
        "--placements",
        type=int,
        default=300,
        metavar="P",
        help="placements of the mix set up first (default 300; the report's figure is 1000)",
    )
    parser.add_argument(
        "--turns",
        type=int,
        default=400,
        metavar="N",
        help="edits to make in the measured window (default 400)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        metavar="S",
        help="edit for S seconds instead of --turns edits",
    )
    parser.add_argument(
        "--editors",
        type=int,
        default=50,
        metavar="E",
        help="placements edited at once, each again once scheduled (default 50)",
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds the idle stack is measured before the turns (default 10)",
    )
    parser.add_argument("--pick-n", type=int, default=10, metavar="N")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy record each Python process over the turns, into DIR",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds any one wait may take (default 1800)"
    )
    parser.add_argument("--temporal-db", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--scheduler-flag", action="append", default=[], metavar="FLAG")
    parser.add_argument("--worker-flag", action="append", default=[], metavar="FLAG")
    parser.add_argument("--watcher-flag", action="append", default=[], metavar="FLAG")
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    args = parser.parse_args(argv)
    if min(args.clusters, args.placements, args.turns, args.editors) < 1:
        parser.error("--clusters, --placements, --turns and --editors must be at least 1")
    if args.editors > args.placements:
        parser.error("--editors must not exceed --placements")
    # kubefleet_report's check of the fleet against the mix reads these.
    args.phases = {"setup"}
    args.storm_clusters = args.storm_placements = 0
    args.wide_n = 1
    check_fleet(parser, args)
    return args


def main() -> int:
    args = parse_args()
    return run_bench("turn_cost", functools.partial(run, args), keep=args.keep)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip finalisation (temporalio/sdk-python#300), as fleet-scheduler does
