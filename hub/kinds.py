"""The kinds that make up a placement: a cluster-scoped ClusterResourcePlacement with its
ClusterSchedulingPolicySnapshots and ClusterResourceBindings, or a namespaced ResourcePlacement
with its SchedulingPolicySnapshots and ResourceBindings in its namespace (kubefleet-rules 9).

A placement is named by its key, KubeFleet's queue key: `<name>` for a cluster-scoped one,
`<namespace>/<name>` for a namespaced one. Placement names cannot contain "/", so the key is
unambiguous."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from hub import names
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    HubObject,
    ResourceBinding,
    ResourcePlacement,
    SchedulingPolicySnapshot,
)

__all__ = [
    "CLUSTER_SCOPED",
    "NAMESPACED",
    "NAMESPACED_KINDS",
    "PlacementKinds",
    "kinds_for",
    "parent_key",
    "placement_key",
    "placement_label",
    "split_key",
]


@dataclass(frozen=True)
class PlacementKinds:
    placement: type[ClusterResourcePlacement]
    snapshot: type[ClusterSchedulingPolicySnapshot]
    binding: type[ClusterResourceBinding]

    @property
    def namespaced(self) -> bool:
        return self.placement.NAMESPACED

    @property
    def scheduled_condition(self) -> str:
        """The placement's own Scheduled condition type."""
        return self.placement.SCHEDULED_CONDITION


CLUSTER_SCOPED: Final = PlacementKinds(
    ClusterResourcePlacement, ClusterSchedulingPolicySnapshot, ClusterResourceBinding
)
NAMESPACED: Final = PlacementKinds(ResourcePlacement, SchedulingPolicySnapshot, ResourceBinding)
# The namespaced kinds, for those that list or watch them all.
NAMESPACED_KINDS: Final = (NAMESPACED.placement, NAMESPACED.snapshot, NAMESPACED.binding)


def kinds_for(namespace: str | None) -> PlacementKinds:
    """The namespaced kinds for a placement in `namespace`, the cluster-scoped ones for None/""."""
    return NAMESPACED if namespace else CLUSTER_SCOPED


def placement_key(namespace: str | None, name: str) -> str:
    """`<namespace>/<name>`, or `<name>` for a cluster-scoped placement."""
    return f"{namespace}/{name}" if namespace else name


def parent_key(obj: HubObject) -> str:
    """The key of the placement a snapshot or binding belongs to: its parent-CRP label, in its
    own namespace ("" without the label: no placement's key)."""
    parent = obj.metadata.labels.get(names.PARENT_PLACEMENT_LABEL)
    return placement_key(obj.metadata.namespace, parent) if parent else ""


def split_key(key: str) -> tuple[str | None, str]:
    """The inverse of `placement_key`: (namespace or None, name)."""
    namespace, slash, name = key.rpartition("/")
    if not slash:
        return None, key
    if not namespace or not name or "/" in namespace:
        raise ValueError(f"not a placement key (<name> or <namespace>/<name>): {key!r}")
    return namespace, name


def placement_label(key: str) -> str:
    """How a placement is named to people beside other kinds: `crp/checkout`, or
    `rp/shop/web` for a ResourcePlacement (`placement_key` `shop/web`)."""
    namespace, name = split_key(key)
    return f"rp/{namespace}/{name}" if namespace else f"crp/{name}"
