"""kubectl, unchanged, against devhub: get, apply, re-apply, delete and get -w; namespaces
(create, get, delete) and namespaced placements (-n, -A).

Drives the real binary as a subprocess with the kubeconfig devhub writes (HTTPS with devhub's CA
and the bearer token, because kubectl sends credentials only over TLS)."""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.devhub.devhub_helpers import (
    ALL_RPS,
    CLUSTERS,
    NAMESPACES,
    PLACEMENTS,
    Client,
    cluster,
    rbs,
    resource_binding,
)

pytestmark = pytest.mark.kubectl

KUBECTL = shutil.which("kubectl")
TIMEOUT = 30
PLACEMENT_YAML = """\
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: web
  labels: {app: web}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: web}
  policy:
    placementType: PickN
    numberOfClusters: NUMBER
"""

RESOURCE_PLACEMENT_YAML = """\
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata:
  name: NAME
  NAMESPACE_LINE
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: ConfigMap, name: web}
  policy:
    placementType: PickAll
"""
FINALIZER = "kubernetes-fleet.io/scheduler-cleanup"

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(hub_kubeconfig: Path, tmp_path: Path) -> Kubectl:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (make test installs Debian's kubernetes-client)")
    binary = KUBECTL

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [binary, "--kubeconfig", str(hub_kubeconfig), "--cache-dir",
             str(tmp_path / "kube-cache"), *args],
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result

    return run


def _manifest(tmp_path: Path, number: int) -> str:
    path = tmp_path / "placement.yaml"
    path.write_text(PLACEMENT_YAML.replace("NUMBER", str(number)))
    return str(path)


def _resource_placement(tmp_path: Path, name: str, namespace: str | None) -> str:
    path = tmp_path / f"{name}-{namespace}.yaml"
    line = f"namespace: {namespace}" if namespace else ""
    path.write_text(RESOURCE_PLACEMENT_YAML.replace("NAMESPACE_LINE", line).replace("NAME", name))
    return str(path)


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines()]


def test_kubectl_get_prints_the_printer_columns(api: Client, kubectl: Kubectl) -> None:
    api.create(CLUSTERS, cluster("member-1"))
    api.create(CLUSTERS, cluster("member-2"))
    out = kubectl("get", "memberclusters").stdout.splitlines()
    assert out[0].split() == ["NAME", "JOINED", "TAINTS", "AGE"]
    assert [line.split()[0] for line in out[1:]] == ["member-1", "member-2"]
    assert kubectl("get", "cluster", "member-2", "-o", "name").stdout.strip() == \
        "membercluster.cluster.kubernetes-fleet.io/member-2"


def test_kubectl_get_by_category(api: Client, kubectl: Kubectl) -> None:
    api.create(CLUSTERS, cluster("member-1"))
    assert "member-1" in kubectl("get", "fleet").stdout


def test_kubectl_get_of_a_missing_object_fails_cleanly(kubectl: Kubectl) -> None:
    result = kubectl("get", "crp", "nope", check=False)
    assert result.returncode != 0
    assert 'clusterresourceplacements.placement.kubernetes-fleet.io "nope" not found' in \
        result.stderr


