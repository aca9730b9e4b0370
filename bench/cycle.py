"""Benchmark: one scheduling cycle with the default profile at 100, 1,000 and 5,000 clusters.

The placement is a PickN with everything the default profile can evaluate: a required term
(label expression), preferred terms (a label and a property sorter), a topology spread
constraint and a toleration. The fleet has zones, taints, a few ineligible clusters and
existing bindings (current, obsolete, unscheduled). Prints `name value` lines:

    cycle.ms.<clusters>           median wall time of `scheduler.schedule`, milliseconds, with
                                  the clusters' facts cached (scheduler/clusters/facts.py), as in a
                                  worker whose cluster cache has not changed since the last cycle
    cycle.ms.cold.<clusters>      the same with the facts cache emptied before each cycle, as
                                  for the first cycle after every cluster changed
    explanation.bytes.<clusters>  JSON size of the cycle's Explanation
    result.bytes.<clusters>       JSON size of the whole CycleResult (plan + explanation)

Targets (issue 12): cycle.ms.1000 <= 6, cycle.ms.5000 <= 30.
`--profile` prints the top of a cProfile of the largest size instead of timing."""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time
from datetime import UTC, datetime, timedelta

from hub import names
from hub.types import ClusterResourceBinding, MemberCluster
from scheduler import CycleInput, default_profile, schedule
from scheduler.clusters import facts
from scheduler.testing import binding, member_cluster, policy_snapshot

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
SIZES = (100, 1000, 5000)
ZONES = ("eu-1", "eu-2", "us-1", "us-2", "ap-1")
PLACEMENT = "bench"
WANTED = 60

POLICY = {
    "placementType": "PickN",
    "numberOfClusters": WANTED,
    "affinity": {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "clusterSelectorTerms": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "env", "operator": "In", "values": ["prod", "staging"]}
                            ]
                        }
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 30, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}},
                {
                    "weight": 60,
                    "preference": {
                        "propertySorter": {
                            "name": names.NODE_COUNT_PROPERTY,
                            "sortOrder": names.SORT_DESCENDING,
                        }
                    },
                },
            ],
        }
    },
    "topologySpreadConstraints": [
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": names.SCHEDULE_ANYWAY}
    ],
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch"}],
}


def fleet(size: int) -> list[MemberCluster]:
    clusters = []
    for i in range(size):
        taints = []
        if i % 10 == 3:
            taints.append(("dedicated", "batch"))  # tolerated
        elif i % 10 == 7:
            taints.append(("gpu", "true"))  # not tolerated
        clusters.append(
            member_cluster(
                f"member-{i:05d}",
                NOW,
                labels={
                    "env": ("prod", "staging", "dev")[i % 3],
                    "zone": ZONES[i % len(ZONES)],
                    **({"tier": "gold"} if i % 4 == 0 else {}),
                },
                taints=taints,
                properties={names.NODE_COUNT_PROPERTY: str(3 + (i * 7919) % 97)},
                heartbeat_age=timedelta(minutes=10 if i % 50 == 49 else 0),
            )
        )
    return clusters


def bindings(clusters: list[MemberCluster]) -> list[ClusterResourceBinding]:
    """40 current bindings, 5 obsolete, 5 unscheduled, spread over the fleet."""
    step = max(1, len(clusters) // 50)
    chosen = [c.metadata.name for c in clusters[::step][:50]]
    out = []
    for i, name in enumerate(chosen):
        if i < 40:
            state, snapshot, annotations = names.STATE_BOUND, f"{PLACEMENT}-1", {}
        elif i < 45:
            state, snapshot, annotations = names.STATE_BOUND, f"{PLACEMENT}-0", {}
        else:
            state, snapshot = names.STATE_UNSCHEDULED, f"{PLACEMENT}-0"
            annotations = {names.PREVIOUS_BINDING_STATE_ANNOTATION: names.STATE_BOUND}
        out.append(
            binding(
                PLACEMENT,
                name,
                snapshot,
                state=state,
                name=f"{PLACEMENT}-{name}-{i:08x}",
                score=(30, 0),
                annotations=annotations,
            )
        )
    return out


def cycle_input(size: int) -> CycleInput:
    clusters = fleet(size)
    return CycleInput(
        snapshot=policy_snapshot(PLACEMENT, POLICY, index=1),
        clusters=clusters,
        bindings=bindings(clusters),
        now=NOW,
    )


def measure(size: int, repeats: int) -> None:
    data = cycle_input(size)
    gc.freeze()  # as the worker's cluster cache does after each full list (activities/clusters.py)
    profile = default_profile()
    result = schedule(data, profile)  # warm-up, and the result whose size we report
    assert result.error is None, result.error
    times, cold = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        schedule(data, profile)
        times.append((time.perf_counter() - start) * 1000)
        facts.forget()
        start = time.perf_counter()
        schedule(data, profile)
        cold.append((time.perf_counter() - start) * 1000)
    print(f"cycle.ms.{size} {statistics.median(times):.1f}")
    print(f"cycle.ms.cold.{size} {statistics.median(cold):.1f}")
    print(f"explanation.bytes.{size} {len(result.explanation.model_dump_json())}")
    print(f"result.bytes.{size} {len(result.model_dump_json())}")


def profile_largest(size: int) -> None:
    data = cycle_input(size)
    profile = default_profile()
    schedule(data, profile)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        schedule(data, profile)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--profile", action="store_true", help="cProfile the largest size")
    args = parser.parse_args()
    if args.profile:
        profile_largest(max(args.sizes))
        return
    for size in args.sizes:
        measure(size, args.repeats)


if __name__ == "__main__":
    main()
