"""The Kustomize output of each overlay, as `kubectl kustomize` renders it, holds what a hub
cluster needs: the right objects, Deployments that the CLI accepts and the probes can reach, a
PodDisruptionBudget that covers the workers and a NetworkPolicy that lets exactly our traffic
through. (RBAC has its own module, test_rbac.)"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from control.config import LOOPBACK
from hub import crds
from hub.types import KINDS
from tests.support.deploy import (
    BESIDE_KUBEFLEET,
    DEPLOY,
    REPO,
    STANDALONE,
    by_kind,
    container,
    kubectl,
    one,
    render,
    render_directory,
)
from workers.cli import build_parser
from workers.cli.run import run_config
from workers.temporal_client import load_target

NAMESPACE = "fleet-scheduler"
SERVICE_ACCOUNT = "fleet-scheduler"
WORKER = "fleet-scheduler-worker"
WATCHER = "fleet-scheduler-watcher"
ACTIVITIES = "fleet-scheduler-activities"
DEPLOYMENTS = [WORKER, ACTIVITIES, WATCHER]
METRICS_PORT = 9090
UID = 65532
CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
# Objects per overlay, by kind; the CRDs are counted separately.
COMMON_KINDS = {
    "Namespace": 1,
    "ServiceAccount": 1,
    "ConfigMap": 1,
    "Deployment": 3,
    "HorizontalPodAutoscaler": 1,
    "PodDisruptionBudget": 2,
    "NetworkPolicy": 1,
}
# Beside KubeFleet its hub agent installs KubeFleet's CRDs; fleet-scheduler's own kinds (API
# groups outside kubernetes-fleet.io) are installed by us in both modes.
KUBEFLEET_GROUP = ".kubernetes-fleet.io"
OWN_KINDS = [k for k in KINDS if not k.GROUP.endswith(KUBEFLEET_GROUP)]
EXPECTED_KINDS = {
    STANDALONE: {**COMMON_KINDS, "ClusterRole": 2, "ClusterRoleBinding": 2,
                 "CustomResourceDefinition": len(KINDS)},
    BESIDE_KUBEFLEET: {**COMMON_KINDS, "ClusterRole": 1, "ClusterRoleBinding": 1,
                       "CustomResourceDefinition": len(OWN_KINDS)},
}
OVERLAYS = list(EXPECTED_KINDS)
DNS_PORT = 53
API_SERVER_PORTS = {443, 6443}
OTLP_PORTS = {4317, 4318}
ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@pytest.fixture(scope="module", autouse=True)
def _kubectl() -> Iterator[None]:
    if kubectl() is None:
        pytest.skip("kubectl is not installed (make system-deps installs Debian's kubectl)")
    yield


def deployments(overlay: str) -> dict[str, dict[str, Any]]:
    return by_kind(render(overlay), "Deployment")


def config_map(overlay: str) -> dict[str, Any]:
    (found,) = by_kind(render(overlay), "ConfigMap").values()
    return dict(found)


def environment(overlay: str, deployment: Mapping[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet builds it (ConfigMap, then env, expanded)."""
    maps = by_kind(render(overlay), "ConfigMap")
    env: dict[str, str] = {}
    spec = container(deployment)
    for source in spec.get("envFrom", []):
        name = source["configMapRef"]["name"]
        assert name in maps, f"envFrom names ConfigMap {name!r}; the overlay has {sorted(maps)}"
        env.update(maps[name]["data"])
    for var in spec.get("env", []):
        if "value" in var:
            env[var["name"]] = ENV_REF.sub(lambda m: env.get(m[1], m[0]), var["value"])
        else:
            env[var["name"]] = f"<{var['valueFrom']}>"
    return env


def parsed_args(overlay: str, deployment: Mapping[str, Any]) -> argparse.Namespace:
    """The container's args, expanded as the kubelet does, through fleet-scheduler's own parser."""
    env = environment(overlay, deployment)
    args = []
    for arg in container(deployment)["args"]:
        for name in ENV_REF.findall(arg):
            assert name in env, f"{arg!r} refers to ${name}, which the container does not have"
        args.append(ENV_REF.sub(lambda m: env[m[1]], arg))
    try:
        return build_parser().parse_args(args)
    except SystemExit as exc:  # argparse's way of refusing
        raise AssertionError(f"fleet-scheduler refuses {args}") from exc


def pod_labels(deployment: Mapping[str, Any]) -> dict[str, str]:
    return dict(deployment["spec"]["template"]["metadata"]["labels"])


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    assert set(selector) == {"matchLabels"}, "only matchLabels selectors are expected here"
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def ports(rule: Mapping[str, Any]) -> set[tuple[str, int]]:
    return {(p.get("protocol", "TCP"), p["port"]) for p in rule.get("ports", [])}


# --- objects -----------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_has_exactly_the_expected_objects(overlay: str) -> None:
    kinds = Counter(o["kind"] for o in render(overlay))
    assert dict(kinds) == EXPECTED_KINDS[overlay]


