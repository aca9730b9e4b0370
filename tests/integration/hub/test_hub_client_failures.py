"""HubClient when the hub misbehaves: injected 5xx/429, hangs, bad credentials, a dead server.

Every failure must arrive as a hub error (no kubernetes or urllib3 exception leaves hub/), and
none may be retried by the client: Temporal owns retries."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import OpenApiException

from hub.client import HubClient
from hub.errors import HubConfigError, HubError, HubUnavailableError, UnauthorizedError
from hub.types import MemberCluster
from tests.integration.hub.hub_helpers import cluster


@pytest.mark.parametrize("status", [500, 503, 429])
def test_injected_server_errors_are_unavailable(hub: HubClient, devhub: Any, status: int) -> None:
    devhub.faults.inject(verb="get", resource="memberclusters", status=status, count=1)
    with pytest.raises(HubUnavailableError) as caught:
        hub.get(MemberCluster, "member-1")
    assert caught.value.status == status


def test_failed_requests_are_not_retried_by_the_client(hub: HubClient, devhub: Any) -> None:
    devhub.faults.inject(verb="create", resource="memberclusters", status=503)
    devhub.stats.clear()
    with pytest.raises(HubUnavailableError):
        hub.create(cluster("member-1"))
    assert devhub.stats.count("create", "memberclusters") == 1


def test_too_many_requests_carries_retry_after(hub: HubClient, devhub: Any) -> None:
    devhub.faults.inject(verb="list", resource="memberclusters", status=429, retry_after=7)
    with pytest.raises(HubUnavailableError) as caught:
        hub.list(MemberCluster)
    assert caught.value.retry_after == 7.0


def test_a_hanging_request_times_out_as_unavailable(hub_kubeconfig: Path, devhub: Any) -> None:
    devhub.faults.inject(verb="get", resource="memberclusters", hang=True)
    devhub.stats.clear()
    client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=(2.0, 0.5))
    started = time.monotonic()
    try:
        with pytest.raises(HubUnavailableError) as caught:
            client.get(MemberCluster, "member-1")
    finally:
        devhub.faults.clear()
        client.close()
    assert time.monotonic() - started < 5.0
    assert isinstance(caught.value.__cause__, urllib3.exceptions.HTTPError)
    assert devhub.stats.count("get", "memberclusters") == 1  # a timed-out read is not resent


def test_a_wrong_token_is_unauthorized(devhub: Any, hub_kubeconfig: Path) -> None:
    with (
        HubClient.from_url(devhub.url, token="not-the-token") as client,
        pytest.raises(UnauthorizedError) as caught,
    ):
        client.list(MemberCluster)
    assert caught.value.status == 401


def test_no_token_is_unauthorized(devhub: Any, hub_kubeconfig: Path) -> None:
    with HubClient.from_url(devhub.url) as client, pytest.raises(UnauthorizedError):
        client.get(MemberCluster, "member-1")


def test_transport_errors_are_not_leaked_outside_hub(devhub_factory: Any) -> None:
    server = devhub_factory()
    url = server.url
    server.stop()
    with (
        HubClient.from_url(url, token="t", timeout=(1.0, 1.0)) as client,
        pytest.raises(HubError) as caught,
    ):
        client.list(MemberCluster)
    assert isinstance(caught.value, HubUnavailableError)
    assert not isinstance(caught.value, (urllib3.exceptions.HTTPError, OpenApiException, OSError))
    assert caught.value.__cause__ is not None


def test_kubeconfig_errors_are_config_errors(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [this is not: a kubeconfig")
    with pytest.raises(HubConfigError):
        HubClient.from_kubeconfig(broken)
    with pytest.raises(HubConfigError):
        HubClient.from_kubeconfig(tmp_path / "missing")


def test_an_unknown_context_is_a_config_error(hub_kubeconfig: Path) -> None:
    with pytest.raises(HubConfigError, match="no-such-context"):
        HubClient.from_kubeconfig(hub_kubeconfig, context="no-such-context")


def test_from_env_follows_kubeconfig(hub_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(hub_kubeconfig))
    with HubClient.from_env() as client:
        assert client.list(MemberCluster).items == []


def test_from_env_uses_the_context_asked_for(
    hub_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan --context NAME` with KUBECONFIG set reads that context, not the current one."""
    monkeypatch.setenv("KUBECONFIG", str(hub_kubeconfig))
    with pytest.raises(HubConfigError, match="no-such-context"):
        HubClient.from_env("no-such-context")


def test_in_cluster_outside_a_cluster_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(HubConfigError, match="not running in a cluster"):
        HubClient.in_cluster()


def test_from_env_with_nothing_configured_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(HubConfigError, match="KUBECONFIG"):
        HubClient.from_env()


@pytest.mark.parametrize("timeout", [0, -1.0, (1.0, 0.0)])
def test_non_positive_timeouts_are_refused(devhub: Any, timeout: Any) -> None:
    with pytest.raises(ValueError, match="positive"):
        HubClient.from_url(devhub.url, timeout=timeout)
