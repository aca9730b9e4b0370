"""List: label and field selectors, pagination with a consistent snapshot, resourceVersion."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests

from devhub import DevHub
from tests.integration.devhub.devhub_helpers import CLUSTERS, PLACEMENTS, Client, cluster, placement

FLEET = {
    "a": {"env": "prod", "region": "east"},
    "b": {"env": "prod", "region": "west"},
    "c": {"env": "dev", "region": "east"},
    "d": {"env": "staging"},
    "e": {},
}


@pytest.fixture
def fleet(api: Client) -> Client:
    for name, labels in FLEET.items():
        api.create(CLUSTERS, cluster(name, labels=labels))
    return api


def _names(response: requests.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [item["metadata"]["name"] for item in response.json()["items"]]


@pytest.mark.parametrize(("selector", "expected"), [
    pytest.param("env=prod", ["a", "b"], id="equals"),
    pytest.param("env==prod", ["a", "b"], id="double-equals"),
    pytest.param("env!=prod", ["c", "d", "e"], id="not-equals-includes-missing"),
    pytest.param("env in (prod,dev)", ["a", "b", "c"], id="in"),
    pytest.param("env notin (prod,dev)", ["d", "e"], id="notin-includes-missing"),
    pytest.param("region", ["a", "b", "c"], id="exists"),
    pytest.param("!region", ["d", "e"], id="does-not-exist"),
    pytest.param("env=prod,region=east", ["a"], id="and"),
    pytest.param(" env = prod , region in ( east ) ", ["a"], id="spaces"),
    pytest.param("", ["a", "b", "c", "d", "e"], id="empty"),
])
def test_label_selectors(fleet: Client, selector: str, expected: list[str]) -> None:
    assert _names(fleet.get(CLUSTERS, params={"labelSelector": selector})) == expected


@pytest.mark.parametrize("selector", [
    "env=",  # legal: the empty value
])
def test_label_selector_empty_value_matches_nothing_here(fleet: Client, selector: str) -> None:
    assert _names(fleet.get(CLUSTERS, params={"labelSelector": selector})) == []


@pytest.mark.parametrize("selector", [
    "env in (prod", "env in prod", "env notin ()", "=prod", "env===prod", "env=prod,",
    "env=pr od", "env=a/b", "bad key=1", "env in (a,,", "!", "env>abc", "-bad=1",
    "x" * 64 + "=1",
])
def test_malformed_label_selectors_are_bad_requests(api: Client, selector: str) -> None:
    response = api.get(CLUSTERS, params={"labelSelector": selector})
    assert response.status_code == 400, selector
    body = response.json()
    assert body["reason"] == "BadRequest"
    assert "labelSelector" in body["message"]


@pytest.mark.parametrize(("selector", "expected"), [
    pytest.param("metadata.name=b", ["b"], id="equals"),
    pytest.param("metadata.name==c", ["c"], id="double-equals"),
    pytest.param("metadata.name!=a", ["b", "c", "d", "e"], id="not-equals"),
    pytest.param("metadata.name=zzz", [], id="no-match"),
    pytest.param("metadata.name!=a,metadata.name!=b", ["c", "d", "e"], id="and"),
])
def test_field_selectors_on_name(fleet: Client, selector: str, expected: list[str]) -> None:
    assert _names(fleet.get(CLUSTERS, params={"fieldSelector": selector})) == expected


@pytest.mark.parametrize("selector", ["spec.taints=x", "metadata.name", "status.phase!=Ready"])
def test_unsupported_field_selectors_are_bad_requests(api: Client, selector: str) -> None:
    response = api.get(CLUSTERS, params={"fieldSelector": selector})
    assert response.status_code == 400
    assert response.json()["message"]


def test_list_reports_the_resource_version_of_the_last_write(api: Client) -> None:
    api.create(CLUSTERS, cluster("a"))
    last = api.create(PLACEMENTS, placement("web"))
    body = api.get(CLUSTERS).json()
    assert body["kind"] == "MemberClusterList"
    assert body["apiVersion"] == "cluster.kubernetes-fleet.io/v1beta1"
    assert body["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]


def test_pages_follow_continue_tokens_in_name_order(fleet: Client) -> None:
    first = fleet.get(CLUSTERS, params={"limit": 2}).json()
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    second = fleet.get(CLUSTERS, params={"limit": 2, "continue": token}).json()
    assert [i["metadata"]["name"] for i in second["items"]] == ["c", "d"]
    third = fleet.get(CLUSTERS, params={"limit": 2,
                                        "continue": second["metadata"]["continue"]}).json()
    assert [i["metadata"]["name"] for i in third["items"]] == ["e"]
    assert "continue" not in third["metadata"]


def test_pages_are_a_consistent_snapshot(fleet: Client) -> None:
    first = fleet.get(CLUSTERS, params={"limit": 2}).json()
    fleet.create(CLUSTERS, cluster("bb"))
    fleet.delete(f"{CLUSTERS}/d")
    fleet.patch(f"{CLUSTERS}/c", {"metadata": {"labels": {"changed": "yes"}}})
    rest = fleet.get(CLUSTERS, params={"continue": first["metadata"]["continue"]}).json()
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c", "d", "e"]
    assert "changed" not in rest["items"][0]["metadata"].get("labels", {})
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_pages_with_a_label_selector_fill_up_to_the_limit(fleet: Client) -> None:
    page = fleet.get(CLUSTERS, params={"limit": 1, "labelSelector": "region=east"}).json()
    assert [i["metadata"]["name"] for i in page["items"]] == ["a"]
    rest = fleet.get(CLUSTERS, params={"labelSelector": "region=east",
                                       "continue": page["metadata"]["continue"]}).json()
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c"]


def test_an_expired_continue_token_is_gone(devhub_factory: Callable[..., DevHub]) -> None:
    hub = devhub_factory(watch_window=3)
    client = Client(hub)
    for name in "abc":
        client.create(CLUSTERS, cluster(name))
    token = client.get(CLUSTERS, params={"limit": 1}).json()["metadata"]["continue"]
    for name in "defg":  # move the window (etcd's compaction, here) past the snapshot
        client.create(CLUSTERS, cluster(name))
    response = client.get(CLUSTERS, params={"limit": 1, "continue": token})
    assert response.status_code == 410
    assert response.json()["reason"] == "Expired"


@pytest.mark.parametrize("token", ["garbage!", "eyJ4IjoxfQ", ""])
def test_a_forged_continue_token_is_a_bad_request(fleet: Client, token: str) -> None:
    response = fleet.get(CLUSTERS, params={"continue": token, "limit": 1})
    if token == "":
        assert response.status_code == 200  # empty means "from the start"
    else:
        assert response.status_code == 400
        assert "continue" in response.json()["message"]


def test_a_non_integer_limit_is_a_bad_request(api: Client) -> None:
    assert api.get(CLUSTERS, params={"limit": "ten"}).status_code == 400


@pytest.mark.parametrize(("params", "code"), [
    pytest.param({"resourceVersion": "0"}, 200, id="any"),
    pytest.param({"resourceVersion": "abc"}, 400, id="not-a-number"),
    pytest.param({"resourceVersion": "999999999"}, 410, id="from-the-future"),
    pytest.param({"resourceVersionMatch": "Exact"}, 400, id="match-without-version"),
    pytest.param({"resourceVersion": "1", "resourceVersionMatch": "Sometime"}, 400,
                 id="unknown-match"),
    pytest.param({"resourceVersion": "1", "resourceVersionMatch": "Exact"}, 410,
                 id="exact-old-version"),
])
def test_list_resource_version_parameters(
    fleet: Client, params: dict[str, str], code: int
) -> None:
    response = fleet.get(CLUSTERS, params=params)
    assert response.status_code == code, response.text
    if code != 200:
        assert response.json()["kind"] == "Status"


def test_list_at_the_exact_latest_version(fleet: Client) -> None:
    rv = fleet.get(CLUSTERS).json()["metadata"]["resourceVersion"]
    response = fleet.get(CLUSTERS, params={"resourceVersion": rv,
                                           "resourceVersionMatch": "Exact"})
    assert response.status_code == 200
    assert len(response.json()["items"]) == len(FLEET)


def test_label_selected_lists_follow_relabels_and_deletes(fleet: Client) -> None:
    """Equality selectors are answered from a label index: it must track every change."""

    def selected(selector: str) -> list[str]:
        return _names(fleet.get(CLUSTERS, params={"labelSelector": selector}))

    assert selected("env=prod") == ["a", "b"]
    patched = fleet.patch(f"{CLUSTERS}/a", {"metadata": {"labels": {"env": "dev"}}})
    assert patched.status_code == 200, patched.text
    assert selected("env=prod") == ["b"]
    assert selected("env=dev") == ["a", "c"]
    assert selected("env=dev,region=east") == ["a", "c"]
    removed = fleet.patch(f"{CLUSTERS}/c", {"metadata": {"labels": {"env": None}}})
    assert removed.status_code == 200, removed.text
    assert selected("env in (dev)") == ["a"]
    assert selected("!env") == ["c", "e"]
    assert fleet.delete(f"{CLUSTERS}/a").status_code == 200
    assert selected("env=dev") == []
    fleet.create(CLUSTERS, cluster("a", labels={"env": "prod"}))
    assert selected("env=prod") == ["a", "b"]
