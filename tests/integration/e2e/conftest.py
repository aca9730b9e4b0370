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


@pytest_asyncio.fixture(loop_scope="session")
async def system(
    temporal_client: Client, hub: HubClient, task_queue: str
) -> AsyncIterator[Watcher]:
    async with fleet_scheduler(temporal_client, hub, task_queue) as watcher:
        yield watcher
