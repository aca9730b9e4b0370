"""Bearer-token authentication, loopback binding, and the kubeconfig devhub writes."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
import yaml

from devhub import DevHub
from tests.integration.devhub.devhub_helpers import CLUSTERS, Client, cluster


@pytest.mark.parametrize("header", [
    pytest.param(None, id="no-token"),
    pytest.param("Bearer wrong", id="wrong-token"),
    pytest.param("Basic dXNlcjpwYXNz", id="basic-auth"),
    pytest.param("Bearer", id="empty-bearer"),
])
@pytest.mark.parametrize("path", ["/apis", CLUSTERS, f"{CLUSTERS}/m1", "/openapi/v3"])
def test_requests_without_the_token_are_unauthorized(
    api: Client, header: str | None, path: str
) -> None:
    headers = {"Authorization": header} if header else {}
    response = requests.get(api.hub.url + path, headers=headers, timeout=5)
    assert response.status_code == 401
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Unauthorized", 401)


def test_writes_without_the_token_store_nothing(api: Client) -> None:
    response = requests.post(api.hub.url + CLUSTERS, json=cluster("m1"), timeout=5)
    assert response.status_code == 401
    assert api.get(CLUSTERS).json()["items"] == []


def test_a_wrong_token_is_refused_even_on_public_paths(api: Client) -> None:
    response = requests.get(api.hub.url + "/version", timeout=5,
                            headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    assert requests.get(api.hub.url + "/healthz", timeout=5).text == "ok"


def test_devhub_binds_to_loopback_by_default(devhub: DevHub) -> None:
    assert devhub.host == "127.0.0.1"
    assert devhub.url.startswith("http://127.0.0.1:")


def test_a_given_token_is_used(devhub_factory: Callable[..., DevHub]) -> None:
    hub = devhub_factory(token="s3cret")
    assert hub.token == "s3cret"
    ok = requests.get(hub.url + "/apis", headers={"Authorization": "Bearer s3cret"}, timeout=5)
    assert ok.status_code == 200


def test_kubeconfig_carries_the_tls_url_ca_and_token(
    api: Client, hub_kubeconfig: Path, tmp_path: Path
) -> None:
    config = yaml.safe_load(hub_kubeconfig.read_text())
    assert hub_kubeconfig.stat().st_mode & 0o077 == 0
    server = config["clusters"][0]["cluster"]["server"]
    assert server == api.hub.tls_url
    assert config["users"][0]["user"]["token"] == api.hub.token
    ca = tmp_path / "ca.pem"
    ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    response = requests.get(server + "/apis", verify=str(ca), timeout=5,
                            headers={"Authorization": f"Bearer {api.hub.token}"})
    assert response.status_code == 200
    assert requests.get(server + "/apis", verify=str(ca), timeout=5).status_code == 401


def test_the_official_kubernetes_client_works_from_the_kubeconfig(
    api: Client, hub_kubeconfig: Path
) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    api.create(CLUSTERS, cluster("m1"))
    client = kubernetes.config.new_client_from_config(config_file=str(hub_kubeconfig))
    with client:
        custom = kubernetes.client.CustomObjectsApi(client)
        listed = custom.list_cluster_custom_object(
            "cluster.kubernetes-fleet.io", "v1beta1", "memberclusters")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["m1"]