def test_standalone_installs_the_generated_crds_unchanged() -> None:
    rendered = by_kind(render(STANDALONE), "CustomResourceDefinition")
    generated = {}
    for text in crds.generate().values():
        crd = yaml.safe_load(text)
        generated[crd["metadata"]["name"]] = crd
    assert set(rendered) == set(generated)
    for name, crd in rendered.items():
        labels = crd["metadata"].pop("labels")  # the base's part-of label is the only change
        assert labels == {"app.kubernetes.io/part-of": "fleet-scheduler"}
        assert crd == generated[name]


def test_beside_kubefleet_installs_only_fleet_schedulers_own_crds() -> None:
    rendered = by_kind(render(BESIDE_KUBEFLEET), "CustomResourceDefinition")
    assert OWN_KINDS, "fleet-scheduler has kinds of its own (CapacityLedger)"
    assert set(rendered) == {crds.crd_name(kind) for kind in OWN_KINDS}


def test_crds_kustomization_lists_every_generated_file() -> None:
    kustomization = yaml.safe_load((DEPLOY / "crds" / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(crds.generate())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_namespaced_objects_live_in_the_fleet_scheduler_namespace(overlay: str) -> None:
    for obj in render(overlay):
        where = obj["metadata"].get("namespace")
        if obj["kind"] in CLUSTER_SCOPED:
            assert where is None, f"{obj['kind']} {obj['metadata']['name']} is cluster-scoped"
        else:
            assert where == NAMESPACE, f"{obj['kind']} {obj['metadata']['name']} is in {where}"
    namespace = one(render(overlay), "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


# --- Deployments -------------------------------------------------------------------------


def parts(args: argparse.Namespace) -> tuple[bool, bool, bool]:
    """(workflows, activities, watcher): what a `run` with these arguments runs in its pod,
    activities counted only in the pod's own process (no child processes)."""
    config = run_config(args)
    return config.workflows, config.activities_here, config.watcher


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_worker_activities_and_watcher_run_one_part_each(
    overlay: str, capsys: pytest.CaptureFixture[str]
) -> None:
    found = deployments(overlay)
    assert set(found) == set(DEPLOYMENTS)
    worker, activities, watcher = (parsed_args(overlay, found[name]) for name in DEPLOYMENTS)
    assert worker.command == activities.command == watcher.command == "run"
    assert parts(worker) == (True, False, False)
    assert parts(activities) == (False, True, False)
    assert parts(watcher) == (False, False, True)
    assert capsys.readouterr().err == ""  # no deprecated spelling in our own manifests
    beside = overlay == BESIDE_KUBEFLEET
    for args in (worker, activities, watcher):
        assert args.no_snapshotter is beside
    assert found[WORKER]["spec"]["replicas"] >= 2  # one may be drained (PDB) or rolling
    assert found[ACTIVITIES]["spec"]["replicas"] >= 2
    assert found[WATCHER]["spec"]["replicas"] == 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_activity_pods_are_one_core_each_and_scale_on_cpu(overlay: str) -> None:
    activities = deployments(overlay)[ACTIVITIES]
    resources = container(activities)["resources"]
    # One process per pod (--processes=0), so one core: more would idle behind the GIL.
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == "1"
    (hpa,) = by_kind(render(overlay), "HorizontalPodAutoscaler").values()
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": ACTIVITIES,
    }
    assert 1 <= spec["minReplicas"] <= activities["spec"]["replicas"] <= spec["maxReplicas"]
    (metric,) = spec["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert 0 < metric["resource"]["target"]["averageUtilization"] < 100


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_deployment_connects_from_inside_the_cluster(overlay: str, name: str) -> None:
    deployment = deployments(overlay)[name]
    args = parsed_args(overlay, deployment)
    data = config_map(overlay)["data"]
    # No kubeconfig: the hub client falls back to the pod's service account.
    assert args.kubeconfig is None
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == SERVICE_ACCOUNT
    assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    # No Temporal flags: the SDK's standard variables from the ConfigMap say where to connect,
    # read by the same loader the process uses.
    temporal = (args.temporal_address, args.temporal_namespace, args.temporal_profile)
    assert temporal == (None, None, None)
    target = load_target(env=data)
    assert (target.address, target.namespace) == (
        data["TEMPORAL_ADDRESS"], data["TEMPORAL_NAMESPACE"]
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_probes_and_scrapes_reach_the_metrics_port(overlay: str, name: str) -> None:
    deployment = deployments(overlay)[name]
    spec = container(deployment)
    args = parsed_args(overlay, deployment)
    assert args.metrics_port == METRICS_PORT
    assert args.metrics_host != LOOPBACK  # the kubelet and Prometheus come from outside the pod
    (port,) = spec["ports"]
    assert port == {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}
    probes = {probe: spec[probe]["httpGet"] for probe in
              ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"] == {"path": "/healthz", "port": "metrics"}
    assert probes["startupProbe"] == {"path": "/healthz", "port": "metrics"}
    assert probes["readinessProbe"] == {"path": "/readyz", "port": "metrics"}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(METRICS_PORT),
        "prometheus.io/path": "/metrics",
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_pods_are_locked_down_and_bounded(overlay: str, name: str) -> None:
    deployment = deployments(overlay)[name]
    pod = deployment["spec"]["template"]["spec"]
    spec = container(deployment)
    assert pod["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
    }
    # A read-only root needs a writable /tmp (tempfile, the SDK).
    mounts = {m["mountPath"]: m["name"] for m in spec["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    for bound in ("requests", "limits"):
        assert set(spec["resources"][bound]) == {"cpu", "memory"}, f"{name} {bound}"
    # Activities in flight get SHUTDOWN_GRACE (20 s) after SIGTERM; leave room beyond it.
    assert pod["terminationGracePeriodSeconds"] > 20


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_deployment_runs_the_project_image_at_its_version(overlay: str) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    images = {container(d)["image"] for d in deployments(overlay).values()}
    assert images == {f"fleet-scheduler:{version}"}
    # The worker polls as that version of its Worker Deployment (workers.versioning), so a
    # new image with a new build id is a versioned rolling upgrade.
    worker = deployments(overlay)[WORKER]
    assert environment(overlay, worker)["FLEET_BUILD_ID"] == version


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_tracing_is_off_by_default_and_points_at_a_collector(overlay: str) -> None:
    data = config_map(overlay)["data"]
    assert data["OTEL_TRACES_EXPORTER"] == "none"
    endpoint = urlsplit(data["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.scheme == "http" and endpoint.port in OTLP_PORTS
    assert data["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"  # the exporter we install
    for deployment in deployments(overlay).values():
        env = environment(overlay, deployment)
        assert "k8s.pod.name=<" in env["OTEL_RESOURCE_ATTRIBUTES"]


# --- PodDisruptionBudget and NetworkPolicy -----------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", [WORKER, ACTIVITIES])
def test_pdb_keeps_one_pod_and_selects_only_its_deployment(overlay: str, name: str) -> None:
    found = deployments(overlay)
    pdb = by_kind(render(overlay), "PodDisruptionBudget")[name]
    selector = pdb["spec"]["selector"]
    for other in DEPLOYMENTS:
        assert selects(selector, pod_labels(found[other])) is (other == name)
    assert selector == found[name]["spec"]["selector"]
    assert 1 <= pdb["spec"]["minAvailable"] < found[name]["spec"]["replicas"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policy_allows_exactly_our_traffic(overlay: str) -> None:
    (policy,) = by_kind(render(overlay), "NetworkPolicy").values()
    spec = policy["spec"]
    for deployment in deployments(overlay).values():
        assert selects(spec["podSelector"], pod_labels(deployment))
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    (ingress,) = spec["ingress"]
    assert ports(ingress) == {("TCP", METRICS_PORT)}
    egress: set[tuple[str, int]] = set()
    for rule in spec["egress"]:
        assert ports(rule), f"an egress rule without ports opens everything: {rule}"
        egress |= ports(rule)
    data = config_map(overlay)["data"]
    temporal_port = int(data["TEMPORAL_ADDRESS"].rpartition(":")[2])
    otlp_port = urlsplit(data["OTEL_EXPORTER_OTLP_ENDPOINT"]).port
    assert egress == (
        {("UDP", DNS_PORT), ("TCP", DNS_PORT), ("TCP", temporal_port)}
        | {("TCP", p) for p in API_SERVER_PORTS | OTLP_PORTS}
    )
    assert ("TCP", otlp_port) in egress


def test_kustomization_files_parse_and_name_existing_resources() -> None:
    for path in sorted((DEPLOY / "base").glob("kustomization.yaml")) + sorted(
        (DEPLOY / "overlays").glob("*/kustomization.yaml")
    ):
        kustomization = yaml.safe_load(path.read_text())
        for resource in kustomization.get("resources", []):
            assert (path.parent / resource).exists(), f"{path}: {resource} does not exist"


def test_every_overlay_is_tested() -> None:
    on_disk = {p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir()}
    assert on_disk == set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_readme_customisation_sets_image_and_temporal_address(
    overlay: str, tmp_path: Path
) -> None:
    readme = (DEPLOY / "README.md").read_text()
    block = re.search(r"```yaml\n(# my-hub/kustomization.yaml\n.*?)```", readme, re.S)
    assert block, "deploy/README.md lost its example kustomization"
    own = tmp_path / "my-hub"
    own.mkdir()
    text = block[1].replace("../deploy/overlays/standalone",
                            os.path.relpath(DEPLOY / "overlays" / overlay, own))
    text = text.replace("temporal-frontend.temporal.svc.cluster.local:7233",
                        "temporal.example.com:7233")
    (own / "kustomization.yaml").write_text(text)
    objects = render_directory(own)
    (config,) = by_kind(objects, "ConfigMap").values()
    assert config["data"]["TEMPORAL_ADDRESS"] == "temporal.example.com:7233"
    assert config["data"]["OTEL_TRACES_EXPORTER"] == "none"  # merged, not replaced
    for deployment in by_kind(objects, "Deployment").values():
        spec = container(deployment)
        assert spec["image"] == "REGISTRY/fleet-scheduler:0.1.0"
        assert spec["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
