"""The processes of the end-to-end bench: devhub, the Temporal dev server, the scheduler's worker
and watcher, and the baselines, each its own process so its peak memory can be read from /proc.

Every child is registered the moment it starts and stopped by `stop_all` (SIGTERM, then SIGKILL
after a grace period), which bench/e2e.py calls on every way out: normal end, an error, Ctrl-C,
SIGTERM. Children we spawn ourselves also get PR_SET_PDEATHSIG, so even a bench killed with
SIGKILL takes them along; the Temporal dev server is started by `workers.devserver.DevServer`
(its own session, stopped by `stop_all` through DevServer.stop)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import IO, Any, Final

import yaml

from workers.devserver import DevServer, free_port

__all__ = ["Child", "Stack", "cpu_seconds", "peak_rss_mb", "self_peak_rss_mb"]

PYTHON: Final = sys.executable
CLI: Final = [PYTHON, "-m", "workers.cli", "--log-level", "WARNING"]
BENCH_DIR: Final = Path(__file__).resolve().parent
STOP_GRACE_S: Final = 20.0
READY_TIMEOUT_S: Final = 90.0
_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the bench's (main) thread dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _status_kb(pid: int, field: str) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def rss_mb(pid: int) -> float | None:
    """The process's resident set (VmRSS) now, in MiB; None once it has exited."""
    kb = _status_kb(pid, "VmRSS")
    return None if kb is None else kb / 1024


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM) so far, in MiB; None once it has exited."""
    kb = _status_kb(pid, "VmHWM")
    return None if kb is None else kb / 1024


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time the process has used so far, in seconds (its threads included)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    # After "pid (comm) ": state is field 3, utime 14, stime 15 (1-based, see proc(5)).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_named(name: str) -> list[int]:
    """Pids of our direct children whose command name is `name` (e.g. the temporal binary)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces, so split after the last ')'.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == me and comm == name:
            found.append(int(entry.name))
    return found


