"""Placement kinds and keys: which trio of kinds a placement is made of, and its queue key."""

from __future__ import annotations

import pytest

from hub import names
from hub.kinds import CLUSTER_SCOPED, NAMESPACED, kinds_for, placement_key, split_key
from hub.types import ClusterResourceBinding, ResourceBinding, ResourcePlacement


def test_a_namespace_picks_the_namespaced_kinds() -> None:
    assert kinds_for("app") is NAMESPACED
    assert kinds_for(None) is kinds_for("") is CLUSTER_SCOPED
    assert NAMESPACED.placement is ResourcePlacement and NAMESPACED.binding is ResourceBinding
    assert CLUSTER_SCOPED.binding is ClusterResourceBinding
    assert NAMESPACED.scheduled_condition == names.RP_SCHEDULED_CONDITION
    assert CLUSTER_SCOPED.scheduled_condition == names.PLACEMENT_SCHEDULED_CONDITION
    assert NAMESPACED.namespaced and not CLUSTER_SCOPED.namespaced


@pytest.mark.parametrize(
    ("namespace", "name", "key"), [(None, "web", "web"), ("app", "web", "app/web")]
)
def test_keys_round_trip(namespace: str | None, name: str, key: str) -> None:
    assert placement_key(namespace, name) == key
    assert split_key(key) == (namespace, name)


@pytest.mark.parametrize("key", ["/web", "app/", "a/b/c"])
def test_malformed_keys_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="not a placement key"):
        split_key(key)


def test_collection_paths() -> None:
    assert (
        ResourceBinding.api_path() == "/apis/placement.kubernetes-fleet.io/v1beta1/resourcebindings"
    )
    assert (
        ResourceBinding.api_path("app")
        == "/apis/placement.kubernetes-fleet.io/v1beta1/namespaces/app/resourcebindings"
    )
    with pytest.raises(ValueError, match="cluster-scoped"):
        ClusterResourceBinding.api_path("app")
