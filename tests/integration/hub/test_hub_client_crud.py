"""HubClient reads and writes against a real devhub over HTTP: every method, every refusal."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from hub import names
from hub.client import HubClient
from hub.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    HubAPIError,
    InvalidObjectError,
    NotFoundError,
)
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourceBindingSpec,
    MemberCluster,
    ObjectMeta,
)
from tests.integration.hub.hub_helpers import cluster, tainted

STAMP = "2024-05-01T10:00:00Z"


def binding(name: str, cluster_name: str = "member-1") -> ClusterResourceBinding:
    return ClusterResourceBinding(
        metadata=ObjectMeta(name=name, labels={names.PARENT_PLACEMENT_LABEL: "crp"}),
        spec=ClusterResourceBindingSpec(
            state=names.STATE_SCHEDULED,
            scheduling_policy_snapshot_name="crp-0",
            target_cluster=cluster_name,
            cluster_decision=ClusterDecision(
                cluster_name=cluster_name, selected=True, reason="picked"
            ),
        ),
    )


# --- create and get -------------------------------------------------------------------------


def test_create_returns_the_stored_object(hub: HubClient) -> None:
    created = hub.create(cluster("member-1", labels={"env": "prod"}))
    assert created.metadata.uid
    assert created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.labels == {"env": "prod"}
    assert hub.get(MemberCluster, "member-1") == created


def test_create_keeps_the_required_empty_resource_snapshot_name(hub: HubClient) -> None:
    created = hub.create(binding("crp-member-1"))
    assert created.spec.resource_snapshot_name == ""
    assert created.spec.cluster_decision.cluster_name == "member-1"


def test_create_of_a_taken_name_is_already_exists(hub: HubClient) -> None:
    hub.create(cluster("member-1"))
    with pytest.raises(AlreadyExistsError) as caught:
        hub.create(cluster("member-1"))
    assert (caught.value.status, caught.value.reason) == (409, "AlreadyExists")


def test_get_of_a_missing_object_is_not_found(hub: HubClient) -> None:
    with pytest.raises(NotFoundError) as caught:
        hub.get(MemberCluster, "nowhere")
    assert "nowhere" in caught.value.message


def bogus_state_binding() -> ClusterResourceBinding:
    good = binding("crp-member-1")
    return good.model_copy(update={"spec": good.spec.model_copy(update={"state": "Bogus"})})


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param(
            MemberCluster.from_wire(
                {"metadata": {"name": "bad"}, "spec": {"taints": [{"key": "k", "effect": "Bogus"}]}}
            ),
            "spec.taints[0].effect",
            id="cluster-taint-effect",
        ),
        pytest.param(bogus_state_binding(), "spec.state", id="binding-state"),
    ],
)
def test_an_object_breaking_the_schema_is_invalid_with_field_causes(
    hub: HubClient, obj: MemberCluster | ClusterResourceBinding, field: str
) -> None:
    with pytest.raises(InvalidObjectError) as caught:
        hub.create(obj)
    assert caught.value.status == 422
    assert field in [cause.field for cause in caught.value.causes]
    with pytest.raises(NotFoundError):
        hub.get(type(obj), obj.name)  # never stored


def test_a_name_that_is_not_dns_1123_is_invalid(hub: HubClient) -> None:
    with pytest.raises(InvalidObjectError) as caught:
        hub.create(cluster("Not_A_Name"))
    assert "metadata.name" in str(caught.value)


# --- list ------------------------------------------------------------------------------------


def test_list_returns_every_object_and_a_resource_version(hub: HubClient) -> None:
    for name in ("b", "a", "c"):
        hub.create(cluster(name))
    listing = hub.list(MemberCluster)
    assert sorted(obj.name for obj in listing.items) == ["a", "b", "c"]
    assert int(listing.resource_version) >= max(
        int(obj.metadata.resource_version or 0) for obj in listing.items
    )


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param({"env": "prod"}, ["a", "c"], id="mapping"),
        pytest.param("env=prod,zone=1", ["a"], id="string"),
        pytest.param("env!=prod", ["b"], id="not-equal"),
        pytest.param("zone", ["a", "b"], id="exists"),
        pytest.param("env in (dev)", ["b"], id="set"),
    ],
)
def test_list_filters_by_label_selector(
    hub: HubClient, selector: str | dict[str, str], expected: list[str]
) -> None:
    hub.create(cluster("a", labels={"env": "prod", "zone": "1"}))
    hub.create(cluster("b", labels={"env": "dev", "zone": "2"}))
    hub.create(cluster("c", labels={"env": "prod"}))
    listing = hub.list(MemberCluster, label_selector=selector)
    assert sorted(obj.name for obj in listing) == expected


def test_listed_objects_equal_the_objects_read_one_by_one(hub: HubClient) -> None:
    hub.create(cluster("a", labels={"env": "prod"}, identity={"kind": "ServiceAccount"}))
    written = hub.create(cluster("b"))
    hub.update_status(
        MemberCluster.from_wire(
            {
                **written.to_wire(),
                "status": {
                    "conditions": [
                        {"type": "Joined", "status": "True", "lastTransitionTime": STAMP}
                    ],
                    "agentField": [1, 2],
                },
            }
        )
    )
    listed = {obj.name: obj for obj in hub.list(MemberCluster)}
    assert listed == {name: hub.get(MemberCluster, name) for name in ("a", "b")}
    assert listed["b"].status.model_extra == {"agentField": [1, 2]}


class StampedCluster(MemberCluster):
    """A kind whose from_wire does more than validate: lists must still go through it."""

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> StampedCluster:
        data = {**data, "metadata": {**data["metadata"], "annotations": {"stamped": "yes"}}}
        return cls.model_validate(data)


def test_list_honours_a_kind_that_overrides_from_wire(hub: HubClient) -> None:
    hub.create(cluster("a"))
    (obj,) = hub.list(StampedCluster).items
    assert isinstance(obj, StampedCluster)
    assert obj.metadata.annotations == {"stamped": "yes"}


@pytest.mark.parametrize("enabled", [True, False])
def test_list_leaves_the_garbage_collector_as_it_found_it(hub: HubClient, enabled: bool) -> None:
    hub.create(cluster("a"))
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        hub.list(MemberCluster)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_list_filters_by_metadata_name(hub: HubClient) -> None:
    hub.create(cluster("a"))
    hub.create(cluster("b"))
    listing = hub.list(MemberCluster, field_selector={"metadata.name": "b"})
    assert [obj.name for obj in listing] == ["b"]


def test_a_malformed_selector_is_a_bad_request(hub: HubClient) -> None:
    with pytest.raises(BadRequestError):
        hub.list(MemberCluster, label_selector="env in (prod")


def test_list_follows_continue_pages(hub: HubClient, devhub: Any) -> None:
    names_created = [f"member-{i:02d}" for i in range(25)]
    for name in names_created:
        hub.create(cluster(name))
    devhub.stats.clear()
    listing = hub.list(MemberCluster, limit=10)
    assert sorted(obj.name for obj in listing) == names_created
    assert devhub.stats.count("list", "memberclusters") == 3
    assert listing.resource_version


# --- update, status, patch --------------------------------------------------------------------


def test_update_writes_the_change_and_moves_the_resource_version(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    updated = hub.update(tainted(read, "gpu"))
    assert [t.key for t in updated.spec.taints] == ["gpu"]
    assert int(updated.metadata.resource_version or 0) > int(read.metadata.resource_version or 0)
    assert updated.metadata.generation == (read.metadata.generation or 0) + 1


def test_update_from_a_stale_read_is_a_conflict(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    hub.update(tainted(read, "first"))
    with pytest.raises(ConflictError) as caught:
        hub.update(tainted(read, "second"))
    assert caught.value.status == 409
    assert [t.key for t in hub.get(MemberCluster, "member-1").spec.taints] == ["first"]


def test_update_without_a_resource_version_is_refused_before_sending(hub: HubClient) -> None:
    with pytest.raises(ValueError, match="resourceVersion"):
        hub.update(cluster("member-1"))


def test_unknown_fields_survive_get_modify_update(hub: HubClient) -> None:
    identity = {"kind": "ServiceAccount", "name": "fleet-member-agent", "namespace": "fleet"}
    hub.create(cluster("member-1", identity=identity))
    read = hub.get(MemberCluster, "member-1")
    assert read.spec.model_extra == {"identity": identity}
    hub.update(tainted(read, "gpu"))
    again = hub.get(MemberCluster, "member-1")
    assert again.spec.model_extra == {"identity": identity}
    assert [t.key for t in again.spec.taints] == ["gpu"]


def test_unknown_status_fields_survive_update_status(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    status = read.status.model_copy(update={"namespaces": {"a": "b"}})
    written = hub.update_status(
        MemberCluster.from_wire(
            {**read.to_wire(), "status": {**status.to_wire(), "otherAgentField": {"x": 1}}}
        )
    )
    assert written.status.namespaces == {"a": "b"}
    relabelled = written.model_copy(
        update={"status": written.status.model_copy(update={"namespaces": {"c": "d"}})}
    )
    hub.update_status(relabelled)
    again = hub.get(MemberCluster, "member-1")
    assert again.status.namespaces == {"c": "d"}
    assert again.status.model_extra == {"otherAgentField": {"x": 1}}


def test_update_status_changes_only_status(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    changed = tainted(read, "gpu").model_copy(
        update={"status": read.status.model_copy(update={"namespaces": {"a": "b"}})}
    )
    written = hub.update_status(changed)
    assert written.status.namespaces == {"a": "b"}
    assert written.spec.taints == []


def test_merge_patch_changes_only_the_named_fields(hub: HubClient) -> None:
    hub.create(cluster("member-1", labels={"keep": "me", "drop": "me"}, identity={"a": 1}))
    patched = hub.patch(
        MemberCluster, "member-1", {"metadata": {"labels": {"drop": None, "new": "yes"}}}
    )
    assert patched.metadata.labels == {"keep": "me", "new": "yes"}
    assert patched.spec.model_extra == {"identity": {"a": 1}}


def test_merge_patch_with_the_read_resource_version_applies(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    patched = hub.patch(
        MemberCluster,
        "member-1",
        {"metadata": {"finalizers": ["x/y"]}},
        resource_version=read.metadata.resource_version,
    )
    assert patched.metadata.finalizers == ["x/y"]


def test_merge_patch_with_a_stale_resource_version_is_a_conflict(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    hub.patch(MemberCluster, "member-1", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ConflictError):
        hub.patch(
            MemberCluster,
            "member-1",
            {"metadata": {"labels": {"a": "2"}}},
            resource_version=read.metadata.resource_version,
        )
    assert hub.get(MemberCluster, "member-1").metadata.labels == {"a": "1"}


def test_merge_patch_of_the_status_subresource(hub: HubClient) -> None:
    hub.create(cluster("member-1"))
    patched = hub.patch(
        MemberCluster, "member-1", {"status": {"namespaces": {"a": "b"}}}, subresource="status"
    )
    assert patched.status.namespaces == {"a": "b"}


def test_merge_patch_of_a_missing_object_is_not_found(hub: HubClient) -> None:
    with pytest.raises(NotFoundError):
        hub.patch(MemberCluster, "nowhere", {"metadata": {"labels": {"a": "b"}}})


def test_json_patch_applies_operations_in_order(hub: HubClient) -> None:
    hub.create(cluster("member-1", labels={"a": "1"}))
    patched = hub.json_patch(
        MemberCluster,
        "member-1",
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
            {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]},
        ],
    )
    assert patched.metadata.labels == {"a": "2"}
    assert [t.key for t in patched.spec.taints] == ["k"]


def test_json_patch_with_a_failing_test_changes_nothing(hub: HubClient) -> None:
    hub.create(cluster("member-1", labels={"a": "1"}))
    with pytest.raises(HubAPIError):
        hub.json_patch(
            MemberCluster,
            "member-1",
            [
                {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
                {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            ],
        )
    assert hub.get(MemberCluster, "member-1").metadata.labels == {"a": "1"}


def test_a_patch_that_breaks_the_schema_is_invalid(hub: HubClient) -> None:
    hub.create(cluster("member-1"))
    with pytest.raises(InvalidObjectError) as caught:
        hub.patch(MemberCluster, "member-1", {"spec": {"heartbeatPeriodSeconds": 100000}})
    assert "spec.heartbeatPeriodSeconds" in [cause.field for cause in caught.value.causes]


# --- delete ----------------------------------------------------------------------------------


def test_delete_without_finalizers_removes_the_object(hub: HubClient) -> None:
    hub.create(cluster("member-1"))
    assert hub.delete(MemberCluster, "member-1") is None
    with pytest.raises(NotFoundError):
        hub.get(MemberCluster, "member-1")


def test_delete_with_a_finalizer_returns_the_object_until_it_is_released(hub: HubClient) -> None:
    hub.create(
        MemberCluster.from_wire({"metadata": {"name": "member-1", "finalizers": ["x/hold"]}})
    )
    held = hub.delete(MemberCluster, "member-1")
    assert held is not None
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == ["x/hold"]
    hub.patch(MemberCluster, "member-1", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFoundError):
        hub.get(MemberCluster, "member-1")


def test_delete_of_a_missing_object_is_not_found(hub: HubClient) -> None:
    with pytest.raises(NotFoundError):
        hub.delete(MemberCluster, "nowhere")


def test_delete_with_a_stale_precondition_is_a_conflict(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    hub.update(tainted(read, "gpu"))
    with pytest.raises(ConflictError):
        hub.delete(MemberCluster, "member-1", resource_version=read.metadata.resource_version)
    assert hub.get(MemberCluster, "member-1")


def test_delete_with_the_current_precondition_deletes(hub: HubClient) -> None:
    read = hub.create(cluster("member-1"))
    rv = read.metadata.resource_version
    assert (
        hub.delete(MemberCluster, "member-1", resource_version=rv, propagation="Background") is None
    )
    with pytest.raises(NotFoundError):
        hub.get(MemberCluster, "member-1")


def test_delete_collection_removes_only_matching_objects(hub: HubClient) -> None:
    hub.create(cluster("a", labels={"env": "prod"}))
    hub.create(cluster("b", labels={"env": "dev"}))
    hub.create(cluster("c", labels={"env": "prod"}))
    hub.delete_collection(MemberCluster, {"env": "prod"})
    assert [obj.name for obj in hub.list(MemberCluster)] == ["b"]


@pytest.mark.parametrize("name", ["", None])
def test_a_missing_name_is_refused_before_sending(hub: HubClient, name: Any) -> None:
    with pytest.raises(ValueError, match="name is required"):
        hub.get(MemberCluster, name)


def test_an_unread_merge_patch_applies_and_fails_as_a_patch_does(hub: HubClient) -> None:
    read = hub.create(cluster("member-1", labels={"keep": "me"}))
    hub.patch_unread(MemberCluster, "member-1", {"metadata": {"labels": {"new": "yes"}}})
    assert hub.get(MemberCluster, "member-1").metadata.labels == {"keep": "me", "new": "yes"}
    stale = {"metadata": {"resourceVersion": read.metadata.resource_version}}
    with pytest.raises(ConflictError):
        hub.patch_unread(MemberCluster, "member-1", stale)
    with pytest.raises(NotFoundError):
        hub.patch_unread(MemberCluster, "nowhere", {"metadata": {"labels": {"a": "b"}}})
