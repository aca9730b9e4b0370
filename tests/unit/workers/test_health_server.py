"""HealthServer over real loopback HTTP: liveness, readiness with reasons, metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from workers.devserver import free_port
from workers.health import HealthServer, Readiness
from workers.metrics import SchedulerMetrics


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, response.headers["Content-Type"], await response.text()


@pytest.fixture
async def readiness() -> Readiness:
    return Readiness("temporal", "worker")


@pytest.fixture
async def server(readiness: Readiness) -> AsyncIterator[HealthServer]:
    metrics = SchedulerMetrics(process_metrics=False)
    metrics.count_binding_writes("create", 2)
    async with HealthServer("127.0.0.1", 0, readiness, metrics) as started:
        yield started


async def test_healthz_answers_while_the_process_runs(server: HealthServer) -> None:
    assert (await get(server.url + "/healthz"))[0] == 200


async def test_readyz_names_the_missing_parts_until_all_are_ready(
    server: HealthServer, readiness: Readiness
) -> None:
    status, _, body = await get(server.url + "/readyz")
    assert status == 503 and "temporal: starting" in body and "worker: starting" in body
    readiness.set("temporal", True)
    readiness.set("worker", False, "poller not started")
    status, _, body = await get(server.url + "/readyz")
    assert status == 503 and "worker: poller not started" in body and "temporal" not in body
    readiness.set("worker", True)
    assert (await get(server.url + "/readyz"))[0] == 200
    readiness.set("worker", False, "lost connection")
    assert (await get(server.url + "/readyz"))[0] == 503


async def test_metrics_are_served_in_prometheus_text(server: HealthServer) -> None:
    status, content_type, body = await get(server.url + "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert 'fleet_scheduler_binding_writes_total{operation="create"} 2.0' in body
    assert "# TYPE scheduling_cycle_duration_milliseconds histogram" in body


@pytest.mark.parametrize(
    ("check", "status", "text"),
    [
        pytest.param(lambda: True, 200, "ok", id="bool-true"),
        pytest.param(lambda: False, 503, "not ready", id="bool-false"),
        pytest.param(lambda: (False, "watch not synced"), 503, "watch not synced", id="reason"),
        pytest.param(lambda: 1 / 0, 503, "ZeroDivisionError", id="broken-check"),
    ],
)
async def test_readiness_callback_shapes(check: object, status: int, text: str) -> None:
    async with HealthServer("127.0.0.1", 0, check) as started:  # type: ignore[arg-type]
        got_status, _, body = await get(started.url + "/readyz")
        assert (got_status, text in body) == (status, True)
        assert (await get(started.url + "/metrics"))[0] == 404  # no metrics object given


async def test_busy_port_is_a_clear_error(server: HealthServer) -> None:
    with pytest.raises(OSError, match="choose another --metrics-port"):
        await HealthServer("127.0.0.1", server.port, lambda: True).start()


async def test_fixed_port_and_stop_releases_it() -> None:
    port = free_port()
    health = HealthServer("127.0.0.1", port, lambda: True)
    await health.start()
    assert health.port == port and (await get(health.url + "/healthz"))[0] == 200
    await health.stop()
    await health.stop()  # idempotent
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(f"http://127.0.0.1:{port}/healthz")
