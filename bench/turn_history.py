"""What one re-decision turn costs the Temporal server: history events, workflow tasks and
payload bytes per turn, and the server process's CPU per turn.

    python bench/turn_history.py [--clusters 1000] [--edits 20] [--turn-execution auto]

One process holds devhub (embedded) and the scheduler as `fleet-scheduler run` wires it (worker
and watcher, `workers.worker.serve` with a bare process's defaults: workflows cached, the
workers choosing where turns run); the Temporal dev server (SQLite) is a child, so its CPU
(/proc, bench/e2e_stack.cpu_seconds) is its own. On bench/e2e_load's fleet, two placements of
KubeFleet's mix (bench/e2e_load.region_env_placement): a PickAll of one region and a PickN-10
on env. Once both are scheduled, each is edited --edits times, one edit at a time (the two
taking turns), as
bench/kubefleet_report's churn edits them (PickAll: the gpu toleration, then a preferred term
on and off; PickN: numberOfClusters 11, 10, ...); each edit waits for its generation to be
fully scheduled (read from the hub, not by a query, which the server would serve) and a short
settle, so every turn the edit causes (the watcher's signals, a snapshot's) is counted.

Prints `name value` lines, per placement type (`pick_all`, `pick_n`) and for both together
(no suffix):
- turn.events_per_edit, turn.bytes_per_edit: history events and their protobuf bytes (as the
  server stores them) added per edit; turn.turns_per_edit: schedule_once turns per edit;
- turn.workflow_tasks_per_edit: workflow tasks completed per edit;
- turn.signals_per_edit, turn.markers_per_edit, turn.upserts_per_edit, turn.timers_per_edit;
- turn.bytes.<event type>_per_edit: where the bytes are;
- turn.result_bytes_per_turn: the turn's result (the local-activity marker's or the activity
  completion's payload);
- server.cpu_ms_per_edit: the Temporal server's CPU during the edits, divided by the edits, and
  server.idle_cpu_ms_per_s, its CPU per second when nothing runs (measured before the edits),
  with server.cpu_ms_per_edit_less_idle.
`--max-cached-workflows 1` makes every turn miss the worker's workflow cache, as in a fleet with
more placements than the cache holds: the server sends the run's history and the worker replays
it, so the figures grow with the history's size. `--local-cycles-up-to 0` runs every turn on
the activity queue (the split Deployments' shape above 2,000 clusters).
Counts do not depend on the machine's load; CPU does somewhat (a busy machine's server
batches less)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import e2e_load
from e2e_stack import cpu_seconds
from kubefleet_report import churn_edit
from outage import report
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from control.config import DEFAULT_MAX_CACHED_WORKFLOWS, RunConfig
from devhub import DevHub
from devhub.sample import apply_fleet
from hub.client import HubClient
from hub.types import ClusterResourcePlacement
from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workers.worker import serve
from workflows import names
from workflows.names import ACTIVITY_SCHEDULE_ONCE

PICK_N = 10
SETTLE_S = 1.0  # after an edit is scheduled: a turn it causes later (a snapshot's) lands too
POLL_S = 0.05
IDLE_S = 5.0


def scheduled(hub: HubClient, name: str, generation: int) -> bool:
    placement = hub.get(ClusterResourcePlacement, name)
    condition = placement.status.condition(ClusterResourcePlacement.SCHEDULED_CONDITION)
    return (
        condition is not None
        and condition.status == "True"
        and condition.observed_generation == generation
        and placement.metadata.generation == generation
    )


async def wait_scheduled(hub: HubClient, name: str, generation: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(scheduled, hub, name, generation):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: generation {generation} not scheduled in {timeout:g}s")
        await asyncio.sleep(POLL_S)


async def events_of(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """Every event of the workflow's runs so far, the first run's first."""
    handle = client.get_workflow_handle(workflow_id)
    runs: list[list[HistoryEvent]] = []
    run_id: str | None = (await handle.describe()).run_id
    while run_id:
        events = [
            e
            async for e in client.get_workflow_handle(
                workflow_id, run_id=run_id
            ).fetch_history_events()
        ]
        runs.append(events)
        first = events[0].workflow_execution_started_event_attributes
        run_id = first.continued_execution_run_id or None
    return [e for run in reversed(runs) for e in run]


def is_turn_result(event: HistoryEvent, turn_scheduled: set[int]) -> int | None:
    """The result bytes of a schedule_once turn this event completes, else None."""
    if event.HasField("marker_recorded_event_attributes"):
        marker = event.marker_recorded_event_attributes
        if marker.marker_name == "core_local_activity":
            result = marker.details.get("result")
            return sum(p.ByteSize() for p in result.payloads) if result is not None else 0
    scheduled = event.activity_task_scheduled_event_attributes
    if event.HasField("activity_task_scheduled_event_attributes") and (
        scheduled.activity_type.name.endswith(ACTIVITY_SCHEDULE_ONCE)
    ):
        turn_scheduled.add(event.event_id)
    if event.HasField("activity_task_completed_event_attributes"):
        completed = event.activity_task_completed_event_attributes
        if completed.scheduled_event_id in turn_scheduled:
            return sum(p.ByteSize() for p in completed.result.payloads)
    return None


def tally(events: list[HistoryEvent], after: int) -> dict[str, float]:
    """Counts and bytes of the events after the first `after` (across runs: by position)."""
    counts: dict[str, float] = collections.Counter()
    turn_scheduled: set[int] = set()
    for event in events[:after]:
        is_turn_result(event, turn_scheduled)
    for event in events[after:]:
        kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()
        size = event.ByteSize()
        counts["events"] += 1
        counts["bytes"] += size
        counts[f"bytes.{kind}"] += size
        counts[f"count.{kind}"] += 1
        result = is_turn_result(event, turn_scheduled)
        if result is not None:
            counts["turns"] += 1
            counts["result_bytes"] += result
    return counts


async def run(args: argparse.Namespace) -> None:
    tag = uuid.uuid4().hex[:4]
    with tempfile.TemporaryDirectory(prefix="turn-history-") as work, DevHub() as devhub:
        hub = HubClient.from_kubeconfig(devhub.write_kubeconfig(Path(work) / "kubeconfig"))
        report("machine.load1.start", os.getloadavg()[0])
        docs = e2e_load.fleet(args.clusters)
        devhub.call(lambda store: apply_fleet(store, docs), timeout=300)
        server = DevServer(port=free_port(), ui=False, data_dir=Path(work) / "temporal")
        async with server:
            assert server.pid is not None
            client = await connect(TemporalTarget(server.target, server.namespace))
            config = RunConfig(
                task_queue=f"turn-history-{tag}",
                local_cycles_up_to=args.local_cycles_up_to,
                max_cached_workflows=args.max_cached_workflows,
                log_level="WARNING",
            )
            stop = asyncio.Event()
            serving = asyncio.create_task(serve(client, hub, stop, config))
            try:
                await measure(args, tag, client, hub, server.pid)
            finally:
                stop.set()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(serving, timeout=60)
        report("machine.load1.end", os.getloadavg()[0])
        hub.close()


async def measure(
    args: argparse.Namespace, tag: str, client: Client, hub: HubClient, server_pid: int
) -> None:
    # Slot 7 of the mix: a PickAll of one region; slot 0: a PickN on env.
    bodies = {
        "pick_all": e2e_load.region_env_placement(f"th-{tag}-all", 7, PICK_N),
        "pick_n": e2e_load.region_env_placement(f"th-{tag}-n", 0, PICK_N),
    }
    for body in bodies.values():
        hub.create(ClusterResourcePlacement.from_wire(body))
    for body in bodies.values():
        await wait_scheduled(hub, body["metadata"]["name"], 1, args.timeout)
    await asyncio.sleep(SETTLE_S * 2)
    before = {
        kind: len(await events_of(client, names.workflow_id(body["metadata"]["name"])))
        for kind, body in bodies.items()
    }
    idle_start = cpu_seconds(server_pid) or 0.0
    await asyncio.sleep(IDLE_S)
    idle_ms_per_s = ((cpu_seconds(server_pid) or 0.0) - idle_start) * 1000 / IDLE_S
    started_cpu = cpu_seconds(server_pid) or 0.0
    started = time.monotonic()
    for edit in range(args.edits):
        for body in bodies.values():  # one after the other: with a cache of 1, every turn misses
            name = body["metadata"]["name"]
            patch = churn_edit(body["spec"]["policy"], edit, PICK_N)
            placement = hub.patch(ClusterResourcePlacement, name, patch)
            generation = placement.metadata.generation
            assert generation is not None
            await wait_scheduled(hub, name, generation, args.timeout)
            await asyncio.sleep(SETTLE_S)
    report("edits_per_placement", args.edits)
    elapsed = time.monotonic() - started
    cpu_ms = ((cpu_seconds(server_pid) or 0.0) - started_cpu) * 1000
    edits = args.edits * len(bodies)
    totals: dict[str, float] = collections.Counter()
    for kind, body in bodies.items():
        events = await events_of(client, names.workflow_id(body["metadata"]["name"]))
        counts = tally(events, before[kind])
        totals.update(counts)
        print_counts(counts, args.edits, f".{kind}")
    print_counts(totals, edits, "")
    report("server.idle_cpu_ms_per_s", idle_ms_per_s)
    report("server.cpu_ms_per_edit", cpu_ms / edits)
    report("server.cpu_ms_per_edit_less_idle", (cpu_ms - idle_ms_per_s * elapsed) / edits)


def print_counts(counts: dict[str, Any], edits: int, suffix: str) -> None:
    per = {key: value / edits for key, value in counts.items()}
    turns = counts.get("turns", 0) or 1
    report(f"turn.turns_per_edit{suffix}", per.get("turns", 0.0))
    report(f"turn.events_per_edit{suffix}", per.get("events", 0.0))
    report(f"turn.bytes_per_edit{suffix}", per.get("bytes", 0.0))
    report(f"turn.workflow_tasks_per_edit{suffix}", per.get("count.workflow_task_completed", 0.0))
    report(f"turn.signals_per_edit{suffix}", per.get("count.workflow_execution_signaled", 0.0))
    report(f"turn.markers_per_edit{suffix}", per.get("count.marker_recorded", 0.0))
    report(
        f"turn.upserts_per_edit{suffix}",
        per.get("count.upsert_workflow_search_attributes", 0.0),
    )
    report(f"turn.timers_per_edit{suffix}", per.get("count.timer_started", 0.0))
    report(f"turn.result_bytes_per_turn{suffix}", counts.get("result_bytes", 0) / turns)
    if not suffix:
        for key in sorted(k for k in per if k.startswith("bytes.")):
            report(f"turn.{key}_per_edit", per[key])
        for key in sorted(k for k in per if k.startswith("count.")):
            report(f"turn.{key}_per_edit", per[key])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=20, help="edits of each placement")
    parser.add_argument("--timeout", type=float, default=120.0, help="per edit, seconds")
    parser.add_argument(
        "--local-cycles-up-to",
        type=int,
        default=None,
        help="as `run --local-cycles-up-to` (default: the workers choose)",
    )
    parser.add_argument(
        "--max-cached-workflows",
        type=int,
        default=DEFAULT_MAX_CACHED_WORKFLOWS,
        help="as `run --max-cached-workflows`; 1: every turn misses the worker's cache and "
        "its run's history is sent and replayed (a fleet with more placements than the cache)",
    )
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
