"""Health, readiness and metrics endpoints of a fleet-scheduler process, for Kubernetes probes
and Prometheus.

Runs inside the process's own asyncio loop (the worker's or the watcher's), so `/healthz`
answering means that loop is alive, not merely that some thread is. `/readyz` asks a callback,
typically a `Readiness` whose parts (Temporal client connected, worker polling, watcher synced)
are flipped by the process as it starts; a 503 names the parts still missing. `/metrics`
serves `SchedulerMetrics.exposition`, ours and the Temporal SDK's in one scrape."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Final, Self

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from workers.metrics import SchedulerMetrics

__all__ = ["HEALTHZ", "METRICS", "READYZ", "HealthServer", "Readiness", "ReadyCheck"]

HEALTHZ: Final = "/healthz"
READYZ: Final = "/readyz"
METRICS: Final = "/metrics"
TEXT: Final = "text/plain"

ReadyCheck = Callable[[], bool | tuple[bool, str]]
"""Returns readiness, optionally with the reason it is not ready."""

_log = logging.getLogger(__name__)


class Readiness:
    """Named parts that must all be ready, e.g. `Readiness("temporal", "worker")`.

    Thread-safe; call the instance to get `(ready, reason)` for `/readyz`."""

    def __init__(self, *parts: str) -> None:
        self._lock = threading.Lock()
        self._missing: dict[str, str] = {part: "starting" for part in parts}

    def set(self, part: str, ready: bool, reason: str = "") -> None:
        """Mark `part` ready, or not ready because of `reason`."""
        with self._lock:
            if ready:
                self._missing.pop(part, None)
            else:
                self._missing[part] = reason or "not ready"

    def __call__(self) -> tuple[bool, str]:
        with self._lock:
            if not self._missing:
                return True, "ok"
            return False, "; ".join(f"{part}: {why}" for part, why in sorted(self._missing.items()))


class HealthServer:
    """An aiohttp server for `/healthz`, `/readyz` and `/metrics`.

    `port=0` binds a free port; read `port` after `start()`. `stop()` is idempotent. Use as
    `async with HealthServer(...) as server:` or call start/stop from the process's loop."""

    def __init__(
        self,
        host: str,
        port: int,
        ready: ReadyCheck,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self._ready = ready
        self._metrics = metrics
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("health server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(HEALTHZ, self._healthz)
        app.router.add_get(READYZ, self._readyz)
        app.router.add_get(METRICS, self._metrics_handler)
        return app

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("health server already started")
        runner = web.AppRunner(self._app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._requested_port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise OSError(
                exc.errno,
                f"cannot serve health and metrics on {self.host}:{self._requested_port}: "
                f"{exc.strerror}; choose another --metrics-port (0 picks a free one)",
            ) from exc
        addresses = runner.addresses  # the bound port, which differs from 0 when 0 was asked
        self._port = int(addresses[0][1]) if addresses else self._requested_port
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n", content_type=TEXT)

    async def _readyz(self, request: web.Request) -> web.Response:
        try:
            result = self._ready()
        except Exception as exc:  # a broken check must not take the endpoint down
            _log.exception("readiness check failed")
            ready, reason = False, f"readiness check failed: {exc!r}"
        else:
            ready, reason = result if isinstance(result, tuple) else (result, "")
        if ready:
            return web.Response(text="ok\n", content_type=TEXT)
        return web.Response(
            status=503, text=f"not ready: {reason or 'not ready'}\n", content_type=TEXT
        )

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        if self._metrics is None:
            return web.Response(status=404, text="metrics are not enabled\n", content_type=TEXT)
        body = await self._metrics.exposition()
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response
