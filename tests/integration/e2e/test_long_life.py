"""A placement that can never be fully scheduled, under a flood of cluster changes, keeps a
bounded history and loses no event.

PickN 5 over a fleet of 2 is never fulfilled, so every label change on its clusters requeues it
(kubefleet-rules section 7). The server here refuses more than SERVER_SIGNAL_LIMIT signals per
run (`history.maximumSignalsPerExecution`, 10,000 by default); the workflow is told the same
limit, so it continues-as-new at the end of the turn in which it got that many. Signals that
arrive in between are refused by the server and must be retried by the watcher, not dropped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.watcher import Watcher, WatcherTiming
from hub.client import HubClient
from hub.types import MemberCluster
from tests.support.fleet import add_cluster, add_placement, live_targets, unique
from tests.support.waits import until_async
from workers.devserver import DevServer, free_port
from workers.worker import build_worker
from workflows import names
from workflows.models import PlacementInput
from workflows.placement import RUN_EVENTS_BOUND

SERVER_SIGNAL_LIMIT = 40
EVENTS = 1_000
# The first events wait for their signal, so that more signals than two runs take are sent
# even when a loaded machine lets the rest of the flood coalesce (then it is one per send).
PACED = 2 * SERVER_SIGNAL_LIMIT + 5


@pytest_asyncio.fixture(loop_scope="session")
async def limited_temporal(tmp_path: Path) -> AsyncIterator[Client]:
    """A dev server of its own, with a signal limit a test can reach."""
    server = DevServer(
        port=free_port(),
        ui=False,
        extra_args=[
            "--dynamic-config-value",
            f"history.maximumSignalsPerExecution={SERVER_SIGNAL_LIMIT}",
        ],
    )
    async with server:
        yield await Client.connect(server.target, data_converter=pydantic_data_converter)


async def _runs(client: Client, workflow_id: str) -> list[tuple[str, int]]:
    """(run id, number of history events) of every run of `workflow_id`."""
    runs: list[tuple[str, int]] = []
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
        events = [event async for event in handle.fetch_history_events()]
        runs.append((execution.run_id, len(events)))
    return runs


async def _continued(client: Client, workflow_id: str) -> int:
    count = 0
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                count += 1
    return count


async def test_a_flood_of_events_keeps_every_run_bounded_and_loses_none(
    limited_temporal: Client, hub: HubClient, task_queue: str
) -> None:
    client = limited_temporal
    placement = unique("never-full")
    first, second = unique("a"), unique("b")
    for name in (first, second):
        add_cluster(hub, name, labels={"env": "prod"})
    # It reads the `round` label the flood changes (a preference of weight 0: it scores
    # nothing), so every change may change its decision and is routed (requeue hints).
    reads_round = {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {"labelSelector": {"matchExpressions": [
            {"key": "round", "operator": "Exists"}]}}}
    ]}}  # fmt: skip
    add_placement(
        hub,
        placement,
        {"placementType": "PickN", "numberOfClusters": 5, "affinity": reads_round},
    )
    workflow_id = names.workflow_id(placement)
    # Started here, before the watcher, to pass the run limits; every later run inherits them.
    await client.start_workflow(
        names.PLACEMENT_WORKFLOW,
        PlacementInput(placement=placement, signals_per_run=SERVER_SIGNAL_LIMIT),
        id=workflow_id,
        task_queue=task_queue,
    )
    worker = build_worker(
        client,
        hub,
        task_queue=task_queue,
        settings=ActivitySettings(snapshotter=True),
        max_cached_workflows=0,
    )
    # No coalescing window: as many signals as the hub has events, short of one in flight.
    watcher = Watcher(
        hub, client, RunConfig(task_queue=task_queue), timing=WatcherTiming(coalesce_seconds=0.0)
    )
    stop = asyncio.Event()
    async with worker:
        watching = asyncio.create_task(watcher.run(stop))
        try:
            await watcher.wait_ready(timeout=30)
            await until_async(
                lambda: set(live_targets(hub, placement)) == {first, second}, blocking=True
            )

            def relabel(i: int) -> None:
                current = hub.get(MemberCluster, first)
                labels = {**current.metadata.labels, "round": str(i)}
                hub.update(
                    current.model_copy(
                        update={"metadata": current.metadata.model_copy(update={"labels": labels})}
                    )
                )

            for i in range(EVENTS):
                sent = watcher.stats.sent
                await asyncio.to_thread(relabel, i)
                if i < PACED:  # each its own signal, however slow the machine
                    await until_async(lambda sent=sent: watcher.stats.sent > sent)
            # The last event: a new cluster the placement wants. It must be acted on.
            last = unique("c")
            add_cluster(hub, last, labels={"env": "prod"})
            await until_async(
                lambda: set(live_targets(hub, placement)) == {first, second, last},
                timeout=120,
                blocking=True,
            )
            await until_async(lambda: watcher.idle, timeout=60, blocking=True)
        finally:
            stop.set()
            await asyncio.wait_for(watching, timeout=30)

    stats = watcher.stats
    assert stats.dropped == 0
    assert stats.sent > 2 * SERVER_SIGNAL_LIMIT  # enough signals to need several runs
    runs = await _runs(client, workflow_id)
    assert len(runs) >= 2 and await _continued(client, workflow_id) == len(runs) - 1
    assert max(events for _, events in runs) <= RUN_EVENTS_BOUND
    # Every run stayed within the signals the server takes.
    assert all(events < 20 * SERVER_SIGNAL_LIMIT for _, events in runs)
