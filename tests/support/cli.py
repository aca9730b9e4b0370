"""Drive `fleet-scheduler` as a user does: a real subprocess on free ports, read through its
output, the hub and Temporal.

`DevProcess` runs `fleet-scheduler dev` with a throwaway data dir and waits for its "ready"
line; `cli()` runs one short command (requeue, explain, status) against it;
`assert_one_line_error` checks a failure as a user sees it. Output goes to files,
not pipes, so a chatty process can never block on a full pipe while a test waits for it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Self, TypeVar

from hub import names as hub_names
from hub.client import HubClient
from hub.types import ClusterResourceBinding
from workers.devserver import free_port

T = TypeVar("T")

# `dev` must be up within ~30 s on a busy 2-core CI machine (it takes a few seconds idle).
STARTUP_TIMEOUT_S: Final = 45.0
# `run` with activity processes is ready once the server lists every process among the task
# queue's pollers. The dev server lists the pollers of a queue's root partition: a process whose
# pollers all sit on other partitions shows up only when one of them is forwarded or polls again,
# which has taken up to about a minute on a loaded machine (a CI run failed at 45 s with one
# process still "starting").
RUN_STARTUP_TIMEOUT_S: Final = 90.0
STOP_TIMEOUT_S: Final = 30.0
COMMAND_TIMEOUT_S: Final = 60.0
POLL_S: Final = 0.2
READY = re.compile(r"fleet-scheduler dev: ready in (?P<seconds>[0-9.]+)s")
RUN_READY = re.compile(r"^fleet-scheduler run: ready in [0-9.]+s", re.MULTILINE)
_VENV_SCRIPT = Path(sys.prefix) / "bin" / "fleet-scheduler"


def fleet_scheduler() -> list[str]:
    """The installed console script (what users run), or the module when not installed."""
    if _VENV_SCRIPT.is_file():
        return [str(_VENV_SCRIPT)]
    return [sys.executable, "-m", "workers.cli"]


def run_cli(
    *args: str,
    timeout: float = COMMAND_TIMEOUT_S,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `fleet-scheduler ARGS` in `cwd` (default: this one) with `env` (default: ours)."""
    return subprocess.run(
        [*fleet_scheduler(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
    )


def beside_make_run(home: Path) -> dict[str, str]:
    """Our environment as a newcomer's shell in the repository root has it: no KUBECONFIG, no
    ~/.kube/config (HOME is `home`), not in a pod; what `make run` wrote is all there is."""
    hidden = {"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
    return {**{k: v for k, v in os.environ.items() if k not in hidden}, "HOME": str(home)}


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes containing `text` (from /proc; Linux only)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = (entry / "stat").read_text()
            if text in cmdline and ") Z " not in status:  # zombies hold no port
                found.append(f"{entry.name}: {cmdline.strip()}")
    return found


@dataclass
class Ports:
    hub: int
    temporal: int
    ui: int
    metrics: int

    @classmethod
    def free(cls) -> Ports:
        return cls(hub=free_port(), temporal=free_port(), ui=free_port(), metrics=free_port())

    def all(self) -> list[int]:
        return [self.hub, self.temporal, self.ui, self.metrics]


class DevProcess:
    """One `fleet-scheduler dev` subprocess. `start()` returns once it printed its ready line."""

    def __init__(
        self,
        workdir: Path,
        *extra: str,
        data_dir: bool = True,
        program: Sequence[str] | None = None,
        one_stream: bool = False,
    ) -> None:
        """`program`: the `fleet-scheduler` to run (default: this venv's); it runs in `workdir`.
        `one_stream`: its stderr goes where its stdout goes, in the order written, as in a
        terminal (`stdout()` and `stderr()` then both read that one file)."""
        self.workdir = workdir
        self.program = list(program) if program is not None else fleet_scheduler()
        self.ports = Ports.free()
        self.kubeconfig = workdir / "kubeconfig"
        self.data_dir = workdir / "data" if data_dir else None
        self.stdout_path = workdir / "dev.stdout"
        self.stderr_path = self.stdout_path if one_stream else workdir / "dev.stderr"
        self.one_stream = one_stream
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_s: float | None = None
        self.reported_ready_s: float | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports.temporal}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.ui}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.metrics}"

    def command(self) -> list[str]:
        cmd = [
            *self.program, "dev",
            "--kubeconfig-out", str(self.kubeconfig),
            "--hub-port", str(self.ports.hub),
            "--temporal-port", str(self.ports.temporal),
            "--ui-port", str(self.ports.ui),
            "--metrics-port", str(self.ports.metrics),
            # dev's defaults are make run's (samples on, state in .run); a test asks for what
            # it needs in `extra`, which comes last and so wins.
            "--no-sample-fleet", "--no-sample-placements",
        ]  # fmt: skip
        cmd += ["--data-dir", str(self.data_dir)] if self.data_dir is not None else ["--in-memory"]
        return cmd + list(self.extra)

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT if self.one_stream else err,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env={
                    **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                    "PYTHONUNBUFFERED": "1",
                },
            )
        deadline = began + timeout
        while (match := READY.search(self.stdout())) is None:
            code = self.process.poll()
            if code is not None:
                raise AssertionError(
                    f"fleet-scheduler dev exited with {code} before it was ready\n"
                    f"stdout:\n{self.stdout()}\nstderr:\n{self.stderr()[-4000:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(
                    f"fleet-scheduler dev was not ready within {timeout:g}s\n"
                    f"stdout:\n{self.stdout()}\nstderr:\n{self.stderr()[-4000:]}"
                )
            time.sleep(POLL_S)
        self.startup_s = time.monotonic() - began
        self.reported_ready_s = float(match["seconds"])
        return self

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send `sig` and wait for the exit code (kills after STOP_TIMEOUT_S)."""
        process = self.process
        if process is None:
            raise RuntimeError("not started")
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
                raise AssertionError(
                    f"fleet-scheduler dev ignored {sig.name} for {STOP_TIMEOUT_S:g}s\n"
                    f"stderr:\n{self.stderr()[-4000:]}"
                ) from None
        return process.returncode

    def cli(
        self, *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `fleet-scheduler ARGS --temporal-address <ours>`, with KUBECONFIG naming our hub
        (what `requeue --wait` reads) unless `env` is given."""
        if env is None:
            env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        return run_cli(*args, "--temporal-address", self.address, cwd=cwd, env=env)

    def hub(self) -> HubClient:
        return HubClient.from_kubeconfig(self.kubeconfig)


