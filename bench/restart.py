"""Watcher restart bench: what a watcher restart costs with nothing changed in the hub, with the
reconcile Schedule (the watcher triggers one reconcile) and without it (the watcher signals
every placement, the behaviour before the Schedule), back to back.

    python bench/restart.py [--placements 1000]

One process holds devhub (embedded, the sample fleet), the real worker and watcher; the
Temporal dev server is a child. Per variant: P PickN placements are created and scheduled, the
watcher is stopped and a new one started. Prints `name value` lines:
- restart.<variant>.cycles: cycles that ran because of the restart (the placements' cycle counts
  after minus before);
- restart.<variant>.quiet_s: from the new watcher's start until no cycle has run for QUIET_S
  and the watcher has nothing left to send (QUIET_S not included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from outage import each, report, statuses, wait_cycles
from temporalio.client import Client

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.schedules import ensure_reconcile_schedule
from control.watcher import Watcher
from devhub import DevHub
from hub.client import HubClient
from hub.types import ClusterResourcePlacement
from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workers.worker import build_worker
from workflows import names

QUIET_S = 5.0


async def total_cycles(client: Client, placements: list[str]) -> int:
    return sum(s.cycles for s in await statuses(client, placements) if s is not None)


async def restart(
    label: str, reconcile: bool, args: argparse.Namespace, hub: HubClient, client: Client
) -> None:
    queue = f"restart-{label}-{uuid.uuid4().hex[:6]}"
    placements = [f"r{label[0]}-{uuid.uuid4().hex[:4]}-{i:05d}" for i in range(args.placements)]
    if reconcile:
        await ensure_reconcile_schedule(client, queue, timedelta(hours=1), standalone=True)
    worker = build_worker(client, hub, task_queue=queue, settings=ActivitySettings())
    async with worker:
        config = RunConfig(task_queue=queue, reconcile_every_s=3600.0 if reconcile else 0.0)
        first = Watcher(hub, client, config)
        stop = asyncio.Event()
        task = asyncio.create_task(first.run(stop))
        await first.wait_ready(timeout=120)
        started = time.monotonic()
        await each(placements, lambda n: asyncio.to_thread(hub.create, _placement(n)))
        await wait_cycles(client, placements, {}, args.timeout)
        report(f"restart.{label}.setup_s", time.monotonic() - started)
        stop.set()
        await asyncio.wait_for(task, 60)

        before = await total_cycles(client, placements)
        second = Watcher(hub, client, config)
        stop = asyncio.Event()
        began = time.monotonic()
        task = asyncio.create_task(second.run(stop))
        try:
            await second.wait_ready(timeout=120)
            last_change, seen = time.monotonic(), before
            while time.monotonic() - last_change < QUIET_S or not second.idle:
                await asyncio.sleep(0.5)
                now = await total_cycles(client, placements)
                if now != seen:
                    seen, last_change = now, time.monotonic()
            report(f"restart.{label}.cycles", seen - before)
            report(f"restart.{label}.quiet_s", last_change - began)
            report(f"restart.{label}.signals", second.stats.sent)
            if reconcile:
                report(f"restart.{label}.reconcile_s", await _reconciled(client, queue) - began)
        finally:
            stop.set()
            await asyncio.wait_for(task, 60)


async def _reconciled(client: Client, queue: str) -> float:
    """When (time.monotonic) the reconcile the restart triggered was seen completed."""
    query = (
        f"WorkflowType = '{names.RECONCILE_WORKFLOW}' AND TaskQueue = '{queue}' "
        "AND ExecutionStatus = 'Completed'"
    )
    while not [e async for e in client.list_workflows(query)]:
        await asyncio.sleep(0.2)
    return time.monotonic()


def _placement(name: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name},
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {"placementType": "PickN", "numberOfClusters": 1},
            },
        }
    )


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="restart-bench-") as work, DevHub() as devhub:
        devhub.load_sample_fleet(heartbeat_interval=20.0)
        hub = HubClient.from_kubeconfig(devhub.write_kubeconfig(Path(work) / "kubeconfig"))
        report("config.placements", args.placements)
        report("machine.load1.start", os.getloadavg()[0])
        server = DevServer(port=free_port(), ui=False, data_dir=Path(work) / "temporal")
        async with server:
            client = await connect(TemporalTarget(server.target, server.namespace))
            for label, reconcile in (("reconcile", True), ("signal_all", False)):
                if label in args.skip:
                    continue
                await restart(label, reconcile, args, hub, client)
                report(f"machine.load1.after_{label}", os.getloadavg()[0])
        hub.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--skip", default="", help="reconcile,signal_all")
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
