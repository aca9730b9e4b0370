"""Watcher tests: a real devhub (reset per test) and a real Temporal dev server, never mocks.

`hub` is a client of the shared devhub; `worker` runs the real PlacementWorkflow with
stand-in activities (watcher_helpers.StandIns) on the test's own task queue, so every workflow
the watcher starts runs, and its history records exactly which signals it received."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.client import Client

from hub.client import HubClient
from tests.integration.control.watcher_helpers import StandIns, placement_worker


@pytest_asyncio.fixture(loop_scope="session")
async def worker(
    temporal_client: Client, task_queue: str, hub: HubClient
) -> AsyncIterator[StandIns]:
    async with placement_worker(temporal_client, task_queue, hub) as stand_ins:
        yield stand_ins
