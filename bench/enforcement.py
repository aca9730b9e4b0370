"""Affinity enforced during execution: how long from a cluster's change to the moves it causes.

    python bench/enforcement.py [--clusters 100] [--placements 1000] [--pick-n 3] [--rounds 3]
        [--pool region|all] [--timeout 600] [--keep]

The stack is bench/kubefleet_report.py's (devhub, the Temporal dev server, the worker and the
watcher, each its own process, at `run`'s defaults) and its fleet (bench/e2e_load.py: ten
regions, every tenth cluster tainted `gpu`). P PickN placements, each requiring a cluster of
one region (`--pool region`: placement i the i-th of ten; `--pool all`: any region) and
annotated `fleet-scheduler.io/affinity-enforcement: DuringExecution`, are created and
scheduled. Then, --rounds times, the cluster holding the most bindings is changed so that it no
longer passes, alternately relabelled (`region=retired`) and tainted
(`maintenance=true:NoSchedule`), and the bench measures, for every placement bound there, the
time from the change (its PATCH answered) to the placement's new binding seen on a watch (the
move's first write; its old binding is unscheduled right after, in the same turn):
round.<n>.moved, p50_s, p90_s, max_s. At the end every affected placement must hold N active
bindings and none on a changed cluster (checked by a list: enforcement.misplaced must be 0).
Prints `name value` lines."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any, Final

import e2e_load as load
from e2e import percentile, report
from e2e_load import each
from e2e_stack import Stack, run_bench
from kubefleet_report import Deployment, start_deployment, stop_deployment
from priority import heartbeats

from hub import names

CREATE_CONCURRENCY: Final = 48
RETIRED: Final = "retired"
SELECTOR: Final = {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
MAINTENANCE: Final = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


def enforcing_placement(name: str, index: int, pick_n: int, pool: str) -> dict[str, Any]:
    regions = list(load.REGIONS) if pool == "all" else [load.REGIONS[index % len(load.REGIONS)]]
    term = {"labelSelector": {"matchExpressions": [
        {"key": "region", "operator": "In", "values": regions}
    ]}}  # fmt: skip
    return {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": "ClusterResourcePlacement",
        "metadata": {
            "name": name,
            "annotations": {names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"},
        },
        "spec": {
            "resourceSelectors": [SELECTOR],
            "policy": {
                "placementType": "PickN",
                "numberOfClusters": pick_n,
                "affinity": {
                    "clusterAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "clusterSelectorTerms": [term]
                        }
                    }
                },
            },
        },
    }


async def active_bindings(d: Deployment) -> list[dict[str, Any]]:
    listed = await d.hub.list(load.BINDINGS_PATH)
    return [
        b
        for b in listed.get("items") or []
        if b["spec"].get("state") != names.STATE_UNSCHEDULED
        and not b["metadata"].get("deletionTimestamp")
    ]


async def round_(d: Deployment, number: int, changed: set[str]) -> None:
    bound: dict[str, list[str]] = {}
    for binding in await active_bindings(d):
        parent = binding["metadata"]["labels"][names.PARENT_PLACEMENT_LABEL]
        bound.setdefault(binding["spec"]["targetCluster"], []).append(parent)
    cluster = max((c for c in bound if c not in changed), key=lambda c: len(bound[c]))
    affected = bound[cluster]
    counts = {n: len(d.tracker.state(n).bound) for n in affected}
    how = "relabel" if number % 2 else "taint"
    if how == "relabel":
        patch: dict[str, Any] = {"metadata": {"labels": {"region": RETIRED}}}
    else:
        patch = {"spec": {"taints": [MAINTENANCE]}}
    started = time.monotonic()
    await d.hub.patch(load.CLUSTERS_PATH, cluster, patch)
    changed.add(cluster)
    await d.tracker.wait(
        lambda n: d.tracker.bound_at(n, counts[n] + 1) is not None,
        affected,
        d.args.timeout,
        f"round {number}: every placement on {cluster} moved",
    )
    took = [(d.tracker.bound_at(n, counts[n] + 1) or 0.0) - started for n in affected]
    prefix = f"round.{number}"
    report(f"{prefix}.change", f"{cluster} {how}")
    report(f"{prefix}.moved", len(affected))
    report(f"{prefix}.p50_s", percentile(took, 0.50))
    report(f"{prefix}.p90_s", percentile(took, 0.90))
    report(f"{prefix}.max_s", max(took))


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    report("config.clusters", args.clusters)
    report("config.placements", args.placements)
    report("config.pick_n", args.pick_n)
    report("config.pool", args.pool)
    logs = workdir / "stack"
    logs.mkdir()
    stack = Stack(logs, temporal_db="sqlite", server_args=[])
    deployment: Deployment | None = None
    beats: asyncio.Task[None] | None = None
    try:
        deployment = await start_deployment(args, stack, args.clusters, "setup")
        d = deployment
        beats = asyncio.create_task(heartbeats(d.hub, args.clusters))
        names_ = [d.name("e", i) for i in range(args.placements)]
        started = time.monotonic()
        await each(
            [enforcing_placement(n, i, args.pick_n, args.pool) for i, n in enumerate(names_)],
            d.create,
            CREATE_CONCURRENCY,
        )
        last = await d.wait_scheduled(names_, "setup: every placement scheduled")
        report("setup.scheduled_s", last - started)
        await d.cycles.quiet()
        changed: set[str] = set()
        for number in range(1, args.rounds + 1):
            await round_(d, number, changed)
        await d.cycles.quiet()
        active = await active_bindings(d)
        per: dict[str, int] = {}
        misplaced = 0
        for binding in active:
            parent = binding["metadata"]["labels"][names.PARENT_PLACEMENT_LABEL]
            per[parent] = per.get(parent, 0) + 1
            misplaced += binding["spec"]["targetCluster"] in changed
        report("enforcement.misplaced", misplaced)
        report("enforcement.short_placements", sum(1 for n in names_ if per.get(n) != args.pick_n))
        return misplaced == 0
    except Exception as exc:
        print(f"# failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return False
    finally:
        if beats is not None:
            beats.cancel()
        await stop_deployment(deployment, stack, "enforcement")
        report("machine.load1.end", os.getloadavg()[0])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100, metavar="K")
    parser.add_argument("--placements", type=int, default=1000, metavar="P")
    parser.add_argument("--pick-n", type=int, default=3, metavar="N")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool", choices=("region", "all"), default="region",
                        help="region: placement i requires the i-th region (mod 10), so a "
                             "cluster holds about a tenth of them; all: any region, so the "
                             "name tie-break puts every placement on the same clusters")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    args = parser.parse_args(argv)
    if args.clusters < args.pick_n + args.rounds + 1:
        parser.error("--clusters must leave room to move: at least --pick-n + --rounds + 1")
    args.scheduler_flag, args.worker_flag, args.watcher_flag = [], [], []
    return args


def main() -> int:
    args = parse_args()
    return run_bench("enforcement", functools.partial(run, args), keep=args.keep)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip finalisation (temporalio/sdk-python#300), as fleet-scheduler does
