"""`fleet-scheduler plan --all --config NEW.yaml` at fleet scale: its wall time, as a user runs it.

    python bench/plan_all.py [--clusters 1000] [--placements 1000] [--repeats 1]

Builds the fleet in an embedded devhub without running the scheduler: bench/e2e_load.py's
clusters (every tenth tainted `gpu`) and placement mix (70% PickN 3 preferring gold and big
clusters, one in seven of them spreading over zones; 20% PickAll of one shard; 10%
PickFixed), every tenth of them a ResourcePlacement in namespace `bench`. Each placement gets
the policy snapshot the snapshotter plans and the bindings one default-profile cycle creates,
written straight into devhub's store. Then runs `fleet-scheduler plan --all` as a process
against it, with a candidate that drops TaintToleration and ranks by a weighted sum with
ClusterAffinity counted three times, and prints `name value` lines:

    plan_all.setup_s       building the fleet (not part of the figure)
    plan_all.wall_s        `plan --all`, process start to exit (the figure; goal <= 30 s at
                           1,000 x 1,000)
    plan_all.changed       placements whose decision the candidate changes
    plan_all.bindings      bindings in the fleet

A figure, not a timed test: run it alone on the machine."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import yaml

# The repository first: bench/devhub.py must not shadow the devhub package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import e2e_load as load

from devhub import DevHub
from devhub.namespaces import NAMESPACES
from devhub.store import Store
from hub.kinds import kinds_for
from hub.types import ClusterResourcePlacement, MemberCluster
from scheduler import CycleInput, schedule
from scheduler.snapshots import plan_snapshot_sync

NAMESPACE: Final = "bench"
CANDIDATE: Final = (
    "name: bench-candidate\nscoreMode: weightedSum\n"
    "plugins:\n"
    "  multiPoint: {disabled: [{name: TaintToleration}]}\n"
    "  score: {enabled: [{name: ClusterAffinity, weight: 3}]}\n"
)
PROGRAM: Final = Path(sys.prefix) / "bin" / "fleet-scheduler"
CHANGED = re.compile(r"^placements changed: (\d+)", re.MULTILINE)


def report(name: str, value: float) -> None:
    shown = f"{value:.2f}" if isinstance(value, float) else str(value)
    print(f"plan_all.{name} {shown}")
    sys.stdout.flush()


def _resource(store: Store, kind: type[Any]) -> Any:
    return store.resources[f"{kind.PLURAL}.{kind.GROUP}"]


def build(hub: DevHub, workdir: Path, clusters: int, placements: int) -> int:
    """The fleet, its placements, their latest snapshots and default-profile bindings, written
    into devhub's store directly. Returns the number of bindings."""
    documents = load.fleet(clusters)
    for document in documents:
        document["status"]["namespaces"] = {NAMESPACE: ""}
    path = workdir / "fleet.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    hub.load_sample_fleet(path, heartbeat_interval=None)
    members = [MemberCluster.from_wire(d) for d in documents]
    now = datetime.now(UTC)
    hub.call(lambda store: store.create(NAMESPACES, {"metadata": {"name": NAMESPACE}}))

    def create_all(store: Store) -> int:
        count = 0
        for index in range(placements):
            namespace = NAMESPACE if index % 10 == 5 else None
            kinds = kinds_for(namespace)
            document = load.placement(f"plan-{index:05d}", index, clusters)
            document["kind"] = kinds.placement.KIND
            document["metadata"]["namespace"] = namespace
            entry, _ = store.create(
                _resource(store, kinds.placement), document, namespace=namespace
            )
            placement: ClusterResourcePlacement = kinds.placement.from_wire(entry.fresh())
            snapshot = plan_snapshot_sync(placement, []).create
            assert snapshot is not None
            entry, _ = store.create(
                _resource(store, kinds.snapshot), snapshot.to_wire(), namespace=namespace
            )
            snapshot = kinds.snapshot.from_wire(entry.fresh())
            result = schedule(CycleInput(snapshot=snapshot, clusters=members, now=now))
            for binding in result.plan.create:
                store.create(
                    _resource(store, kinds.binding), binding.to_wire(), namespace=namespace
                )
                count += 1
        return count

    return hub.call(create_all, timeout=3600)


def plan_all(kubeconfig: Path, candidate: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [str(PROGRAM), "plan", "--all", "--config", str(candidate),
         "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"plan --all failed ({done.returncode}): {done.stderr.strip()}")
    return wall, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--placements", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-all-") as tmp, DevHub() as hub:
        workdir = Path(tmp)
        started = time.perf_counter()
        bindings = build(hub, workdir, args.clusters, args.placements)
        report("setup_s", time.perf_counter() - started)
        report("bindings", bindings)
        kubeconfig = hub.write_kubeconfig(workdir / "kubeconfig")
        candidate = workdir / "candidate.yaml"
        candidate.write_text(CANDIDATE)
        for _ in range(args.repeats):
            wall, out = plan_all(kubeconfig, candidate)
            report("wall_s", wall)
            found = CHANGED.search(out)
            report("changed", int(found[1]) if found else -1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
