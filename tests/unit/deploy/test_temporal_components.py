"""deploy/components: connecting the Deployments to a secured Temporal from Secrets.

Each component is rendered with Debian's kubectl on top of each overlay, and what the pod would
get (ConfigMap, env, mounted Secret files) is fed to the loader the process itself uses, so a
misspelt variable or path fails here rather than in a pod that cannot connect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.service import TLSConfig

from devhub import tls
from tests.support.deploy import DEPLOY, by_kind, container, kubectl, render_with_components
from workers.temporal_client import load_target

COMPONENTS = DEPLOY / "components"
OVERLAYS = ("standalone", "beside-kubefleet")
MOUNT = "/etc/fleet-scheduler/temporal-tls"

pytestmark = pytest.mark.kubectl


@pytest.fixture(autouse=True)
def _kubectl() -> None:
    if kubectl() is None:
        pytest.skip("kubectl is not installed (make system-deps installs Debian's kubectl)")


def render_with(tmp_path: Path, overlay: str, component: str) -> list[dict[str, Any]]:
    return render_with_components(tmp_path / "my-hub", overlay, [component])


def pod_env(
    objects: list[dict[str, Any]], deployment: dict[str, Any]
) -> tuple[dict[str, str], dict[str, Any]]:
    """The container's environment (its ConfigMap, then its own values) and, apart, the
    variables the kubelet fills from references (Secrets, the downward API)."""
    (config,) = by_kind(objects, "ConfigMap").values()
    env: dict[str, str] = dict(config["data"])
    refs: dict[str, Any] = {}
    for entry in container(deployment).get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        else:
            refs[entry["name"]] = entry["valueFrom"]
    return env, refs


def test_every_component_is_tested() -> None:
    assert {p.name for p in COMPONENTS.iterdir() if p.is_dir()} == {
        "temporal-api-key",
        "temporal-mtls",
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_api_key_comes_from_a_secret_and_turns_tls_on(overlay: str, tmp_path: Path) -> None:
    objects = render_with(tmp_path, overlay, "temporal-api-key")
    deployments = by_kind(objects, "Deployment").values()
    assert len(deployments) == 3  # worker, activities, watcher
    for deployment in deployments:
        env, refs = pod_env(objects, deployment)
        assert refs["TEMPORAL_API_KEY"] == {
            "secretKeyRef": {"name": "fleet-scheduler-temporal", "key": "api-key"}
        }
        assert "--api-key" not in " ".join(container(deployment)["args"])  # never in argv
        env["TEMPORAL_API_KEY"] = "secret-from-the-secret"  # what the kubelet puts there
        target = load_target(env=env)
        assert target.api_key == "secret-from-the-secret"
        assert target.tls is True  # an API key means TLS with the system's roots
        assert "secret-from-the-secret" not in target.describe()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_mtls_mounts_the_secret_and_names_its_files_for_the_sdk(
    overlay: str, tmp_path: Path
) -> None:
    objects = render_with(tmp_path, overlay, "temporal-mtls")
    # The Secret's files, as the kubelet would mount them (here under tmp_path).
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    server, client = tls.create("temporal.example.com"), tls.create("fleet-scheduler")
    (mounted / "ca.crt").write_bytes(server.cert_pem)
    (mounted / "tls.crt").write_bytes(client.cert_pem)
    (mounted / "tls.key").write_bytes(client.key_pem)
    for deployment in by_kind(objects, "Deployment").values():
        spec = deployment["spec"]["template"]["spec"]
        volume = next(v for v in spec["volumes"] if v["name"] == "temporal-tls")
        assert volume["secret"]["secretName"] == "fleet-scheduler-temporal-tls"
        mounts = container(deployment)["volumeMounts"]
        mount = next(m for m in mounts if m["name"] == "temporal-tls")
        assert (mount["mountPath"], mount["readOnly"]) == (MOUNT, True)
        env = {
            key: value.replace(MOUNT, str(mounted))
            for key, value in pod_env(objects, deployment)[0].items()
        }
        target = load_target(env=env)
        assert isinstance(target.tls, TLSConfig)
        assert target.tls.client_cert == client.cert_pem
        assert target.tls.client_private_key == client.key_pem
        assert target.tls.server_root_ca_cert == server.cert_pem
