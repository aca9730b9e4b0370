"""How late a scheduling deadline is reported (docs/operations.md, "Scheduling deadlines").

N placements with a deadline of a few seconds that cannot be fulfilled (PickFixed to a cluster
that never joins) are created at once. For each, the bench takes the moment its
ScheduleDeadlineExceeded Event is first seen, less the moment its deadline fell (when the
workflow's clock started, as its status says, plus the deadline): the delay of the timer, the
turn and the Event's write, plus how long the bench takes to see it. Prints p50, p99 and max,
and what the misses cost (`name value` lines): hub requests by verb and kind, workflow tasks,
turns and history events after each placement's deadline fell, and CPU seconds per process;
and where the lateness goes: when, after the deadline, its timer fired and the workflow task it
scheduled started and completed (a miss reported alone, or a local turn, runs inside that task).
The counts and CPU are those from the first deadline's fall: with a deadline shorter than the
first turns of N placements take, they include first turns (hub creates of snapshots show it);
a longer one (`--deadline 30s`) counts the misses alone.

The stack, by default, as users run it: devhub in the bench's process (standing in for the
hub's API server, which is never the scheduler's process), the Temporal dev server, and
`fleet-scheduler run` (worker, watcher and its `--processes`, one per core) as a child process;
the bench sees the Events by a watch. `--in-process` is the setup before issue 35: worker,
watcher and devhub in the bench's one process, which also lists every Event every 50 ms, so the
bench competes with what it measures for one interpreter; `dev` runs worker, watcher and devhub
in one process too, without that poll.

    .venv/bin/python bench/deadline.py --placements 200 --deadline 5s
    .venv/bin/python bench/deadline.py --placements 200 --deadline 5s --in-process"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.append(str(Path(__file__).resolve().parent))  # e2e_stack; after the repo's devhub

from e2e_stack import Stack, cpu_seconds, run_bench
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.watcher import Watcher
from devhub import DevHub
from hub import names
from hub.client import Bookmark, HubClient, WatchEvent
from hub.types import ClusterResourcePlacement, Event
from scheduler.opt_in.deadline import DEADLINE_EXCEEDED_REASON, parse_deadline
from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workers.worker import build_worker
from workflows.models import PlacementStatus
from workflows.names import QUERY_STATUS, workflow_id

POLL_S = 0.05
# The history events a miss's work shows as (after the placement's deadline fell).
COUNTED_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "workflow_tasks",
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "queue_activities",
    EventType.EVENT_TYPE_MARKER_RECORDED: "markers",
}


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


class Sightings:
    """When each wanted placement's deadline Event was first seen: by a watch (its own thread),
    or, `--in-process`, by polling every Event as the bench did before."""

    def __init__(self, hub: HubClient, wanted: set[str]) -> None:
        self.hub, self.wanted = hub, wanted
        self.seen: dict[str, datetime] = {}
        self.stop = threading.Event()

    def note(self, events: Iterable[Event]) -> None:
        now = datetime.now(UTC)
        for event in events:
            name = event.involved_object.name or ""
            if event.reason == DEADLINE_EXCEEDED_REASON and name in self.wanted:
                self.seen.setdefault(name, now)

    def watch(self) -> None:
        version = self.hub.list(Event, namespace="default").resource_version
        while not self.stop.is_set() and len(self.seen) < len(self.wanted):
            for change in self.hub.watch(Event, version, timeout_seconds=5):
                if isinstance(change, WatchEvent):
                    self.note([change.object])
                if isinstance(change, WatchEvent | Bookmark):
                    version = change.resource_version or version
                if self.stop.is_set() or len(self.seen) >= len(self.wanted):
                    break

    async def poll(self, until: float) -> None:
        while len(self.seen) < len(self.wanted) and time.monotonic() < until:
            self.note(self.hub.list(Event, namespace="default").items)
            await asyncio.sleep(POLL_S)


# Where the lateness goes, from each history: the timer's fire after the deadline, the wait
# for the workflow task it schedules, and that task (a local report or turn runs inside it).
STAGES = {
    EventType.EVENT_TYPE_TIMER_FIRED: "timer_fired",
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED: "task_started",
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "task_completed",
}


async def history_counts(
    client: Client,
    seen: Iterable[str],
    since: dict[str, datetime],
    seconds: float,
    stages: dict[str, list[float]],
) -> collections.Counter[str]:
    """What the placements' histories hold after each one's deadline fell; the time from the
    deadline to each stage of the first workflow task after it, into `stages`."""
    counts: collections.Counter[str] = collections.Counter()
    for name in seen:
        due = since[name] + timedelta(seconds=seconds)
        history = await client.get_workflow_handle(workflow_id(name)).fetch_history()
        reached: dict[str, float] = {}
        for event in history.events:
            at = event.event_time.ToDatetime(UTC)
            if at < due - timedelta(milliseconds=5):
                continue
            counts["history_events"] += 1
            if (what := COUNTED_EVENTS.get(event.event_type)) is not None:
                counts[what] += 1
            stage = STAGES.get(event.event_type)
            order = list(STAGES.values())
            wanted_next = [step for step in order if step not in reached][:1]
            if stage is not None and wanted_next == [stage]:
                reached[stage] = (at - due).total_seconds()
        for stage, after in reached.items():
            stages.setdefault(stage, []).append(after)
    return counts


def report(
    count: int,
    deadline: str,
    seconds: float,
    seen: dict[str, datetime],
    since: dict[str, datetime],
    requests: dict[tuple[str, str], int],
    counts: collections.Counter[str],
    cpu: dict[str, float],
) -> None:
    fell = {name: at + timedelta(seconds=seconds) for name, at in since.items()}
    late = [(at - fell[name]).total_seconds() for name, at in seen.items()]
    if not late:
        print(f"no Event seen for {count} placements")
        return
    print(
        f"# {count} placements, deadline {deadline}: {len(seen)} Events seen; Event time minus "
        f"deadline: p50 {statistics.median(late):.3f}s, p99 {percentile(late, 0.99):.3f}s, "
        f"max {max(late):.3f}s"
    )
    misses = len(seen)
    print(f"events_seen {misses}")
    print(f"late_p50_s {statistics.median(late):.3f}")
    print(f"late_p99_s {percentile(late, 0.99):.3f}")
    print(f"late_max_s {max(late):.3f}")
    total = sum(n for (verb, _), n in requests.items() if verb != "watch")
    print(f"hub_requests_per_miss {total / misses:.2f}")
    for (verb, resource), n in sorted(requests.items()):
        if verb != "watch":
            print(f"hub_{verb}_{resource}_per_miss {n / misses:.2f}")
    for what in ("workflow_tasks", "queue_activities", "markers", "history_events"):
        print(f"{what}_per_miss {counts[what] / misses:.2f}")
    for part, used in sorted(cpu.items()):
        print(f"cpu_ms_per_miss_{part} {1000 * used / misses:.1f}")
    print(f"cpu_ms_per_miss_all {1000 * sum(cpu.values()) / misses:.1f}")


async def statuses(client: Client, seen: Iterable[str]) -> dict[str, datetime]:
    since: dict[str, datetime] = {}
    for name in seen:
        status: PlacementStatus = await client.get_workflow_handle(workflow_id(name)).query(
            QUERY_STATUS, result_type=PlacementStatus
        )
        if status.deadline is not None and status.deadline.since is not None:
            since[name] = status.deadline.since
    return since


def delta(
    after: dict[tuple[str, str], int], before: dict[tuple[str, str], int]
) -> dict[tuple[str, str], int]:
    return {key: n - before.get(key, 0) for key, n in after.items() if n > before.get(key, 0)}


def cpu_of(pids: dict[str, int | None]) -> dict[str, float]:
    return {name: cpu_seconds(pid) or 0.0 for name, pid in pids.items() if pid is not None}


async def measure(
    hub: HubClient,
    devhub: DevHub,
    client: Client,
    count: int,
    deadline: str,
    pids: dict[str, int | None],
    in_process: bool,
) -> None:
    """Create the placements; the work counted is what happens from the first deadline's fall
    (after the first turns, which the bench waits out when they are quicker than the deadline)
    until every Event is seen, less the bench's own requests."""
    seconds = parse_deadline(deadline).seconds
    prefix = uuid.uuid4().hex[:6]
    wanted = {f"late-{prefix}-{i}" for i in range(count)}
    sightings = Sightings(hub, wanted)
    watching = None if in_process else asyncio.create_task(asyncio.to_thread(sightings.watch))
    started = time.monotonic()
    for name in sorted(wanted):
        hub.create(placement(name, deadline))
    # A clock starts at the placement's creationTimestamp, whole seconds: up to 1 s before.
    await asyncio.sleep(max(0.0, started + seconds - 1.2 - time.monotonic()))
    requests_before, cpu_before = devhub.stats.snapshot(), cpu_of(pids)
    limit = time.monotonic() + seconds + 120
    if in_process:
        await sightings.poll(limit)
    else:
        while len(sightings.seen) < count and time.monotonic() < limit:
            await asyncio.sleep(POLL_S)
    requests, cpu_after = delta(devhub.stats.snapshot(), requests_before), cpu_of(pids)
    sightings.stop.set()
    if watching is not None:
        await asyncio.wait_for(watching, timeout=30)
    if in_process:  # the bench's own lists of Events, one per poll
        requests.pop(("list", "events"), None)
    cpu = {part: cpu_after[part] - cpu_before.get(part, 0.0) for part in cpu_after}
    since = await statuses(client, sightings.seen)
    seen = {name: at for name, at in sightings.seen.items() if name in since}
    stages: dict[str, list[float]] = {}
    counts = await history_counts(client, seen, since, seconds, stages)
    report(count, deadline, seconds, seen, since, requests, counts, cpu)
    for stage, values in stages.items():
        print(f"{stage}_after_deadline_p50_s {statistics.median(values):.3f}")
        print(f"{stage}_after_deadline_p99_s {percentile(values, 0.99):.3f}")


