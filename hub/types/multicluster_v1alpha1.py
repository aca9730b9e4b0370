"""PlacementDecision (multicluster.x-k8s.io/v1alpha1): SIG-Multicluster's KEP-5313, the place a
scheduler publishes where a placement's workloads go, for readers that know nothing of KubeFleet
(Argo CD, MultiKueue, progressive rollout controllers). docs/decisions.md says how we write them.

Data only, no spec: `decisions` (at most 100 per object, a "slice") and `schedulerName` sit at
the top level, as the KEP and the cluster-inventory-api CRD define them. Each decision names a
ClusterProfile (KEP-4322), the cluster inventory's entry for a member cluster: KubeFleet's hub
agent keeps one per MemberCluster, of the same name, in its system namespace.

One addition of ours: `status.decisions` lists the same clusters as flat `{clusterName, reason}`
strings, the shape Argo CD's cluster-decision-resource generator reads (and OCM's own
PlacementDecision has). It is an optional field of our CRD, written with the object (the CRD has
no status subresource); under the upstream CRD an API server prunes it and nothing else changes."""

from __future__ import annotations

from typing import ClassVar, Final

from pydantic import Field

from hub.types.meta import FleetModel, HubObject

__all__ = [
    "MAX_DECISIONS_PER_SLICE",
    "ClusterProfileReference",
    "DuckDecision",
    "PlacementDecision",
    "PlacementDecisionStatus",
    "ProfileDecision",
]

# KEP-5313: "Up to 100 ClusterDecisions per object (slice)", EndpointSlice's default.
MAX_DECISIONS_PER_SLICE: Final = 100


class ClusterProfileReference(FleetModel):
    name: str
    """The ClusterProfile's name: the member cluster's."""
    namespace: str | None = None
    """The ClusterProfile's namespace; absent means the PlacementDecision's own."""


class ProfileDecision(FleetModel):
    """One chosen cluster (the KEP's ClusterDecision; renamed here beside KubeFleet's)."""

    cluster_profile_ref: ClusterProfileReference
    reason: str | None = None


class DuckDecision(FleetModel):
    """One chosen cluster as flat strings, for duck-typed readers (Argo CD)."""

    cluster_name: str
    reason: str | None = None


class PlacementDecisionStatus(FleetModel):
    decisions: list[DuckDecision] = Field(
        default_factory=list, max_length=MAX_DECISIONS_PER_SLICE
    )


class PlacementDecision(HubObject):
    GROUP: ClassVar[str] = "multicluster.x-k8s.io"
    VERSION: ClassVar[str] = "v1alpha1"
    KIND: ClassVar[str] = "PlacementDecision"
    PLURAL: ClassVar[str] = "placementdecisions"
    SINGULAR: ClassVar[str] = "placementdecision"
    NAMESPACED: ClassVar[bool] = True
    REQUIRED: ClassVar[tuple[str, ...]] = ("decisions",)
    STATUS_SUBRESOURCE: ClassVar[bool] = False
    # A column shows one value per object (kube-apiserver prints a path's first match), so the
    # clusters are not one: `kubectl get placementdecisions -o custom-columns=...` lists them.
    PRINTER_COLUMNS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("Scheduler", "string", ".schedulerName"),
    )

    decisions: list[ProfileDecision] = Field(max_length=MAX_DECISIONS_PER_SLICE)
    scheduler_name: str | None = None
    status: PlacementDecisionStatus | None = None
