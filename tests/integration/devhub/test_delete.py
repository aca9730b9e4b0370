"""Delete: finalizers hold an object until the last one is removed; delete-collection."""

from __future__ import annotations

from tests.integration.devhub.devhub_helpers import BINDINGS, JSON_PATCH, Client, binding

FINALIZER = "kubernetes-fleet.io/scheduler-crb-cleanup"
OTHER = "kubernetes-fleet.io/work-cleanup"


def test_delete_without_finalizers_removes_the_object(api: Client) -> None:
    api.create(BINDINGS, binding("b1"))
    response = api.delete(f"{BINDINGS}/b1")
    assert response.status_code == 200
    assert response.json()["metadata"]["name"] == "b1"
    assert api.get(f"{BINDINGS}/b1").status_code == 404


def test_delete_of_a_missing_object_is_not_found(api: Client) -> None:
    response = api.delete(f"{BINDINGS}/ghost")
    assert response.status_code == 404
    assert response.json()["reason"] == "NotFound"


def test_delete_with_finalizers_only_marks_the_object(api: Client) -> None:
    created = api.create(BINDINGS, binding("b1", finalizers=[FINALIZER]))
    response = api.delete(f"{BINDINGS}/b1")
    assert response.status_code == 202
    marked = api.get(f"{BINDINGS}/b1").json()
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert marked["metadata"]["generation"] == created["metadata"]["generation"] + 1
    assert marked["metadata"]["finalizers"] == [FINALIZER]


def test_deleting_an_object_already_being_deleted_returns_it_unchanged(api: Client) -> None:
    api.create(BINDINGS, binding("b1", finalizers=[FINALIZER]))
    first = api.delete(f"{BINDINGS}/b1").json()
    second = api.delete(f"{BINDINGS}/b1")
    assert second.status_code == 202
    assert second.json() == first


def test_removing_the_last_finalizer_removes_the_object(api: Client) -> None:
    api.create(BINDINGS, binding("b1", finalizers=[FINALIZER, OTHER]))
    api.delete(f"{BINDINGS}/b1")
    api.patch(f"{BINDINGS}/b1", [{"op": "remove", "path": "/metadata/finalizers/0"}], JSON_PATCH)
    assert api.get(f"{BINDINGS}/b1").json()["metadata"]["finalizers"] == [OTHER]
    current = api.get(f"{BINDINGS}/b1").json()
    current["metadata"]["finalizers"] = []
    response = api.put(f"{BINDINGS}/b1", current)
    assert response.status_code == 200
    assert api.get(f"{BINDINGS}/b1").status_code == 404


def test_no_new_finalizers_while_deleting(api: Client) -> None:
    api.create(BINDINGS, binding("b1", finalizers=[FINALIZER]))
    api.delete(f"{BINDINGS}/b1")
    response = api.patch(f"{BINDINGS}/b1", {"metadata": {"finalizers": [FINALIZER, OTHER]}})
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "metadata.finalizers"


def test_an_update_cannot_clear_the_deletion_timestamp(api: Client) -> None:
    api.create(BINDINGS, binding("b1", finalizers=[FINALIZER]))
    marked = api.delete(f"{BINDINGS}/b1").json()
    stamp = marked["metadata"]["deletionTimestamp"]
    marked["metadata"].pop("deletionTimestamp")
    marked["spec"]["state"] = "Bound"
    updated = api.put(f"{BINDINGS}/b1", marked).json()
    assert updated["metadata"]["deletionTimestamp"] == stamp


def test_delete_preconditions_guard_against_replacement(api: Client) -> None:
    api.create(BINDINGS, binding("b1"))
    response = api.request("DELETE", f"{BINDINGS}/b1",
                           json={"kind": "DeleteOptions", "apiVersion": "v1",
                                 "preconditions": {"uid": "not-the-uid"}})
    assert response.status_code == 409
    assert "Precondition failed" in response.json()["message"]
    assert api.get(f"{BINDINGS}/b1").status_code == 200


def test_delete_collection_honours_selectors_and_finalizers(api: Client) -> None:
    parent = {"kubernetes-fleet.io/parent-CRP": "web"}
    api.create(BINDINGS, binding("b1", labels=parent))
    api.create(BINDINGS, binding("b2", labels=parent, finalizers=[FINALIZER]))
    api.create(BINDINGS, binding("other", labels={"kubernetes-fleet.io/parent-CRP": "api"}))
    response = api.delete(BINDINGS, params={"labelSelector": "kubernetes-fleet.io/parent-CRP=web"})
    assert response.status_code == 200
    assert sorted(i["metadata"]["name"] for i in response.json()["items"]) == ["b1", "b2"]
    remaining = api.get(BINDINGS).json()["items"]
    assert [i["metadata"]["name"] for i in remaining] == ["b2", "other"]
    assert remaining[0]["metadata"]["deletionTimestamp"]


def test_delete_collection_with_a_bad_selector_deletes_nothing(api: Client) -> None:
    api.create(BINDINGS, binding("b1"))
    assert api.delete(BINDINGS, params={"labelSelector": "a in ("}).status_code == 400
    assert api.get(f"{BINDINGS}/b1").status_code == 200
