"""The kubeconfig loader's token refresh runs when a token can have changed, not per request.

An exec credential plugin stands for every refreshing credential: it counts its runs and hands
out whatever token its file holds, with an expiry inside the loader's five-minute skew, so the
loader would re-run it whenever asked."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hub.client import HubClient
from hub.errors import UnauthorizedError
from hub.types import MemberCluster

_PLUGIN = """
import datetime, json, pathlib, sys
folder = pathlib.Path(sys.argv[1])
with open(folder / "runs", "a") as runs:
    runs.write("run\\n")
soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=60)
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {
        "token": (folder / "token").read_text().strip(),
        "expirationTimestamp": soon.strftime("%Y-%m-%dT%H:%M:%SZ"),
    },
}))
"""


def _exec_kubeconfig(hub_kubeconfig: Path, folder: Path) -> Path:
    config = yaml.safe_load(hub_kubeconfig.read_text())
    (folder / "plugin.py").write_text(_PLUGIN)
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(folder / "plugin.py"), str(folder)],
            "interactiveMode": "Never",
        }
    }
    path = folder / "kubeconfig"
    path.write_text(json.dumps(config))
    return path


def _runs(folder: Path) -> int:
    return len((folder / "runs").read_text().splitlines())


def test_a_refreshing_credential_is_not_refreshed_per_request(
    devhub: Any, hub_kubeconfig: Path, tmp_path: Path
) -> None:
    (tmp_path / "token").write_text(devhub.token)
    with HubClient.from_kubeconfig(_exec_kubeconfig(hub_kubeconfig, tmp_path)) as client:
        loaded = _runs(tmp_path)
        for _ in range(5):
            client.list(MemberCluster)
        # Before: the loader's hook re-ran the plugin on each of the five requests.
        assert _runs(tmp_path) - loaded <= 1


def test_a_rotated_token_is_picked_up(
    devhub: Any, hub_kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("an-old-token")
    with HubClient.from_kubeconfig(_exec_kubeconfig(hub_kubeconfig, tmp_path)) as client:
        with pytest.raises(UnauthorizedError):
            client.list(MemberCluster)
        (tmp_path / "token").write_text(devhub.token)
        # A 401 makes the next request ask the loader again, whatever the interval.
        client.list(MemberCluster)
        (tmp_path / "token").write_text("rotated-away")
        monkeypatch.setattr("hub.client.TOKEN_CHECK_SECONDS", 0.0)
        # Once the interval has passed, the loader is asked again and sends the new token.
        with pytest.raises(UnauthorizedError):
            client.list(MemberCluster)
