"""The worker of the workflow tests: the real PlacementWorkflow with the stand-in activities,
on the test's own task queue, caching no workflow (every task replays its history from the
start: a determinism check for free). Such a worker runs no local turn of its own choosing
(docs/operations.md, "Where turns run"): the tests of that choice use `caching_worker`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.client import Client

from tests.integration.workflows.stand_ins import STAND_INS
from workers.worker import PlacementWorkers, split_workers
from workflows.placement import PlacementWorkflow, ResourcePlacementWorkflow


@pytest_asyncio.fixture(loop_scope="session")
async def worker(temporal_client: Client, task_queue: str) -> AsyncIterator[PlacementWorkers]:
    async with split_workers(
        temporal_client,
        task_queue,
        workflows=[PlacementWorkflow, ResourcePlacementWorkflow],
        activities=STAND_INS,
        max_cached_workflows=0,
    ) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def caching_worker(
    temporal_client: Client, task_queue: str
) -> AsyncIterator[PlacementWorkers]:
    """The same on a workflow worker that caches workflows (the SDK's default cache)."""
    async with split_workers(
        temporal_client,
        task_queue,
        workflows=[PlacementWorkflow, ResourcePlacementWorkflow],
        activities=STAND_INS,
    ) as running:
        yield running
