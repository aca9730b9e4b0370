"""Whole systems as tests start them.

- `fleet_scheduler`: the worker and the watcher in this process, as `fleet-scheduler run`
  wires them, on a test's own task queue (workflows not cached: every task replays)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.client import Client

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.telemetry import WatcherMetrics
from control.watcher import Watcher
from hub.client import HubClient
from workers.worker import build_worker

__all__ = ["fleet_scheduler"]


@asynccontextmanager
async def fleet_scheduler(
    client: Client,
    hub: HubClient,
    task_queue: str,
    *,
    snapshotter: bool = True,
    local_cycles_up_to: int | None = None,
    metrics: WatcherMetrics | None = None,
) -> AsyncIterator[Watcher]:
    """Worker + watcher, as `fleet-scheduler run` wires them, until the block ends."""
    worker = build_worker(
        client,
        hub,
        task_queue=task_queue,
        settings=ActivitySettings(snapshotter=snapshotter),
    )
    watcher = Watcher(
        hub,
        client,
        RunConfig(
            task_queue=task_queue,
            snapshotter=snapshotter,
            local_cycles_up_to=local_cycles_up_to,
        ),
        metrics=metrics,
    )
    stop = asyncio.Event()
    async with worker:
        watching = asyncio.create_task(watcher.run(stop))
        try:
            await watcher.wait_ready(timeout=30)
            yield watcher
        finally:
            stop.set()
            await asyncio.wait_for(watching, timeout=30)
