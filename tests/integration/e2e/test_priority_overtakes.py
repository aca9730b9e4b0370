"""Priority end to end (docs/priority.md): against the real dev server, a placement of a high
PriorityClass created behind a backlog of low ones has its cycle run before most of them.

The backlog is made real and deterministic: the watcher and the workflow worker run, the
activity worker does not, so every placement's first turn waits on the activity task queue.
Then one activity slot starts taking them. First in, first out, the high one would go last; by
priority it goes within the first few.

Temporal orders tasks by priority within each task-queue partition, and a dev server gives a
queue four: which partition a poll reaches is luck, so on a loaded machine the high one once
came ninth. This test's server gives each queue one partition, so what it checks is the
server's priority order, not that luck; the bound is the same as with four."""

from __future__ import annotations

import asyncio
import functools
from datetime import datetime

import pytest
from temporalio.client import Client

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.watcher import Watcher
from hub.client import HubClient
from hub.names import PRIORITY_CLASS_ANNOTATION
from hub.types import ClusterResourcePlacement, PriorityClass
from tests.support.fleet import add_cluster, status, unique
from tests.support.waits import until_async
from workers.worker import build_worker
from workflows.names import SA_PRIORITY, workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

BACKLOG = 24
# Where the high placement's cycle may come at most: well before the backlog's end, with room
# for the partitions polled before the one holding it.
AT_MOST = 8


def priority_class(name: str, value: int) -> PriorityClass:
    return PriorityClass.from_wire(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
    )


def placement(name: str, cls: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name, "annotations": {PRIORITY_CLASS_ANNOTATION: cls}},
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {"placementType": "PickAll"},
            },
        }
    )


async def activity_started(client: Client, name: str) -> datetime:
    """When the placement's first turn's activity started (the server's clock)."""
    async for event in client.get_workflow_handle(workflow_id(name)).fetch_history_events():
        if event.HasField("activity_task_started_event_attributes"):
            return event.event_time.ToDatetime()
    raise AssertionError(f"{name}: no activity started")


async def test_a_high_priority_placement_overtakes_a_backlog(
    hub: HubClient, one_partition: Client, task_queue: str
) -> None:
    temporal_client = one_partition
    add_cluster(hub, unique("member"))
    low, high = unique("low"), unique("high")
    hub.create(priority_class(low, -10))
    hub.create(priority_class(high, 1000))
    backlog = [unique("backlog") for _ in range(BACKLOG)]
    urgent = unique("urgent")

    workflows = build_worker(
        temporal_client,
        hub,
        task_queue=task_queue,
        settings=ActivitySettings(),
        activities=False,
        max_cached_workflows=0,
    )
    # Turns on the activity queue, whose order the activity worker's slots show.
    watcher = Watcher(
        hub, temporal_client, RunConfig(task_queue=task_queue, local_cycles_up_to=0)
    )
    stop = asyncio.Event()
    async with workflows:
        watching = asyncio.create_task(watcher.run(stop))
        try:
            await watcher.wait_ready(timeout=30)
            # The watcher knows the classes (readiness does not wait for them).
            await until_async(
                lambda: {low, high} <= set(watcher.priority_classes.values), blocking=True
            )

            async def waiting(name: str) -> bool:
                current = await status(temporal_client, name)
                return current is not None and current.phase == "running"

            async def turned(name: str) -> bool:
                current = await status(temporal_client, name)
                return current is not None and current.cycles >= 1

            for name in backlog:
                hub.create(placement(name, low))
            for name in backlog:  # every first turn is on the activity queue
                await until_async(
                    functools.partial(waiting, name), what=f"{name}'s first turn queued"
                )
            hub.create(placement(urgent, high))
            await until_async(
                functools.partial(waiting, urgent), what=f"{urgent}'s first turn queued"
            )

            activities = build_worker(
                temporal_client,
                hub,
                task_queue=task_queue,
                settings=ActivitySettings(),
                workflows=False,
                max_concurrent_activities=1,
            )
            async with activities:
                for name in [*backlog, urgent]:
                    await until_async(functools.partial(turned, name), what=f"{name}'s first cycle")
                # It was told its priority, and shows it (a query needs a running worker).
                told = await status(temporal_client, urgent)
        finally:
            stop.set()
            await asyncio.wait_for(watching, timeout=30)

    started = {name: await activity_started(temporal_client, name) for name in [*backlog, urgent]}
    order = sorted(started, key=started.__getitem__)
    position = order.index(urgent) + 1
    assert position <= AT_MOST, f"the high placement ran {position} of {BACKLOG + 1}: {order}"
    assert told is not None and told.priority is not None
    assert (told.priority.value, told.priority.priority_class) == (1000, high)
    assert told.last_turn_key == 2
    description = await temporal_client.get_workflow_handle(workflow_id(urgent)).describe()
    assert description.typed_search_attributes.get(SA_PRIORITY) == 1000
