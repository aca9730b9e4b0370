"""The sender alone (control.sending.Sender), with no Temporal and no hub: its Temporal call is a
function of a batch (`Deliver`), written here to record, hold or fail the calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from temporalio.service import RPCError, RPCStatusCode

from control.admission import AdmissionWindow
from control.outbox import Backoff, Batch
from control.routes import Route
from control.sending import Sender, SendOutcome
from control.telemetry import WatcherStats
from hub.types import ClusterResourcePlacement
from scheduler.framework.queue_sort import QueuePriority
from tests.support.waits import consistently_async, until_async
from workflows import names

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Retries come back at once, so a test waits for the retry, not for a backoff.
FAST_RETRY = Backoff(initial=0.01, maximum=0.01)
DEFAULT = QueuePriority()
URGENT = QueuePriority(priority_key=1)
CHANGED = names.SIGNAL_PLACEMENT_CHANGED
# How long a test watches for a send that must not happen: many coalescing windows.
QUIET_S = 0.5


class Calls:
    """A `Deliver` that records each call as it starts, holds every call while `gate` is clear,
    and raises the errors queued for a placement, one per call."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.delivered: list[Batch] = []
        self.cancelled: list[str] = []
        self.running = 0
        self.most = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.errors: dict[str, list[Exception]] = {}

    async def __call__(self, batch: Batch) -> SendOutcome:
        self.started.append(batch.placement)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.gate.wait()  # bounded by: each test sets the gate, or close() cancels
            if errors := self.errors.get(batch.placement):
                raise errors.pop(0)
            self.delivered.append(batch)
            return "signalled"
        except asyncio.CancelledError:
            self.cancelled.append(batch.placement)
            raise
        finally:
            self.running -= 1

    def names(self) -> list[str]:
        return [batch.placement for batch in self.delivered]


@asynccontextmanager
async def sending(sender: Sender) -> AsyncIterator[Sender]:
    task = asyncio.create_task(sender.run())
    try:
        yield sender
    finally:
        task.cancel()
        await sender.close()
        await asyncio.gather(task, return_exceptions=True)


def placement(name: str, scheduled: bool = False) -> ClusterResourcePlacement:
    """A live placement at generation 1, scheduled at it or not yet (a send starts a turn)."""
    wire: dict[str, object] = {
        "metadata": {"name": name, "resourceVersion": "1", "generation": 1},
        "spec": {"policy": {"placementType": "PickAll"}},
    }
    if scheduled:
        wire["status"] = {"conditions": [{
            "type": ClusterResourcePlacement.SCHEDULED_CONDITION, "status": "True",
            "reason": "SchedulingPolicyFulfilled", "observedGeneration": 1,
        }]}  # fmt: skip
    return ClusterResourcePlacement.from_wire(wire)


def route(name: str, reason: str = "created", signal: str = CHANGED) -> Route:
    return Route(name, signal, reason)


async def test_routes_for_one_placement_go_as_one_call_and_are_counted() -> None:
    calls, stats = Calls(), WatcherStats()
    sender = Sender(calls, {}, stats=stats, coalesce_seconds=0.01)
    sender.add(route("web", "labels changed", names.SIGNAL_CLUSTER_CHANGED), DEFAULT)
    sender.add(route("web", "spec changed"), DEFAULT)
    sender.add(route("web", "spec changed"), DEFAULT)
    sender.add(route("api"), DEFAULT)
    assert sender.pending == 2
    async with sending(sender):
        await until_async(lambda: sender.pending == 0 and len(calls.delivered) == 2)
    web = next(batch for batch in calls.delivered if batch.placement == "web")
    assert web.signal == names.SIGNAL_PLACEMENT_CHANGED  # the most telling of the signals
    assert web.reason == "labels changed; spec changed (+1 more events)"
    assert (stats.signalled, stats.sent, stats.retries, stats.dropped) == (2, 2, 0, 0)


