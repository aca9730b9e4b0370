"""A tiny HTTP client for the conformance tests: real requests to a real DevHub, no mocks.

Only URL building and object builders live here; every assertion stays in the tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import requests

from devhub import DevHub
from hub import names

PLACEMENTS = f"/apis/{names.PLACEMENT_API_VERSION}/clusterresourceplacements"
BINDINGS = f"/apis/{names.PLACEMENT_API_VERSION}/clusterresourcebindings"
SNAPSHOTS = f"/apis/{names.PLACEMENT_API_VERSION}/clusterschedulingpolicysnapshots"
CLUSTERS = f"/apis/{names.CLUSTER_API_VERSION}/memberclusters"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


class Client:
    """requests.Session bound to one DevHub, with its bearer token."""

    def __init__(self, hub: DevHub, token: str | None = None) -> None:
        self.hub = hub
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token or hub.token}"

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 10)
        return self.session.request(method, self.hub.url + path, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, json=body, **kwargs)

    def put(self, path: str, body: Any, **kwargs: Any) -> requests.Response:
        return self.request("PUT", path, json=body, **kwargs)

    def patch(self, path: str, body: Any, content_type: str = MERGE, **kwargs: Any) -> requests.Response:
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return self.request("PATCH", path, data=data, headers={"Content-Type": content_type},
                            **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, **kwargs)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.post(path, body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def watch(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Events of a watch on `path` as dicts, until the server ends the stream."""
        params["watch"] = "true"
        response = self.request("GET", path, params=params, stream=True, timeout=30)
        assert response.status_code == 200, response.text
        for line in response.iter_lines():
            if line:
                yield json.loads(line)


def placement(name: str, *, labels: dict[str, str] | None = None, n: int | None = 2,
              placement_type: str = "PickN") -> dict[str, Any]:
    policy: dict[str, Any] = {"placementType": placement_type}
    if n is not None:
        policy["numberOfClusters"] = n
    return {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace",
                                   "name": name}],
            "policy": policy,
        },
    }


def cluster(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": names.CLUSTER_API_VERSION,
        "kind": "MemberCluster",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
    }


def binding(name: str, *, target: str = "member-1", finalizers: list[str] | None = None,
            labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": "ClusterResourceBinding",
        "metadata": {"name": name, "labels": labels or {}, "finalizers": finalizers or []},
        "spec": {
            "state": names.STATE_SCHEDULED,
            "resourceSnapshotName": "",
            "schedulingPolicySnapshotName": "web-0",
            "targetCluster": target,
            "clusterDecision": {"clusterName": target, "selected": True, "reason": "picked"},
        },
    }
