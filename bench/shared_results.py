"""Benchmark: cycle CPU saved by sharing filter and score answers between placements of one
policy (scheduler.framework.sharing), for KubeFleet's report mix
(bench/e2e_load.region_env_placement).

N placements of the mix are cycled in turn against one fleet, in one process, the way the
worker's activities run them: a round of first turns (no bindings yet), then a round of
re-decisions (each placement's bindings and status as its first turn left them), then the
re-decisions again after `--changes` clusters changed one label each (the cluster cache hands
out new objects: those clusters are asked again). Each round runs without the store and with
it (the store warm from the rounds before, as in a long-lived worker); the results are checked
equal. Prints `name value` lines, CPU seconds from `time.process_time` (so other processes on a
shared machine bend them little):

    shared.<round>.cpu_ms_per_cycle.<clusters>.off|on   CPU per cycle, without / with
    shared.<round>.cpu_ratio.<clusters>                 on / off
    shared.<round>.hit_rate.<clusters>                  lookups answered from the store
    shared.entries.<clusters> / shared.cells.<clusters> the store's size at the end

Run: `python bench/shared_results.py` (sizes 1000 5000, 300 placements)."""

from __future__ import annotations

import argparse
import gc
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import e2e_load
from hub.types import ClusterResourceBinding, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler import CycleInput, CycleResult, default_profile, schedule
from scheduler.framework.sharing import SharedResults
from scheduler.testing import apply_plan, policy_snapshot

PICK_N = 100
Placements = list[tuple[ClusterSchedulingPolicySnapshot, list[ClusterResourceBinding]]]


def _round(
    name: str,
    size: int,
    clusters: list[MemberCluster],
    placements: Placements,
    shared: SharedResults,
    now: datetime,
) -> list[CycleResult]:
    profile = default_profile()
    inputs = [CycleInput(snapshot=s, clusters=clusters, bindings=b, now=now) for s, b in placements]
    before = (shared.counters.hits, shared.counters.misses)
    gc.collect()
    start = time.process_time()
    plain = [schedule(i, profile) for i in inputs]
    off = time.process_time() - start
    gc.collect()
    start = time.process_time()
    with_shared = [schedule(i, profile, shared=shared) for i in inputs]
    on = time.process_time() - start
    if plain != with_shared:
        raise SystemExit(f"{name}: shared answers changed a decision")
    hits = shared.counters.hits - before[0]
    misses = shared.counters.misses - before[1]
    count = len(inputs)
    print(f"shared.{name}.cpu_ms_per_cycle.{size}.off {off * 1000 / count:.2f}")
    print(f"shared.{name}.cpu_ms_per_cycle.{size}.on {on * 1000 / count:.2f}")
    print(f"shared.{name}.cpu_ratio.{size} {on / off:.3f}")
    print(f"shared.{name}.hit_rate.{size} {hits / max(hits + misses, 1):.3f}")
    return plain


def measure(size: int, count: int, changes: int) -> None:
    now = datetime.now(UTC)
    clusters = [MemberCluster.model_validate(c) for c in e2e_load.fleet(size)]
    gc.freeze()
    snapshots = [
        policy_snapshot(
            f"p{i}", e2e_load.region_env_placement(f"p{i}", i, PICK_N)["spec"]["policy"], index=1
        )
        for i in range(count)
    ]
    placements: Placements = [(s, []) for s in snapshots]
    shared = SharedResults()
    results = _round("first", size, clusters, placements, shared, now)
    placements = [
        tuple(reversed(apply_plan(b, s, r.plan)))  # type: ignore[misc]
        for (s, b), r in zip(placements, results, strict=True)
    ]
    placements = [(s, b) for s, b in placements]
    _round("again", size, clusters, placements, shared, now)
    step = max(size // max(changes, 1), 1)
    changed = list(clusters)
    for i in range(0, size, step)[:changes]:
        c = changed[i]
        labels = {**c.metadata.labels, "bench/touched": "1"}
        changed[i] = c.model_copy(
            update={"metadata": c.metadata.model_copy(update={"labels": labels})}
        )
    _round("changed", size, changed, placements, shared, now)
    print(f"shared.entries.{size} {len(shared)}")
    print(f"shared.cells.{size} {shared.cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 5000])
    parser.add_argument("--placements", type=int, default=300)
    parser.add_argument("--changes", type=int, default=10, help="clusters changed before round 3")
    args = parser.parse_args()
    for size in args.sizes:
        measure(size, args.placements, args.changes)


if __name__ == "__main__":
    main()
