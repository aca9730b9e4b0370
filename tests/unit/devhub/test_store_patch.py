"""devhub's Store patching a custom resource: the stored object is parsed once per patch, and
what the patch reads from it (the old object, its labels for the index) stays right."""

from __future__ import annotations

from typing import Any

import pytest

from devhub import store as store_module
from devhub.resources import load_resources
from devhub.selectors import FieldSelector, parse_label_selector
from devhub.store import MERGE_PATCH, Entry, Store

PLACEMENTS = ("placement.kubernetes-fleet.io", "clusterresourceplacements")


def new_store() -> tuple[Store, Any]:
    resources = load_resources()
    return Store(resources.values()), resources[PLACEMENTS]


def crp(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "resourceSelectors": [],
            "policy": {"placementType": "PickN", "numberOfClusters": 1},
        },
    }


def names(store: Store, res: Any, selector: str) -> list[str]:
    found = store.list_entries(res, parse_label_selector(selector), FieldSelector())
    return [entry.obj["metadata"]["name"] for entry in found.entries]


def test_a_merge_patch_parses_the_stored_object_once(monkeypatch: pytest.MonkeyPatch) -> None:
    store, res = new_store()
    store.create(res, crp("web", env="prod"))
    reads = 0
    parse = vars(Entry)["obj"].fget

    def counted(entry: Entry) -> dict[str, Any]:
        nonlocal reads
        reads += 1
        parsed: dict[str, Any] = parse(entry)
        return parsed

    monkeypatch.setattr(store_module.Entry, "obj", property(counted))
    store.patch(res, "web", MERGE_PATCH, {"spec": {"policy": {"numberOfClusters": 2}}})
    assert reads == 1


def test_a_merge_patch_moves_the_object_in_the_label_index_and_keeps_what_it_does_not_name() -> (
    None
):
    store, res = new_store()
    store.create(res, crp("web", env="prod", team="a"))
    entry, _, _ = store.patch(res, "web", MERGE_PATCH, {"metadata": {"labels": {"env": "dev"}}})
    assert entry.obj["metadata"]["labels"] == {"env": "dev", "team": "a"}
    assert entry.obj["spec"]["policy"]["numberOfClusters"] == 1
    assert names(store, res, "env=prod") == []
    assert names(store, res, "env=dev") == ["web"]
    assert names(store, res, "team=a") == ["web"]
    entry, _, _ = store.patch(
        res, "web", MERGE_PATCH, {"spec": {"policy": {"numberOfClusters": 3}}}
    )
    assert entry.obj["metadata"]["generation"] == 2
    assert entry.obj["metadata"]["resourceVersion"] == str(entry.rv)