class Child:
    """One child process; its output goes to a log file, and each line to `on_line` if given."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_dir: Path,
        *,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self._on_line = on_line
        self._lines: list[str] = []
        self._ready = threading.Event()
        self._ready_pattern: re.Pattern[str] | None = None
        self.ready_line = ""
        self.peak_mb: float | None = None
        self.descendant_peaks_mb: dict[str, float] = {}
        self.process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self, ready: str | None = None) -> Child:
        self._ready_pattern = re.compile(ready) if ready else None
        log: IO[str] = self.log_path.open("w")
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            # A terminal's Ctrl-C reaches only the bench, which then stops us in order.
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        _CHILDREN.append(self)
        self._reader = threading.Thread(target=self._read, args=(log,), daemon=True)
        self._reader.start()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def _read(self, log: IO[str]) -> None:
        assert self.process is not None and self.process.stdout is not None
        with log:
            for line in self.process.stdout:
                log.write(line)
                log.flush()
                line = line.rstrip("\n")
                self._lines.append(line)
                if self._on_line is not None:
                    self._on_line(line)
                if self._ready_pattern is not None and self._ready_pattern.search(line):
                    self.ready_line = line
                    self._ready.set()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}) before it "
                                   f"was ready; see {self.log_path}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s; see "
                                   f"{self.log_path}:\n{self.tail()}")
        return self.ready_line

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self._lines[-lines:])

    def stats(self) -> dict[str, str]:
        """The `stat NAME VALUE` lines it printed (the baselines do, when stopped)."""
        found = {}
        for line in self._lines:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "stat":
                found[parts[1]] = parts[2]
        return found

    def sample_peak(self) -> float | None:
        if self.process is not None and self.process.poll() is None:
            peak = peak_rss_mb(self.process.pid)
            if peak is not None:
                self.peak_mb = peak
            for name, pid in self.descendants().items():
                peak = peak_rss_mb(pid)
                if peak is not None:
                    self.descendant_peaks_mb[name] = max(
                        peak, self.descendant_peaks_mb.get(name, 0.0)
                    )
        return self.peak_mb

    def descendants(self) -> dict[str, int]:
        """The processes this one started (`run --processes N`): "<name>.1", ... by pid order."""
        if self.process is None:
            return {}
        try:
            text = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
        except OSError:
            return {}
        return {
            f"{self.name}.{index}": pid
            for index, pid in enumerate(sorted(int(p) for p in text.split()), start=1)
        }

    def stop(
        self, grace: float = STOP_GRACE_S, sig: signal.Signals = signal.SIGTERM
    ) -> int | None:
        """`sig`, then SIGKILL after `grace`; reads the peak RSS first. Safe to call twice."""
        process = self.process
        if process is None:
            return None
        self.sample_peak()
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(5)
        return process.returncode


_CHILDREN: list[Child] = []


class Stack:
    """devhub and the Temporal dev server for the whole run, plus the children of each phase."""

    def __init__(self, workdir: Path, *, temporal_db: str, server_args: list[str]) -> None:
        self.server_args = server_args
        self.workdir = workdir
        self.temporal_db = temporal_db
        self.devhub: Child | None = None
        self.kubeconfig = workdir / "kubeconfig"
        self.hub_url = ""
        self.token = ""
        self.server: DevServer | None = None
        self.temporal_pid: int | None = None
        self.temporal_peak_mb: float | None = None

    def start_devhub(self) -> None:
        self.devhub = Child(
            "devhub",
            [*CLI, "devhub", "--hub-port", "0", "--kubeconfig-out", str(self.kubeconfig)],
            self.workdir,
        ).start(ready=r"^devhub serving")
        self.devhub.wait_ready()
        config = yaml.safe_load(self.kubeconfig.read_text())
        self.hub_url = config["clusters"][0]["cluster"]["server"].replace("https://", "http://")
        self.token = config["users"][0]["user"]["token"]

    async def start_temporal(self) -> DevServer:
        data_dir = self.workdir / "temporal" if self.temporal_db == "sqlite" else None
        self.server = DevServer(
            port=free_port(), ui=False, data_dir=data_dir, extra_args=self.server_args
        )
        await self.server.start()
        pids = children_named("temporal")
        self.temporal_pid = pids[0] if len(pids) == 1 else None
        return self.server

    def sample_peaks(self) -> None:
        for child in _CHILDREN:
            child.sample_peak()
        if self.temporal_pid is not None:
            peak = peak_rss_mb(self.temporal_pid)
            if peak is not None:
                self.temporal_peak_mb = peak

    def cpu(self, *parts: Child) -> dict[str, float]:
        """CPU seconds used so far by devhub, Temporal, the bench itself, `parts` and the
        processes they started (`worker.1`, ...; each alone)."""
        pids = {"bench": os.getpid(), **{part.name: part.pid for part in parts}}
        for part in parts:
            pids.update(part.descendants())
        if self.devhub is not None:
            pids["devhub"] = self.devhub.pid
        if self.temporal_pid is not None:
            pids["temporal"] = self.temporal_pid
        used = {name: cpu_seconds(pid) for name, pid in pids.items()}
        return {name: seconds for name, seconds in used.items() if seconds is not None}

    def spawn(self, name: str, argv: list[str], **kwargs: Callable[[str], None]) -> Child:
        return Child(name, argv, self.workdir, **kwargs)

    def scheduler_part(self, name: str, task_queue: str, *flags: str) -> Child:
        """`fleet-scheduler run` against this stack's devhub and Temporal."""
        assert self.server is not None
        return self.spawn(
            name,
            [
                *CLI, "run",
                "--kubeconfig", str(self.kubeconfig),
                "--temporal-address", self.server.target,
                "--temporal-namespace", self.server.namespace,
                "--task-queue", task_queue,
                "--metrics-host", "127.0.0.1",
                "--metrics-port", "0",
                *flags,
            ],
        )  # fmt: skip

    def baseline(self, name: str, *args: str) -> Child:
        return self.spawn(name, [PYTHON, str(BENCH_DIR / "baselines.py"), *args])

    async def stop_all(self) -> None:
        """Stop every child still running and the dev server; never raises."""
        self.sample_peaks()
        for child in reversed(_CHILDREN):
            with contextlib.suppress(Exception):
                child.stop()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.stop()


def stop_children_now() -> None:
    """Last resort (atexit): kill whatever is still running, without waiting politely."""
    for child in _CHILDREN:
        process = child.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(Exception):
                process.kill()


def run_bench(
    name: str, run: Callable[[Path], Coroutine[Any, Any, bool]], *, keep: bool
) -> int:
    """A bench's process around `run(workdir)` (True: every phase or arm worked): Linux only
    (/proc), every child stopped on the way out, Ctrl-C and failures said in one line, the
    logs' directory kept when something failed or `keep`. The exit code: 0, 1 (failed), 2 (not
    Linux) or 130 (interrupted)."""
    if not sys.platform.startswith("linux"):
        print(f"bench/{name}.py reads /proc (bench/e2e_stack.py); run it on Linux", file=sys.stderr)
        return 2
    atexit.register(stop_children_now)
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-bench-"))
    print(f"# logs in {workdir}", file=sys.stderr, flush=True)
    async def cancellable() -> bool:
        # Ctrl-C and SIGTERM cancel the run, whose phases' `finally` stop every child.
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        return await run(workdir)

    try:
        ok = asyncio.run(cancellable())
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("# interrupted; every process the bench started has been stopped", file=sys.stderr)
        return 130
    except Exception as exc:
        print(f"# failed: {type(exc).__name__}: {exc} (logs in {workdir})", file=sys.stderr)
        return 1
    if not ok:
        print(f"# something failed (logs in {workdir})", file=sys.stderr)
        return 1
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0
