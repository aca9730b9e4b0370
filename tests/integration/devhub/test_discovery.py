"""Discovery: the documents the kubernetes client and kubectl read before anything else."""

from __future__ import annotations

import pytest
from devhub_helpers import Client

from hub import names
from hub.types import KINDS, HubObject


def test_version_is_served_without_a_token(api: Client) -> None:
    response = api.session.get(api.hub.url + "/version", headers={"Authorization": ""})
    assert response.status_code == 200
    assert response.json()["major"] == "1"
    assert response.json()["gitVersion"].startswith("v1.")


def test_api_lists_no_core_versions(api: Client) -> None:
    body = api.get("/api").json()
    assert body["kind"] == "APIVersions"
    assert body["versions"] == []


def test_apis_lists_both_fleet_groups_at_v1beta1(api: Client) -> None:
    body = api.get("/apis").json()
    assert body["kind"] == "APIGroupList"
    groups = {group["name"]: group for group in body["groups"]}
    assert set(groups) == {names.PLACEMENT_GROUP, names.CLUSTER_GROUP}
    for name, group in groups.items():
        assert group["preferredVersion"] == {"groupVersion": f"{name}/v1beta1",
                                             "version": "v1beta1"}


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
    assert entry["shortNames"] == list(kind.SHORT_NAMES)
    assert entry["categories"] == list(kind.CATEGORIES)
    assert set(entry["verbs"]) == {"create", "delete", "deletecollection", "get", "list",
                                   "patch", "update", "watch"}
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


@pytest.mark.parametrize("path", [
    "/apis/example.com",
    "/apis/placement.kubernetes-fleet.io/v1",
    "/apis/placement.kubernetes-fleet.io/v1beta1/widgets",
    "/apis/placement.kubernetes-fleet.io/v1beta1/clusterresourceplacements/a/scale",
    "/apis/placement.kubernetes-fleet.io/v1beta1/namespaces/default/clusterresourceplacements",
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