def bindings_of(hub: HubClient, placement: str) -> list[ClusterResourceBinding]:
    return list(hub.list(ClusterResourceBinding, {hub_names.PARENT_PLACEMENT_LABEL: placement}))


def targets(bindings: Sequence[ClusterResourceBinding], state: str | None = None) -> list[str]:
    return sorted(b.spec.target_cluster for b in bindings if state is None or b.spec.state == state)


class RunProcess:
    """`fleet-scheduler run ARGS` in the background, its output in files under `workdir`."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.metrics_port = free_port()
        self.out = workdir / f"run-{self.metrics_port}.stdout"
        self.err = workdir / f"run-{self.metrics_port}.stderr"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(
                [*fleet_scheduler(), "run", *args, "--metrics-host", "127.0.0.1",
                 "--metrics-port", str(self.metrics_port)],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_ready(self, timeout: float = RUN_STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not RUN_READY.search(self.stdout()):
            assert self.process.poll() is None, self.err.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, (
                f"not ready after {timeout:g}s; /readyz: {self.readyz()}\n"
                + self.err.read_text(errors="replace")[-4000:]
            )
            time.sleep(0.2)

    def readyz(self) -> str:
        """What the process's /readyz says (why it is not ready), or why it cannot be asked."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=5
            ) as response:
                return str(response.read().decode(errors="replace"))
        except urllib.error.HTTPError as err:
            return str(err.read().decode(errors="replace"))
        except OSError as err:
            return f"unreachable ({err})"

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        return self.process.returncode


# What every command exits with on bad input or a missing service (workers/cli/common.py).
EXIT_USAGE: Final = 2


def assert_one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> str:
    """The command failed as a user should see it: exit 2 and one line on stderr naming each of
    `expected`, no traceback. Returns the line."""
    assert result.returncode == EXIT_USAGE, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0]
    return lines[0]


def unreachable() -> str:
    """A local address where nothing listens."""
    return f"127.0.0.1:{free_port()}"
