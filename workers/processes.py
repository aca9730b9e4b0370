"""Activity-worker processes: `fleet-scheduler run --processes N` starts N children, each a
`fleet-scheduler run --components activities` with its own cluster cache, and keeps them running.

A cycle is pure Python, so one process runs one cycle at a time however many threads it has;
cycles spread over cores (and, with more pods, over hosts) as processes polling the activity
task queue, and Temporal hands each task to whichever polls first. The parent here supervises:

- a child that exits while the parent runs is started again after a backoff (1 s, doubling to
  30 s, back to 1 s once a child has lived a minute); its activities in flight time out and are
  retried by Temporal on another process, so nothing is lost;
- a child whose parent died (SIGKILL, OOM) notices within a second and stops
  (`exit_with_parent`), so no orphan keeps polling after a restart;
- the parent is ready once every child said it is, and its `/metrics` carries every child's
  samples under a `fleet_process` label (`merge_expositions`);
- on a stop, every child gets SIGTERM and STOP_GRACE_S (25 s: its own 20 s for the activities
  in flight, and a margin) to finish, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "PARENT_PID_ENV",
    "PROCESS_LABEL",
    "STOP_GRACE_S",
    "ActivityProcesses",
    "available_cpus",
    "exit_with_parent",
    "merge_expositions",
]

log = logging.getLogger("fleet_scheduler.processes")

# Set in each child's environment: the pid of the `run` that started it.
PARENT_PID_ENV: Final = "FLEET_SCHEDULER_PARENT_PID"
# The label the parent's /metrics gives each child's samples: "activities-1", ...
PROCESS_LABEL: Final = "fleet_process"
RESTART_BACKOFF_S: Final = (1.0, 30.0)
HEALTHY_AFTER_S: Final = 60.0
STOP_GRACE_S: Final = 25.0  # the child's own SHUTDOWN_GRACE (20 s) and a margin
PARENT_CHECK_S: Final = 1.0
CGROUP_CPU_MAX: Final = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2
CGROUP_V1_CPU: Final = Path("/sys/fs/cgroup/cpu")  # cgroup v1: cpu.cfs_quota_us, cfs_period_us
_READY = re.compile(r": ready in .*?metrics (?P<url>http://\S+?)(?:,|\s|$)")


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX, v1: Path = CGROUP_V1_CPU) -> int:
    """The cores this process may use: the CPUs it may run on, capped by its cgroup's CPU quota
    (a container's CPU limit, rounded up; cgroup v2, else v1), at least 1. `os.cpu_count()` is
    the node's count, which in a pod limited to one core would start dozens of processes."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    quota = _cpu_quota(cpu_max, v1)
    return cpus if quota is None else max(1, min(cpus, math.ceil(quota)))


def _cpu_quota(cpu_max: Path, v1: Path) -> float | None:
    """The cgroup's CPU limit in cores; None when there is none (or none can be read)."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (v1 / "cpu.cfs_quota_us").read_text().strip()
            period = (v1 / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    if quota in ("max", "-1"):
        return None
    try:
        cores = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None
    return cores if cores > 0 else None


@dataclass
class _Child:
    name: str
    process: asyncio.subprocess.Process | None = None
    ready: bool = False
    metrics_url: str | None = None
    started: float = 0.0
    last_exit: str = field(default="not started")
    terminated: bool = False  # SIGTERM sent for the current process


class ActivityProcesses:
    """`count` children running `argv`, supervised until `run`'s stop event is set."""

    def __init__(self, argv: Sequence[str], count: int) -> None:
        if count < 1:
            raise ValueError(f"activity processes must be at least 1, got {count}")
        self.argv = list(argv)
        self.children = [_Child(f"activities-{index}") for index in range(1, count + 1)]

    def readiness(self) -> tuple[bool, str]:
        waiting = [child for child in self.children if not child.ready]
        if not waiting:
            return True, "ok"
        return False, "; ".join(f"{child.name}: {child.last_exit}" for child in waiting)

    def metrics_sources(self) -> list[tuple[str, str]]:
        """(label, /metrics URL) of every running child that announced one."""
        return [(c.name, c.metrics_url) for c in self.children if c.metrics_url is not None]

    async def run(self, stop: asyncio.Event) -> None:
        """Start every child, restart those that exit, and stop them all once `stop` is set."""
        try:
            await asyncio.gather(*(self._keep(child, stop) for child in self.children))
        finally:
            await asyncio.gather(*(self._stop(child) for child in self.children))

    async def _keep(self, child: _Child, stop: asyncio.Event) -> None:
        backoff = RESTART_BACKOFF_S[0]
        while not stop.is_set():
            await self._start(child)
            assert child.process is not None
            reading = asyncio.create_task(self._read(child, child.process))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait([reading, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if stop.is_set():
                await self._stop(child)
                await reading
                return
            code = await child.process.wait()
            child.ready, child.metrics_url = False, None
            child.last_exit = f"exited with code {code}, restarting"
            if time.monotonic() - child.started >= HEALTHY_AFTER_S:
                backoff = RESTART_BACKOFF_S[0]
            log.error(
                "activity process %s (pid %d) exited with code %s; starting it again in %gs",
                child.name, child.process.pid, code, backoff,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_S[1])

    async def _start(self, child: _Child) -> None:
        env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
        child.process = await asyncio.create_subprocess_exec(
            *self.argv, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
            env=env,
        )
        child.started = time.monotonic()
        child.last_exit = "starting"
        child.terminated = False
        log.info("activity process %s started (pid %d)", child.name, child.process.pid)

    @staticmethod
    async def _read(child: _Child, process: asyncio.subprocess.Process) -> None:
        """Echo the child's output with its name in front; note its ready line. Should echoing
        fail (a line over the reader's limit, our own stdout gone), the rest is drained unread:
        a child must never block on a full pipe."""
        assert process.stdout is not None
        try:
            async for raw in process.stdout:
                line = raw.decode(errors="replace").rstrip()
                found = _READY.search(line)
                if found:
                    child.ready, child.metrics_url = True, found["url"]
                sys.stdout.write(f"[{child.name}] {line}\n")
                sys.stdout.flush()
        except (ValueError, OSError) as exc:
            log.warning("cannot echo the output of %s any more: %s", child.name, exc)
            while await process.stdout.read(1 << 16):
                pass

    @staticmethod
    async def _stop(child: _Child) -> None:
        process = child.process
        if process is None or process.returncode is not None:
            return
        if not child.terminated:  # once: a second stop (after a cancel) goes on to SIGKILL
            child.terminated = True
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except TimeoutError:
            log.warning("activity process %s did not stop in %gs; killing it",
                        child.name, STOP_GRACE_S)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        child.ready = False


async def exit_with_parent(stop: asyncio.Event) -> None:
    """In a child of ActivityProcesses: set `stop` once the parent that started it is gone."""
    parent = os.environ.get(PARENT_PID_ENV)
    if not parent:
        return
    while not stop.is_set():
        if os.getppid() != int(parent):
            log.error("the process that started this one (pid %s) is gone; stopping", parent)
            stop.set()
            return
        await asyncio.sleep(PARENT_CHECK_S)


def _family_of(sample: str) -> str:
    return sample.split("{", 1)[0].split(" ", 1)[0]


def _labelled(sample: str, label: str) -> str:
    """A sample line with `fleet_process="<label>"` added to its labels."""
    pair = f'{PROCESS_LABEL}="{label}"'
    name, brace, rest = sample.partition("{")
    if brace:
        return f"{name}{{{pair}{'' if rest.startswith('}') else ','}{rest}"
    name, space, value = sample.partition(" ")
    return f"{name}{{{pair}}}{space}{value}"


def merge_expositions(parts: Sequence[tuple[str | None, str]]) -> bytes:
    """Prometheus text documents as one: samples of the same family grouped under its first
    HELP and TYPE lines, each document's samples labelled `fleet_process=<its label>` (None:
    left as they are, the parent's own). Works on the text, so every name stays as its
    exporter wrote it (a parse and render would add `_total` to counters that lack it, as the
    Temporal SDK's do)."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for label, text in parts:
        family = ""
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                words = line.split(maxsplit=3)
                if len(words) >= 3 and words[1] in ("HELP", "TYPE"):
                    family = words[2]
                    seen = headers.setdefault(family, [])
                    if not any(h.split(maxsplit=2)[1] == words[1] for h in seen):
                        seen.append(line)
                    samples.setdefault(family, [])
                continue
            name = _family_of(line)
            if not family or not name.startswith(family):
                family = name
                headers.setdefault(family, [])
                samples.setdefault(family, [])
            samples[family].append(line if label is None else _labelled(line, label))
    out: list[str] = []
    for family, lines in samples.items():
        out += headers.get(family, [])
        out += lines
    return ("\n".join(out) + "\n").encode()