async def run_in_process(count: int, deadline: str) -> None:
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
                pids = {"bench": os.getpid(), "temporal": _temporal_pid()}
                await measure(hub, devhub, client, count, deadline, pids, in_process=True)
                stop.set()
                await asyncio.wait_for(watching, timeout=30)


async def run_split(count: int, deadline: str, processes: int | None, workdir: Path) -> bool:
    stack = Stack(workdir, temporal_db="memory", server_args=[])
    queue = f"bench-deadline-{uuid.uuid4().hex[:6]}"
    with DevHub() as devhub:
        devhub.write_kubeconfig(stack.kubeconfig)
        hub = HubClient.from_kubeconfig(stack.kubeconfig, timeout=(2.0, 30.0))
        try:
            server = await stack.start_temporal()
            client = await connect(TemporalTarget(server.target, server.namespace))
            flags = [] if processes is None else ["--processes", str(processes)]
            scheduler = stack.scheduler_part("scheduler", queue, *flags)
            scheduler.start(ready=r"^fleet-scheduler run: ready in")
            scheduler.wait_ready()
            pids: dict[str, int | None] = {
                "devhub_and_bench": os.getpid(),
                "temporal": stack.temporal_pid,
                "scheduler": scheduler.pid,
                **scheduler.descendants(),
            }
            await measure(hub, devhub, client, count, deadline, pids, in_process=False)
        finally:
            await stack.stop_all()
    return True


def _temporal_pid() -> int | None:
    from e2e_stack import children_named

    pids = children_named("temporal")
    return pids[0] if len(pids) == 1 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=50)
    parser.add_argument("--deadline", default="3s")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="worker, watcher and devhub in the bench's process, Events polled (before issue 35)",
    )
    parser.add_argument(
        "--processes", type=int, default=None, help="`run --processes` (default: run's own)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the logs' directory")
    args = parser.parse_args()
    if args.in_process:
        asyncio.run(run_in_process(args.placements, args.deadline))
        return 0
    return run_bench(
        "deadline",
        lambda workdir: run_split(args.placements, args.deadline, args.processes, workdir),
        keep=args.keep,
    )


if __name__ == "__main__":
    sys.exit(main())
