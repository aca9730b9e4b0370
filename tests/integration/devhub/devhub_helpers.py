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
NAMESPACES = "/api/v1/namespaces"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
# All-namespace collections of the namespaced kinds (list and watch only).
ALL_RPS = f"/apis/{names.PLACEMENT_API_VERSION}/resourceplacements"
ALL_RBS = f"/apis/{names.PLACEMENT_API_VERSION}/resourcebindings"
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

    def patch(
        self, path: str, body: Any, content_type: str = MERGE, **kwargs: Any
    ) -> requests.Response:
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

    def watch(self, path: str, *, read_timeout: float = 5.0, **params: Any) -> Watch:
        """Open a watch on `path`; a read waiting longer than `read_timeout` fails the test."""
        return Watch(self, path, read_timeout, params)


class Watch:
    """One open watch stream: `next()` returns the next event, `take(n)` the next n."""

    def __init__(self, client: Client, path: str, read_timeout: float,
                 params: dict[str, Any]) -> None:
        self.response = client.request(
            "GET", path, params={**params, "watch": "true"}, stream=True,
            timeout=(5.0, read_timeout),
        )
        assert self.response.status_code == 200, self.response.text
        self._lines: Iterator[bytes] = self.response.iter_lines()

    def next(self) -> dict[str, Any]:
        for line in self._lines:
            if line:
                event: dict[str, Any] = json.loads(line)
                return event
        raise EOFError("the server ended the watch")

    def take(self, count: int) -> list[dict[str, Any]]:
        return [self.next() for _ in range(count)]

    def rest(self) -> list[dict[str, Any]]:
        """Every event until the server ends the stream."""
        return [json.loads(line) for line in self._lines if line]

    def close(self) -> None:
        self.response.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rps(namespace: str) -> str:
    """The ResourcePlacements of `namespace`."""
    return f"/apis/{names.PLACEMENT_API_VERSION}/namespaces/{namespace}/resourceplacements"


def rbs(namespace: str) -> str:
    """The ResourceBindings of `namespace`."""
    return f"/apis/{names.PLACEMENT_API_VERSION}/namespaces/{namespace}/resourcebindings"


def namespace_object(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}}}


def priority_class(name: str, value: int = 1000, **fields: Any) -> dict[str, Any]:
    """A PriorityClass; `fields` are its other top-level fields, by their wire names."""
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, **fields}


def resource_placement(name: str, namespace: str | None = None, *,
                       labels: dict[str, str] | None = None,
                       finalizers: list[str] | None = None) -> dict[str, Any]:
    """A PickAll ResourcePlacement; `namespace` None leaves metadata.namespace to the path."""
    body = placement(name, labels=labels, n=None, placement_type="PickAll")
    body["kind"] = "ResourcePlacement"
    if namespace is not None:
        body["metadata"]["namespace"] = namespace
    if finalizers:
        body["metadata"]["finalizers"] = finalizers
    return body


def resource_binding(name: str, *, finalizers: list[str] | None = None,
                     labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = binding(name, finalizers=finalizers, labels=labels)
    body["kind"] = "ResourceBinding"
    return body


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
