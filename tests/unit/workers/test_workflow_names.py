"""Wire names the worker, watcher and CLI share: ids must round-trip and reject strangers."""

from __future__ import annotations

import pytest
from temporalio.common import SearchAttributeIndexedValueType

from workflows import names


@pytest.mark.parametrize("placement", ["web", "a", "crp-with-dashes", "x" * 63])
def test_workflow_id_round_trips(placement: str) -> None:
    assert names.workflow_id(placement) == f"crp/{placement}"
    assert names.placement_name(names.workflow_id(placement)) == placement


def test_resource_placement_ids_round_trip() -> None:
    workflow_id = names.workflow_id("web", "team-a")
    assert workflow_id == "rp/team-a/web"
    assert names.placement_of(workflow_id) == ("team-a", "web")
    assert names.placement_of("crp/web") == (None, "web")
    assert names.workflow_id_for_key("team-a/web") == workflow_id
    assert names.workflow_id_for_key("web") == "crp/web"
    with pytest.raises(ValueError, match="not a placement key"):
        names.workflow_id_for_key("/web")
    with pytest.raises(ValueError, match="a ResourcePlacement's"):
        names.placement_name(workflow_id)


@pytest.mark.parametrize(
    "workflow_id",
    ["web", "crp/", "crp/ns/web", "rp/web", "rp/ns/", "rp//web", "rp/a/b/c", "temporal-sys-x"],
)
def test_foreign_workflow_ids_are_rejected(workflow_id: str) -> None:
    with pytest.raises(ValueError, match="not a placement workflow id"):
        names.placement_of(workflow_id)


@pytest.mark.parametrize(("placement", "namespace"), [("", None), ("ns/web", None), ("web", "a/b")])
def test_workflow_id_rejects_names_that_cannot_be_placements(
    placement: str, namespace: str | None
) -> None:
    with pytest.raises(ValueError, match=r"not a placement name|not a namespace"):
        names.workflow_id(placement, namespace)


def test_search_attributes_have_the_documented_types() -> None:
    types = {key.name: key.indexed_value_type for key in names.SEARCH_ATTRIBUTES}
    assert types == {
        "FleetPlacementName": SearchAttributeIndexedValueType.KEYWORD,
        "FleetPlacementType": SearchAttributeIndexedValueType.KEYWORD,
        "FleetFullyScheduled": SearchAttributeIndexedValueType.BOOL,
        "FleetPlacementKind": SearchAttributeIndexedValueType.KEYWORD,
        "FleetPlacementNamespace": SearchAttributeIndexedValueType.KEYWORD,
        "FleetPriority": SearchAttributeIndexedValueType.INT,
        "FleetTenant": SearchAttributeIndexedValueType.KEYWORD,
        "FleetPatchGeneration": SearchAttributeIndexedValueType.INT,
        "FleetClustersVersion": SearchAttributeIndexedValueType.INT,
    }


def test_every_signal_name_has_exactly_one_workflow_handler() -> None:
    from temporalio import workflow

    from workflows.placement import PlacementWorkflow

    signals = (
        names.SIGNAL_REQUEUE, names.SIGNAL_MOVE, names.SIGNAL_RENEW_RUN, *names.WATCHER_SIGNALS
    )
    handlers = workflow._Definition.must_from_class(PlacementWorkflow).signals
    assert len(set(signals)) == len(signals)
    assert set(handlers) == set(signals)
    assert names.SIGNAL_REQUEUE == "requeue" and names.QUERY_STATUS == "status"


def test_every_handler_and_activity_is_registered_under_an_explicit_name() -> None:
    """A name derived from a Python method changes with a rename and strands every running
    workflow's history: each decorator must say `name=` with a constant."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    decorators = {"signal", "query", "update", "defn", "run"}
    unnamed: list[str] = []
    seen = 0
    for package in ("workflows", "activities"):
        for path in sorted((root / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    continue
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if not (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id in ("workflow", "activity")
                        and target.attr in decorators - {"run"}
                    ):
                        continue
                    seen += 1
                    keywords = dec.keywords if isinstance(dec, ast.Call) else []
                    if not any(k.arg == "name" for k in keywords):
                        unnamed.append(f"{path.name}:{node.lineno} {node.name}")
    assert seen >= 9  # the workflow, its handlers and both activities were found
    assert unnamed == []
