"""Hub outage bench: what an outage costs the hub and Temporal, and how fast the fleet converges
after it, with the worker's HubGate (activities/outage.py) and without it, back to back.

    python bench/outage.py [--placements 1000] [--outage-seconds 120]

One process holds devhub (embedded, with the sample fleet and fresh heartbeats), the real
worker and the real watcher; the Temporal dev server is a child. Per variant: P PickN
placements are created and scheduled; then the hub fails every request with 503 (except the
member agents' heartbeats, which the bench writes straight into the store) and every placement
is requeued at once, as a fleet-wide event just before an outage would; after the outage the
faults go and the bench waits until every placement has run a new cycle. "Without" is the same
worker with a gate that never holds an activity (max_wait_s=0), which is how activities behaved
before the gate: fail, and let Temporal retry (200 ms doubling, capped at 60 s).

Prints `name value` lines:
- outage.<variant>.temporal_retries_per_s: activity retries Temporal ran during the outage
  (the attempt numbers of the activities' final attempts, minus one, over the outage);
- outage.<variant>.hub_requests_per_s: requests that reached the hub during the outage;
- outage.<variant>.converge_s: from the end of the outage until every placement ran a new cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from activities.outage import HubGate
from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.watcher import Watcher
from devhub import DevHub
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster
from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workers.worker import build_worker, hub_gate
from workflows import names
from workflows.models import PlacementStatus, RequeueRequest

# Every verb but the status writes the bench's member agents make (see the docstring).
OUTAGE_VERBS = ("get", "list", "watch", "create", "patch", "delete")
CONCURRENCY = 32


def report(name: str, value: float | int | str) -> None:
    print(f"{name} {value:.3f}" if isinstance(value, float) else f"{name} {value}", flush=True)


async def each(items: list[str], call, limit: int = CONCURRENCY) -> list:  # type: ignore[no-untyped-def]
    gate = asyncio.Semaphore(limit)

    async def one(item: str):  # type: ignore[no-untyped-def]
        async with gate:
            return await call(item)

    return await asyncio.gather(*(one(item) for item in items))


async def statuses(client: Client, placements: list[str]) -> list[PlacementStatus | None]:
    async def query(name: str) -> PlacementStatus | None:
        try:
            status: PlacementStatus = await client.get_workflow_handle(
                names.workflow_id(name)
            ).query(names.QUERY_STATUS, result_type=PlacementStatus)
        except Exception:
            return None
        return status

    return await each(placements, query)


async def wait_cycles(
    client: Client, placements: list[str], after: dict[str, int], timeout: float
) -> float:
    """Seconds until every placement is idle past its cycle count in `after`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        found = await statuses(client, placements)
        if all(
            s is not None and s.cycles > after.get(n, 0) and s.phase == "idle"
            for n, s in zip(placements, found, strict=True)
        ):
            return time.monotonic() - started
        await asyncio.sleep(1.0)
    raise TimeoutError(f"placements did not converge within {timeout:.0f}s")


async def retries(client: Client, placements: list[str]) -> int:
    async def count(name: str) -> int:
        history = await client.get_workflow_handle(names.workflow_id(name)).fetch_history()
        return sum(
            event.activity_task_started_event_attributes.attempt - 1
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        )

    return sum(await each(placements, count))


async def variant(
    label: str,
    gated: bool,
    args: argparse.Namespace,
    devhub: DevHub,
    hub: HubClient,
    client: Client,
) -> None:
    queue = f"outage-{label}-{uuid.uuid4().hex[:6]}"
    placements = [f"o{label[0]}-{uuid.uuid4().hex[:4]}-{i:05d}" for i in range(args.placements)]
    gate = hub_gate(hub) if gated else HubGate(lambda: None, max_wait_s=0.0)
    worker = build_worker(client, hub, task_queue=queue, settings=ActivitySettings(hub_gate=gate))
    watcher = Watcher(hub, client, RunConfig(task_queue=queue))
    stop = asyncio.Event()
    async with worker:
        watching = asyncio.create_task(watcher.run(stop))
        try:
            await watcher.wait_ready(timeout=120)
            started = time.monotonic()
            await each(placements, lambda n: asyncio.to_thread(hub.create, _placement(n)))
            await wait_cycles(client, placements, {}, args.timeout)
            report(f"outage.{label}.setup_s", time.monotonic() - started)
            before = {
                n: s.cycles
                for n, s in zip(placements, await statuses(client, placements), strict=True)
                if s is not None
            }
            retries_before = await retries(client, placements)

            faults = [devhub.faults.inject(verb=verb, status=503) for verb in OUTAGE_VERBS]
            requests_before = devhub.stats.count()
            began = time.monotonic()
            await each(
                placements,
                lambda n: client.get_workflow_handle(names.workflow_id(n)).signal(
                    names.SIGNAL_REQUEUE, RequeueRequest(reason="bench: before the outage")
                ),
            )
            await asyncio.sleep(max(0.0, args.outage_seconds - (time.monotonic() - began)))
            during = devhub.stats.count() - requests_before
            for fault in faults:
                fault.remove()
            outage_s = time.monotonic() - began
            converge_s = await wait_cycles(client, placements, before, args.timeout)
            retried = await retries(client, placements) - retries_before
            report(f"outage.{label}.outage_s", outage_s)
            report(f"outage.{label}.temporal_retries_per_s", retried / outage_s)
            report(f"outage.{label}.hub_requests_per_s", during / outage_s)
            report(f"outage.{label}.converge_s", converge_s)
            if gated:
                report(f"outage.{label}.gate_probes", gate.stats.probes)
        finally:
            stop.set()
            await asyncio.wait_for(watching, 60)


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
    with tempfile.TemporaryDirectory(prefix="outage-bench-") as work, DevHub() as devhub:
        devhub.load_sample_fleet(heartbeat_interval=20.0)
        kubeconfig = devhub.write_kubeconfig(Path(work) / "kubeconfig")
        hub = HubClient.from_kubeconfig(kubeconfig, timeout=(2.0, 10.0))
        report("config.placements", args.placements)
        report("config.clusters", len(hub.list(MemberCluster).items))
        report("config.outage_seconds", args.outage_seconds)
        report("machine.load1.start", os.getloadavg()[0])
        async with DevServer(
            port=free_port(), ui=False, data_dir=Path(work) / "temporal"
        ) as server:
            client = await connect(TemporalTarget(server.target, server.namespace))
            for label, gated in (("gated", True), ("ungated", False)):
                if label in args.skip:
                    continue
                await variant(label, gated, args, devhub, hub, client)
                report(f"machine.load1.after_{label}", os.getloadavg()[0])
        hub.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=1000)
    parser.add_argument("--outage-seconds", type=float, default=120.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--skip", default="", help="gated,ungated")
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
