"""Server-side printing: `kubectl get` asks for a meta.k8s.io/v1 Table built from the CRD's
printer columns."""

from __future__ import annotations

from tests.integration.devhub.devhub_helpers import (
    BINDINGS,
    CLUSTERS,
    PLACEMENTS,
    TABLE_ACCEPT,
    Client,
    binding,
    cluster,
    placement,
)


def _table(api: Client, path: str, **params: str) -> dict:  # type: ignore[type-arg]
    response = api.get(path, headers={"Accept": TABLE_ACCEPT}, params=params)
    assert response.status_code == 200, response.text
    body: dict = response.json()  # type: ignore[type-arg]
    assert (body["kind"], body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    return body


def test_placement_table_has_the_printer_columns(api: Client) -> None:
    api.create(PLACEMENTS, placement("web"))
    api.patch(f"{PLACEMENTS}/web/status", {"status": {"conditions": [{
        "type": "ClusterResourcePlacementScheduled", "status": "True", "observedGeneration": 1,
        "reason": "Scheduled", "message": ""}]}})
    table = _table(api, PLACEMENTS)
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Gen", "Type", "Scheduled", "Scheduled-Gen", "Age"]
    assert table["rows"][0]["cells"][:5] == ["web", "1", "PickN", "True", "1"]
    assert table["rows"][0]["cells"][5].endswith("s")
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_missing_values_are_empty_cells(api: Client) -> None:
    api.create(BINDINGS, binding("b1", target="member-9"))
    api.create(CLUSTERS, cluster("m1"))
    assert _table(api, BINDINGS)["rows"][0]["cells"][:4] == ["b1", "member-9", "Scheduled",
                                                             "web-0"]
    assert _table(api, CLUSTERS)["rows"][0]["cells"][:3] == ["m1", None, None]


def test_a_single_object_can_be_a_table(api: Client) -> None:
    api.create(CLUSTERS, cluster("m1"))
    table = _table(api, f"{CLUSTERS}/m1", includeObject="Object")
    assert len(table["rows"]) == 1
    assert table["rows"][0]["object"]["kind"] == "MemberCluster"


def test_paged_tables_carry_the_continue_token(api: Client) -> None:
    for name in ("a", "b", "c"):
        api.create(CLUSTERS, cluster(name))
    table = _table(api, CLUSTERS, limit="2")
    assert [row["cells"][0] for row in table["rows"]] == ["a", "b"]
    assert table["metadata"]["continue"]


def test_plain_json_is_served_when_no_table_is_asked_for(api: Client) -> None:
    api.create(CLUSTERS, cluster("m1"))
    assert api.get(CLUSTERS, headers={"Accept": "application/json"}).json()["kind"] == \
        "MemberClusterList"
