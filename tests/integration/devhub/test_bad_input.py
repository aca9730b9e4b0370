"""Bad input gets a 4xx Status with a message: never a 500, a traceback, or a stored object."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from devhub import DevHub
from devhub.store import Store
from tests.integration.devhub.devhub_helpers import CLUSTERS, PLACEMENTS, Client, placement

YAML = "application/yaml"
JSON = "application/json"
MEMBER_YAML = (b"apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n"
               b"metadata:\n  name: m1\n")


@pytest.mark.parametrize(("body", "content_type", "code"), [
    pytest.param(b'{"apiVersion": ', JSON, 400, id="truncated-json"),
    pytest.param(b"{'single': 'quotes'}", JSON, 400, id="python-not-json"),
    pytest.param(b'{"a": NaN}', JSON, 400, id="nan"),
    pytest.param(b"\xff\xfe\x00", JSON, 400, id="not-utf8"),
    pytest.param(b"[1, 2]", JSON, 400, id="array"),
    pytest.param(b'"just a string"', JSON, 400, id="string"),
    pytest.param(b"", JSON, 400, id="empty"),
    pytest.param(b"apiVersion: [unclosed", YAML, 400, id="malformed-yaml"),
    pytest.param(b"key: value\n  - broken: indentation", YAML, 400, id="yaml-indentation"),
    pytest.param(b"- a\n- b", YAML, 400, id="yaml-list"),
    pytest.param(b"\x00\x01", "application/vnd.kubernetes.protobuf", 415, id="protobuf"),
    pytest.param(b"x", "text/html", 415, id="html"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, JSON, 400, id="deep-nesting"),
    pytest.param(b'{"spec": {"x": 1e400}}', JSON, 400, id="json-overflow-to-infinity"),
    pytest.param(MEMBER_YAML + b"  labels: {1: x}\n", YAML, 400, id="yaml-integer-key"),
    pytest.param(MEMBER_YAML + b"spec: {x: !!binary aGVsbG8=}\n", YAML, 400, id="yaml-binary"),
    pytest.param(MEMBER_YAML + b"spec: {x: !!set {a, b}}\n", YAML, 400, id="yaml-set"),
    pytest.param(MEMBER_YAML + b"spec: {x: .nan}\n", YAML, 400, id="yaml-nan"),
    pytest.param(MEMBER_YAML + b"spec: &a {x: *a}\n", YAML, 400, id="yaml-recursive-alias"),
    pytest.param(MEMBER_YAML + b"spec:\n" + b"\n".join(
        b"  a%d: &a%d [" % (i, i) + b", ".join([b"*a%d" % (i - 1)] * 9) + b"]"
        if i else b"  a0: &a0 [x, x, x, x, x, x, x, x, x]" for i in range(12)) + b"\n",
        YAML, 400, id="yaml-alias-bomb"),
])
def test_undecodable_bodies_are_refused(
    api: Client, body: bytes, content_type: str, code: int
) -> None:
    response = api.request("POST", CLUSTERS, data=body, headers={"Content-Type": content_type})
    assert response.status_code == code, response.text
    status = response.json()
    assert status["kind"] == "Status"
    assert status["message"]
    assert "Traceback" not in response.text
    assert api.get(CLUSTERS).json()["items"] == []


@pytest.mark.parametrize(("mutate", "fragment"), [
    pytest.param(lambda o: o.update(kind="MemberCluster"), "kind", id="wrong-kind"),
    pytest.param(lambda o: o.update(apiVersion="placement.kubernetes-fleet.io/v1"),
                 "API version", id="wrong-version"),
    pytest.param(lambda o: o.pop("kind"), "Kind", id="no-kind"),
    pytest.param(lambda o: o.pop("apiVersion"), "apiVersion", id="no-api-version"),
    pytest.param(lambda o: o["metadata"].update(resourceVersion="5"), "resourceVersion",
                 id="resource-version-on-create"),
])
def test_bodies_for_another_kind_are_bad_requests(
    api: Client, mutate: Any, fragment: str
) -> None:
    body = placement("web")
    mutate(body)
    response = api.post(PLACEMENTS, body)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]
    assert api.get(f"{PLACEMENTS}/web").status_code == 404


def test_yaml_bodies_are_accepted(api: Client) -> None:
    body = (b"apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n"
            b"metadata:\n  name: m1\n  annotations:\n    when: 2024-01-01T00:00:00Z\nspec: {}\n")
    response = api.request("POST", CLUSTERS, data=body, headers={"Content-Type": YAML})
    assert response.status_code == 201, response.text
    assert response.json()["metadata"]["annotations"] == {"when": "2024-01-01T00:00:00Z"}


@pytest.mark.parametrize(("method", "path"), [
    ("POST", f"{CLUSTERS}/m1"),
    ("PUT", CLUSTERS),
    ("PATCH", CLUSTERS),
    ("POST", f"{CLUSTERS}/m1/status"),
    ("DELETE", f"{CLUSTERS}/m1/status"),
    ("POST", "/version"),
])
def test_wrong_methods_are_405(api: Client, method: str, path: str) -> None:
    response = api.request(method, path, json={})
    assert response.status_code == 405
    assert response.json()["reason"] == "MethodNotAllowed"


@pytest.mark.parametrize("params", [
    {"fieldValidation": "Loose"},
    {"dryRun": "Some"},
])
def test_bad_query_parameters_are_bad_requests(api: Client, params: dict[str, str]) -> None:
    response = api.post(PLACEMENTS, placement("web"), params=params)
    assert response.status_code == 400
    assert api.get(f"{PLACEMENTS}/web").status_code == 404


def test_an_oversized_body_is_refused(api: Client) -> None:
    body = placement("web")
    body["metadata"]["annotations"] = {"big": "x" * (4 * 1024 * 1024)}
    response = api.post(PLACEMENTS, body)
    assert response.status_code == 413
    assert response.json()["kind"] == "Status"


def test_a_bad_delete_options_body_is_a_bad_request(api: Client) -> None:
    api.create(PLACEMENTS, placement("web"))
    response = api.request("DELETE", f"{PLACEMENTS}/web", data=b"[1]",
                           headers={"Content-Type": JSON})
    assert response.status_code == 400
    assert api.get(f"{PLACEMENTS}/web").status_code == 200


def test_an_unexpected_server_error_is_a_500_status_without_internals(
    api: Client, devhub: DevHub
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal detail")

    original = Store.get
    devhub.call(lambda store: setattr(store, "get", explode))
    try:
        response = api.get(f"{PLACEMENTS}/web")
    finally:
        devhub.call(lambda store: setattr(store, "get", original.__get__(store)))
    assert response.status_code == 500
    assert response.json()["reason"] == "InternalError"
    assert "secret internal detail" not in response.text
    assert "Traceback" not in response.text
    assert api.get(f"{PLACEMENTS}/web").status_code == 404


WEIRD_VALUES: list[Any] = [None, 5, 1.5, True, "x", "", [], [1], {}, {"a": 1}, "a" * 300]
META_KEYS = ["name", "generateName", "labels", "annotations", "finalizers", "ownerReferences",
             "uid", "resourceVersion", "namespace", "creationTimestamp", "deletionTimestamp",
             "generation", "deletionGracePeriodSeconds"]
TOP_KEYS = ["metadata", "spec", "status", "apiVersion", "kind"]
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def _every_write_with(api: Client, place: Callable[[dict[str, Any], Any], None]) -> list[str]:
    """Send every weird value through create, update, status update, patch and apply."""
    failures = []
    for value in WEIRD_VALUES:
        api.delete(f"{PLACEMENTS}/web")
        created = api.create(PLACEMENTS, placement("web"))
        attempts: dict[str, Any] = {}
        body = copy.deepcopy(placement("web"))
        place(body, value)
        attempts["create"] = api.post(PLACEMENTS, body)
        changed = copy.deepcopy(created)
        place(changed, value)
        attempts["update"] = api.put(f"{PLACEMENTS}/web", changed)
        attempts["status"] = api.put(f"{PLACEMENTS}/web/status", changed)
        patch: dict[str, Any] = {}
        place(patch, value)
        attempts["patch"] = api.request("PATCH", f"{PLACEMENTS}/web", headers=MERGE,
                                        data=json.dumps(patch))
        attempts["apply"] = api.request("PATCH", f"{PLACEMENTS}/web?fieldManager=t",
                                        headers=APPLY, data=json.dumps(body))
        failures += [f"{verb} with {value!r}: {response.status_code} {response.text[:120]}"
                     for verb, response in attempts.items() if response.status_code >= 500]
    return failures


@pytest.mark.parametrize("key", META_KEYS)
def test_odd_metadata_values_never_cause_server_errors(api: Client, key: str) -> None:
    def place(obj: dict[str, Any], value: Any) -> None:
        obj.setdefault("metadata", {})[key] = value

    assert _every_write_with(api, place) == []


@pytest.mark.parametrize("key", TOP_KEYS)
def test_odd_top_level_values_never_cause_server_errors(api: Client, key: str) -> None:
    def place(obj: dict[str, Any], value: Any) -> None:
        obj[key] = value

    assert _every_write_with(api, place) == []


@pytest.mark.parametrize("value", WEIRD_VALUES)
def test_odd_patch_and_delete_bodies_never_cause_server_errors(api: Client, value: Any) -> None:
    api.create(PLACEMENTS, placement("web"))
    responses = [
        api.request("DELETE", f"{PLACEMENTS}/web", data=json.dumps({"preconditions": value})),
        api.request("DELETE", f"{PLACEMENTS}/web",
                    data=json.dumps({"preconditions": {"uid": value}})),
        api.patch(f"{PLACEMENTS}/web", [{"op": "add", "path": value, "value": 1}],
                  "application/json-patch+json"),
        api.patch(f"{PLACEMENTS}/web", [{"op": "move", "from": value, "path": "/spec/x"}],
                  "application/json-patch+json"),
        api.patch(f"{PLACEMENTS}/web", [{"op": "replace", "path": "", "value": value}],
                  "application/json-patch+json"),
    ]
    assert [r.status_code for r in responses if r.status_code >= 500] == []


@pytest.mark.parametrize(("value", "code"), [
    pytest.param(1, 201, id="integer"),
    pytest.param("50%", 201, id="percentage"),
    pytest.param(True, 422, id="boolean"),
    pytest.param([1], 422, id="list"),
    pytest.param(1.5, 422, id="float"),
])
def test_an_int_or_string_field_takes_integers_and_strings_only(
    api: Client, value: Any, code: int
) -> None:
    """A disruption budget's minAvailable is Kubernetes' IntOrString."""
    path = "/apis/placement.kubernetes-fleet.io/v1beta1/clusterresourceplacementdisruptionbudgets"
    body = {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterResourcePlacementDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": value},
    }
    response = api.request("POST", path, data=json.dumps(body).encode(),
                           headers={"Content-Type": JSON})
    assert response.status_code == code, response.text
    if code == 422:
        assert "spec.minAvailable in body must be of type integer or string" in response.text
