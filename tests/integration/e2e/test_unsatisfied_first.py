"""Unsatisfied first end to end (docs/priority.md, issue 35): within a class, a placement that
has less than it asks for overtakes a backlog of re-decisions of placements that already have
it, with turns on the activity queue and with turns run locally in the workflow worker; and a
new placement overtakes a backlog of edited ones (new first), beside activity processes, where
the edits' turns run local and on the queue.

Real parts: devhub, the Temporal dev server (one partition per queue, as
test_priority_overtakes says why), the watcher and our workers. Each backlog is made real and
deterministic by holding what serves it: the activity worker is not running (queue), or the
one local slot is held by the test (local)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import pytest
from temporalio import activity
from temporalio.client import Client

from activities.local_slots import LocalSlots, TurnOrder
from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.watcher import Watcher
from hub.client import HubClient
from hub.types import ClusterResourcePlacement
from scheduler import load_profile
from scheduler.framework.queue_sort import TurnCause
from scheduler.requeue.watch_rules import scheduled_condition_current
from tests.integration.e2e.turn_order import cycles, has_cycles, turn_queued
from tests.support.fleet import add_cluster, add_placement, status, unique
from tests.support.waits import until_async
from workers.worker import PlacementWorkers, build_worker, local_slots
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

BACKLOG = 8
PICK_ALL = {"placementType": "PickAll"}
# An edit that keeps the placement's clusters: a preferred term no cluster matches.
PREFERRING = {
    "placementType": "PickAll",
    "affinity": {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"labelSelector": {"matchLabels": {"edited": "yes"}}}}
    ]}},
}  # fmt: skip


async def last_activity_started(client: Client, name: str) -> datetime:
    """When the placement's latest activity (its latest queued turn) started, server time."""
    started = None
    async for event in client.get_workflow_handle(workflow_id(name)).fetch_history_events():
        if event.HasField("activity_task_started_event_attributes"):
            started = event.event_time.ToDatetime()
    assert started is not None, f"{name}: no activity started"
    return started


async def seen(watcher: Watcher, name: str, order: TurnOrder) -> bool:
    """The watcher orders a fan-out turn of `name` at `order`: it has seen its Scheduled
    condition (True: a re-decision; not True: a placement short of what it asks for)."""
    return watcher.queue_priority(name, TurnCause.FAN_OUT).order == order


def hub_condition_false(hub: HubClient, name: str) -> bool:
    """The placement's Scheduled condition at its generation is False (short of its N)."""
    condition = scheduled_condition_current(hub.get(ClusterResourcePlacement, name))
    return condition is not None and condition.status == "False"


async def test_on_the_queue_a_placement_short_of_its_n_overtakes_re_decisions(
    hub: HubClient, one_partition: Client, task_queue: str
) -> None:
    """A cluster joins: every placement's turn waits on the activity queue. The ones that
    have what they asked for (PickAll) are re-decisions, one key lower; the PickN placement
    short of its N, created last, is not demoted and its turn goes first once a slot frees."""
    client = one_partition
    add_cluster(hub, unique("member"))
    settled = [unique("settled") for _ in range(BACKLOG)]
    short = unique("short")
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
                add_placement(hub, short, {"placementType": "PickN", "numberOfClusters": 2})
                for name in [*settled, short]:
                    await until_async(
                        functools.partial(has_cycles, client, name, 1), what=f"{name} scheduled"
                    )
                for name in settled:
                    await until_async(
                        functools.partial(seen, watcher, name, (4, 2)), what=f"{name} satisfied"
                    )
                # Its condition says 1 of 2: short of its N, its fan-outs at its own key.
                await until_async(
                    lambda: hub_condition_false(hub, short), what="short's condition", blocking=True
                )
                await until_async(functools.partial(seen, watcher, short, (3, 1)), what=short)
            before = {name: await cycles(client, name) for name in [*settled, short]}
            add_cluster(hub, unique("joined"))  # reaches every placement
            for name in [*settled, short]:
                await until_async(
                    functools.partial(turn_queued, client, name), what=f"{name}'s turn queued"
                )
            activities = build_worker(
                client, hub, task_queue=task_queue, settings=ActivitySettings(), workflows=False,
                max_concurrent_activities=1,
            )  # fmt: skip
            async with activities:
                for name in [*settled, short]:
                    await until_async(
                        functools.partial(has_cycles, client, name, before[name] + 1),
                        what=f"{name}'s turn after the join",
                    )
        finally:
            stop.set()
            await asyncio.wait_for(watching, timeout=30)
    started = {name: await last_activity_started(client, name) for name in [*settled, short]}
    order = sorted(started, key=started.__getitem__)
    assert order[0] == short, f"the placement short of its N ran {order.index(short) + 1}: {order}"


