"""The watcher's admission window against a real devhub and Temporal (docs/priority.md,
"Admission"): only so many unscheduled placements' turns go into Temporal at once, a finished
turn lets the next one in, a placement of a better priority key is never kept out by worse ones,
an automatic window sizes itself from the turns it sees done, and beside KubeFleet there is no
window.

No worker runs here: a started workflow just waits, so whether the watcher started it is exactly
whether Temporal knows it. "Scheduled" is written by the test, as our activities write it."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from control.admission import AutoSizing
from hub.client import HubClient
from hub.names import PRIORITY_CLASS_ANNOTATION
from hub.types import ClusterResourcePlacement, PriorityClass
from tests.integration.control.watcher_helpers import (
    mark_fulfilled,
    placement,
    run_status,
    running_watcher,
    signals_matching,
    snapshot,
    unique,
)
from tests.support.waits import consistently_async, until_async
from workflows import names

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _started(client: Client, placements: list[str]) -> list[str]:
    found = await asyncio.gather(*(run_status(client, name) for name in placements))
    return [name for name, status in zip(placements, found, strict=True) if status is not None]


async def _exactly_started(client: Client, placements: list[str], count: int) -> list[str]:
    async def check() -> list[str] | None:
        started = await _started(client, placements)
        return started if len(started) == count else None

    found = await until_async(check)
    assert found is not None
    return found


async def _stays_started(
    client: Client, placements: list[str], expected: list[str] | int, duration: float
) -> None:
    """No more of `placements` start for `duration` seconds (the others wait in the outbox)."""

    async def check() -> None:
        started = await _started(client, placements)
        if isinstance(expected, int):
            assert len(started) == expected, started
        else:
            assert started == expected, started

    await consistently_async(check, duration=duration)


def _annotated(name: str, priority_class: str) -> ClusterResourcePlacement:
    crp = placement(name, "PickN", n=1)
    meta = crp.metadata.model_copy(
        update={"annotations": {PRIORITY_CLASS_ANNOTATION: priority_class}}
    )
    return crp.model_copy(update={"metadata": meta})


async def test_a_finished_turn_lets_the_next_placement_in_and_a_better_key_goes_past(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    urgent = unique("urgent")
    hub.create(
        PriorityClass.from_wire({"metadata": {"name": urgent}, "value": 1000})  # key 2
    )
    lows = [unique("low") for _ in range(5)]
    async with running_watcher(
        hub, temporal_client, task_queue, snapshotter=True, admission_window=2
    ) as watcher:
        for name in lows:
            hub.create(placement(name, "PickN", n=1))  # key 3: no class, no default class
        first = await _exactly_started(temporal_client, lows, 2)
        # Not quiet(): three batches wait, so it never is idle.
        await _stays_started(temporal_client, lows, 2, duration=1.0)
        assert watcher.pending == 3

        mark_fulfilled(hub, first[0])  # its turn is done: one place frees
        third = await _exactly_started(temporal_client, lows, 3)
        assert set(first) < set(third)

        high = unique("high")
        hub.create(_annotated(high, urgent))  # the window is full at key 3, not at key 2
        await until_async(lambda: run_status(temporal_client, high))
        assert len(await _started(temporal_client, lows)) == 3

        for name in third:
            if name != first[0]:
                mark_fulfilled(hub, name)
        # The high turn holds a place that key 3 counts too: one more low goes, not two.
        await _exactly_started(temporal_client, lows, 4)
        await _stays_started(temporal_client, lows, 4, duration=1.0)
        mark_fulfilled(hub, high)
        await _exactly_started(temporal_client, lows, 5)
        assert watcher.stats.admissions_expired == 0


async def test_a_failed_turn_writing_schedule_pending_keeps_its_place(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    """A turn whose cycle failed writes SchedulePending at the placement's generation while
    Temporal retries it: the turn is not done, so its place is not freed."""
    lows = [unique("retried") for _ in range(2)]
    async with running_watcher(
        hub, temporal_client, task_queue, snapshotter=True, admission_window=1
    ) as watcher:
        for name in lows:
            hub.create(placement(name, "PickN", n=1))
        [first] = await _exactly_started(temporal_client, lows, 1)
        mark_fulfilled(hub, first, pending=True)
        await _stays_started(temporal_client, lows, [first], duration=1.5)
        mark_fulfilled(hub, first)
        await _exactly_started(temporal_client, lows, 2)
        assert watcher.stats.admissions_expired == 0


async def test_a_turn_nobody_finishes_gives_its_place_up_after_the_timeout(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    lows = [unique("stuck") for _ in range(3)]
    async with running_watcher(
        hub,
        temporal_client,
        task_queue,
        snapshotter=True,
        admission_window=1,
        admission_timeout=1.0,
    ) as watcher:
        for name in lows:
            hub.create(placement(name, "PickN", n=1))
        await _exactly_started(temporal_client, lows, 3)
        await until_async(lambda: watcher.stats.admissions_expired >= 2)


async def test_beside_kubefleet_there_is_no_window(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    kubefleet = [unique("kf") for _ in range(4)]
    async with running_watcher(
        hub, temporal_client, task_queue, snapshotter=False, admission_window=1
    ):
        for name in kubefleet:
            hub.create(placement(name, "PickN", n=1))
            hub.create(snapshot(name, 0, n=1))
        await _exactly_started(temporal_client, kubefleet, 4)


async def test_a_full_window_holds_back_only_turns_that_need_a_place(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    done = unique("done")
    hub.create(placement(done, "PickN", n=1))
    mark_fulfilled(hub, done)  # scheduled at its generation: its signals need no place
    lows = [unique("low") for _ in range(3)]
    async with running_watcher(
        hub, temporal_client, task_queue, snapshotter=True, admission_window=1
    ) as watcher:
        await until_async(lambda: run_status(temporal_client, done))
        for name in lows:
            hub.create(placement(name, "PickN", n=1))
        await _exactly_started(temporal_client, lows, 1)
        # The window is full and two turns wait at the same key; a deletion goes past them.
        hub.delete(ClusterResourcePlacement, done)
        await signals_matching(temporal_client, done, names.SIGNAL_PLACEMENT_DELETING)
        assert len(await _started(temporal_client, lows)) == 1
        assert watcher.pending == 2


async def test_an_automatic_window_grows_from_the_rate_it_measures_and_a_better_key_goes_first(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    """`auto`: the window holds its start size until it has seen turns done while others wait;
    then it is sized from their rate (rate x target wait), and the waiting backlog goes in at
    once. A placement of a better key is let in past the backlog all along."""
    urgent = unique("urgent")
    hub.create(PriorityClass.from_wire({"metadata": {"name": urgent}, "value": 1000}))  # key 2
    lows = [unique("auto") for _ in range(10)]
    # Two turns seen done, at most a few seconds apart: at least 1/3 turn/s, times 30 s makes
    # 10 places or more, whatever the machine's load does to the watch's timing.
    sizing = AutoSizing(
        target_wait_s=30.0, floor=1, start=2, horizon_s=60.0, warmup_s=0.3, min_samples=1
    )
    async with running_watcher(
        hub,
        temporal_client,
        task_queue,
        snapshotter=True,
        admission_window="auto",
        admission_sizing=sizing,
    ) as watcher:
        for name in lows:
            hub.create(placement(name, "PickN", n=1))  # key 3
        first = await _exactly_started(temporal_client, lows, 2)
        await _stays_started(temporal_client, lows, 2, duration=1.0)
        assert watcher.admission_window == 2 and watcher.drain_rate is None

        high = unique("high")
        hub.create(_annotated(high, urgent))
        await until_async(lambda: run_status(temporal_client, high))
        assert len(await _started(temporal_client, lows)) == 2  # it went past eight waiting

        mark_fulfilled(hub, first[0])  # the rate's origin: no rate yet
        await asyncio.sleep(1.5)
        mark_fulfilled(hub, first[1])  # one turn in ~1.5 s: ~0.7/s, so ~20 places
        await _exactly_started(temporal_client, lows, 10)
        assert watcher.admission_window >= 10
        rate = watcher.drain_rate
        assert rate is not None and 0.2 < rate < 5.0
        for name in [high, *lows]:
            mark_fulfilled(hub, name)
        assert watcher.stats.admissions_expired == 0
