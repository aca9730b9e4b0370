"""DevHub: one devhub server on its own thread and event loop, usable from any test.

Sync tests, async tests on pytest-asyncio's loop, the CLI and the benchmarks all drive the same
object: `DevHub(...).start()` returns once the port is bound, `stop()` returns once every
connection is closed. The store lives on the server thread; `call()` runs a function there, which
is how `reset()` and the sample fleet touch it without locks."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import logging
import os
import secrets
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

import yaml
from aiohttp import web

from devhub import tls
from devhub.faults import Faults, Stats
from devhub.listener import DualProtocolListener
from devhub.persistence import SqliteStore
from devhub.resources import load_resources
from devhub.server import Api
from devhub.store import DEFAULT_WATCH_WINDOW, Store

__all__ = ["DEFAULT_BOOKMARK_INTERVAL", "DEFAULT_WATCH_WINDOW", "DevHub"]

log = logging.getLogger("devhub")
T = TypeVar("T")

DEFAULT_BOOKMARK_INTERVAL: Final = 60.0
START_TIMEOUT: Final = 30.0
STOP_TIMEOUT: Final = 10.0
SHUTDOWN_GRACE: Final = 1.0
CONTEXT_NAME: Final = "devhub"
TOKEN_FILE: Final = "token"
WILDCARD_HOSTS: Final = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}


def _stored_token(data_dir: Path | None) -> str:
    """A durable hub keeps its token with its data, so kubeconfigs survive restarts."""
    if data_dir is None:
        return secrets.token_urlsafe(32)
    path = data_dir / TOKEN_FILE
    if path.is_file() and (kept := path.read_text(encoding="utf-8").strip()):
        return kept
    token = secrets.token_urlsafe(32)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


class DevHub:
    """A local Kubernetes-compatible hub API server for the fleet CRDs.

    `url` is plain HTTP (what tests and the kubernetes client use); the same port also speaks
    TLS, and `write_kubeconfig` points at that `tls_url` with devhub's CA, because kubectl only
    sends a bearer token over TLS. Every request needs the token except /version and health.

    Args:
        host: interface to bind; loopback unless you mean to share it.
        port: 0 picks a free port (see `.port` / `.url` after start).
        data_dir: keep objects in SQLite there across restarts; None keeps them in memory.
        token: the bearer token clients must send; a random one when None.
        watch_window: how many recent events a watch can resume from (older: 410 Expired).
        bookmark_interval: seconds between BOOKMARK events on watches that allow them.
        crd_dir: CRD manifests to serve instead of those generated from the models.
        fault_seed: seeds the choice of which requests a partial-share fault fails.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: Path | str | None = None,
        token: str | None = None,
        watch_window: int = DEFAULT_WATCH_WINDOW,
        *,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
        crd_dir: Path | None = None,
        fault_seed: int | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.token = token or _stored_token(self.data_dir)
        self.watch_window = watch_window
        self.bookmark_interval = bookmark_interval
        self.crd_dir = crd_dir
        self.faults = Faults(seed=fault_seed)
        self.stats = Stats()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._store: Store | None = None
        self._api: Api | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._listener: DualProtocolListener | None = None
        self.certificate = tls.load_or_create(self._client_host, self.data_dir)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> DevHub:
        if self._thread is not None:
            raise RuntimeError("this DevHub is already started")
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"devhub-{self.host}", daemon=True
        )
        self._thread.start()
        try:
            ready.result(timeout=START_TIMEOUT)
        except BaseException:
            self._thread.join(timeout=STOP_TIMEOUT)
            self._thread = None
            raise
        return self

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:
            ready.set_exception(exc)
            loop.run_until_complete(self._shutdown())
            loop.close()
            return
        ready.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _startup(self) -> None:
        persistence = SqliteStore(self.data_dir) if self.data_dir is not None else None
        self._store = Store(
            load_resources(self.crd_dir).values(),
            watch_window=self.watch_window,
            persistence=persistence,
        )
        self._api = Api(
            self._store,
            token=self.token,
            faults=self.faults,
            stats=self.stats,
            bookmark_interval=self.bookmark_interval,
            server_address=lambda: f"{self.host}:{self.port}",
        )
        self._runner = web.AppRunner(
            self._api.app(),
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=SHUTDOWN_GRACE,
        )
        await self._runner.setup()
        factory = self._runner.server
        if factory is None:
            raise RuntimeError("aiohttp runner has no server after setup()")
        self._listener = DualProtocolListener(
            factory, self.certificate.server_context(), self.host, self._requested_port
        )
        await self._listener.start()
        self.port = self._listener.port

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
        if self._api is not None:
            self._api.closing = True
        if self._store is not None:
            for watcher in list(getattr(self._store, "_watchers", ())):
                watcher.close("server shutting down")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._store is not None:
            self._store.close()

    def stop(self) -> None:
        """Stop serving, close every connection and the data file. Safe to call twice."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=STOP_TIMEOUT)
        self._thread = None
        self._loop = None

    def __enter__(self) -> DevHub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- access ----------------------------------------------------------------------------

    @property
    def _client_host(self) -> str:
        """Where a local client reaches the server (a wildcard bind is reached on loopback)."""
        return WILDCARD_HOSTS.get(self.host, self.host)

    def _base(self, scheme: str) -> str:
        if not self.port:
            raise RuntimeError("DevHub is not started: call start() first")
        host = self._client_host
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{self.port}"

    @property
    def url(self) -> str:
        """Plain-HTTP base URL, e.g. http://127.0.0.1:PORT."""
        return self._base("http")

    @property
    def tls_url(self) -> str:
        """The same server over TLS (same port); what the written kubeconfig points at."""
        return self._base("https")

    def call(self, fn: Callable[[Store], T], timeout: float = STOP_TIMEOUT) -> T:
        """Run `fn(store)` on the server thread and return its result."""
        loop = self._loop
        if loop is None or self._store is None:
            raise RuntimeError("DevHub is not started: call start() first")
        store = self._store

        async def run() -> T:
            return fn(store)

        if threading.current_thread() is self._thread:
            return fn(store)
        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    @property
    def resource_version(self) -> int:
        """The cluster-wide resourceVersion of the last write."""
        return self.call(lambda store: store.rv)

    def reset(self) -> None:
        """Drop every object (the system namespaces, `default` among them, and the system
        priority classes come back), end open watches, clear faults and stats.

        resourceVersions stay monotonic, so a client holding an old one gets 410, not a lie."""
        self.faults.clear()
        self.call(lambda store: store.reset())
        self.stats.clear()

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig for this hub: its HTTPS URL and CA (kubectl sends tokens only over TLS)
        and the bearer token."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CONTEXT_NAME, "cluster": {
                "server": self.tls_url,
                "certificate-authority-data": base64.b64encode(self.certificate.cert_pem).decode(),
            }}],
            "users": [{"name": CONTEXT_NAME, "user": {"token": self.token}}],
            "contexts": [{
                "name": CONTEXT_NAME,
                "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME},
            }],
            "current-context": CONTEXT_NAME,
            "preferences": {},
        }

    def write_kubeconfig(self, path: Path | str) -> Path:
        """Write a kubeconfig for this hub (server URL and token) to `path`, mode 0600.

        Atomically: it is written beside `path` and renamed over it, so a process waiting for
        the file (a test, a script after `make run`) never reads half of it."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(self.kubeconfig(), sort_keys=False)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:  # mkstemp makes it 0600
                handle.write(text)
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return target

    # --- sample fleet ----------------------------------------------------------------------

    def load_sample_fleet(
        self, path: Path | None = None, *, heartbeat_interval: float | None = 60.0
    ) -> list[str]:
        """Create the sample MemberClusters (when missing) and keep their heartbeats fresh.

        Returns the cluster names. With `heartbeat_interval=None` heartbeats are written once."""
        from devhub import sample

        documents = sample.read_fleet(path)
        names = self.call(lambda store: sample.apply_fleet(store, documents))
        loop, store = self._loop, self._store
        if heartbeat_interval is not None and loop is not None and store is not None:

            def schedule() -> None:
                task = loop.create_task(sample.keep_heartbeats(store, names, heartbeat_interval))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

            loop.call_soon_threadsafe(schedule)
        return names
