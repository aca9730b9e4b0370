"""History bench: what one cycle adds to a placement's event history at 1,000 and 5,000 member
clusters with 40-character names, and how large the status answer and continue-as-new input are.

    python bench/history.py [--clusters 1000 5000] [--cycles 5] [--names patterned random]

One process holds devhub (embedded) and the real worker; the Temporal dev server is a child. Per
fleet size and naming: the fleet is created (labels and node counts independent of the names),
then two placements are started: a PickAll with a required term that about a third of the
clusters fail, and a PickN of 10 with preferred terms (a label and a node-count sorter, so
scores vary from cluster to cluster) and a topology spread. After their first cycles, each
measured cycle changes one cluster's labels so that both placements decide differently (the
explanation changes, so it must be recorded again), then requeues both; one more requeue
changes nothing (the same fates: only a digest is recorded). The runs are set to continue as new
after the last turn, so the continue-as-new input is measured too. Prints `name value` lines:

- history.bytes_per_cycle.<K>: the largest number of history bytes (the events' protobuf size,
  as the server stores them) that one deciding cycle of either placement added, signal included;
  `.<names>.<placement type>.max` / `.median` break it down;
- history.bytes_same_fates.<K>: the cycle that decided the same fates again;
- history.continue_as_new_input_bytes.<K> and history.status_answer_bytes.<K>: the largest of the
  two placements'; history.explanation_answer_bytes.<K> (a query: not in history);
- explain.clusters.<K>: clusters `explain` lists for the PickAll placement (must be K).

Names: `patterned` is how fleets name clusters (environment, region, team, number:
"prod-westeurope-payments-cluster-00042"); `random` is 40 random characters, the worst case, whose
names cannot be packed below about 25 bytes each."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from outage import report
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from activities.plumbing import ActivitySettings
from devhub import DevHub
from devhub.sample import apply_fleet
from hub import names as hub_names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster
from scheduler.testing import member_cluster
from workers.cli.render import render_explain
from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workers.worker import build_worker
from workflows import names
from workflows.models import PlacementExplanation, PlacementInput, PlacementStatus, RequeueRequest
from workflows.names import ACTIVITY_SCHEDULE_ONCE
from workflows.placement import PlacementWorkflow

ENVS = ("prod", "stage", "dev", "canary")
REGIONS = (
    "eastus", "eastus2", "westus2", "westus3", "centralus", "northeurope", "westeurope",
    "uksouth", "francecentral", "japaneast", "koreacentral", "australiaeast", "southeastasia",
    "canadacentral", "brazilsouth", "swedencentral",
)
TEAMS = (
    "payments", "checkout", "identity", "search", "catalog", "inventory", "shipping", "billing",
    "analytics", "gateway", "messaging", "ledger", "pricing", "orders", "storage", "edge",
)
ZONES = ("zone-1", "zone-2", "zone-3", "zone-4", "zone-5")
NAME_LENGTH = 40


def cluster_names(count: int, style: str) -> list[str]:
    if style == "random":
        rng = random.Random(7)
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        return ["c" + "".join(rng.choices(alphabet, k=NAME_LENGTH - 1)) for _ in range(count)]
    out = []
    for i in range(count):
        env, region = ENVS[i % len(ENVS)], REGIONS[(i // 4) % len(REGIONS)]
        team = TEAMS[(i // 64) % len(TEAMS)]
        stem = f"{env}-{region}-{team}-cluster-fleet"[: NAME_LENGTH - 6].ljust(NAME_LENGTH - 6, "x")
        out.append(f"{stem}-{i:05d}")
    return out


def fleet(names_: list[str]) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    rng = random.Random(11)
    out = []
    for name in names_:
        nodes = rng.randrange(3, 100)
        labels = {"env": rng.choice(("prod", "staging", "dev")), "zone": rng.choice(ZONES)}
        if rng.random() < 0.25:
            labels["tier"] = "gold"
        out.append(
            member_cluster(
                name,
                now,
                labels=labels,
                properties={hub_names.NODE_COUNT_PROPERTY: str(nodes)},
                heartbeat_age=timedelta(0),
            ).to_wire()
        )
    return out


def placements(tag: str) -> list[ClusterResourcePlacement]:
    selectors = [{"group": "", "version": "v1", "kind": "Namespace", "name": "app"}]
    required = {
        "clusterSelectorTerms": [
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": "env", "operator": "In", "values": ["prod", "staging"]}
                    ]
                }
            }
        ]
    }
    pick_all = {"placementType": "PickAll", "affinity": {"clusterAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": required}}}
    pick_n = {
        "placementType": "PickN",
        "numberOfClusters": 10,
        "affinity": {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 30, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}},
            {"weight": 60, "preference": {"propertySorter": {
                "name": hub_names.NODE_COUNT_PROPERTY, "sortOrder": hub_names.SORT_DESCENDING}}},
        ]}},
        "topologySpreadConstraints": [
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": hub_names.SCHEDULE_ANYWAY}
        ],
    }
    return [
        ClusterResourcePlacement.from_wire(
            {"metadata": {"name": f"{tag}-{kind}"}, "spec": {"resourceSelectors": selectors,
                                                             "policy": policy}}
        )
        for kind, policy in (("all", pick_all), ("n", pick_n))
    ]


Handle = WorkflowHandle[PlacementWorkflow, PlacementStatus]


async def wait_for_cycle(handle: Handle, cycle: int, timeout: float = 600.0) -> PlacementStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = await handle.query(PlacementWorkflow.status)
        if status.cycles >= cycle and status.phase in ("idle", "done"):
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"{handle.id}: cycle {cycle} not reached: {status}")
        await asyncio.sleep(0.2)


async def run_events(client: Client, workflow_id: str, run_id: str) -> list[HistoryEvent]:
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    return [event async for event in handle.fetch_history_events()]


def bytes_per_turn(events: list[HistoryEvent]) -> list[int]:
    """History bytes of each schedule_once turn: from the event after the previous turn's
    completion through this turn's completion (the signal that caused it included)."""
    turns, current = [], 0
    scheduled: set[int] = set()
    for event in events[1:]:  # the workflow's start is no cycle's
        current += event.ByteSize()
        scheduled_attributes = event.activity_task_scheduled_event_attributes
        completed_attributes = event.activity_task_completed_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes"):
            if scheduled_attributes.activity_type.name == ACTIVITY_SCHEDULE_ONCE:
                scheduled.add(event.event_id)
        elif (
            event.HasField("activity_task_completed_event_attributes")
            and completed_attributes.scheduled_event_id in scheduled
        ):
            turns.append(current)
            current = 0
    return turns


