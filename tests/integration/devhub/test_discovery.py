"""Discovery: the documents the kubernetes client and kubectl read before anything else."""

from __future__ import annotations

import pytest

from hub import names
from hub.types import KINDS, HubObject
from tests.integration.devhub.devhub_helpers import Client


def test_version_is_served_without_a_token(api: Client) -> None:
    response = api.session.get(api.hub.url + "/version", headers={"Authorization": ""})
    assert response.status_code == 200
    assert response.json()["major"] == "1"
    assert response.json()["gitVersion"].startswith("v1.")


def test_api_lists_the_core_version_serving_events_and_namespaces(api: Client) -> None:
    body = api.get("/api").json()
    assert body["kind"] == "APIVersions"
    assert body["versions"] == ["v1"]
    core = api.get("/api/v1").json()
    assert core["kind"] == "APIResourceList"
    assert core["groupVersion"] == "v1"
    assert core["resources"] == [{
        "name": "events", "singularName": "event", "namespaced": True,
        "kind": "Event", "shortNames": ["ev"],
        "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update",
                  "watch"],
    }, {
        "name": "namespaces", "singularName": "namespace", "namespaced": False,
        "kind": "Namespace", "shortNames": ["ns"],
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    }]


def test_apis_lists_both_fleet_groups_at_v1beta1_ours_and_the_scheduling_group(
    api: Client,
) -> None:
    body = api.get("/apis").json()
    assert body["kind"] == "APIGroupList"
    groups = {group["name"]: group for group in body["groups"]}
    assert set(groups) == {
        names.PLACEMENT_GROUP, names.CLUSTER_GROUP, names.OWN_GROUP, "scheduling.k8s.io",
        "multicluster.x-k8s.io",  # KEP-5313's PlacementDecision (docs/decisions.md)
    }  # fmt: skip
    for name in (names.PLACEMENT_GROUP, names.CLUSTER_GROUP):
        assert groups[name]["preferredVersion"] == {"groupVersion": f"{name}/v1beta1",
                                                    "version": "v1beta1"}
    # CapacityLedger (docs/capacity.md)
    assert groups[names.OWN_GROUP]["preferredVersion"]["version"] == names.OWN_VERSION
    assert groups["scheduling.k8s.io"]["preferredVersion"]["version"] == "v1"  # PriorityClass


def test_group_document_names_its_versions(api: Client) -> None:
    body = api.get(f"/apis/{names.PLACEMENT_GROUP}").json()
    assert body["kind"] == "APIGroup"
    assert body["name"] == names.PLACEMENT_GROUP
    assert [v["version"] for v in body["versions"]] == ["v1beta1"]


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.KIND)
def test_resource_list_describes_every_kind(api: Client, kind: type[HubObject]) -> None:
    body = api.get(f"/apis/{kind.GROUP}/{kind.VERSION}").json()
    assert body["kind"] == "APIResourceList"
    resources = {entry["name"]: entry for entry in body["resources"]}
    entry = resources[kind.PLURAL]
    assert entry["kind"] == kind.KIND
    assert entry["singularName"] == kind.SINGULAR
    assert entry["namespaced"] is kind.NAMESPACED
    # As kube-apiserver: no shortNames or categories key when the CRD names none.
    assert entry.get("shortNames", []) == list(kind.SHORT_NAMES)
    assert entry.get("categories", []) == list(kind.CATEGORIES)
    assert set(entry["verbs"]) == {"create", "delete", "deletecollection", "get", "list",
                                   "patch", "update", "watch"}
    if not kind.STATUS_SUBRESOURCE:  # data only: PlacementDecision
        assert f"{kind.PLURAL}/status" not in resources
        return
    status = resources[f"{kind.PLURAL}/status"]
    assert set(status["verbs"]) == {"get", "patch", "update"}


def test_openapi_v3_advertises_server_side_field_validation(api: Client) -> None:
    index = api.get("/openapi/v3").json()
    key = f"apis/{names.PLACEMENT_GROUP}/v1beta1"
    document = api.get(index["paths"][key]["serverRelativeURL"]).json()
    patch = document["paths"][f"/{key}/clusterresourceplacements/{{name}}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "ClusterResourcePlacement"
    assert "fieldValidation" in {param["name"] for param in patch["parameters"]}
    schemas = document["components"]["schemas"]
    assert "io.kubernetes-fleet.placement.v1beta1.ClusterResourcePlacement" in schemas


def test_openapi_v3_puts_namespaced_kinds_under_their_namespace(api: Client) -> None:
    index = api.get("/openapi/v3").json()
    key = f"apis/{names.PLACEMENT_GROUP}/v1beta1"
    paths = api.get(index["paths"][key]["serverRelativeURL"]).json()["paths"]
    namespaced = f"/{key}/namespaces/{{namespace}}/resourceplacements"
    assert set(paths[namespaced]) >= {"get", "post", "delete"}
    assert "fieldValidation" in {p["name"] for p in paths[f"{namespaced}/{{name}}"]["patch"][
        "parameters"]}
    assert set(paths[f"/{key}/resourceplacements"]) == {"get"}  # list and watch only
    assert f"/{key}/resourceplacements/{{name}}" not in paths
    core = api.get(index["paths"]["api/v1"]["serverRelativeURL"]).json()
    patch = core["paths"]["/api/v1/namespaces/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1",
                                                         "kind": "Namespace"}
    assert "delete" not in core["paths"]["/api/v1/namespaces"]  # no deletecollection
    assert "io.k8s.api.core.v1.Namespace" in core["components"]["schemas"]


@pytest.mark.parametrize("path", [
    "/apis/example.com",
    "/apis/placement.kubernetes-fleet.io/v1",
    "/apis/placement.kubernetes-fleet.io/v1beta1/widgets",
    "/apis/placement.kubernetes-fleet.io/v1beta1/clusterresourceplacements/a/scale",
    "/apis/placement.kubernetes-fleet.io/v1beta1/namespaces/default/clusterresourceplacements",
    "/apis/placement.kubernetes-fleet.io/v1beta1/namespaces/default",
    "/apis/placement.kubernetes-fleet.io/v1beta1/resourceplacements/web",
    "/api/v2",
    "/api/v1/pods",
    "/api/v1/namespaces/default/configmaps",
    "/openapi/v3/apis/example.com/v1",
    "/nothing/here",
])
def test_unknown_paths_are_404_status(api: Client, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 404
    body = response.json()
    assert body["kind"] == "Status"
    assert body["reason"] == "NotFound"
    assert body["message"]
