"""The generated CRDs: fresh on disk, structural, and carrying KubeFleet's validation facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hub import crds, names
from hub.types import (
    KINDS,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    HubObject,
    MemberCluster,
)

CRD_DIR = Path(__file__).resolve().parents[3] / "deploy" / "crds"
# The Helm chart's copy (Helm reads no file outside the chart): its templates render every file
# there, so a leftover file would be installed too.
CHART_CRD_DIR = CRD_DIR.parent / "chart" / "fleet-scheduler" / "files" / "crds"


def _schema(kind: type[HubObject]) -> dict[str, Any]:
    return crds.crd_for(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_deploy_crds_are_up_to_date() -> None:
    assert crds.stale_files(CRD_DIR) == [], "deploy/crds is stale: run `make crds`"


def test_the_helm_charts_crds_are_up_to_date_and_nothing_else() -> None:
    where = CHART_CRD_DIR.relative_to(CRD_DIR.parents[1])
    assert crds.stale_files(CHART_CRD_DIR) == [], f"{where} is stale: run `make crds`"
    leftover = sorted({p.name for p in CHART_CRD_DIR.iterdir()} - set(crds.generate()))
    assert leftover == [], f"{where} holds CRDs no hub kind generates: delete {leftover}"


def test_check_mode_reports_stale_files(tmp_path: Path) -> None:
    assert crds.main([str(tmp_path), "--check"]) == 1
    assert crds.main([str(tmp_path)]) == 0
    assert crds.main([str(tmp_path), "--check"]) == 0
    target = tmp_path / crds.crd_file_name(MemberCluster)
    target.write_text(target.read_text() + "# edited\n")
    assert crds.main([str(tmp_path), "--check"]) == 1


# KubeFleet's namespaced kinds (kubefleet-rules 1.1), with their short names.
NAMESPACED_KINDS = {
    "ResourcePlacement": "rp",
    "SchedulingPolicySnapshot": "sps",
    "ResourceBinding": "rb",
}


# Namespaced and not KubeFleet's: KEP-5313's PlacementDecision (docs/decisions.md).
OTHER_NAMESPACED_KINDS = {"PlacementDecision"}


def test_the_namespaced_kinds_are_kubefleets() -> None:
    namespaced = {
        k.KIND: k.SHORT_NAMES
        for k in KINDS
        if k.NAMESPACED and k.KIND not in OTHER_NAMESPACED_KINDS
    }
    assert namespaced == {kind: (short,) for kind, short in NAMESPACED_KINDS.items()}
    by_kind = {k.KIND: crds.crd_for(k) for k in KINDS}
    rp_columns = by_kind["ResourcePlacement"]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert '.status.conditions[?(@.type=="ResourcePlacementScheduled")].status' in {
        c["jsonPath"] for c in rp_columns
    }


def test_generation_is_deterministic() -> None:
    assert crds.generate() == crds.generate()


def test_one_file_per_kind_named_group_plural() -> None:
    assert sorted(crds.generate()) == sorted(f"{k.GROUP}_{k.PLURAL}.yaml" for k in KINDS)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.KIND)
def test_crd_names_scope_and_subresources(kind: type[HubObject]) -> None:
    crd = crds.crd_for(kind)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{kind.PLURAL}.{kind.GROUP}"
    spec = crd["spec"]
    namespaced = kind.KIND in NAMESPACED_KINDS or kind.KIND in OTHER_NAMESPACED_KINDS
    assert spec["scope"] == ("Namespaced" if namespaced else "Cluster")
    assert spec["names"]["kind"] == kind.KIND
    assert spec["names"]["listKind"] == f"{kind.KIND}List"
    assert spec["names"].get("shortNames", []) == list(kind.SHORT_NAMES)
    assert spec["names"].get("categories", []) == list(kind.CATEGORIES)
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == (kind.VERSION, True, True)
    # Data-only kinds (PlacementDecision) keep their status in the object itself.
    assert version.get("subresources") == ({"status": {}} if kind.STATUS_SUBRESOURCE else None)
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == [c[0] for c in kind.PRINTER_COLUMNS] + ["Age"]
    assert columns[-1] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


@pytest.mark.parametrize(
    ("kind", "short"),
    [
        (ClusterResourcePlacement, "crp"),
        (ClusterResourceBinding, "crb"),
        (MemberCluster, "cluster"),
        (ClusterSchedulingPolicySnapshot, "csps"),
    ],
)
def test_short_names(kind: type[HubObject], short: str) -> None:
    assert short in crds.crd_for(kind)["spec"]["names"]["shortNames"]


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        found += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}[*]")
    if "items" in node:
        found += _walk(node["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.KIND)
def test_schemas_are_structural(kind: type[HubObject]) -> None:
    for path, node in _walk(_schema(kind)):
        # Kubernetes' structural rule: every node typed, but an IntOrString node has none.
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        assert not {"$ref", "anyOf", "oneOf", "allOf", "title", "$defs"} & node.keys(), path
        assert node.get("additionalProperties") is not True, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if "required" in node:
            assert set(node["required"]) <= set(node["properties"]), path


@pytest.mark.parametrize(
    ("kind", "path", "key", "value"),
    [
        (
            ClusterResourcePlacement,
            "spec.policy.placementType",
            "enum",
            list(names.PLACEMENT_TYPES),
        ),
        (ClusterResourcePlacement, "spec.policy.placementType", "default", names.PICK_ALL),
        (ClusterResourcePlacement, "spec.policy.numberOfClusters", "minimum", 0),
        (ClusterResourcePlacement, "spec.policy.clusterNames", "maxItems", 100),
        (ClusterResourcePlacement, "spec.policy.tolerations", "maxItems", 100),
        (ClusterResourcePlacement, "spec.policy.tolerations.[].operator", "default", "Equal"),
        (
            ClusterResourcePlacement,
            "spec.policy.topologySpreadConstraints.[].maxSkew",
            "default",
            1,
        ),
        (
            ClusterResourcePlacement,
            "spec.policy.topologySpreadConstraints.[].maxSkew",
            "minimum",
            1,
        ),
        (
            ClusterResourcePlacement,
            "spec.policy.topologySpreadConstraints.[].whenUnsatisfiable",
            "enum",
            [names.DO_NOT_SCHEDULE, names.SCHEDULE_ANYWAY],
        ),
        (
            ClusterResourcePlacement,
            "spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".clusterSelectorTerms",
            "maxItems",
            10,
        ),
        (
            ClusterResourcePlacement,
            "spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution"
            ".[].weight",
            "maximum",
            100,
        ),
        (
            ClusterResourcePlacement,
            "spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution"
            ".[].weight",
            "minimum",
            -100,
        ),
        (ClusterResourcePlacement, "spec.revisionHistoryLimit", "default", 10),
        (ClusterResourcePlacement, "spec.revisionHistoryLimit", "maximum", 1000),
        (ClusterResourceBinding, "spec.state", "enum", list(names.BINDING_STATES)),
        (ClusterSchedulingPolicySnapshot, "spec.policyHash", "format", "byte"),
        (ClusterSchedulingPolicySnapshot, "status.targetClusters", "maxItems", names.MAX_DECISIONS),
        (MemberCluster, "spec.taints", "maxItems", 100),
        (MemberCluster, "spec.taints.[].effect", "enum", [names.EFFECT_NO_SCHEDULE]),
        (MemberCluster, "spec.taints.[].key", "maxLength", 316),
        (MemberCluster, "spec.heartbeatPeriodSeconds", "maximum", 600),
        (MemberCluster, "status.agentStatus.[].lastReceivedHeartbeat", "format", "date-time"),
        (MemberCluster, "status.conditions.[].status", "enum", ["True", "False", "Unknown"]),
    ],
)
def test_schema_facts(kind: type[HubObject], path: str, key: str, value: Any) -> None:
    assert _at(_schema(kind), path)[key] == value


@pytest.mark.parametrize(
    ("kind", "path", "required"),
    [
        (
            ClusterResourceBinding,
            "spec",
            {"state", "schedulingPolicySnapshotName", "targetCluster", "clusterDecision"},
        ),
        (ClusterResourceBinding, "spec.clusterDecision", {"clusterName", "selected", "reason"}),
        (ClusterSchedulingPolicySnapshot, "spec", {"policyHash"}),
        (MemberCluster, "spec.taints.[]", {"key", "effect"}),
        (ClusterResourcePlacement, "spec.policy.topologySpreadConstraints.[]", {"topologyKey"}),
    ],
)
def test_required_fields(kind: type[HubObject], path: str, required: set[str]) -> None:
    assert set(_at(_schema(kind), path)["required"]) == required


@pytest.mark.parametrize(
    ("kind", "path", "preserved"),
    [
        (MemberCluster, "spec", True),
        (MemberCluster, "status", True),
        (ClusterResourcePlacement, "spec", True),
        (ClusterResourcePlacement, "status", True),
        (ClusterResourceBinding, "spec", True),
        (ClusterResourceBinding, "status", True),
        (ClusterResourcePlacement, "spec.policy", False),
        (ClusterSchedulingPolicySnapshot, "spec", False),
        (ClusterSchedulingPolicySnapshot, "status", False),
        (MemberCluster, "spec.taints.[]", False),
    ],
)
def test_unknown_fields_are_preserved_only_where_partially_modelled(
    kind: type[HubObject], path: str, preserved: bool
) -> None:
    node = _at(_schema(kind), path)
    assert node.get(crds.PRESERVE, False) is preserved


def test_metadata_is_left_to_the_api_server() -> None:
    for kind in KINDS:
        assert _schema(kind)["properties"]["metadata"] == {"type": "object"}


def test_condition_lists_are_list_maps_keyed_by_type() -> None:
    conditions = _at(_schema(ClusterSchedulingPolicySnapshot), "status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_string_maps_are_additional_properties() -> None:
    labels = _at(
        _schema(ClusterResourcePlacement), "spec.resourceSelectors.[].labelSelector.matchLabels"
    )
    assert labels == {"type": "object", "additionalProperties": {"type": "string"}}


def test_files_parse_as_single_yaml_documents_without_anchors() -> None:
    for text in crds.generate().values():
        assert "&id" not in text and "*id" not in text
        (doc,) = list(yaml.safe_load_all(text))
        assert doc["kind"] == "CustomResourceDefinition"


def test_an_int_or_string_field_is_marked_as_kubernetes_marks_it() -> None:
    from hub.types import ClusterResourcePlacementDisruptionBudget

    spec = _schema(ClusterResourcePlacementDisruptionBudget)["properties"]["spec"]
    for field in ("minAvailable", "maxUnavailable"):
        node = spec["properties"][field]
        assert node["x-kubernetes-int-or-string"] is True and "type" not in node
        # ... with KubeFleet's rule: a percentage string or an integer >= 0
        [rule] = node["x-kubernetes-validations"]
        assert rule["rule"] == (
            "type(self) == string ? self.matches('^(100|[0-9]{1,2})%$') : self >= 0"
        )
    [both] = spec["x-kubernetes-validations"]
    assert both["rule"] == "!(has(self.maxUnavailable) && has(self.minAvailable))"
