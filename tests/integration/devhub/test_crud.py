"""Create, get, update, patch and the status subresource, as kube-apiserver does them."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from tests.integration.devhub.devhub_helpers import (
    APPLY,
    BINDINGS,
    CLUSTERS,
    JSON_PATCH,
    PLACEMENTS,
    Client,
    binding,
    cluster,
    placement,
)


def _rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_create_sets_system_metadata(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    meta = created["metadata"]
    assert uuid.UUID(meta["uid"])
    assert datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))
    assert meta["generation"] == 1
    assert _rv(created) > 0
    assert api.get(f"{PLACEMENTS}/web").json() == created


def test_create_ignores_status_because_the_status_subresource_owns_it(api: Client) -> None:
    body = placement("web")
    body["status"] = {"conditions": [{"type": "X", "status": "True"}]}
    created = api.create(PLACEMENTS, body)
    assert "status" not in created


def test_create_of_an_existing_name_is_already_exists(api: Client) -> None:
    api.create(PLACEMENTS, placement("web"))
    response = api.post(PLACEMENTS, placement("web"))
    assert response.status_code == 409
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "AlreadyExists", 409)
    assert status["details"]["name"] == "web"


def test_generate_name_makes_a_unique_name(api: Client) -> None:
    body = placement("")
    body["metadata"] = {"generateName": "web-"}
    first = api.create(PLACEMENTS, body)
    second = api.create(PLACEMENTS, body)
    assert first["metadata"]["name"].startswith("web-")
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_get_of_a_missing_object_is_not_found_status(api: Client) -> None:
    response = api.get(f"{PLACEMENTS}/nope")
    assert response.status_code == 404
    assert response.json()["reason"] == "NotFound"
    assert "nope" in response.json()["message"]


def test_resource_versions_are_cluster_wide_and_increasing(api: Client) -> None:
    a = api.create(PLACEMENTS, placement("a"))
    b = api.create(CLUSTERS, cluster("b"))
    c = api.create(BINDINGS, binding("c"))
    assert _rv(a) < _rv(b) < _rv(c)


def test_update_with_the_current_resource_version_succeeds(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    created["spec"]["policy"]["numberOfClusters"] = 5
    response = api.put(f"{PLACEMENTS}/web", created)
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["spec"]["policy"]["numberOfClusters"] == 5
    assert _rv(updated) > _rv(created)
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


def test_update_with_a_stale_resource_version_is_a_conflict(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    fresh = copy.deepcopy(created)
    fresh["spec"]["policy"]["numberOfClusters"] = 3
    assert api.put(f"{PLACEMENTS}/web", fresh).status_code == 200
    created["spec"]["policy"]["numberOfClusters"] = 4
    response = api.put(f"{PLACEMENTS}/web", created)
    assert response.status_code == 409
    assert response.json()["reason"] == "Conflict"
    assert api.get(f"{PLACEMENTS}/web").json()["spec"]["policy"]["numberOfClusters"] == 3


def test_update_without_a_resource_version_is_invalid(api: Client) -> None:
    api.create(PLACEMENTS, placement("web"))
    response = api.put(f"{PLACEMENTS}/web", placement("web"))
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_update_of_a_missing_object_is_not_found(api: Client) -> None:
    body = placement("ghost")
    body["metadata"]["resourceVersion"] = "1"
    assert api.put(f"{PLACEMENTS}/ghost", body).status_code == 404


def test_update_whose_body_names_another_object_is_a_bad_request(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    created["metadata"]["name"] = "other"
    response = api.put(f"{PLACEMENTS}/web", created)
    assert response.status_code == 400
    assert "does not match the name on the URL" in response.json()["message"]


def test_uid_is_immutable(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    created["metadata"]["uid"] = str(uuid.uuid4())
    response = api.put(f"{PLACEMENTS}/web", created)
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "metadata.uid"


@pytest.mark.parametrize(("change", "bumps"), [
    pytest.param(lambda o: o["spec"]["policy"].update(numberOfClusters=9), True, id="spec"),
    pytest.param(lambda o: o["metadata"].update(labels={"a": "b"}), False, id="labels"),
    pytest.param(lambda o: o["metadata"].update(annotations={"a": "b"}), False, id="annotations"),
    pytest.param(lambda o: o.update(status={"conditions": []}), False, id="status-ignored"),
])
def test_generation_moves_on_spec_changes_only(
    api: Client, change: Callable[[dict[str, Any]], None], bumps: bool
) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    change(created)
    updated = api.put(f"{PLACEMENTS}/web", created).json()
    assert updated["metadata"]["generation"] == (2 if bumps else 1)


def test_main_endpoint_ignores_status_changes(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    created["status"] = {"conditions": [{"type": "Scheduled", "status": "True"}]}
    created["spec"]["policy"]["numberOfClusters"] = 4
    updated = api.put(f"{PLACEMENTS}/web", created).json()
    assert updated["spec"]["policy"]["numberOfClusters"] == 4
    assert "status" not in updated


def test_status_endpoint_changes_only_status(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    created["status"] = {"conditions": [{"type": "Scheduled", "status": "True",
                                         "reason": "Done", "message": ""}]}
    created["spec"]["policy"]["numberOfClusters"] = 7
    created["metadata"]["labels"] = {"sneaky": "yes"}
    response = api.put(f"{PLACEMENTS}/web/status", created)
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["status"]["conditions"][0]["type"] == "Scheduled"
    assert updated["spec"]["policy"]["numberOfClusters"] == 2
    assert "labels" not in updated["metadata"]
    assert updated["metadata"]["generation"] == 1
    assert api.get(f"{PLACEMENTS}/web/status").json() == updated


def test_status_update_with_a_stale_resource_version_is_a_conflict(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    api.patch(f"{PLACEMENTS}/web", {"metadata": {"labels": {"x": "y"}}})
    created["status"] = {"conditions": []}
    assert api.put(f"{PLACEMENTS}/web/status", created).status_code == 409


def test_a_no_op_update_writes_nothing(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    again = api.put(f"{PLACEMENTS}/web", created).json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_merge_patch_merges_and_null_deletes(api: Client) -> None:
    api.create(PLACEMENTS, placement("web", labels={"a": "1", "b": "2"}))
    response = api.patch(f"{PLACEMENTS}/web", {"metadata": {"labels": {"a": None, "c": "3"}},
                                               "spec": {"policy": {"numberOfClusters": 4}}})
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert patched["spec"]["policy"] == {"placementType": "PickN", "numberOfClusters": 4}
    assert patched["metadata"]["generation"] == 2


def test_json_patch_applies_operations_in_order(api: Client) -> None:
    api.create(PLACEMENTS, placement("web"))
    ops = [
        {"op": "test", "path": "/spec/policy/numberOfClusters", "value": 2},
        {"op": "replace", "path": "/spec/policy/numberOfClusters", "value": 3},
        {"op": "add", "path": "/metadata/labels", "value": {"tier": "web"}},
        {"op": "add", "path": "/spec/resourceSelectors/-",
         "value": {"group": "", "version": "v1", "kind": "Namespace", "name": "extra"}},
    ]
    response = api.patch(f"{PLACEMENTS}/web", ops, JSON_PATCH)
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["spec"]["policy"]["numberOfClusters"] == 3
    assert patched["metadata"]["labels"] == {"tier": "web"}
    assert [s["name"] for s in patched["spec"]["resourceSelectors"]] == ["web", "extra"]


@pytest.mark.parametrize(("ops", "code"), [
    pytest.param([{"op": "test", "path": "/spec/policy/numberOfClusters", "value": 9}], 422,
                 id="failed-test"),
    pytest.param([{"op": "remove", "path": "/spec/nothing"}], 422, id="missing-path"),
    pytest.param([{"op": "jump", "path": "/spec"}], 400, id="unknown-op"),
    pytest.param({"op": "add"}, 400, id="not-a-list"),
    pytest.param([{"path": "/spec"}], 400, id="no-op"),
])
def test_json_patch_failures_leave_the_object_alone(api: Client, ops: Any, code: int) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    response = api.patch(f"{PLACEMENTS}/web", ops, JSON_PATCH)
    assert response.status_code == code
    assert response.json()["kind"] == "Status"
    assert api.get(f"{PLACEMENTS}/web").json() == created


def test_patch_carrying_a_stale_resource_version_is_a_conflict(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    api.patch(f"{PLACEMENTS}/web", {"metadata": {"labels": {"x": "y"}}})
    response = api.patch(f"{PLACEMENTS}/web", {"metadata": {
        "resourceVersion": created["metadata"]["resourceVersion"], "labels": {"x": "z"}}})
    assert response.status_code == 409
    assert response.json()["reason"] == "Conflict"


def test_patch_of_a_missing_object_is_not_found(api: Client) -> None:
    assert api.patch(f"{PLACEMENTS}/ghost", {"spec": {}}).status_code == 404


def test_status_patch_changes_only_status(api: Client) -> None:
    api.create(PLACEMENTS, placement("web"))
    response = api.patch(f"{PLACEMENTS}/web/status", {
        "spec": {"policy": {"numberOfClusters": 9}},
        "status": {"conditions": [{"type": "Scheduled", "status": "False"}]},
    })
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["status"]["conditions"][0]["status"] == "False"
    assert patched["spec"]["policy"]["numberOfClusters"] == 2


def test_strategic_merge_patch_is_unsupported_for_custom_resources(api: Client) -> None:
    api.create(PLACEMENTS, placement("web"))
    response = api.patch(f"{PLACEMENTS}/web", {"spec": {}},
                         "application/strategic-merge-patch+json")
    assert response.status_code == 415
    assert response.json()["reason"] == "UnsupportedMediaType"


def test_server_side_apply_creates_then_updates(api: Client) -> None:
    path = f"{PLACEMENTS}/web?fieldManager=test"
    body = placement("web")
    first = api.patch(path, body, APPLY)
    assert first.status_code == 201, first.text
    body["spec"]["policy"]["numberOfClusters"] = 6
    second = api.patch(path, body, APPLY)
    assert second.status_code == 200, second.text
    assert second.json()["spec"]["policy"]["numberOfClusters"] == 6
    assert second.json()["metadata"]["uid"] == first.json()["metadata"]["uid"]


def test_server_side_apply_requires_a_field_manager(api: Client) -> None:
    response = api.patch(f"{PLACEMENTS}/web", placement("web"), APPLY)
    assert response.status_code == 400
    assert "fieldManager" in response.json()["message"]


def test_dry_run_create_stores_nothing(api: Client) -> None:
    response = api.post(f"{PLACEMENTS}?dryRun=All", placement("web"))
    assert response.status_code == 201
    assert response.json()["metadata"]["name"] == "web"
    assert api.get(f"{PLACEMENTS}/web").status_code == 404
