"""placement.kubernetes-fleet.io/v1beta1: placements, policy snapshots and bindings.

Field order follows KubeFleet's Go structs, because the policy hash (kubefleet-rules 2.1) is taken
over Go's JSON encoding of the policy, which writes fields in struct order. Enumerated strings are
plain `str` in Python with the enum in the CRD (see `crd_enum`)."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import Field

from hub import names
from hub.types.meta import (
    Condition,
    FleetModel,
    HubObject,
    crd_default,
    crd_enum,
    crd_rules,
)

__all__ = [
    "Affinity",
    "ClusterAffinity",
    "ClusterDecision",
    "ClusterResourceBinding",
    "ClusterResourceBindingSpec",
    "ClusterResourcePlacement",
    "ClusterResourcePlacementDisruptionBudget",
    "ClusterResourcePlacementSpec",
    "ClusterResourcePlacementStatus",
    "ClusterSchedulingPolicySnapshot",
    "ClusterScore",
    "ClusterSelector",
    "ClusterSelectorTerm",
    "LabelSelector",
    "LabelSelectorRequirement",
    "PlacementDisruptionBudgetSpec",
    "PlacementPolicy",
    "PreferredClusterSelector",
    "PropertySelector",
    "PropertySelectorRequirement",
    "PropertySorter",
    "ResourceBinding",
    "ResourcePlacement",
    "ResourceSelector",
    "SchedulingPolicySnapshot",
    "SchedulingPolicySnapshotSpec",
    "SchedulingPolicySnapshotStatus",
    "Toleration",
    "TopologySpreadConstraint",
]


# --- selectors -------------------------------------------------------------------------------


class LabelSelectorRequirement(FleetModel):
    key: str
    operator: str = Field(json_schema_extra=crd_enum(*names.LABEL_OPERATORS))
    values: list[str] = Field(default_factory=list)


class LabelSelector(FleetModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class PropertySelectorRequirement(FleetModel):
    name: str
    operator: str = Field(json_schema_extra=crd_enum(*names.PROPERTY_OPERATORS))
    values: list[str] = Field(default_factory=list, max_length=1)


class PropertySelector(FleetModel):
    match_expressions: list[PropertySelectorRequirement] = Field(default_factory=list)


class PropertySorter(FleetModel):
    name: str
    sort_order: str = Field(json_schema_extra=crd_enum(names.SORT_ASCENDING, names.SORT_DESCENDING))


class ClusterSelectorTerm(FleetModel):
    label_selector: LabelSelector | None = None
    property_selector: PropertySelector | None = None
    property_sorter: PropertySorter | None = None


class ClusterSelector(FleetModel):
    cluster_selector_terms: list[ClusterSelectorTerm] = Field(max_length=10)


class PreferredClusterSelector(FleetModel):
    weight: int = Field(ge=-100, le=100)
    preference: ClusterSelectorTerm


class ClusterAffinity(FleetModel):
    required_during_scheduling_ignored_during_execution: ClusterSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredClusterSelector] = Field(
        default_factory=list
    )


class Affinity(FleetModel):
    cluster_affinity: ClusterAffinity | None = None


class TopologySpreadConstraint(FleetModel):
    max_skew: int | None = Field(default=None, ge=1, json_schema_extra=crd_default(1))
    topology_key: str
    when_unsatisfiable: str | None = Field(
        default=None,
        json_schema_extra={
            **crd_enum(names.DO_NOT_SCHEDULE, names.SCHEDULE_ANYWAY),
            **crd_default(names.DO_NOT_SCHEDULE),
        },
    )


# --- CEL rules -------------------------------------------------------------------------------
# KubeFleet's CRDs carry these rules and its validating webhook checks the same things; with them
# in our CRDs a hub without the webhook (standalone mode) refuses the same mistakes with the same
# messages (docs/validation.md lists every rule and where the rest are checked). One difference in
# form, none in effect: an empty list counts as unset (`size(...) == 0`), as the webhook's
# `len(...) > 0` has it, because clients that write `[]` for an empty list (ours among them) must
# not be refused for a field they did not set.


def _unset(field: str) -> str:
    return f"(!has(self.{field}) || size(self.{field}) == 0)"


_TOLERATION_RULES: Final = crd_rules(
    (
        "self.all(t, t.operator != 'Exists' || !has(t.value) || size(t.value) == 0)",
        "value must be empty when operator is Exists",
    ),
    (
        "self.all(t, (has(t.key) && size(t.key) > 0) || t.operator == 'Exists')",
        "operator must be Exists when key is empty",
    ),
)

_POLICY_RULES: Final = crd_rules(
    ("self.placementType == oldSelf.placementType", "placement type is immutable"),
    (
        f"self.placementType != 'PickFixed' || (!has(self.affinity) && "
        f"!has(self.numberOfClusters) && {_unset('topologySpreadConstraints')} && "
        f"{_unset('tolerations')})",
        "affinity, numberOfClusters, topologySpreadConstraints, and tolerations cannot be set "
        "when placementType is PickFixed",
    ),
    (
        f"self.placementType != 'PickAll' || ({_unset('clusterNames')} && "
        f"!has(self.numberOfClusters) && {_unset('topologySpreadConstraints')})",
        "clusterNames, numberOfClusters, and topologySpreadConstraints cannot be set when "
        "placementType is PickAll",
    ),
    (
        f"self.placementType != 'PickN' || ({_unset('clusterNames')} && "
        "has(self.numberOfClusters))",
        "clusterNames cannot be set and numberOfClusters must be set when placementType is PickN",
    ),
    # The webhook's: an update may add tolerations, never change or remove one.
    (
        "!has(oldSelf.tolerations) || oldSelf.tolerations.all(t, has(self.tolerations) && "
        "self.tolerations.exists(n, n == t))",
        "tolerations have been updated/deleted, only additions to tolerations are allowed",
    ),
)

_RESOURCE_SELECTOR_RULES: Final = crd_rules(
    (
        "self.all(x, !(has(x.name) && size(x.name) > 0 && has(x.labelSelector)))",
        "name and labelSelector are mutually exclusive in a resource selector",
    ),
)

_SPEC_RULES: Final = crd_rules(
    ("!has(oldSelf.policy) || has(self.policy)", "policy cannot be removed once set"),
    # The webhook's: a placement made without a policy is PickAll, and stays PickAll.
    (
        "has(oldSelf.policy) || !has(self.policy) || self.policy.placementType == 'PickAll'",
        "placement type is immutable",
    ),
)


class Toleration(FleetModel):
    key: str | None = None
    operator: str | None = Field(
        default=None,
        json_schema_extra={**crd_enum(*names.TOLERATION_OPERATORS), **crd_default("Equal")},
    )
    value: str | None = None
    effect: str | None = Field(default=None, json_schema_extra=crd_enum(names.EFFECT_NO_SCHEDULE))


class PlacementPolicy(FleetModel):
    placement_type: str | None = Field(
        default=None,
        json_schema_extra={**crd_enum(*names.PLACEMENT_TYPES), **crd_default(names.PICK_ALL)},
    )
    cluster_names: list[str] = Field(default_factory=list, max_length=100)
    number_of_clusters: int | None = Field(default=None, ge=0)
    affinity: Affinity | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=100, json_schema_extra=_TOLERATION_RULES
    )

    @property
    def effective_type(self) -> str:
        """The placement type with the API default applied (empty means PickAll)."""
        return self.placement_type or names.PICK_ALL


# --- ClusterResourcePlacement ----------------------------------------------------------------


class ResourceSelector(FleetModel):
    group: str = ""
    version: str
    kind: str
    name: str | None = None
    label_selector: LabelSelector | None = None


class ClusterResourcePlacementSpec(FleetModel):
    preserve_unknown_fields: ClassVar[bool] = True  # strategy, and fields of later API versions

    resource_selectors: list[ResourceSelector] = Field(
        default_factory=list, max_length=100, json_schema_extra=_RESOURCE_SELECTOR_RULES
    )
    policy: PlacementPolicy | None = Field(default=None, json_schema_extra=_POLICY_RULES)
    revision_history_limit: int | None = Field(
        default=None, ge=1, le=1000, json_schema_extra=crd_default(10)
    )


class ClusterResourcePlacementStatus(FleetModel):
    preserve_unknown_fields: ClassVar[bool] = True  # placementStatuses, selectedResources, ...

    conditions: list[Condition] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def _scheduled_columns(condition: str) -> tuple[tuple[str, str, str], ...]:
    return (
        ("Gen", "string", ".metadata.generation"),
        ("Type", "string", ".spec.policy.placementType"),
        ("Scheduled", "string", f'.status.conditions[?(@.type=="{condition}")].status'),
        (
            "Scheduled-Gen",
            "string",
            f'.status.conditions[?(@.type=="{condition}")].observedGeneration',
        ),
    )


class ClusterResourcePlacement(HubObject):
    GROUP: ClassVar[str] = names.PLACEMENT_GROUP
    KIND: ClassVar[str] = "ClusterResourcePlacement"
    PLURAL: ClassVar[str] = "clusterresourceplacements"
    SINGULAR: ClassVar[str] = "clusterresourceplacement"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("crp",)
    CATEGORIES: ClassVar[tuple[str, ...]] = ("fleet", "fleet-placement")
    # The placement's own Scheduled condition (kubefleet-rules 2.7; ResourcePlacementScheduled
    # on a ResourcePlacement).
    SCHEDULED_CONDITION: ClassVar[str] = names.PLACEMENT_SCHEDULED_CONDITION
    # KubeFleet's webhook: the name is the parent-CRP label value of its snapshots and bindings.
    RULES: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            f"size(self.metadata.name) <= {names.MAX_PLACEMENT_NAME_LENGTH}",
            f"the name field cannot have length exceeding {names.MAX_PLACEMENT_NAME_LENGTH}",
        ),
    )
    PRINTER_COLUMNS: ClassVar[tuple[tuple[str, str, str], ...]] = _scheduled_columns(
        names.PLACEMENT_SCHEDULED_CONDITION
    )

    spec: ClusterResourcePlacementSpec = Field(
        default_factory=ClusterResourcePlacementSpec, json_schema_extra=_SPEC_RULES
    )
    status: ClusterResourcePlacementStatus = Field(default_factory=ClusterResourcePlacementStatus)


# --- ClusterSchedulingPolicySnapshot ---------------------------------------------------------


class ClusterScore(FleetModel):
    affinity_score: int | None = None
    priority_score: int | None = None


class ClusterDecision(FleetModel):
    cluster_name: str
    selected: bool
    cluster_score: ClusterScore | None = None
    reason: str


class SchedulingPolicySnapshotSpec(FleetModel):
    policy: PlacementPolicy | None = None
    # Go []byte: base64 on the wire of the ASCII hex SHA-256 digest (kubefleet-rules 2.1).
    policy_hash: str = Field(json_schema_extra={"format": "byte"})


class SchedulingPolicySnapshotStatus(FleetModel):
    observed_crp_generation: int | None = Field(default=None, alias="observedCRPGeneration")
    conditions: list[Condition] = Field(default_factory=list)
    target_clusters: list[ClusterDecision] = Field(
        default_factory=list, max_length=names.MAX_DECISIONS
    )

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class ClusterSchedulingPolicySnapshot(HubObject):
    GROUP: ClassVar[str] = names.PLACEMENT_GROUP
    KIND: ClassVar[str] = "ClusterSchedulingPolicySnapshot"
    PLURAL: ClassVar[str] = "clusterschedulingpolicysnapshots"
    SINGULAR: ClassVar[str] = "clusterschedulingpolicysnapshot"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("csps",)
    CATEGORIES: ClassVar[tuple[str, ...]] = ("fleet", "fleet-placement")
    PRINTER_COLUMNS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("Gen", "string", ".metadata.generation"),
    )

    spec: SchedulingPolicySnapshotSpec
    status: SchedulingPolicySnapshotStatus = Field(default_factory=SchedulingPolicySnapshotStatus)

    @property
    def is_latest(self) -> bool:
        return self.metadata.labels.get(names.IS_LATEST_SNAPSHOT_LABEL) == "true"

    @property
    def placement_name(self) -> str | None:
        return self.metadata.labels.get(names.PARENT_PLACEMENT_LABEL)


# --- ClusterResourceBinding ------------------------------------------------------------------


class ClusterResourceBindingSpec(FleetModel):
    preserve_unknown_fields: ClassVar[bool] = True  # override snapshots, applyStrategy, ...

    state: str = Field(
        json_schema_extra=crd_enum(
            names.STATE_SCHEDULED, names.STATE_BOUND, names.STATE_UNSCHEDULED
        )
    )
    resource_snapshot_name: str = ""
    scheduling_policy_snapshot_name: str
    target_cluster: str
    cluster_decision: ClusterDecision


class ClusterResourceBinding(HubObject):
    GROUP: ClassVar[str] = names.PLACEMENT_GROUP
    KIND: ClassVar[str] = "ClusterResourceBinding"
    PLURAL: ClassVar[str] = "clusterresourcebindings"
    SINGULAR: ClassVar[str] = "clusterresourcebinding"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("crb",)
    CATEGORIES: ClassVar[tuple[str, ...]] = ("fleet", "fleet-placement")
    PRINTER_COLUMNS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("Cluster", "string", ".spec.targetCluster"),
        ("State", "string", ".spec.state"),
        ("Policy-Snapshot", "string", ".spec.schedulingPolicySnapshotName"),
    )

    spec: ClusterResourceBindingSpec
    status: dict[str, Any] = Field(default_factory=dict)  # written by other controllers only


# --- The namespaced kinds (kubefleet-rules 9) ------------------------------------------------
# ResourcePlacement, SchedulingPolicySnapshot and ResourceBinding live in the placement's
# namespace and have the schemas of their cluster-scoped siblings, so they are those classes with
# other API coordinates: everything that reads a cluster-scoped placement reads these too.


class ResourcePlacement(ClusterResourcePlacement):
    KIND: ClassVar[str] = "ResourcePlacement"
    PLURAL: ClassVar[str] = "resourceplacements"
    SINGULAR: ClassVar[str] = "resourceplacement"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("rp",)
    NAMESPACED: ClassVar[bool] = True
    SCHEDULED_CONDITION: ClassVar[str] = names.RP_SCHEDULED_CONDITION
    PRINTER_COLUMNS: ClassVar[tuple[tuple[str, str, str], ...]] = _scheduled_columns(
        names.RP_SCHEDULED_CONDITION
    )


class SchedulingPolicySnapshot(ClusterSchedulingPolicySnapshot):
    KIND: ClassVar[str] = "SchedulingPolicySnapshot"
    PLURAL: ClassVar[str] = "schedulingpolicysnapshots"
    SINGULAR: ClassVar[str] = "schedulingpolicysnapshot"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("sps",)
    NAMESPACED: ClassVar[bool] = True


class ResourceBinding(ClusterResourceBinding):
    KIND: ClassVar[str] = "ResourceBinding"
    PLURAL: ClassVar[str] = "resourcebindings"
    SINGULAR: ClassVar[str] = "resourcebinding"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("rb",)
    NAMESPACED: ClassVar[bool] = True


# --- Disruption budgets (docs/capacity.md, "Compaction and rebalancing") -----------------------


# KubeFleet's own rules on both fields, and on the pair.
_BUDGET_VALUE_RULES: Final = crd_rules(
    (
        "type(self) == string ? self.matches('^(100|[0-9]{1,2})%$') : self >= 0",
        "If supplied value is String should match regex '^(100|[0-9]{1,2})%$' or If supplied "
        "value is Integer must be greater than or equal to 0",
    ),
)


_BUDGET_SPEC_RULES: Final = crd_rules(
    (
        "!(has(self.maxUnavailable) && has(self.minAvailable))",
        "Both MaxUnavailable and MinAvailable cannot be specified",
    ),
)


class PlacementDisruptionBudgetSpec(FleetModel):
    """At most one of the two, each a number of clusters or a percentage of N ("25%")."""

    max_unavailable: int | str | None = Field(default=None, json_schema_extra=_BUDGET_VALUE_RULES)
    min_available: int | str | None = Field(default=None, json_schema_extra=_BUDGET_VALUE_RULES)



class ClusterResourcePlacementDisruptionBudget(HubObject):
    """KubeFleet's budget for voluntary disruptions of the ClusterResourcePlacement of the same
    name: `fleet-scheduler rebalance` never moves more of its bindings than it allows (read
    only; KubeFleet's eviction controller uses it too)."""

    GROUP: ClassVar[str] = names.PLACEMENT_GROUP
    KIND: ClassVar[str] = "ClusterResourcePlacementDisruptionBudget"
    PLURAL: ClassVar[str] = "clusterresourceplacementdisruptionbudgets"
    SINGULAR: ClassVar[str] = "clusterresourceplacementdisruptionbudget"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("crpdb",)
    CATEGORIES: ClassVar[tuple[str, ...]] = ("fleet", "fleet-placement")

    spec: PlacementDisruptionBudgetSpec = Field(
        default_factory=PlacementDisruptionBudgetSpec, json_schema_extra=_BUDGET_SPEC_RULES
    )
