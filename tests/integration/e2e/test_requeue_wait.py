"""`fleet-scheduler requeue --wait` against the whole system: it answers with the cycle the
requeue caused, and brings back the workflow of a placement that lost it (update-with-start)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from hub.client import HubClient
from tests.integration.e2e.fleet import add_cluster, add_placement, eventually, live_targets, unique
from workers.watcher import Watcher
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

CLI = str(Path(sys.prefix) / "bin" / "fleet-scheduler")


async def _requeue_wait(env: WorkflowEnvironment, task_queue: str, *args: str) -> tuple[int, str]:
    # A subprocess on this loop: the worker that must answer runs in this process.
    process = await asyncio.create_subprocess_exec(
        CLI, "requeue", *args, "--wait", "--timeout", "60",
        "--temporal-address", env.client.service_client.config.target_host,
        "--task-queue", task_queue,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 90)
    return process.returncode or 0, output.decode()


async def test_requeue_wait_restarts_a_lost_workflow_and_prints_its_cycle(
    hub: HubClient, temporal_env: WorkflowEnvironment, task_queue: str, system: Watcher
) -> None:
    client: Client = temporal_env.client
    add_cluster(hub, "member-a")
    placement = unique("lost")
    add_placement(hub, placement, {"placementType": "PickAll"})
    await eventually(lambda: set(live_targets(hub, placement)) == {"member-a"})
    handle = client.get_workflow_handle(workflow_id(placement))
    await handle.terminate("test: the workflow is lost")

    code, output = await _requeue_wait(temporal_env, task_queue, placement, "--reason", "back")

    assert code == 0, output
    assert f"sent requeue to crp/{placement} (back)" in output
    assert "cycle 1: PickAll 1, picked member-a" in output, output
    assert (await client.get_workflow_handle(workflow_id(placement)).describe()).status == (
        WorkflowExecutionStatus.RUNNING
    )


async def test_requeue_wait_of_a_placement_that_does_not_exist_says_so(
    hub: HubClient, temporal_env: WorkflowEnvironment, task_queue: str, system: Watcher
) -> None:
    code, output = await _requeue_wait(temporal_env, task_queue, unique("nothing"))

    assert code == 1
    assert "no such ClusterResourcePlacement in the hub" in output, output
    assert "Traceback" not in output
