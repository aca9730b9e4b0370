"""KEP-5313's PlacementDecision on devhub, as kube-apiserver serves it under its CRD
(docs/decisions.md): namespaced, data only (no spec, no status subresource: a write of the
object writes its status too), at most 100 decisions a slice, a ClusterProfile name required in
each, listed by the labels that tie a placement's slices together; fleet-system there from the
start, as on a KubeFleet hub, and deletable."""

from __future__ import annotations

from typing import Any

from hub import names
from tests.integration.devhub.devhub_helpers import NAMESPACES, TABLE_ACCEPT, Client

GROUP_VERSION = "multicluster.x-k8s.io/v1alpha1"
ALL = f"/apis/{GROUP_VERSION}/placementdecisions"


def in_namespace(namespace: str) -> str:
    return f"/apis/{GROUP_VERSION}/namespaces/{namespace}/placementdecisions"


def decision(
    name: str, clusters: list[str], *, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "PlacementDecision",
        "metadata": {"name": name, "labels": labels or {}},
        "schedulerName": "fleet-scheduler",
        "decisions": [
            {"clusterProfileRef": {"name": c, "namespace": "fleet-system"}, "reason": "picked"}
            for c in clusters
        ],
        "status": {"decisions": [{"clusterName": c, "reason": "picked"} for c in clusters]},
    }


def test_fleet_system_exists_from_the_start_and_can_be_deleted(api: Client) -> None:
    assert api.get(f"{NAMESPACES}/fleet-system").json()["status"] == {"phase": "Active"}
    assert api.delete(f"{NAMESPACES}/fleet-system").status_code == 200
    assert api.get(f"{NAMESPACES}/fleet-system").status_code == 404


def test_a_slice_is_stored_whole_status_included(api: Client) -> None:
    created = api.create(in_namespace("fleet-system"), decision("crp-web-0", ["m-1", "m-2"]))
    assert created["metadata"]["namespace"] == "fleet-system"
    assert [d["clusterProfileRef"]["name"] for d in created["decisions"]] == ["m-1", "m-2"]
    # No status subresource: the status written with the object is kept, and a replace of the
    # object replaces it.
    assert created["status"]["decisions"][1] == {"clusterName": "m-2", "reason": "picked"}
    replaced = decision("crp-web-0", ["m-3"])
    replaced["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    response = api.put(f"{in_namespace('fleet-system')}/crp-web-0", replaced)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == {"decisions": [{"clusterName": "m-3", "reason": "picked"}]}
    assert api.get(f"{in_namespace('fleet-system')}/crp-web-0/status").status_code == 404


def test_more_than_a_hundred_decisions_are_refused(api: Client) -> None:
    body = decision("crp-big-0", [f"m-{i}" for i in range(101)])
    response = api.post(in_namespace("fleet-system"), body)
    assert response.status_code == 422, response.text
    assert "decisions" in response.json()["message"]
    assert api.create(in_namespace("fleet-system"), decision("crp-big-0", ["m-0"] * 100))


def test_decisions_and_a_profile_name_are_required(api: Client) -> None:
    without = decision("crp-none-0", [])
    del without["decisions"]
    assert api.post(in_namespace("fleet-system"), without).status_code == 422
    nameless = decision("crp-anon-0", ["m-1"])
    del nameless["decisions"][0]["clusterProfileRef"]["name"]
    response = api.post(in_namespace("fleet-system"), nameless)
    assert response.status_code == 422
    assert "clusterProfileRef.name" in response.json()["message"]
    # An empty slice is a decision too: placed nowhere.
    assert api.create(in_namespace("fleet-system"), decision("crp-empty-0", []))["decisions"] == []


def test_a_placements_slices_are_found_by_their_labels_in_every_namespace(api: Client) -> None:
    api.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}})
    web = {names.DECISION_KEY_LABEL: "web", names.DECISION_PLACEMENT_KIND_LABEL: "X"}
    api.create(in_namespace("fleet-system"), decision("crp-web-0", ["m-1"], labels=web))
    api.create(in_namespace("fleet-system"), decision("crp-web-1", ["m-2"], labels=web))
    api.create(in_namespace("fleet-system"), decision("crp-db-0", ["m-1"]))
    api.create(in_namespace("app"), decision("rp-web-0", ["m-3"], labels=web))
    selector = f"{names.DECISION_KEY_LABEL}=web"
    there = api.get(in_namespace("fleet-system"), params={"labelSelector": selector}).json()
    assert sorted(i["metadata"]["name"] for i in there["items"]) == ["crp-web-0", "crp-web-1"]
    everywhere = api.get(ALL, params={"labelSelector": selector}).json()
    assert sorted(
        (i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]
    ) == [("app", "rp-web-0"), ("fleet-system", "crp-web-0"), ("fleet-system", "crp-web-1")]


def test_kubectl_get_shows_the_scheduler(api: Client) -> None:
    api.create(in_namespace("fleet-system"), decision("crp-web-0", ["m-1", "m-2"]))
    table = api.get(ALL, headers={"Accept": TABLE_ACCEPT}).json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Scheduler", "Age"]
    (row,) = table["rows"]
    assert row["cells"][:2] == ["crp-web-0", "fleet-scheduler"]
