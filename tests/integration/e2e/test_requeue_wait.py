"""`fleet-scheduler requeue --wait` against the whole system: it answers with the cycle the
requeue caused, brings back the workflow of a placement that lost it (update-with-start), and
starts nothing for a placement the hub does not have."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from control.watcher import Watcher
from hub.client import HubClient
from tests.support.fleet import add_cluster, add_placement, live_targets, unique
from tests.support.waits import until_async
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

CLI = str(Path(sys.prefix) / "bin" / "fleet-scheduler")


async def _requeue_wait(
    env: WorkflowEnvironment, task_queue: str, kubeconfig: Path, *args: str
) -> tuple[int, str]:
    # A subprocess on this loop: the worker that must answer runs in this process.
    process = await asyncio.create_subprocess_exec(
        CLI, "requeue", *args, "--wait", "--timeout", "60",
        "--temporal-address", env.client.service_client.config.target_host,
        "--task-queue", task_queue, "--kubeconfig", str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 90)
    return process.returncode or 0, output.decode()


async def test_requeue_wait_restarts_a_lost_workflow_and_prints_its_cycle(
    hub: HubClient,
    hub_kubeconfig: Path,
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    system: Watcher,
) -> None:
    client: Client = temporal_env.client
    add_cluster(hub, "member-a")
    placement = unique("lost")
    add_placement(hub, placement, {"placementType": "PickAll"})
    await until_async(lambda: set(live_targets(hub, placement)) == {"member-a"}, blocking=True)
    handle = client.get_workflow_handle(workflow_id(placement))
    await handle.terminate("test: the workflow is lost")

    code, output = await _requeue_wait(
        temporal_env, task_queue, hub_kubeconfig, placement, "--reason", "back"
    )

    assert code == 0, output
    assert f"sent requeue to crp/{placement} (back)" in output
    assert "cycle 1: PickAll 1, picked member-a" in output, output
    assert (await client.get_workflow_handle(workflow_id(placement)).describe()).status == (
        WorkflowExecutionStatus.RUNNING
    )


async def test_requeue_wait_of_a_placement_that_does_not_exist_starts_no_workflow(
    hub: HubClient,
    hub_kubeconfig: Path,
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    system: Watcher,
) -> None:
    name = unique("nothing")
    code, output = await _requeue_wait(temporal_env, task_queue, hub_kubeconfig, name)

    assert code == 2, output
    assert output.strip().splitlines() == [
        f"fleet-scheduler requeue: error: the hub at {hub.host} has no ClusterResourcePlacement "
        f"named {name!r}: nothing was requeued and no workflow was started (`kubectl get crp` "
        "lists them)"
    ]
    with pytest.raises(RPCError) as described:
        await temporal_env.client.get_workflow_handle(workflow_id(name)).describe()
    assert described.value.status == RPCStatusCode.NOT_FOUND
