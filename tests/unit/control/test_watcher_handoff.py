"""control.watcher.Handoff: watch items reach the loop in order, the loop woken once per batch,
and a full hand-off holds a watch thread back until the loop takes, or until stopping."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from control.watcher import Handoff
from hub.types import ClusterResourceBinding

KIND = ClusterResourceBinding


def items(count: int) -> list[Any]:
    return [(KIND, index) for index in range(count)]


def item(label: object) -> Any:
    return (KIND, label)


async def test_items_that_arrive_together_wake_the_loop_once() -> None:
    loop = asyncio.get_running_loop()
    handoff = Handoff(limit=1000)
    wakes = 0
    arrived = handoff._arrived.set

    def counted() -> None:
        nonlocal wakes
        wakes += 1
        arrived()

    handoff._arrived.set = counted  # type: ignore[method-assign]
    halt = threading.Event()
    assert all(handoff.put(loop, item, halt) for item in items(100))
    assert len(handoff) == 100
    await asyncio.sleep(0)  # the wake-up runs
    assert await asyncio.wait_for(handoff.take(), 5) == items(100)
    assert wakes == 1
    assert not handoff
    assert handoff.put(loop, item("next"), halt)
    assert await asyncio.wait_for(handoff.take(), 5) == [item("next")]
    assert wakes == 2


async def test_a_full_handoff_holds_the_thread_until_the_loop_takes() -> None:
    loop = asyncio.get_running_loop()
    handoff = Handoff(limit=2)
    halt = threading.Event()
    sent = asyncio.create_task(
        asyncio.to_thread(lambda: [handoff.put(loop, item, halt) for item in items(5)])
    )
    taken: list[Any] = []
    while len(taken) < 5:  # bounded by: each take waits at most 10 s, and 5 items were put
        batch = await asyncio.wait_for(handoff.take(), 10)
        assert len(batch) <= 2
        taken.extend(batch)
    assert taken == items(5)
    assert await asyncio.wait_for(sent, 10) == [True] * 5


async def test_a_thread_waiting_on_a_full_handoff_gives_up_when_halted() -> None:
    loop = asyncio.get_running_loop()
    handoff = Handoff(limit=1)
    halt = threading.Event()
    assert handoff.put(loop, item(0), halt)
    blocked = asyncio.create_task(asyncio.to_thread(handoff.put, loop, item(1), halt))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    halt.set()
    assert await asyncio.wait_for(blocked, 10) is False
