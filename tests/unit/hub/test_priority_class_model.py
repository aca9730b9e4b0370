"""hub.types.PriorityClass: the built-in kind's wire names, coordinates and leniency.

Its fields sit at the top level as in Kubernetes, camelCase on the wire like every hub type, and
what a later Kubernetes adds survives a read-modify-write."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from hub import crds
from hub.types import KINDS, ObjectMeta, PriorityClass

UNKNOWN = {"unmodelledField": {"writtenBy": ["a-later-kubernetes", 1, True]}}


def wire(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high", "resourceVersion": "7"},
        "value": 1000,
        **fields,
    }


def test_wire_names_are_the_kubernetes_ones() -> None:
    doc = wire(globalDefault=True, description="batch", preemptionPolicy="Never")
    pc = PriorityClass.from_wire(doc)
    assert (pc.value, pc.global_default, pc.description, pc.preemption_policy) == (
        1000,
        True,
        "batch",
        "Never",
    )
    out = pc.to_wire()
    assert {k: v for k, v in out.items() if k != "metadata"} == {
        k: v for k, v in doc.items() if k != "metadata"
    }
    assert out["metadata"]["resourceVersion"] == "7"


def test_absent_fields_take_the_api_zero_values() -> None:
    pc = PriorityClass.from_wire(wire())
    assert (pc.global_default, pc.description, pc.preemption_policy) == (False, "", None)
    assert "preemptionPolicy" not in pc.to_wire()  # left to the API server's default


def test_python_names_build_one_too() -> None:
    pc = PriorityClass(metadata=ObjectMeta(name="high"), value=5, global_default=True)
    assert pc.to_wire()["globalDefault"] is True
    assert (pc.api_version, pc.kind) == ("scheduling.k8s.io/v1", "PriorityClass")


def test_value_is_required() -> None:
    doc = wire()
    del doc["value"]
    with pytest.raises(ValidationError, match="value"):
        PriorityClass.from_wire(doc)


def test_an_unknown_policy_still_loads() -> None:
    assert PriorityClass.from_wire(wire(preemptionPolicy="Later")).preemption_policy == "Later"


def test_unknown_fields_survive_a_copy_with_update() -> None:
    doc = wire(**UNKNOWN)
    doc["metadata"].update(UNKNOWN)
    pc = PriorityClass.from_wire(doc)
    changed = pc.model_copy(
        update={"metadata": pc.metadata.model_copy(update={"labels": {"tier": "gold"}})}
    )
    out = changed.to_wire()
    assert out["unmodelledField"] == UNKNOWN["unmodelledField"]
    assert out["metadata"]["unmodelledField"] == UNKNOWN["unmodelledField"]
    assert out["metadata"]["labels"] == {"tier": "gold"}


def test_it_is_served_cluster_scoped_by_the_scheduling_group() -> None:
    assert PriorityClass.api_path() == "/apis/scheduling.k8s.io/v1/priorityclasses"
    assert not PriorityClass.NAMESPACED
    assert PriorityClass.SHORT_NAMES == ("pc",)
    with pytest.raises(ValueError, match="cluster-scoped"):
        PriorityClass.api_path("default")


def test_it_is_a_built_in_kind_without_a_crd() -> None:
    assert PriorityClass not in KINDS
    assert not any("priorityclass" in name for name in crds.generate())
