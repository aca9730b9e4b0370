"""NamespaceAffinity: a namespaced placement goes only to clusters that have its namespace.

Reference 5.3, after KubeFleet's `plugins/namespaceaffinity/filtering.go`. Cluster-scoped
placements (every ClusterSchedulingPolicySnapshot) skip it in PreFilter. A cluster that does not
report namespace collection at all (no `NamespaceCollectionSucceeded` condition) passes, so
fleets without the feature keep working; a degraded (False) collection still uses its data."""

from __future__ import annotations

from collections.abc import Sequence

from hub import names
from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster, PlacementPolicy
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BatchFilterPlugin, PreFilterPlugin
from scheduler.framework.sharing import CLUSTER, FILTER
from scheduler.framework.status import Status
from scheduler.requeue.requeue_hints import ClusterChange

__all__ = [
    "NAME",
    "REASON_NAMESPACE_MISSING",
    "REASON_NO_NAMESPACE_INFO",
    "SKIP_CLUSTER_SCOPED",
    "NamespaceAffinity",
]

NAME = "NamespaceAffinity"
SKIP_CLUSTER_SCOPED = "cluster-scoped placement does not require namespace affinity filtering"
REASON_NO_NAMESPACE_INFO = "cluster has no namespace information available"
REASON_NAMESPACE_MISSING = "target namespace does not exist on cluster"


class NamespaceAffinity:
    """PreFilter and Filter plugin. Stateless, so one instance serves every cycle."""

    name = NAME
    sharing = {FILTER: CLUSTER}  # the snapshot's namespace and the cluster's namespaces

    def signature(self, stage: str, snapshot: ClusterSchedulingPolicySnapshot) -> str:
        return snapshot.metadata.namespace or ""

    def pre_filter(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
        if not snapshot.metadata.namespace:
            return Status.skip(SKIP_CLUSTER_SCOPED)
        return Status.success()

    def requeue_hint(self, policy: PlacementPolicy | None, change: ClusterChange) -> bool:
        """The cluster's namespaces and its namespace-collection condition decide here."""
        return change.namespaces

    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> Status:
        status = cluster.status
        if not any(c.type == names.NAMESPACE_COLLECTION_CONDITION for c in status.conditions):
            return Status.success()
        if status.namespaces is None:
            return Status.unschedulable(REASON_NO_NAMESPACE_INFO)
        if (snapshot.metadata.namespace or "") not in status.namespaces:
            return Status.unschedulable(REASON_NAMESPACE_MISSING)
        return Status.success()

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[Status | None]:
        return [self.filter(state, snapshot, f.cluster).or_none() for f in facts]


_plugin = NamespaceAffinity()
_: tuple[PreFilterPlugin, BatchFilterPlugin] = (_plugin, _plugin)  # fails if the contract drifts
