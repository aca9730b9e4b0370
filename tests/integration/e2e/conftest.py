"""The whole system in one process: a real devhub, the real Temporal dev server, the real
worker (PlacementWorkflow and its activities on the HubClient) and the real watcher. Nothing is
stood in; faults come from devhub's fault injection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.watcher import Watcher
from hub.client import HubClient
from workers.worker import build_worker

TEST_TIMEOUT = (2.0, 5.0)


@pytest.fixture
def hub(hub_kubeconfig: Path, devhub: Any) -> Iterator[HubClient]:
    client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=TEST_TIMEOUT)
    yield client
    devhub.faults.clear()
    client.close()


@asynccontextmanager
async def fleet_scheduler(
    client: Client,
    hub: HubClient,
    task_queue: str,
    *,
    snapshotter: bool = True,
    local_cycles_up_to: int = 0,
) -> AsyncIterator[Watcher]:
    """Worker + watcher, as `fleet-scheduler run` wires them, until the block ends."""
    worker = build_worker(
        client,
        hub,
        task_queue=task_queue,
        settings=ActivitySettings(snapshotter=snapshotter),
        local_cycles=local_cycles_up_to > 0,
        max_cached_workflows=0,
    )
    watcher = Watcher(
        hub,
        client,
        RunConfig(
            task_queue=task_queue,
            snapshotter=snapshotter,
            local_cycles_up_to=local_cycles_up_to,
        ),
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


@pytest_asyncio.fixture(loop_scope="session")
async def system(
    temporal_client: Client, hub: HubClient, task_queue: str
) -> AsyncIterator[Watcher]:
    async with fleet_scheduler(temporal_client, hub, task_queue) as watcher:
        yield watcher