def test_kubectl_apply_creates_then_reapplies(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    assert "created" in kubectl("apply", "-f", _manifest(tmp_path, 2)).stdout
    assert "unchanged" in kubectl("apply", "-f", _manifest(tmp_path, 2)).stdout
    assert "configured" in kubectl("apply", "-f", _manifest(tmp_path, 3)).stdout
    stored = api.get(f"{PLACEMENTS}/web").json()
    assert stored["spec"]["policy"]["numberOfClusters"] == 3
    assert stored["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]


def test_kubectl_server_side_apply(api: Client, kubectl: Kubectl, tmp_path: Path) -> None:
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f",
                                           _manifest(tmp_path, 4)).stdout
    assert api.get(f"{PLACEMENTS}/web").json()["spec"]["policy"]["numberOfClusters"] == 4


def test_kubectl_apply_reports_invalid_objects(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    result = kubectl("apply", "-f", _manifest(tmp_path, -1), check=False)
    assert result.returncode != 0
    assert "spec.policy.numberOfClusters" in result.stderr
    assert api.get(f"{PLACEMENTS}/web").status_code == 404


def test_kubectl_apply_reports_a_broken_cel_rule_in_its_words(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    """The mistakes KubeFleet's webhook and CRD refuse are refused at the door, as a real hub
    with our CRDs refuses them: a PickN without numberOfClusters, then a placement type change."""
    path = tmp_path / "pick-n.yaml"
    path.write_text(PLACEMENT_YAML.replace("    numberOfClusters: NUMBER\n", ""))
    result = kubectl("apply", "-f", str(path), check=False)
    assert result.returncode != 0
    assert (
        'The ClusterResourcePlacement "web" is invalid: spec.policy: Invalid value: "object": '
        "clusterNames cannot be set and numberOfClusters must be set when placementType is PickN"
    ) in result.stderr, result.stderr
    assert api.get(f"{PLACEMENTS}/web").status_code == 404

    kubectl("apply", "-f", _manifest(tmp_path, 2))
    path.write_text(PLACEMENT_YAML.replace("PickN", "PickAll").replace(
        "    numberOfClusters: NUMBER\n", ""))  # fmt: skip
    result = kubectl("apply", "-f", str(path), check=False)
    assert result.returncode != 0
    assert 'spec.policy: Invalid value: "object": placement type is immutable' in result.stderr
    assert api.get(f"{PLACEMENTS}/web").json()["spec"]["policy"]["placementType"] == "PickN"


def test_kubectl_delete(api: Client, kubectl: Kubectl) -> None:
    api.create(CLUSTERS, cluster("member-1"))
    assert "deleted" in kubectl("delete", "membercluster", "member-1").stdout
    assert api.get(f"{CLUSTERS}/member-1").status_code == 404


def test_kubectl_get_watch_reads_events(
    api: Client, kubectl: Kubectl, hub_kubeconfig: Path, tmp_path: Path
) -> None:
    assert KUBECTL is not None
    api.create(CLUSTERS, cluster("member-1"))
    watcher = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(hub_kubeconfig), "--cache-dir", str(tmp_path / "kc"),
         "get", "memberclusters", "--watch", "--output-watch-events"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert watcher.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in watcher.stdout or ()],
                     daemon=True).start()

    def next_row() -> list[str]:
        return lines.get(timeout=TIMEOUT).split()[:2]

    try:
        assert next_row() == ["EVENT", "NAME"]
        assert next_row() == ["ADDED", "member-1"]
        time.sleep(0.2)
        api.create(CLUSTERS, cluster("member-2"))
        assert next_row() == ["ADDED", "member-2"]
        api.delete(f"{CLUSTERS}/member-1")
        assert next_row() == ["DELETED", "member-1"]
    finally:
        watcher.kill()
        watcher.communicate(timeout=TIMEOUT)


def test_kubectl_creates_lists_and_deletes_namespaces(api: Client, kubectl: Kubectl) -> None:
    # `kubectl create namespace` sends the Namespace in protobuf, as typed clients do.
    assert kubectl("create", "namespace", "team-a").stdout.strip() == "namespace/team-a created"
    assert api.get(f"{NAMESPACES}/team-a").json()["status"]["phase"] == "Active"
    rows = _rows(kubectl("get", "ns").stdout)
    assert rows[0][:2] == ["NAME", "STATUS"]
    assert [row[:2] for row in rows[1:]] == [
        ["default", "Active"], ["fleet-system", "Active"], ["kube-public", "Active"],
        ["kube-system", "Active"], ["team-a", "Active"]]
    again = kubectl("create", "ns", "team-a", check=False)
    assert 'namespaces "team-a" already exists' in again.stderr
    assert 'namespace "team-a" deleted' in kubectl("delete", "ns", "team-a").stdout
    assert api.get(f"{NAMESPACES}/team-a").status_code == 404
    refused = kubectl("delete", "ns", "default", check=False)
    assert 'namespaces "default" is forbidden: this namespace may not be deleted' in refused.stderr


def test_kubectl_applies_a_namespace_manifest_again_with_changes(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "namespace.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n"
                        "  labels: {tier: gold}\n")
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "namespace/team-a created"
    manifest.write_text(manifest.read_text().replace("gold", "silver"))
    # A changed built-in kind is re-applied with a strategic merge patch.
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "namespace/team-a configured"
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "namespace/team-a unchanged"
    assert api.get(f"{NAMESPACES}/team-a").json()["metadata"]["labels"] == {
        "tier": "silver", "kubernetes.io/metadata.name": "team-a"}


def test_kubectl_applies_namespaced_placements_and_lists_them_by_namespace(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("create", "ns", "team-a")
    applied = kubectl("apply", "-f", _resource_placement(tmp_path, "web", "team-a")).stdout
    assert applied.strip() == "resourceplacement.placement.kubernetes-fleet.io/web created"
    assert "unchanged" in kubectl("apply", "-f", _resource_placement(tmp_path, "web", "team-a")
                                  ).stdout
    kubectl("apply", "-f", _resource_placement(tmp_path, "web", None))  # the context's: default
    kubectl("apply", "-f", _resource_placement(tmp_path, "db", None), "-n", "team-a")
    api.create(rbs("team-a"), resource_binding("web-b1"))
    stored = [(item["metadata"]["namespace"], item["metadata"]["name"])
              for item in api.get(ALL_RPS).json()["items"]]
    assert stored == [("default", "web"), ("team-a", "db"), ("team-a", "web")]

    in_team = _rows(kubectl("get", "rp", "-n", "team-a").stdout)
    assert in_team[0][:3] == ["NAME", "GEN", "TYPE"]
    assert [row[0] for row in in_team[1:]] == ["db", "web"]
    everywhere = _rows(kubectl("get", "rp,rb", "-A", "-o", "name").stdout)
    assert everywhere == [
        ["resourceplacement.placement.kubernetes-fleet.io/web"],
        ["resourceplacement.placement.kubernetes-fleet.io/db"],
        ["resourceplacement.placement.kubernetes-fleet.io/web"],
        ["resourcebinding.placement.kubernetes-fleet.io/web-b1"],
    ]
    table = _rows(kubectl("get", "rp,rb", "-A").stdout)
    assert table[0][:2] == ["NAMESPACE", "NAME"]
    assert [row[:2] for row in table if row and row[0] in ("default", "team-a")] == [
        ["default", "resourceplacement.placement.kubernetes-fleet.io/web"],
        ["team-a", "resourceplacement.placement.kubernetes-fleet.io/db"],
        ["team-a", "resourceplacement.placement.kubernetes-fleet.io/web"],
        ["team-a", "resourcebinding.placement.kubernetes-fleet.io/web-b1"],
    ]
    missing = kubectl("apply", "-f", _resource_placement(tmp_path, "web", "nope"), check=False)
    assert missing.returncode != 0
    assert 'namespaces "nope" not found' in missing.stderr


def test_kubectl_delete_namespace_leaves_it_terminating_while_a_finalizer_holds_content(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("create", "ns", "team-a")
    kubectl("apply", "-f", _resource_placement(tmp_path, "web", "team-a"))
    api.create(rbs("team-a"), resource_binding("b1", finalizers=[FINALIZER]))
    assert 'namespace "team-a" deleted' in kubectl("delete", "ns", "team-a", "--wait=false").stdout
    assert _rows(kubectl("get", "ns", "team-a", "--no-headers").stdout)[0][:2] == [
        "team-a", "Terminating"]
    assert kubectl("get", "rp", "-n", "team-a", "-o", "name").stdout == ""
    held = kubectl("get", "rb", "b1", "-n", "team-a", "-o",
                   "jsonpath={.metadata.deletionTimestamp}").stdout
    assert held
    refused = kubectl("apply", "-f", _resource_placement(tmp_path, "db", "team-a"), check=False)
    assert "because it is being terminated" in refused.stderr

    kubectl("patch", "rb", "b1", "-n", "team-a", "--type", "json",
            "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    gone = kubectl("get", "ns", "team-a", check=False)
    assert gone.returncode != 0
    assert 'namespaces "team-a" not found' in gone.stderr
