"""PlacementWorkers runs its workers together and stops them together, and a cancel (serve's
last resort when a stop outlives its grace) ends it at once, as it ends one Worker.run."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from workers.worker import PlacementWorkers


class StuckWorker:
    """Runs until cancelled; its graceful shutdown never finishes (an activity that hangs)."""

    def __init__(self) -> None:
        self.cancelled = False

    async def run(self) -> None:
        try:
            await asyncio.Event().wait()  # bounded by: the test's cancel
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    async def shutdown(self) -> None:
        await asyncio.Event().wait()  # bounded by: the test's cancel


class EndingWorker:
    """Ends by itself with an error."""

    async def run(self) -> None:
        raise RuntimeError("poller failed")

    async def shutdown(self) -> None:
        return None


def workers(*parts: Any) -> PlacementWorkers:
    return PlacementWorkers(cast(Any, parts))


async def test_a_cancel_ends_every_worker_at_once() -> None:
    stuck = [StuckWorker(), StuckWorker()]
    running = asyncio.create_task(workers(*stuck).run())
    await asyncio.sleep(0.05)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 2.0)  # not the never-ending graceful shutdown
    assert all(worker.cancelled for worker in stuck)


async def test_one_worker_failing_stops_the_other_and_raises() -> None:
    class Quick:
        """Stops when asked, as a Worker does."""

        def __init__(self) -> None:
            self.stopped = asyncio.Event()

        async def run(self) -> None:
            await self.stopped.wait()  # bounded by: the test's wait_for

        async def shutdown(self) -> None:
            self.stopped.set()

    quick = Quick()
    running = asyncio.create_task(workers(EndingWorker(), quick).run())
    with pytest.raises(RuntimeError, match="poller failed"):
        await asyncio.wait_for(running, 2.0)
    assert quick.stopped.is_set()