@dataclass
class RecordingSlots(LocalSlots):
    """The worker's real local slots, recording the turns they let run: each one's order and
    its placement's workflow id (None: the test's own hold)."""

    granted: list[tuple[TurnOrder, str | None]] = field(default_factory=list, init=False)

    def waiting_orders(self) -> list[TurnOrder]:
        """The orders of the turns waiting in the room now."""
        with self._lock:
            return [waiter.order for _, waiter in self._queue]

    @contextmanager
    def slot(self, order: TurnOrder) -> Iterator[None]:
        with super().slot(order):
            turn = activity.info().workflow_id if activity.in_activity() else None
            self.granted.append((order, turn))
            yield


async def test_in_local_slots_a_new_placement_overtakes_re_decisions_of_its_key(
    hub: HubClient, one_partition: Client, task_queue: str
) -> None:
    """Every turn local, fan-outs not demoted (`fanOutDemotion: 0`), so a new placement and the
    re-decisions a cluster's join causes share key 3. The test holds the one local slot while
    the re-decisions and then the new placement's first turn arrive; once it lets go, the new
    placement goes first."""
    client = one_partition
    profile = load_profile("pluginConfig: [{name: PrioritySort, args: {fanOutDemotion: 0}}]")
    add_cluster(hub, unique("member"))
    settled = [unique("settled") for _ in range(BACKLOG)]
    new = unique("new")
    # One turn runs at a time; the SDK starts enough local turns for all to reach the room.
    slots = RecordingSlots(slots=1, waiting=BACKLOG + 2, max_wait_s=20.0)
    worker = build_worker(
        client, hub, task_queue=task_queue, settings=ActivitySettings(profile=profile,
        local_slots=slots), max_concurrent_activities=BACKLOG + 2,
    )  # fmt: skip
    config = RunConfig(task_queue=task_queue, local_cycles_up_to=10_000)
    watcher = Watcher(hub, client, config, queue_sort=profile.queue_sorter)
    stop = asyncio.Event()
    async with worker:
        watching = asyncio.create_task(watcher.run(stop))
        try:
            await watcher.wait_ready(timeout=30)
            for name in settled:
                add_placement(hub, name, PICK_ALL)
            for name in settled:
                await until_async(functools.partial(has_cycles, client, name, 1), what=name)
                await until_async(functools.partial(seen, watcher, name, (3, 2)), what=name)
            before = {name: await cycles(client, name) for name in settled}
            held = slots.slot((1, 0))
            held.__enter__()
            try:
                slots.granted.clear()
                add_cluster(hub, unique("joined"))
                await until_async(
                    lambda: slots.waiting_now == BACKLOG, what="the re-decisions wait"
                )
                add_placement(hub, new, PICK_ALL)
                await until_async(
                    lambda: slots.waiting_now == BACKLOG + 1, what="the new placement waits"
                )
            finally:
                held.__exit__(None, None, None)
            await until_async(functools.partial(has_cycles, client, new, 1), what=new)
            for name in settled:
                await until_async(functools.partial(has_cycles, client, name, before[name] + 1))
        finally:
            stop.set()
            await asyncio.wait_for(watching, timeout=30)
    # The new placement first, then the re-decisions (later turns of any may follow).
    granted = slots.granted[: BACKLOG + 1]
    assert granted[0] == ((3, 0), workflow_id(new)), granted
    assert sorted(granted[1:]) == sorted(((3, 2), workflow_id(name)) for name in settled), granted
    assert slots.shed_count == 0


