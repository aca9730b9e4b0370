"""Watcher memory bench: the peak RSS of `fleet-scheduler run --components watcher` over a hub
holding P placements with their policy snapshots and bindings, and the Temporal work it does at
start.

    python bench/watcher_memory.py [--placements 10000] [--clusters 100]

devhub runs embedded in this process (its memory is not measured) and is filled directly: P
placements of the e2e bench's mix (bench/e2e_load.py), each with its latest policy snapshot and
three bindings as the scheduler writes them, and K member clusters. The Temporal dev server is a
child, with no worker: the watcher lists every kind, then signals-with-start every placement
(`--reconcile-every 0`: the start-up behaviour without the reconcile Schedule, the most work a
start can do). Prints `name value` lines:
- watcher_memory.objects: what the hub holds (placements + snapshots + bindings + clusters);
- watcher_memory.ready_s / ready_rss_mb: the watcher's start until it said it is ready, and its
  RSS then (every kind listed and cached);
- watcher_memory.started_s: until Temporal holds a workflow for every placement;
- watcher_memory.peak_rss_mb: the watcher's VmHWM after that (and 5 s of quiet).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e_load import fleet, placement
from e2e_stack import peak_rss_mb, rss_mb
from outage import report

from devhub import DevHub
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster
from hub.types.meta import HubObject
from scheduler.testing import binding, policy_snapshot
from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workflows import names

T = TypeVar("T", bound=HubObject)
BINDINGS_PER_PLACEMENT = 3
QUIET_S = 5.0
CLI = [sys.executable, "-m", "workers.cli"]


def _new(obj: T) -> T:
    """`obj` without the resourceVersion the test builders give it (a create refuses one)."""
    wire = obj.to_wire()
    wire["metadata"].pop("resourceVersion", None)
    return type(obj).from_wire(wire)


def fill(hub: HubClient, clusters: int, placements: int) -> int:
    """The hub's objects, created through its API in parallel; returns how many."""
    members = [MemberCluster.from_wire(doc) for doc in fleet(clusters)]
    names_ = [member.name for member in members]

    def one(index: int) -> int:
        name = f"mem-{index:05d}"
        wire = placement(name, index, clusters)
        created = hub.create(ClusterResourcePlacement.from_wire(wire))
        snapshot = policy_snapshot(name, wire["spec"].get("policy"))
        hub.create(_new(snapshot))
        for offset in range(BINDINGS_PER_PLACEMENT):
            cluster = names_[(index + offset) % len(names_)]
            hub.create(
                _new(binding(created.name, cluster, snapshot.name, name=f"{name}-{cluster}"))
            )
        return 2 + BINDINGS_PER_PLACEMENT

    for member in members:
        hub.create(member)
    with ThreadPoolExecutor(8) as pool:
        return len(members) + sum(pool.map(one, range(placements)))


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="watcher-memory-"))
    hub = DevHub(port=free_port())
    hub.start()
    server = DevServer(port=free_port(), ui=False)
    await server.start()
    try:
        kubeconfig = hub.write_kubeconfig(workdir / "kubeconfig")
        client = HubClient.from_kubeconfig(kubeconfig)
        started = time.monotonic()
        objects = await asyncio.to_thread(fill, client, args.clusters, args.placements)
        report("watcher_memory.objects", objects)
        report("watcher_memory.setup_s", time.monotonic() - started)
        temporal = await connect(TemporalTarget(server.target, server.namespace))
        log = (workdir / "watcher.log").open("w")
        started = time.monotonic()
        watcher = subprocess.Popen(
            [*CLI, "run", "--components", "watcher", "--kubeconfig", str(kubeconfig),
             "--temporal-address", server.target, "--task-queue", "bench-memory",
             "--reconcile-every", "0", "--metrics-port", "0", "--metrics-host", "127.0.0.1"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            while "run: ready in" not in (workdir / "watcher.log").read_text():
                if watcher.poll() is not None:
                    raise RuntimeError((workdir / "watcher.log").read_text()[-3000:])
                await asyncio.sleep(0.2)
            report("watcher_memory.ready_s", time.monotonic() - started)
            report("watcher_memory.ready_rss_mb", rss_mb(watcher.pid) or float("nan"))
            query = names.PLACEMENT_WORKFLOWS_QUERY
            while (await temporal.count_workflows(query)).count < args.placements:
                await asyncio.sleep(1.0)
            report("watcher_memory.started_s", time.monotonic() - started)
            await asyncio.sleep(QUIET_S)
            report("watcher_memory.rss_mb", rss_mb(watcher.pid) or float("nan"))
            report("watcher_memory.peak_rss_mb", peak_rss_mb(watcher.pid) or float("nan"))
        finally:
            watcher.terminate()
            watcher.wait(60)
        client.close()
    finally:
        await server.stop()
        hub.stop()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--placements", type=int, default=10_000)
    parser.add_argument("--clusters", type=int, default=100)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments: Any = parse()
    report("config.placements", arguments.placements)
    report("config.clusters", arguments.clusters)
    asyncio.run(main(arguments))
