"""Child processes a reliability test can SIGKILL, and a reaper that never leaves one behind.

Every child starts in its own session, so its process group id is its pid and a kill reaches
whatever it spawned too. `Processes` remembers every group it ever started; `close()` SIGKILLs
them all and waits, and is called from a pytest finalizer and, as a last resort, at interpreter
exit (a KeyboardInterrupt, a failed assertion or a timeout mid-test all still clean up).
`leftovers()` scans /proc for any process still in one of those groups, so a test can assert
that nothing outlived it.

Output goes to log files, never to pipes nobody reads (a chatty child blocked on a full pipe
looks exactly like a hung one). The one exception is a child that talks a line protocol on
stdout (`reader=True`): a thread drains it into a queue."""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

__all__ = ["Proc", "Processes", "group_members"]

# SIGTERM grace before SIGKILL when a test stops a child politely.
TERM_GRACE_S: Final = 10.0
# How long a SIGKILLed group may take to disappear from /proc (zombies are reaped by wait()).
REAP_TIMEOUT_S: Final = 10.0
LOG_TAIL_CHARS: Final = 3000


def children_of(pid: int) -> list[int]:
    """The direct children of `pid` (none once it has exited)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def is_live(pid: int) -> bool:
    """`pid` runs (is neither gone nor a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids whose process group is `pgid` (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


class Proc:
    """One child process in its own process group; its output goes to `log_path`."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        reader: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.lines: queue.Queue[str] = queue.Queue()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = log_path.open("ab")
        self.started_at = time.monotonic()
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE if reader else subprocess.DEVNULL,
            stdout=subprocess.PIPE if reader else self._log,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        self.pid = self.popen.pid
        self.killed = False  # by us (kill/terminate), as opposed to exiting by itself
        self._reader: threading.Thread | None = None
        if reader:
            self._reader = threading.Thread(target=self._drain, name=f"read-{name}", daemon=True)
            self._reader.start()

    def _drain(self) -> None:
        stdout = self.popen.stdout
        assert stdout is not None
        for raw in stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def send_line(self, line: str) -> None:
        stdin = self.popen.stdin
        if stdin is None:
            raise RuntimeError(f"{self.name} was not started with a line protocol")
        stdin.write((line + "\n").encode())
        stdin.flush()

    def kill(self) -> None:
        """SIGKILL the whole group and reap the child: no cleanup runs in it."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self._reap()

    def terminate(self, grace_s: float = TERM_GRACE_S) -> int | None:
        """SIGTERM the group; SIGKILL it if the child has not exited within `grace_s`."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=grace_s)
        self.kill()
        return self.popen.returncode

    def _reap(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=REAP_TIMEOUT_S)
        deadline = time.monotonic() + REAP_TIMEOUT_S
        while group_members(self.pid) and time.monotonic() < deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            time.sleep(0.05)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log.close()

    def log_tail(self, limit: int = LOG_TAIL_CHARS) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text if len(text) <= limit else "..." + text[-limit:]

    def __repr__(self) -> str:
        state = "running" if self.alive else f"exited {self.returncode}"
        return f"<{self.name} pid {self.pid} {state}>"


class Processes:
    """Starts children and guarantees they are all gone after `close()`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[Proc] = []
        self._generation: dict[str, int] = {}
        self._closed = False
        atexit.register(self.close)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        reader: bool = False,
    ) -> Proc:
        if self._closed:
            raise RuntimeError("this Processes is closed")
        generation = self._generation.get(name, 0) + 1
        self._generation[name] = generation
        log_path = self.log_dir / f"{name}.{generation}.log"
        proc = Proc(name, argv, log_path, env=env, cwd=cwd, reader=reader)
        self.started.append(proc)
        return proc

    def leftovers(self) -> dict[str, list[int]]:
        """Processes still alive in any group this object started, by child name."""
        found: dict[str, list[int]] = {}
        for proc in self.started:
            members = group_members(proc.pid)
            if members:
                found.setdefault(f"{proc.name}[{proc.pid}]", []).extend(members)
        return found

    def close(self) -> None:
        """SIGKILL every group ever started (newest first) and reap them. Idempotent."""
        self._closed = True
        for proc in reversed(self.started):
            proc.kill()
        atexit.unregister(self.close)
