"""Wire round-trips of the hub types: what other controllers wrote must come back untouched.

The samples populate every model we define (a test checks that), and the round-trip test plants
an unknown field in each of them, so a model that drops unknown fields fails here."""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from hub.types import (
    KINDS,
    CapacityLedger,
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    FleetModel,
    HubObject,
    MemberCluster,
    PlacementDecision,
    ResourceBinding,
    ResourcePlacement,
    SchedulingPolicySnapshot,
    SchedulingPolicySnapshotStatus,
    Toleration,
)

Path = tuple[str | int, ...]
STAMP = "2024-05-01T10:00:00Z"
UNKNOWN = {"unmodelledField": {"writtenBy": ["another-controller", 1, True]}}


def condition(type_: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": "Because",
        "message": "it is so",
        "observedGeneration": 2,
        "lastTransitionTime": STAMP,
    }


def metadata(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "uid": "0b5f7c1e-0000-4000-8000-000000000001",
        "resourceVersion": "42",
        "generation": 2,
        "creationTimestamp": STAMP,
        "labels": {"env": "prod"},
        "annotations": {"note": "x"},
        "finalizers": ["kubernetes-fleet.io/scheduler-cleanup"],
        "ownerReferences": [
            {
                "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
                "kind": "ClusterResourcePlacement",
                "name": "crp",
                "uid": "0b5f7c1e-0000-4000-8000-000000000002",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def selector_term() -> dict[str, Any]:
    return {
        "labelSelector": {
            "matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
        },
        "propertySelector": {
            "matchExpressions": [
                {"name": "kubernetes-fleet.io/node-count", "operator": "Gt", "values": ["3"]}
            ]
        },
        "propertySorter": {"name": "kubernetes-fleet.io/node-count", "sortOrder": "Descending"},
    }


def policy() -> dict[str, Any]:
    return {
        "placementType": "PickN",
        "clusterNames": ["a"],
        "numberOfClusters": 2,
        "affinity": {
            "clusterAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "clusterSelectorTerms": [selector_term()]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 20, "preference": selector_term()}
                ],
            }
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "tolerations": [
            {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ],
    }


def decision() -> dict[str, Any]:
    return {
        "clusterName": "member-1",
        "selected": True,
        "clusterScore": {"affinityScore": 20, "priorityScore": 3},
        "reason": "picked",
    }


def member_cluster() -> dict[str, Any]:
    return {
        "apiVersion": "cluster.kubernetes-fleet.io/v1beta1",
        "kind": "MemberCluster",
        "metadata": metadata("member-1"),
        "spec": {
            "heartbeatPeriodSeconds": 60,
            "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [condition("Joined")],
            "properties": {
                "kubernetes-fleet.io/node-count": {"value": "5", "observationTime": STAMP}
            },
            "resourceUsage": {
                "capacity": {"cpu": "8"},
                "allocatable": {"cpu": "7"},
                "available": {"cpu": "3"},
                "observationTime": STAMP,
            },
            "agentStatus": [
                {
                    "type": "MemberAgent",
                    "conditions": [condition("Joined")],
                    "lastReceivedHeartbeat": STAMP,
                }
            ],
            "namespaces": {"fleet-member-a": "a"},
        },
    }


def placement() -> dict[str, Any]:
    return {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterResourcePlacement",
        "metadata": metadata("crp"),
        "spec": {
            "resourceSelectors": [
                {
                    "group": "",
                    "version": "v1",
                    "kind": "Namespace",
                    "name": "app",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
            "policy": policy(),
            "revisionHistoryLimit": 10,
        },
        "status": {"conditions": [condition("ClusterResourcePlacementScheduled")]},
    }


def policy_snapshot() -> dict[str, Any]:
    return {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterSchedulingPolicySnapshot",
        "metadata": metadata("crp-0"),
        "spec": {"policy": policy(), "policyHash": "YWJjZGVm"},
        "status": {
            "observedCRPGeneration": 2,
            "conditions": [condition("Scheduled")],
            "targetClusters": [decision()],
        },
    }


def binding() -> dict[str, Any]:
    return {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterResourceBinding",
        "metadata": metadata("crp-member-1-abcd"),
        "spec": {
            "state": "Scheduled",
            "resourceSnapshotName": "",
            "schedulingPolicySnapshotName": "crp-0",
            "targetCluster": "member-1",
            "clusterDecision": decision(),
        },
        "status": {"conditions": [condition("Bound")], "failedPlacements": []},
    }


def ledger() -> dict[str, Any]:
    return {
        "apiVersion": "fleet-scheduler.io/v1alpha1",
        "kind": "CapacityLedger",
        "metadata": metadata("member-1"),
        "spec": {
            "reservations": {
                "crp-member-1-abcd": {
                    "placement": "crp",
                    "requests": {"cpu": "2", "memory": "4Gi"},
                    "reservedAt": "2025-01-01T00:00:00Z",
                }
            },
            "nominations": {
                "checkout": {
                    "priority": 100000,
                    "requests": {"cpu": "4"},
                    "victims": [
                        {"binding": "crp-member-1-abcd", "placement": "crp", "priority": 0}
                    ],
                    "nominatedAt": "2025-01-01T00:00:00Z",
                }
            },
        },
    }


def budget() -> dict[str, Any]:
    return {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterResourcePlacementDisruptionBudget",
        "metadata": metadata("crp"),
        "spec": {"minAvailable": "50%"},
    }


def placement_decision() -> dict[str, Any]:
    doc_metadata = metadata("crp-web-0")
    doc_metadata["namespace"] = "fleet-system"
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "PlacementDecision",
        "metadata": doc_metadata,
        "schedulerName": "fleet-scheduler",
        "decisions": [
            {
                "clusterProfileRef": {"name": "member-1", "namespace": "fleet-system"},
                "reason": "picked by scheduling policy",
            }
        ],
        "status": {
            "decisions": [{"clusterName": "member-1", "reason": "picked by scheduling policy"}]
        },
    }


def in_namespace(sample: Callable[[], dict[str, Any]], kind: str) -> Callable[[], dict[str, Any]]:
    """The namespaced sibling's sample: the same document, another kind, in a namespace."""

    def make() -> dict[str, Any]:
        doc = sample()
        doc["kind"] = kind
        doc["metadata"]["namespace"] = "app"
        return doc

    return make


SAMPLES: dict[type[HubObject], Any] = {
    MemberCluster: member_cluster,
    ClusterResourcePlacement: placement,
    ClusterSchedulingPolicySnapshot: policy_snapshot,
    ClusterResourceBinding: binding,
    ResourcePlacement: in_namespace(placement, "ResourcePlacement"),
    SchedulingPolicySnapshot: in_namespace(policy_snapshot, "SchedulingPolicySnapshot"),
    ResourceBinding: in_namespace(binding, "ResourceBinding"),
    CapacityLedger: ledger,
    ClusterResourcePlacementDisruptionBudget: budget,
    PlacementDecision: placement_decision,
}


# --- tiny helpers ---------------------------------------------------------------------------


def model_paths(model: BaseModel, path: Path = ()) -> Iterator[tuple[Path, type[BaseModel]]]:
    """The wire path and class of `model` and of every model nested in it."""
    yield path, type(model)
    for name, field in type(model).model_fields.items():
        key = field.alias or name
        yield from _nested_paths(getattr(model, name), (*path, key))


def _nested_paths(value: Any, path: Path) -> Iterator[tuple[Path, type[BaseModel]]]:
    if isinstance(value, BaseModel):
        yield from model_paths(value, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nested_paths(item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _nested_paths(item, (*path, key))


def reachable_models(cls: type[BaseModel]) -> set[type[BaseModel]]:
    """Every model class a value of `cls` can contain, found from the type annotations."""
    found: set[type[BaseModel]] = set()
    pending: list[Any] = [cls]
    while pending:
        tp = pending.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp not in found:
                found.add(tp)
                pending.extend(f.annotation for f in tp.model_fields.values())
        elif typing.get_origin(tp) is not None or isinstance(tp, types.UnionType):
            pending.extend(typing.get_args(tp))
    return found


def at(doc: Any, path: Path) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def with_unknown_everywhere(kind: type[HubObject], doc: dict[str, Any]) -> list[Path]:
    """Plant UNKNOWN in every object of `doc` that one of our models reads; return the paths."""
    paths = [path for path, _ in model_paths(kind.from_wire(doc))]
    for path in paths:
        at(doc, path).update(copy.deepcopy(UNKNOWN))
    return paths


def contains(outer: Any, inner: Any) -> bool:
    """`outer` has everything `inner` has (dicts may have more keys, e.g. defaults)."""
    if isinstance(inner, dict):
        return isinstance(outer, dict) and all(
            k in outer and contains(outer[k], v) for k, v in inner.items()
        )
    if isinstance(inner, list):
        return (
            isinstance(outer, list)
            and len(outer) == len(inner)
            and all(contains(o, i) for o, i in zip(outer, inner, strict=True))
        )
    return bool(outer == inner)


KIND_PARAMS = [pytest.param(kind, id=kind.KIND) for kind in KINDS]


# --- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_samples_populate_every_model_of_the_kind(kind: type[HubObject]) -> None:
    seen = {cls for _, cls in model_paths(kind.from_wire(SAMPLES[kind]()))}
    assert reachable_models(kind) - seen == set()


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_wire_round_trip_is_lossless(kind: type[HubObject]) -> None:
    doc = SAMPLES[kind]()
    assert contains(kind.from_wire(doc).to_wire(), doc)


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_unknown_fields_survive_at_every_modelled_level(kind: type[HubObject]) -> None:
    doc = SAMPLES[kind]()
    paths = with_unknown_everywhere(kind, doc)
    wire = kind.from_wire(doc).to_wire()
    missing = [path for path in paths if at(wire, path).get("unmodelledField") is None]
    assert missing == []
    assert contains(wire, doc)


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_unknown_fields_survive_a_copy_with_update(kind: type[HubObject]) -> None:
    doc = SAMPLES[kind]()
    with_unknown_everywhere(kind, doc)
    obj = kind.from_wire(doc)
    labels = {**obj.metadata.labels, "touched": "yes"}
    changed = obj.model_copy(
        update={"metadata": obj.metadata.model_copy(update={"labels": labels})}
    )
    wire = changed.to_wire()
    assert wire["metadata"]["labels"]["touched"] == "yes"
    del wire["metadata"]["labels"]["touched"]
    assert contains(wire, doc)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        pytest.param(
            SchedulingPolicySnapshotStatus(observed_crp_generation=3),
            {"observedCRPGeneration": 3},
            id="observedCRPGeneration",
        ),
        pytest.param(
            ClusterDecision(cluster_name="a", selected=False, reason="no"),
            {"clusterName": "a", "selected": False, "reason": "no"},
            id="camelCase",
        ),
    ],
)
def test_wire_names_use_kubefleet_spelling(model: FleetModel, expected: dict[str, Any]) -> None:
    wire = model.to_wire()
    assert contains(wire, expected)
    assert type(model).from_wire(wire) == model


def test_observed_crp_generation_is_read_from_its_wire_name() -> None:
    doc = policy_snapshot()
    doc["status"]["observedCRPGeneration"] = 7
    assert ClusterSchedulingPolicySnapshot.from_wire(doc).status.observed_crp_generation == 7


def test_to_wire_drops_nulls() -> None:
    wire = Toleration(key="gpu").to_wire()
    assert wire == {"key": "gpu"}
    decision_wire = ClusterDecision(cluster_name="a", selected=True, reason="r").to_wire()
    assert "clusterScore" not in decision_wire


def test_to_wire_keeps_required_empty_strings() -> None:
    doc = binding()
    doc["spec"]["resourceSnapshotName"] = ""
    spec = ClusterResourceBinding.from_wire(doc).to_wire()["spec"]
    assert spec["resourceSnapshotName"] == ""


@pytest.mark.parametrize(
    "stamp",
    [
        pytest.param("2024-05-01T10:00:00Z", id="seconds"),
        pytest.param("2024-05-01T10:00:00.123456Z", id="microseconds"),
        pytest.param("2024-05-01T10:00:00+02:00", id="offset"),
    ],
)
def test_timestamps_round_trip_unchanged(stamp: str) -> None:
    doc = member_cluster()
    doc["metadata"]["creationTimestamp"] = stamp
    doc["status"]["conditions"][0]["lastTransitionTime"] = stamp
    wire = MemberCluster.from_wire(doc).to_wire()
    assert wire["metadata"]["creationTimestamp"] == stamp
    assert wire["status"]["conditions"][0]["lastTransitionTime"] == stamp


def test_timestamps_load_as_aware_datetimes() -> None:
    cluster = MemberCluster.from_wire(member_cluster())
    assert cluster.metadata.creation_timestamp == datetime(2024, 5, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_api_version_and_kind_are_filled_from_the_class(kind: type[HubObject]) -> None:
    doc = SAMPLES[kind]()
    del doc["apiVersion"], doc["kind"]
    wire = kind.from_wire(doc).to_wire()
    assert (wire["apiVersion"], wire["kind"]) == (f"{kind.GROUP}/{kind.VERSION}", kind.KIND)


def test_a_reservation_time_without_a_zone_is_read_as_utc() -> None:
    """The API server refuses one (format date-time, tests/integration/activities), but a ledger
    read from elsewhere must not make the sweeps' comparisons raise: it is read as UTC."""
    from datetime import UTC, datetime

    from hub.types import Reservation

    naive = Reservation.model_validate(
        {"placement": "p", "requests": {}, "reservedAt": "2026-01-01T00:00:00"}
    )
    assert naive.reserved_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert naive.model_dump(mode="json", by_alias=True)["reservedAt"] == "2026-01-01T00:00:00Z"
