"""A new placement during a full resync (issue 35): the resync's requeues go straight to the
placement workflows at the fan-out key, as the reconcile and a watcher's start send them, one
key below each placement's own; a placement created while their turns wait has its first turn
at its own key and goes before all of them.

Real parts: devhub, the Temporal dev server (one partition per queue, as
test_priority_overtakes says why), the watcher and our workers. The backlog is made real and
deterministic by holding what serves it: no activity worker runs while the turns queue."""

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
from scheduler.framework.queue_sort import DEFAULT_PRIORITY_KEY
from tests.integration.e2e.turn_order import has_cycles, turn_queued
from tests.support.fleet import add_cluster, add_placement, unique
from tests.support.waits import until_async
from workers.worker import build_worker
from workflows.models import RequeueRequest
from workflows.names import SIGNAL_REQUEUE, workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

BACKLOG = 8
PICK_ALL = {"placementType": "PickAll"}
# The key of our own resyncs' requeues: one below a plain placement's own (docs/priority.md).
FAN_OUT_KEY = DEFAULT_PRIORITY_KEY + 1


async def activities_started(client: Client, name: str) -> list[tuple[datetime, int]]:
    """When each of the placement's activities (its queued turns) started, server time, and
    the priority key each was scheduled at."""
    keys: dict[int, int] = {}
    started: list[tuple[datetime, int]] = []
    async for event in client.get_workflow_handle(workflow_id(name)).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            keys[event.event_id] = scheduled.priority.priority_key
        elif event.HasField("activity_task_started_event_attributes"):
            scheduled_id = event.activity_task_started_event_attributes.scheduled_event_id
            started.append((event.event_time.ToDatetime(), keys[scheduled_id]))
    return started


async def test_a_new_placement_goes_before_a_resync_sent_straight_to_the_workflows(
    hub: HubClient, one_partition: Client, task_queue: str
) -> None:
    client = one_partition
    add_cluster(hub, unique("member"))
    settled = [unique("settled") for _ in range(BACKLOG)]
    new = unique("new")
    workflows = build_worker(
        client, hub, task_queue=task_queue, settings=ActivitySettings(), activities=False,
        max_cached_workflows=0,
    )  # fmt: skip
    watcher = Watcher(hub, client, RunConfig(task_queue=task_queue, local_cycles_up_to=0))
    stop = asyncio.Event()
    async with workflows:
        watching = asyncio.create_task(watcher.run(stop))
        try:
            await watcher.wait_ready(timeout=30)
            first = build_worker(
                client, hub, task_queue=task_queue, settings=ActivitySettings(), workflows=False
            )
            async with first:
                for name in settled:
                    add_placement(hub, name, PICK_ALL)
                for name in settled:
                    await until_async(
                        functools.partial(has_cycles, client, name, 1), what=f"{name} scheduled"
                    )
            # The resync: a requeue to every workflow at the fan-out key; each turn waits on
            # the activity queue, as a resync's do behind the ones running.
            resync = RequeueRequest(reason="full resync", priority=FAN_OUT_KEY)
            for name in settled:
                await client.get_workflow_handle(workflow_id(name)).signal(SIGNAL_REQUEUE, resync)
            for name in settled:
                await until_async(
                    functools.partial(turn_queued, client, name), what=f"{name}'s resync turn"
                )
            add_placement(hub, new, PICK_ALL)
            await until_async(functools.partial(turn_queued, client, new), what="new's turn")
            activities = build_worker(
                client, hub, task_queue=task_queue, settings=ActivitySettings(), workflows=False,
                max_concurrent_activities=1,
            )  # fmt: skip
            async with activities:
                for name in [new, *settled]:
                    await until_async(
                        functools.partial(has_cycles, client, name, 2 if name != new else 1),
                        what=f"{name}'s turn",
                    )
        finally:
            stop.set()
            await asyncio.wait_for(watching, timeout=30)
    (new_started, new_key), *_ = await activities_started(client, new)
    resynced = [(await activities_started(client, name))[-1] for name in settled]
    assert new_key == DEFAULT_PRIORITY_KEY
    assert {key for _, key in resynced} == {FAN_OUT_KEY}
    late = [name for name, (at, _) in zip(settled, resynced, strict=True) if at < new_started]
    assert not late, f"resync turns ran before the new placement's first: {late}"
