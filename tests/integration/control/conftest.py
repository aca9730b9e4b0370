"""Watcher tests: a real devhub (reset per test) and a real Temporal dev server, never mocks.

`hub` is a client of the shared devhub; `worker` runs the real PlacementWorkflow with
stand-in activities (watcher_helpers.StandIns) on the test's own task queue, so every workflow
the watcher starts runs, and its history records exactly which signals it received."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from watcher_helpers import StandIns, placement_worker

from hub.client import HubClient

# Short enough that a hanging devhub fails a test in seconds.
TEST_TIMEOUT = (2.0, 5.0)


@pytest.fixture
def hub(hub_kubeconfig: Path, devhub: Any) -> Iterator[HubClient]:
    client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=TEST_TIMEOUT)
    yield client
    devhub.faults.clear()
    client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def worker(
    temporal_client: Client, task_queue: str, hub: HubClient
) -> AsyncIterator[StandIns]:
    async with placement_worker(temporal_client, task_queue, hub) as stand_ins:
        yield stand_ins