async def edited(client: Client, name: str) -> bool:
    """The placement's workflow has a turn for its edit (generation 2) started or done."""
    current = await status(client, name)
    return current is not None and (current.phase == "running" or current.cycles >= 2)


async def test_beside_processes_a_new_placement_overtakes_a_backlog_of_edits(
    hub: HubClient, one_partition: Client, task_queue: str
) -> None:
    """The workflow worker as `run --processes N` has it (workers.worker.local_slots: two slots,
    a short waiting room for better turns). The test holds both slots, as edits would, while
    BACKLOG placements are edited: each edited one wants something (its Scheduled condition is
    at the old generation), at the same key as a new one. No edit waits behind the edits
    running: each runs on the activity queue, where no activity worker polls yet. Then a new
    placement's first turn arrives: better than the edits running, it waits in the room and
    gets the first slot that frees."""
    client = one_partition
    add_cluster(hub, unique("member"))
    names_ = [unique("edited") for _ in range(BACKLOG)]
    new = unique("new")
    shape = local_slots(16, activities=False)
    slots = RecordingSlots(
        slots=shape.slots, waiting=shape.waiting, max_wait_s=30.0, better_only=shape.better_only
    )
    workflows = build_worker(
        client, hub, task_queue=task_queue, settings=ActivitySettings(local_slots=slots),
        activities=False,
    )  # fmt: skip
    config = RunConfig(task_queue=task_queue, local_cycles_up_to=10_000)
    watcher = Watcher(hub, client, config)
    stop = asyncio.Event()

    def serve_queue() -> PlacementWorkers:
        return build_worker(
            client, hub, task_queue=task_queue, settings=ActivitySettings(), workflows=False,
            max_concurrent_activities=1,
        )  # fmt: skip

    async with workflows:
        watching = asyncio.create_task(watcher.run(stop))
        try:
            await watcher.wait_ready(timeout=30)
            async with serve_queue():
                for name in names_:
                    add_placement(hub, name, PICK_ALL)
                for name in names_:
                    await until_async(functools.partial(has_cycles, client, name, 1), what=name)
                    await until_async(functools.partial(seen, watcher, name, (4, 2)), what=name)
            holds = [slots.slot((3, 1)), slots.slot((3, 1))]  # as edits running
            for hold in holds:
                hold.__enter__()
            try:
                slots.granted.clear()
                shed = slots.shed_count
                for name in names_:
                    hub.patch(ClusterResourcePlacement, name, {"spec": {"policy": PREFERRING}})
                for name in names_:
                    await until_async(functools.partial(edited, client, name), what=name)
                await until_async(
                    lambda: slots.shed_count == shed + BACKLOG, what="the edits went to the queue"
                )
                assert slots.waiting_now == 0
                add_placement(hub, new, PICK_ALL)
                await until_async(
                    lambda: slots.waiting_orders() == [(3, 0)],
                    what="the new placement waits for a local slot",
                )
                # One slot frees: the best waiting turn takes it.
                holds.pop().__exit__(None, None, None)
                await until_async(lambda: slots.granted, what="a waiting turn got the slot")
            finally:
                for hold in holds:
                    hold.__exit__(None, None, None)
            await until_async(functools.partial(has_cycles, client, new, 1), what=new)
            async with serve_queue():
                for name in names_:
                    await until_async(functools.partial(has_cycles, client, name, 2), what=name)
        finally:
            stop.set()
            await asyncio.wait_for(watching, timeout=30)
    turns = [(order, turn) for order, turn in slots.granted if turn is not None]
    assert turns[0] == ((3, 0), workflow_id(new)), turns
    # The edits that ran here waited at the same key, after the new placement.
    assert {order for order, _ in turns[1:]} <= {(3, 1)}, turns
