"""The whole system in one process: a real devhub, the real Temporal dev server, the real
worker (PlacementWorkflow and its activities on the HubClient) and the real watcher. Nothing is
stood in; faults come from devhub's fault injection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.client import Client

from control.watcher import Watcher
from hub.client import HubClient
from tests.support.stacks import fleet_scheduler
from tests.support.temporal import start_temporal


@pytest_asyncio.fixture(loop_scope="session")
async def system(
    temporal_client: Client, hub: HubClient, task_queue: str
) -> AsyncIterator[Watcher]:
    async with fleet_scheduler(temporal_client, hub, task_queue) as watcher:
        yield watcher


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def one_partition() -> AsyncIterator[Client]:
    """A Temporal server of its own whose task queues have one partition: the order a queue
    serves is then the order a test of turn order can see."""
    partitions = ("matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions")
    flags = [arg for key in partitions for arg in ("--dynamic-config-value", f"{key}=1")]
    async with await start_temporal(*flags) as env:
        yield env.client
