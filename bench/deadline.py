"""How late a scheduling deadline is reported (docs/operations.md, "Scheduling deadlines").

N placements with a deadline of a few seconds that cannot be fulfilled (PickFixed to a cluster
that never joins) are created at once against devhub, the Temporal dev server, and the worker
and watcher in this process. For each, the bench polls the hub's Events and takes the moment its
ScheduleDeadlineExceeded Event is first seen, less the moment its deadline fell (when the
workflow's clock started, as its status says, plus the deadline): the delay of the timer, the
turn and the Event's write, plus up to one poll (50 ms). Prints p50, p99 and max.

    .venv/bin/python bench/deadline.py --placements 50 --deadline 3s"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.watcher import Watcher
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, Event
from scheduler.opt_in.deadline import DEADLINE_EXCEEDED_REASON, parse_deadline
from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workers.worker import build_worker
from workflows.models import PlacementStatus
from workflows.names import QUERY_STATUS, workflow_id

POLL_S = 0.05


def placement(name: str, deadline: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {
                "name": name,
                "annotations": {names.SCHEDULE_DEADLINE_ANNOTATION: deadline},
            },
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {"placementType": "PickFixed", "clusterNames": ["never-joins"]},
            },
        }
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(count: int, deadline: str) -> None:
    seconds = parse_deadline(deadline).seconds
    queue = f"bench-deadline-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory(prefix="deadline-bench-") as work, DevHub() as devhub:
        kubeconfig = devhub.write_kubeconfig(Path(work) / "kubeconfig")
        hub = HubClient.from_kubeconfig(kubeconfig, timeout=(2.0, 10.0))
        async with DevServer(port=free_port(), ui=False) as server:
            client = await connect(TemporalTarget(server.target, server.namespace))
            worker = build_worker(client, hub, task_queue=queue, settings=ActivitySettings())
            watcher = Watcher(hub, client, RunConfig(task_queue=queue))
            stop = asyncio.Event()
            async with worker:
                watching = asyncio.create_task(watcher.run(stop))
                await watcher.wait_ready(timeout=30)
                prefix = uuid.uuid4().hex[:6]
                wanted = {f"late-{prefix}-{i}" for i in range(count)}
                for name in sorted(wanted):
                    hub.create(placement(name, deadline))
                seen: dict[str, datetime] = {}
                limit = time.monotonic() + seconds + 120
                while len(seen) < count and time.monotonic() < limit:
                    now = datetime.now(UTC)
                    for event in hub.list(Event, namespace="default").items:
                        name = event.involved_object.name or ""
                        if event.reason == DEADLINE_EXCEEDED_REASON and name in wanted:
                            seen.setdefault(name, now)
                    await asyncio.sleep(POLL_S)
                late: list[float] = []
                for name, at in seen.items():
                    status: PlacementStatus = await client.get_workflow_handle(
                        workflow_id(name)
                    ).query(QUERY_STATUS, result_type=PlacementStatus)
                    since = status.deadline.since if status.deadline else None
                    if since is None:
                        continue
                    late.append((at - (since + timedelta(seconds=seconds))).total_seconds())
                stop.set()
                await asyncio.wait_for(watching, timeout=30)
    if not late:
        print(f"no Event seen for {count} placements")
        return
    print(
        f"{count} placements, deadline {deadline}: {len(seen)} Events seen; Event time minus "
        f"deadline: p50 {statistics.median(late):.3f}s, p99 {percentile(late, 0.99):.3f}s, "
        f"max {max(late):.3f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=50)
    parser.add_argument("--deadline", default="3s")
    args = parser.parse_args()
    asyncio.run(run(args.placements, args.deadline))


if __name__ == "__main__":
    main()
