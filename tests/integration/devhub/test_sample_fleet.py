"""The sample fleet behind `make run`, and the `fleet-scheduler devhub` command itself."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
import yaml

from devhub import DevHub
from hub import names
from hub.types import MemberCluster
from tests.integration.devhub.devhub_helpers import CLUSTERS, Client
from tests.support.waits import until

STARTUP_TIMEOUT = 20.0


def _heartbeat(cluster: MemberCluster) -> datetime:
    agent = cluster.status.agent(names.MEMBER_AGENT)
    assert agent is not None and agent.last_received_heartbeat is not None
    return agent.last_received_heartbeat


def test_sample_fleet_is_eligible_and_varied(devhub_factory: Callable[..., DevHub]) -> None:
    hub = devhub_factory()
    loaded = hub.load_sample_fleet(heartbeat_interval=None)
    items = Client(hub).get(CLUSTERS).json()["items"]
    clusters = [MemberCluster.from_wire(item) for item in items]
    assert sorted(c.name for c in clusters) == sorted(loaded)
    assert len(clusters) >= 8
    assert len({c.metadata.labels["topology.kubernetes.io/region"] for c in clusters}) == 3
    assert len({c.metadata.labels["topology.kubernetes.io/zone"] for c in clusters}) >= 3
    assert any(c.spec.taints for c in clusters)
    now = datetime.now(UTC)
    for c in clusters:
        assert c.metadata.labels[names.MEMBER_NAME_LABEL] == c.name
        assert names.NODE_COUNT_PROPERTY in c.status.properties
        assert c.status.resource_usage.allocatable["cpu"]
        agent = c.status.agent(names.MEMBER_AGENT)
        assert agent is not None
        assert {cond.type: cond.status for cond in agent.conditions} == {
            names.AGENT_JOINED_CONDITION: "True", names.AGENT_HEALTHY_CONDITION: "True"}
        assert (now - _heartbeat(c)).total_seconds() < 60


def test_sample_heartbeats_keep_moving(devhub_factory: Callable[..., DevHub]) -> None:
    hub = devhub_factory()
    name = hub.load_sample_fleet(heartbeat_interval=0.3)[0]
    client = Client(hub)
    before = client.get(f"{CLUSTERS}/{name}").json()

    def moved() -> dict[str, Any] | None:
        after = client.get(f"{CLUSTERS}/{name}").json()
        changed = after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
        return after if changed else None

    after = until(moved, what="a heartbeat", timeout=5)
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert after["spec"] == before["spec"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


def test_reloading_the_sample_fleet_keeps_existing_clusters(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    first = devhub_factory(data_dir=tmp_path / "hub")
    name = first.load_sample_fleet(heartbeat_interval=None)[0]
    uid = Client(first).get(f"{CLUSTERS}/{name}").json()["metadata"]["uid"]
    first.stop()
    second = devhub_factory(data_dir=tmp_path / "hub")
    second.load_sample_fleet(heartbeat_interval=None)
    assert Client(second).get(f"{CLUSTERS}/{name}").json()["metadata"]["uid"] == uid


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    def written() -> bool:
        assert process.poll() is None, process.communicate(timeout=10)
        return path.exists()

    until(written, what="devhub's kubeconfig", timeout=STARTUP_TIMEOUT)


def test_the_devhub_command_serves_the_sample_fleet_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "run" / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.cli", "devhub", "--hub-port", "0",
         "--kubeconfig-out", str(kubeconfig), "--data-dir", str(tmp_path / "data"),
         "--sample-fleet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        _wait_for(kubeconfig, process)
        config = yaml.safe_load(kubeconfig.read_text())
        server = config["clusters"][0]["cluster"]["server"]
        token = config["users"][0]["user"]["token"]
        http = server.replace("https://", "http://")
        response = requests.get(http + CLUSTERS, headers={"Authorization": f"Bearer {token}"},
                                timeout=5)
        assert len(response.json()["items"]) >= 8
        kubectl = shutil.which("kubectl")
        if kubectl is not None:
            listed = subprocess.run(
                [kubectl, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "kc"),
                 "get", "memberclusters", "-o", "name"],
                capture_output=True, text=True, timeout=30, check=True,
            )
            assert len(listed.stdout.split()) >= 8
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=STARTUP_TIMEOUT)
    assert process.returncode == 0, err
    assert str(kubeconfig) in out
    assert "kubectl --kubeconfig" in out


def test_the_devhub_command_explains_a_busy_port(devhub: DevHub, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workers.cli", "devhub", "--hub-port", str(devhub.port),
         "--kubeconfig-out", str(tmp_path / "kubeconfig")],
        capture_output=True, text=True, timeout=30, check=False,
    )
    assert result.returncode == 1
    assert "cannot listen" in result.stderr
    assert "Traceback" not in result.stderr