async def test_at_most_max_in_flight_calls_run_and_the_best_batch_goes_first() -> None:
    calls = Calls()
    calls.gate.clear()
    sender = Sender(calls, {}, coalesce_seconds=0.01, max_in_flight=2)
    for index in range(4):
        sender.add(route(f"batch-{index}"), DEFAULT)
    sender.add(route("urgent"), URGENT)  # last in, first out: a better priority key
    async with sending(sender):
        await until_async(lambda: calls.running == 2, what="two calls in flight")
        await consistently_async(lambda: _assert(calls.running == 2), duration=QUIET_S)
        assert calls.started == ["urgent", "batch-0"] and sender.pending == 5
        calls.gate.set()
        await until_async(lambda: sender.pending == 0, what="every batch sent")
    assert calls.started == ["urgent", *(f"batch-{index}" for index in range(4))]
    assert calls.most == 2


async def test_a_failed_call_is_retried_and_one_a_retry_cannot_fix_is_dropped() -> None:
    calls, stats = Calls(), WatcherStats()
    calls.errors = {
        "web": [RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")],
        "bad": [ValueError("a name the workflow id refuses")],
    }
    sender = Sender(calls, {}, stats=stats, coalesce_seconds=0.01, send_retry=FAST_RETRY)
    sender.add(route("web"), DEFAULT)
    sender.add(route("bad"), DEFAULT)
    async with sending(sender):
        await until_async(lambda: sender.pending == 0 and calls.names() == ["web"])
        await consistently_async(lambda: _assert(calls.started.count("bad") == 1), duration=QUIET_S)
    assert calls.started.count("web") == 2
    assert (stats.signalled, stats.retries, stats.dropped) == (1, 1, 1)


async def test_the_window_holds_turns_back_until_one_is_seen_done() -> None:
    """docs/priority.md "Admission": a window of one turn lets one new turn in at the default
    key; a placement scheduled at its generation needs no place, and a turn of a better key
    does not wait behind worse ones. A turn waits until every turn of its key or better that
    holds a place is seen done."""
    calls = Calls()
    placements = {name: placement(name) for name in ("first", "second", "urgent")}
    placements["done"] = placement("done", scheduled=True)
    # Places never expire in this test: only a turn seen done frees one.
    window = AdmissionWindow(1, timeout=3600.0)
    sender = Sender(calls, placements, window, coalesce_seconds=0.01)
    for name in ("first", "second", "done"):
        sender.add(route(name), DEFAULT)
    second_waits = lambda: _assert("second" not in calls.started)  # noqa: E731
    async with sending(sender):
        await until_async(lambda: sorted(calls.names()) == ["done", "first"], what="two sends")
        await consistently_async(second_waits, duration=QUIET_S)
        sender.add(route("urgent"), URGENT)
        await until_async(lambda: "urgent" in calls.names(), what="the urgent turn")
        assert window.placements() == ["first", "urgent"] and sender.pending == 1
        sender.release_done(["second"])  # its own turn has not run: nothing changes
        placements["first"] = placement("first", scheduled=True)
        sender.release_done(["first"])  # the watch saw its turn done...
        # ...but the urgent turn, of a better key, still holds the one place
        await consistently_async(second_waits, duration=QUIET_S)
        assert window.placements() == ["urgent"]
        placements["urgent"] = placement("urgent", scheduled=True)
        sender.release_done()  # a full list: every placement holding a place is looked at
        await until_async(lambda: calls.names()[-1:] == ["second"], what="the second turn")
    assert window.placements() == ["second"]


async def test_a_send_that_fails_for_good_gives_its_place_back() -> None:
    calls, stats = Calls(), WatcherStats()
    calls.errors = {"bad": [ValueError("refused")]}
    placements = {name: placement(name) for name in ("bad", "next")}
    window = AdmissionWindow(1, timeout=60.0)
    sender = Sender(calls, placements, window, stats, coalesce_seconds=0.01)
    sender.add(route("bad"), DEFAULT)
    sender.add(route("next"), DEFAULT)
    async with sending(sender):
        await until_async(lambda: calls.names() == ["next"], what="the next turn")
    assert stats.dropped == 1 and window.placements() == ["next"]


async def test_closing_cancels_the_calls_in_flight() -> None:
    calls = Calls()
    calls.gate.clear()
    sender = Sender(calls, {}, coalesce_seconds=0.01)
    sender.add(route("web"), DEFAULT)
    async with sending(sender):
        await until_async(lambda: calls.running == 1, what="a call in flight")
    assert calls.cancelled == ["web"] and calls.delivered == [] and sender.pending == 0


def _assert(condition: bool) -> None:
    assert condition
