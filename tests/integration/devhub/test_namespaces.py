"""Namespaces: namespaced kinds live at /namespaces/NS/, Namespace objects gate and cascade.

What kube-apiserver does, over real HTTP: objects are identified by (namespace, name); a create
needs an existing, Active namespace (NamespaceLifecycle: 404, then 403 while it terminates); the
all-namespace path serves list and watch only; deleting a namespace deletes its content, each
object by its finalizers, and the namespace goes with the last of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devhub import DevHub
from hub.client import HubClient, WatchEvent
from hub.types import ResourceBinding, ResourcePlacement
from tests.integration.devhub.devhub_helpers import (
    ALL_RBS,
    ALL_RPS,
    CLUSTERS,
    JSON_PATCH,
    NAMESPACES,
    PLACEMENTS,
    TABLE_ACCEPT,
    Client,
    cluster,
    namespace_object,
    rbs,
    resource_binding,
    resource_placement,
    rps,
)

FINALIZER = "kubernetes-fleet.io/scheduler-cleanup"
TERMINATING_MESSAGE = "unable to create new content in namespace {} because it is being terminated"
MISMATCH = "the namespace of the provided object does not match the namespace sent on the request"


def _events(events: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [(e["type"], e["object"]["kind"], e["object"]["metadata"].get("namespace", ""),
             e["object"]["metadata"]["name"]) for e in events]


def _keys(listing: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["metadata"].get("namespace", ""), item["metadata"]["name"])
            for item in listing["items"]]


def _make_namespaces(api: Client, *names: str) -> None:
    for name in names:
        api.create(NAMESPACES, namespace_object(name))


# --- Namespace objects -----------------------------------------------------------------------


def test_the_system_namespaces_exist_and_are_active(api: Client) -> None:
    listing = api.get(NAMESPACES).json()
    assert listing["kind"] == "NamespaceList"
    assert listing["apiVersion"] == "v1"
    # fleet-system too, as on every KubeFleet hub (deletable, unlike the system ones).
    assert [item["metadata"]["name"] for item in listing["items"]] == [
        "default", "fleet-system", "kube-public", "kube-system"]
    default = api.get(f"{NAMESPACES}/default").json()
    assert default["status"] == {"phase": "Active"}
    assert default["metadata"]["labels"] == {"kubernetes.io/metadata.name": "default"}


def test_a_new_namespace_is_active_with_the_kubernetes_finalizer(api: Client) -> None:
    body = namespace_object("team-a", labels={"team": "a"})
    body["status"] = {"phase": "Terminating"}  # status is the server's to set
    created = api.create(NAMESPACES, body)
    assert created["status"] == {"phase": "Active"}
    assert created["spec"] == {"finalizers": ["kubernetes"]}
    assert created["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert "generation" not in created["metadata"]
    again = api.post(NAMESPACES, namespace_object("team-a"))
    assert again.status_code == 409
    assert again.json()["message"] == 'namespaces "team-a" already exists'


def test_a_namespace_name_must_be_a_dns_label(api: Client) -> None:
    response = api.post(NAMESPACES, namespace_object("team.a"))  # a subdomain, not a label
    assert response.status_code == 422
    assert response.json()["message"].startswith(
        'Namespace "team.a" is invalid: metadata.name: Invalid value: "team.a": a lowercase '
        "RFC 1123 label")


def test_a_namespace_update_changes_metadata_only(api: Client) -> None:
    _make_namespaces(api, "team-a")
    response = api.patch(f"{NAMESPACES}/team-a", {
        "metadata": {"labels": {"tier": "gold", "kubernetes.io/metadata.name": None}},
        "spec": {"finalizers": []},
        "status": {"phase": "Terminating"},
    })
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["metadata"]["labels"] == {"tier": "gold",
                                             "kubernetes.io/metadata.name": "team-a"}
    assert patched["spec"] == {"finalizers": ["kubernetes"]}
    assert patched["status"] == {"phase": "Active"}


def test_a_namespace_takes_strategic_merge_patches_and_placements_do_not(api: Client) -> None:
    strategic = "application/strategic-merge-patch+json"
    body = namespace_object("team-a")
    body["metadata"]["finalizers"] = ["example.com/a"]
    api.create(NAMESPACES, body)
    response = api.patch(f"{NAMESPACES}/team-a",
                         {"metadata": {"finalizers": ["example.com/b"]}}, strategic)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]
    api.create(rps("team-a"), resource_placement("web"))
    refused = api.patch(f"{rps('team-a')}/web", {"metadata": {"labels": {"a": "b"}}}, strategic)
    assert refused.status_code == 415
    assert refused.json()["reason"] == "UnsupportedMediaType"


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_system_namespaces_may_not_be_deleted(api: Client, name: str) -> None:
    response = api.delete(f"{NAMESPACES}/{name}")
    assert response.status_code == 403
    assert response.json()["message"] == \
        f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    assert api.get(f"{NAMESPACES}/{name}").json()["status"]["phase"] == "Active"


def test_namespaces_have_no_deletecollection(api: Client) -> None:
    assert api.delete(NAMESPACES).status_code == 405
    assert len(api.get(NAMESPACES).json()["items"]) == 4


def test_a_namespace_watch_from_a_resource_version_sees_its_life(api: Client) -> None:
    start = api.get(NAMESPACES).json()["metadata"]["resourceVersion"]
    _make_namespaces(api, "team-a")
    assert api.delete(f"{NAMESPACES}/team-a").status_code == 200
    with api.watch(NAMESPACES, resourceVersion=start) as watch:
        added, terminating, deleted = watch.take(3)
    assert [e["type"] for e in (added, terminating, deleted)] == ["ADDED", "MODIFIED", "DELETED"]
    assert added["object"]["status"]["phase"] == "Active"
    assert terminating["object"]["status"]["phase"] == "Terminating"
    assert terminating["object"]["metadata"]["deletionTimestamp"]
    assert deleted["object"]["metadata"]["name"] == "team-a"
    assert api.get(f"{NAMESPACES}/team-a").status_code == 404


# --- namespaced objects ----------------------------------------------------------------------


def test_creating_in_a_missing_namespace_is_not_found(api: Client) -> None:
    response = api.post(rps("nope"), resource_placement("web"))
    assert response.status_code == 404
    status = response.json()
    assert (status["reason"], status["message"]) == ("NotFound", 'namespaces "nope" not found')
    assert status["details"] == {"name": "nope", "kind": "namespaces"}
    # Reads in a missing namespace find nothing, as on kube-apiserver: 404 for an object,
    # an empty list for a collection.
    assert api.get(f"{rps('nope')}/web").json()["message"] == \
        'resourceplacements.placement.kubernetes-fleet.io "web" not found'
    assert api.get(rps("nope")).json()["items"] == []


def test_the_namespace_is_checked_before_the_object_is_validated(api: Client) -> None:
    body = resource_placement("web")
    body["spec"]["policy"] = {"placementType": "PickN"}  # invalid: no numberOfClusters
    assert api.post(rps("nope"), body).status_code == 404
    assert api.post(rps("default"), body).status_code == 422


def test_create_takes_the_namespace_from_the_path(api: Client) -> None:
    created = api.create(rps("default"), resource_placement("web"))
    assert created["metadata"]["namespace"] == "default"
    assert api.get(f"{rps('default')}/web").json() == created


def test_the_same_name_lives_in_two_namespaces(api: Client) -> None:
    _make_namespaces(api, "team-a", "team-b")
    first = api.create(rps("team-a"), resource_placement("web", labels={"team": "a"}))
    second = api.create(rps("team-b"), resource_placement("web", labels={"team": "b"}))
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    assert api.get(f"{rps('team-a')}/web").json()["metadata"]["labels"] == {"team": "a"}
    assert api.get(f"{rps('team-b')}/web").json()["metadata"]["labels"] == {"team": "b"}
    assert api.post(rps("team-a"), resource_placement("web")).status_code == 409

    assert api.delete(f"{rps('team-a')}/web").status_code == 200
    assert api.get(f"{rps('team-a')}/web").status_code == 404
    assert api.get(f"{rps('team-b')}/web").json()["metadata"]["uid"] == second["metadata"]["uid"]


def test_a_body_naming_another_namespace_is_a_bad_request(api: Client) -> None:
    _make_namespaces(api, "team-a", "team-b")
    response = api.post(rps("team-a"), resource_placement("web", "team-b"))
    assert response.status_code == 400
    assert (response.json()["reason"], response.json()["message"]) == ("BadRequest", MISMATCH)
    assert api.get(ALL_RPS).json()["items"] == []

    current = api.create(rps("team-a"), resource_placement("web", "team-a"))
    current["metadata"]["namespace"] = "team-b"
    response = api.put(f"{rps('team-a')}/web", current)
    assert (response.status_code, response.json()["message"]) == (400, MISMATCH)

    response = api.patch(f"{rps('team-a')}/web", {"metadata": {"namespace": "team-b"}})
    assert response.status_code == 400
    assert response.json()["message"] == \
        "the namespace of the object (team-b) does not match the namespace on the request (team-a)"
    assert api.get(f"{rps('team-b')}/web").status_code == 404


def test_update_patch_and_status_work_in_a_namespace(api: Client) -> None:
    _make_namespaces(api, "team-a")
    created = api.create(rps("team-a"), resource_placement("web"))
    created["metadata"].pop("namespace")  # a body may leave the namespace to the path
    created["metadata"]["labels"] = {"tier": "gold"}
    updated = api.put(f"{rps('team-a')}/web", created).json()
    assert updated["metadata"]["namespace"] == "team-a"
    assert updated["metadata"]["labels"] == {"tier": "gold"}

    patched = api.patch(f"{rps('team-a')}/web", [
        {"op": "replace", "path": "/metadata/labels/tier", "value": "silver"}], JSON_PATCH)
    assert patched.json()["metadata"]["labels"] == {"tier": "silver"}

    status = {"observedResourceIndex": "0"}
    response = api.patch(f"{rps('team-a')}/web/status", {"status": status})
    assert response.status_code == 200, response.text
    assert api.get(f"{rps('team-a')}/web").json()["status"] == status
    assert api.get(f"{rps('team-a')}/web/status").json()["metadata"]["namespace"] == "team-a"


def test_server_side_apply_creates_in_the_namespace_of_the_path(api: Client) -> None:
    _make_namespaces(api, "team-a")
    applied = api.patch(f"{rps('team-a')}/web?fieldManager=test", resource_placement("web"),
                        "application/apply-patch+yaml")
    assert applied.status_code == 201, applied.text
    assert applied.json()["metadata"]["namespace"] == "team-a"
    missing = api.patch(f"{rps('nope')}/web?fieldManager=test", resource_placement("web"),
                        "application/apply-patch+yaml")
    assert (missing.status_code, missing.json()["message"]) == (404, 'namespaces "nope" not found')


def test_strict_field_validation_applies_in_a_namespace(api: Client) -> None:
    body = resource_placement("web")
    body["spec"]["policy"]["colour"] = "blue"
    response = api.post(rps("default"), body, params={"fieldValidation": "Strict"})
    assert response.status_code == 400
    assert response.json()["message"] == \
        'strict decoding error: unknown field "spec.policy.colour"'
    warned = api.post(rps("default"), body)
    assert warned.status_code == 201
    assert "colour" not in warned.json()["spec"]["policy"]
    assert 'unknown field \\"spec.policy.colour\\"' in warned.headers["Warning"]


def test_dry_run_create_in_a_namespace_stores_nothing(api: Client) -> None:
    response = api.post(rps("default"), resource_placement("web"), params={"dryRun": "All"})
    assert response.status_code == 201
    assert response.json()["metadata"]["namespace"] == "default"
    assert api.get(f"{rps('default')}/web").status_code == 404
    assert api.post(rps("nope"), resource_placement("web"),
                    params={"dryRun": "All"}).status_code == 404


@pytest.mark.parametrize(("method", "path"), [
    ("POST", ALL_RPS),
    ("DELETE", ALL_RPS),
    ("GET", f"{ALL_RPS}/web"),
    ("PUT", f"{ALL_RPS}/web"),
    ("PATCH", f"{ALL_RPS}/web"),
    ("DELETE", f"{ALL_RPS}/web"),
    ("GET", f"{ALL_RPS}/web/status"),
    ("POST", "/apis/placement.kubernetes-fleet.io/v1beta1/namespaces/default/"
             "clusterresourceplacements"),
    ("GET", "/apis/placement.kubernetes-fleet.io/v1beta1/namespaces/default/"
            "clusterresourceplacements/web"),
], ids=lambda value: value.replace("/apis/placement.kubernetes-fleet.io/v1beta1", ""))
def test_paths_of_the_wrong_scope_are_not_found(api: Client, method: str, path: str) -> None:
    api.create(rps("default"), resource_placement("web"))
    api.create(PLACEMENTS, resource_placement("web") | {"kind": "ClusterResourcePlacement"})
    response = api.request(method, path, json=resource_placement("web", "default"),
                           headers={"Content-Type": "application/merge-patch+json"}
                           if method == "PATCH" else {})
    assert response.status_code == 404, response.text
    assert response.json()["reason"] == "NotFound"
    assert api.get(f"{rps('default')}/web").status_code == 200  # nothing was deleted
    assert api.get(f"{PLACEMENTS}/web").status_code == 200


def test_deletecollection_stays_in_its_namespace(api: Client) -> None:
    _make_namespaces(api, "team-a")
    for ns in ("default", "team-a"):
        api.create(rbs(ns), resource_binding("b1"))
        api.create(rbs(ns), resource_binding("b2"))
    response = api.delete(rbs("team-a"))
    assert response.status_code == 200
    assert _keys(response.json()) == [("team-a", "b1"), ("team-a", "b2")]
    assert _keys(api.get(ALL_RBS).json()) == [("default", "b1"), ("default", "b2")]


# --- lists and watches -----------------------------------------------------------------------


def test_the_all_namespace_list_is_in_etcd_key_order(api: Client) -> None:
    _make_namespaces(api, "a", "a-b", "b")
    for ns, name in (("b", "x"), ("a", "y"), ("a-b", "x"), ("a", "x")):
        api.create(rps(ns), resource_placement(name))
    # etcd keys are .../<namespace>/<name>: '-' sorts before '/', so a-b/x comes before a/x.
    listing = api.get(ALL_RPS).json()
    assert listing["kind"] == "ResourcePlacementList"
    assert _keys(listing) == [("a-b", "x"), ("a", "x"), ("a", "y"), ("b", "x")]
    assert _keys(api.get(rps("a")).json()) == [("a", "x"), ("a", "y")]
    page = api.get(ALL_RPS, params={"limit": 3}).json()
    rest = api.get(ALL_RPS, params={"limit": 3, "continue": page["metadata"]["continue"]}).json()
    assert _keys(page) + _keys(rest) == _keys(listing)


def test_label_selectors_stay_in_the_namespace(api: Client) -> None:
    _make_namespaces(api, "team-a", "team-b")
    for ns in ("team-a", "team-b"):
        api.create(rbs(ns), resource_binding("b1", labels={"crp": "web"}))
    for name in ("b2", "b3"):  # more in the namespace than with the label: the label narrows
        api.create(rbs("team-a"), resource_binding(name, labels={"crp": "db"}))
    selected = api.get(rbs("team-a"), params={"labelSelector": "crp=web"}).json()
    assert _keys(selected) == [("team-a", "b1")]
    across = api.get(ALL_RBS, params={"labelSelector": "crp=web"}).json()
    assert _keys(across) == [("team-a", "b1"), ("team-b", "b1")]


@pytest.mark.parametrize(("selector", "expected"), [
    ("metadata.namespace=team-a", [("team-a", "web"), ("team-a", "db")]),
    ("metadata.namespace==team-b", [("team-b", "web")]),
    ("metadata.namespace!=team-a", [("team-b", "web")]),
    ("metadata.name=web", [("team-a", "web"), ("team-b", "web")]),
    ("metadata.namespace=team-b,metadata.name=web", [("team-b", "web")]),
    ("metadata.namespace=team-b,metadata.name!=web", []),
])
def test_field_selectors_on_namespace_and_name(
    api: Client, selector: str, expected: list[tuple[str, str]]
) -> None:
    _make_namespaces(api, "team-a", "team-b")
    for ns, name in (("team-a", "web"), ("team-b", "web"), ("team-a", "db")):
        api.create(rps(ns), resource_placement(name))
    listed = api.get(ALL_RPS, params={"fieldSelector": selector}).json()
    assert sorted(_keys(listed)) == sorted(expected)
    in_b = api.get(rps("team-b"), params={"fieldSelector": selector}).json()
    assert sorted(_keys(in_b)) == sorted(key for key in expected if key[0] == "team-b")


def test_an_all_namespace_watch_replays_both_namespaces_in_order(api: Client) -> None:
    _make_namespaces(api, "team-a", "team-b")
    start = api.get(ALL_RPS).json()["metadata"]["resourceVersion"]
    api.create(rps("team-a"), resource_placement("web"))
    api.create(rps("team-b"), resource_placement("web"))
    api.create(CLUSTERS, cluster("m1"))  # another kind: not in this watch
    api.patch(f"{rps('team-a')}/web", {"metadata": {"labels": {"x": "1"}}})
    api.delete(f"{rps('team-b')}/web")
    with api.watch(ALL_RPS, resourceVersion=start) as watch:
        api.create(rps("default"), resource_placement("live"))
        events = watch.take(5)
    assert _events(events) == [
        ("ADDED", "ResourcePlacement", "team-a", "web"),
        ("ADDED", "ResourcePlacement", "team-b", "web"),
        ("MODIFIED", "ResourcePlacement", "team-a", "web"),
        ("DELETED", "ResourcePlacement", "team-b", "web"),
        ("ADDED", "ResourcePlacement", "default", "live"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 5


def test_a_namespace_watch_sees_only_its_namespace(api: Client) -> None:
    _make_namespaces(api, "team-a", "team-b")
    start = api.create(rps("team-b"), resource_placement("old"))["metadata"]["resourceVersion"]
    api.create(rps("team-a"), resource_placement("web"))
    api.create(rps("team-b"), resource_placement("web"))
    with api.watch(rps("team-b"), resourceVersion=start) as replayed, \
            api.watch(rps("team-b")) as fresh:
        api.create(rps("team-a"), resource_placement("db"))
        api.create(rps("team-b"), resource_placement("db"))
        assert _events(replayed.take(2)) == [
            ("ADDED", "ResourcePlacement", "team-b", "web"),
            ("ADDED", "ResourcePlacement", "team-b", "db"),
        ]
        assert _events(fresh.take(3)) == [
            ("ADDED", "ResourcePlacement", "team-b", "old"),
            ("ADDED", "ResourcePlacement", "team-b", "web"),
            ("ADDED", "ResourcePlacement", "team-b", "db"),
        ]


def test_a_watch_path_with_a_namespace_and_a_name(api: Client) -> None:
    _make_namespaces(api, "team-a")
    for ns in ("default", "team-a"):
        api.create(rps(ns), resource_placement("web"))
    path = "/apis/placement.kubernetes-fleet.io/v1beta1/watch/namespaces/team-a/" \
        "resourceplacements/web"
    with api.watch(path) as watch:
        api.patch(f"{rps('default')}/web", {"metadata": {"labels": {"x": "1"}}})
        api.patch(f"{rps('team-a')}/web", {"metadata": {"labels": {"x": "2"}}})
        events = watch.take(2)
    assert _events(events) == [("ADDED", "ResourcePlacement", "team-a", "web"),
                               ("MODIFIED", "ResourcePlacement", "team-a", "web")]
    assert events[1]["object"]["metadata"]["labels"] == {"x": "2"}


def test_an_all_namespace_watch_selects_on_the_namespace_field(api: Client) -> None:
    _make_namespaces(api, "team-a")
    with api.watch(ALL_RPS, fieldSelector="metadata.namespace=team-a") as watch:
        api.create(rps("default"), resource_placement("web"))
        api.create(rps("team-a"), resource_placement("web"))
        assert _events([watch.next()]) == [("ADDED", "ResourcePlacement", "team-a", "web")]


def test_a_table_list_across_namespaces_names_each_rows_namespace(api: Client) -> None:
    _make_namespaces(api, "team-a")
    for ns in ("team-a", "default"):
        api.create(rps(ns), resource_placement("web"))
    table = api.get(ALL_RPS, headers={"Accept": TABLE_ACCEPT}).json()
    assert table["kind"] == "Table"
    assert [(row["cells"][0], row["object"]["metadata"]["namespace"])
            for row in table["rows"]] == [("web", "default"), ("web", "team-a")]


# --- deleting a namespace ---------------------------------------------------------------------


def test_deleting_a_namespace_deletes_its_content_then_itself(api: Client) -> None:
    _make_namespaces(api, "team-a")
    api.create(rps("team-a"), resource_placement("web"))
    api.create(rbs("team-a"), resource_binding("b1"))
    api.create(rps("default"), resource_placement("web"))
    start = api.get(NAMESPACES).json()["metadata"]["resourceVersion"]
    with api.watch(ALL_RPS, resourceVersion=start) as placements:
        response = api.delete(f"{NAMESPACES}/team-a")
        assert response.status_code == 200
        assert response.json()["status"]["phase"] == "Terminating"
        assert _events([placements.next()]) == [
            ("DELETED", "ResourcePlacement", "team-a", "web")]
    assert api.get(f"{NAMESPACES}/team-a").status_code == 404
    assert _keys(api.get(ALL_RPS).json()) == [("default", "web")]
    assert api.get(ALL_RBS).json()["items"] == []
    with api.watch(NAMESPACES, resourceVersion=start) as namespaces:
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in namespaces.take(2)] == [
            ("MODIFIED", "team-a"), ("DELETED", "team-a")]


def test_a_finalizer_holds_the_namespace_terminating_until_it_is_removed(api: Client) -> None:
    _make_namespaces(api, "team-a")
    api.create(rps("team-a"), resource_placement("web"))
    api.create(rbs("team-a"), resource_binding("b1", finalizers=[FINALIZER]))
    assert api.delete(f"{NAMESPACES}/team-a").status_code == 200

    namespace = api.get(f"{NAMESPACES}/team-a").json()
    assert namespace["status"]["phase"] == "Terminating"
    assert namespace["metadata"]["deletionTimestamp"]
    assert api.get(f"{rps('team-a')}/web").status_code == 404
    held = api.get(f"{rbs('team-a')}/b1").json()
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == [FINALIZER]
    # Deleting again changes nothing; updates of the content still work.
    assert api.delete(f"{NAMESPACES}/team-a").json() == namespace
    assert api.patch(f"{rbs('team-a')}/b1", {"metadata": {"labels": {"x": "1"}}}
                     ).status_code == 200

    response = api.patch(f"{rbs('team-a')}/b1", {"metadata": {"finalizers": None}})
    assert response.status_code == 200
    assert api.get(f"{rbs('team-a')}/b1").status_code == 404
    assert api.get(f"{NAMESPACES}/team-a").status_code == 404
    listed = api.get(NAMESPACES).json()["items"]
    assert "team-a" not in [item["metadata"]["name"] for item in listed]
    # The name is free again: a new namespace, empty and Active.
    assert api.create(NAMESPACES, namespace_object("team-a"))["status"]["phase"] == "Active"
    assert api.get(rbs("team-a")).json()["items"] == []


def test_a_namespace_finalizer_holds_it_after_its_content_is_gone(api: Client) -> None:
    body = namespace_object("team-a")
    body["metadata"]["finalizers"] = [FINALIZER]
    api.create(NAMESPACES, body)
    api.delete(f"{NAMESPACES}/team-a")
    assert api.get(f"{NAMESPACES}/team-a").json()["status"]["phase"] == "Terminating"
    api.patch(f"{NAMESPACES}/team-a", [{"op": "remove", "path": "/metadata/finalizers"}],
              JSON_PATCH)
    assert api.get(f"{NAMESPACES}/team-a").status_code == 404


def test_creating_in_a_terminating_namespace_is_forbidden(api: Client) -> None:
    _make_namespaces(api, "team-a")
    api.create(rbs("team-a"), resource_binding("b1", finalizers=[FINALIZER]))
    api.delete(f"{NAMESPACES}/team-a")
    response = api.post(rps("team-a"), resource_placement("web"))
    assert response.status_code == 403
    status = response.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'resourceplacements.placement.kubernetes-fleet.io "web" is forbidden: '
        + TERMINATING_MESSAGE.format("team-a"))
    assert status["details"]["causes"] == [{
        "reason": "NamespaceTerminating", "message": "namespace team-a is being terminated",
        "field": "metadata.namespace"}]
    applied = api.patch(f"{rps('team-a')}/web?fieldManager=test", resource_placement("web"),
                        "application/apply-patch+yaml")
    assert applied.status_code == 403
    assert api.get(f"{rps('team-a')}/web").status_code == 404


# --- clients and durability -------------------------------------------------------------------


def test_the_official_kubernetes_client_reads_and_writes_namespaces(
    api: Client, hub_kubeconfig: Path
) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    client = kubernetes.config.new_client_from_config(config_file=str(hub_kubeconfig))
    with client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace({"metadata": {"name": "team-a"}})
        assert [ns.metadata.name for ns in core.list_namespace().items] == [
            "default", "fleet-system", "kube-public", "kube-system", "team-a"]
        custom = kubernetes.client.CustomObjectsApi(client)
        custom.create_namespaced_custom_object(
            "placement.kubernetes-fleet.io", "v1beta1", "team-a", "resourceplacements",
            resource_placement("web"))
        across = custom.list_cluster_custom_object(
            "placement.kubernetes-fleet.io", "v1beta1", "resourceplacements")
        with pytest.raises(kubernetes.client.ApiException) as missing:
            custom.create_namespaced_custom_object(
                "placement.kubernetes-fleet.io", "v1beta1", "nope", "resourceplacements",
                resource_placement("web"))
    assert [item["metadata"]["namespace"] for item in across["items"]] == ["team-a"]
    assert missing.value.status == 404


def test_the_hub_client_works_across_namespaces(api: Client, hub_kubeconfig: Path) -> None:
    _make_namespaces(api, "team-a")
    for ns in ("default", "team-a"):
        api.create(rbs(ns), resource_binding("b1", labels={"crp": "web"}))
    client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=(2.0, 5.0))
    try:
        across = client.list(ResourceBinding, {"crp": "web"})
        assert [(b.metadata.namespace, b.name) for b in across.items] == [
            ("default", "b1"), ("team-a", "b1")]
        one = client.get(ResourceBinding, "b1", namespace="team-a")
        assert one.metadata.namespace == "team-a"
        client.delete_collection(ResourceBinding, "", namespace="team-a")
        assert [b.metadata.namespace for b in client.list(ResourceBinding).items] == ["default"]
        assert client.list(ResourcePlacement, namespace="team-a").items == []

        start = client.list(ResourcePlacement).resource_version
        api.create(rps("team-a"), resource_placement("web"))
        api.create(rps("default"), resource_placement("web"))
        events = client.watch(ResourcePlacement, start, timeout_seconds=5)
        seen = [next(events), next(events)]
        events.close()
        assert [(e.type, e.object.metadata.namespace, e.object.name) for e in seen
                if isinstance(e, WatchEvent)] == [
            ("ADDED", "team-a", "web"), ("ADDED", "default", "web")]
    finally:
        client.close()


def test_namespaces_and_their_content_survive_a_restart(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    data = tmp_path / "hub"
    first = Client(devhub_factory(data_dir=data))
    _make_namespaces(first, "team-a", "team-b")
    web_a = first.create(rps("team-a"), resource_placement("web"))
    web_default = first.create(rps("default"), resource_placement("web"))
    first.create(rbs("team-b"), resource_binding("b1", finalizers=[FINALIZER]))
    first.delete(f"{NAMESPACES}/team-b")
    first.hub.stop()

    second = Client(devhub_factory(data_dir=data))
    assert [ns["metadata"]["name"] for ns in second.get(NAMESPACES).json()["items"]] == [
        "default", "fleet-system", "kube-public", "kube-system", "team-a", "team-b"]
    assert second.get(f"{rps('team-a')}/web").json() == web_a
    assert second.get(f"{rps('default')}/web").json() == web_default
    assert _keys(second.get(ALL_RPS).json()) == [("default", "web"), ("team-a", "web")]
    assert second.get(f"{NAMESPACES}/team-b").json()["status"]["phase"] == "Terminating"
    assert second.post(rps("team-b"), resource_placement("web")).status_code == 403
    # The restored index still ties the held binding to its namespace: releasing it ends both.
    second.patch(f"{rbs('team-b')}/b1", {"metadata": {"finalizers": None}})
    assert second.get(f"{NAMESPACES}/team-b").status_code == 404
    assert second.get(f"{rps('team-a')}/web").status_code == 200