async def payload_bytes(client: Client, value: Any) -> int:
    (payload,) = await client.data_converter.encode([value])
    return payload.ByteSize()


async def measure(
    args: argparse.Namespace, clusters: int, style: str, client: Client, hub: HubClient
) -> dict[str, int]:
    tag = f"h{clusters}{style[0]}-{uuid.uuid4().hex[:4]}"
    queue = f"history-{tag}"
    all_names = cluster_names(clusters, style)
    docs = fleet(all_names)
    started = time.monotonic()
    created = args.devhub.call(lambda store: apply_fleet(store, docs), timeout=300)
    assert len(created) == clusters
    report(f"setup.{clusters}.{style}.clusters_s", time.monotonic() - started)
    turns = args.cycles + 2  # the first, the deciding ones, one with the same fates
    handles: list[Handle] = []
    worker = build_worker(client, hub, task_queue=queue, settings=ActivitySettings())
    figures: dict[str, int] = {}
    async with worker:
        for placement in placements(tag):
            hub.create(placement)
            handles.append(
                await client.start_workflow(
                    PlacementWorkflow.run,
                    PlacementInput(placement=placement.name, turns_per_run=turns),
                    id=names.workflow_id(placement.name),
                    task_queue=queue,
                )
            )
        for handle in handles:
            await wait_for_cycle(handle, 1)
        report(f"setup.{clusters}.{style}.first_cycles_s", time.monotonic() - started)
        first_runs = [(await h.describe()).run_id for h in handles]
        rng = random.Random(3)
        for cycle in range(2, args.cycles + 2):
            # One cluster moves across the PickAll's required term and the PickN's gold tier.
            name = rng.choice(all_names)
            current = hub.get(MemberCluster, name).metadata.labels or {}
            env = "dev" if current.get("env") in ("prod", "staging") else "prod"
            tier = None if current.get("tier") == "gold" else "gold"
            hub.patch(MemberCluster, name, {"metadata": {"labels": {"env": env, "tier": tier}}})
            for handle in handles:
                await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="bench"))
            for handle in handles:
                await wait_for_cycle(handle, cycle)
        for handle in handles:
            await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="same"))
        for handle in handles:
            await wait_for_cycle(handle, args.cycles + 2)
        # Each run has continued as new after its last turn: read the runs that did the work.
        deciding: list[int] = []
        for handle, run_id in zip(handles, first_runs, strict=True):
            events = await run_events(client, handle.id, run_id)
            per_turn = bytes_per_turn(events)
            kind = "pick_all" if handle.id.endswith("-all") else "pick_n"
            changed = per_turn[: args.cycles + 1]
            deciding += changed
            report(f"history.bytes_per_cycle.{clusters}.{style}.{kind}.max", max(changed))
            report(
                f"history.bytes_per_cycle.{clusters}.{style}.{kind}.median",
                statistics.median(changed),
            )
            report(f"history.bytes_same_fates.{clusters}.{style}.{kind}", per_turn[-1])
            figures.setdefault("same", 0)
            figures["same"] = max(figures["same"], per_turn[-1])
            carried = [
                e.workflow_execution_continued_as_new_event_attributes.input.payloads[0].ByteSize()
                for e in events
                if e.HasField("workflow_execution_continued_as_new_event_attributes")
            ]
            figures["can"] = max(figures.get("can", 0), *carried)
            status = await handle.query(PlacementWorkflow.status)
            figures["status"] = max(figures.get("status", 0), await payload_bytes(client, status))
            answer = await handle.query(names.QUERY_EXPLANATION, result_type=PlacementExplanation)
            figures["answer"] = max(figures.get("answer", 0), await payload_bytes(client, answer))
            if kind == "pick_all":
                text = render_explain(status.model_copy(update={"last": answer.last}),
                                      answer.deciding)
                figures["explained"] = sum(1 for n in all_names if f"\n{n} " in text)
        figures["cycle"] = max(deciding)
    for placement in placements(tag):
        hub.delete(ClusterResourcePlacement, placement.name)
    args.devhub.reset()
    return figures


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="history-bench-") as work, DevHub() as devhub:
        args.devhub = devhub
        hub = HubClient.from_kubeconfig(devhub.write_kubeconfig(Path(work) / "kubeconfig"))
        report("machine.load1.start", os.getloadavg()[0])
        server = DevServer(port=free_port(), ui=False, data_dir=Path(work) / "temporal")
        async with server:
            client = await connect(TemporalTarget(server.target, server.namespace))
            for clusters in args.clusters:
                for style in args.names:
                    figures = await measure(args, clusters, style, client, hub)
                    suffix = "" if style == "patterned" else f".{style}"
                    report(f"history.bytes_per_cycle.{clusters}{suffix}", figures["cycle"])
                    report(f"history.bytes_same_fates.{clusters}{suffix}", figures["same"])
                    report(f"history.continue_as_new_input_bytes.{clusters}{suffix}",
                           figures["can"])
                    report(f"history.status_answer_bytes.{clusters}{suffix}", figures["status"])
                    report(f"history.explanation_answer_bytes.{clusters}{suffix}",
                           figures["answer"])
                    report(f"explain.clusters.{clusters}{suffix}", figures["explained"])
        report("machine.load1.end", os.getloadavg()[0])
        hub.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="*", default=[1000, 5000])
    parser.add_argument("--cycles", type=int, default=5, help="deciding cycles measured")
    parser.add_argument("--names", nargs="*", default=["patterned", "random"],
                        choices=["patterned", "random"])
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
