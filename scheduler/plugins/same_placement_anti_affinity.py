"""SamePlacementAntiAffinity: one binding per cluster per placement, and a nudge to stay put.

Reference 5.5, after KubeFleet's `plugins/sameplacementaffinity/{filtering,scoring}.go`. Filter
drops clusters that already hold a Scheduled or Bound binding of the current snapshot with
ClusterAlreadySelected, which the runner treats as "neither passed nor filtered". Score gives 1
to clusters holding a binding of an older snapshot: the last tie-breaker, which keeps existing
placements where they are across policy changes."""

from __future__ import annotations

from collections.abc import Sequence

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster, PlacementPolicy
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BatchFilterPlugin, BatchScorePlugin
from scheduler.framework.score import ClusterScore
from scheduler.framework.sharing import NOT_SHARED
from scheduler.framework.status import Status
from scheduler.requeue.requeue_hints import ClusterChange

__all__ = ["NAME", "REASON_ALREADY_SELECTED", "SamePlacementAntiAffinity"]

NAME = "SamePlacementAntiAffinity"
REASON_ALREADY_SELECTED = "resource placement has already been scheduled or bounded on the cluster"

_OBSOLETE = ClusterScore(obsolete_placement_affinity_score=1)
_NOT_OBSOLETE = ClusterScore(obsolete_placement_affinity_score=0)
_ALREADY = Status.already_selected(REASON_ALREADY_SELECTED)


class SamePlacementAntiAffinity:
    """Filter and Score plugin. Stateless, so one instance serves every cycle."""

    name = NAME
    sharing = NOT_SHARED  # reads the placement's bindings (scheduler.framework.sharing)

    def requeue_hint(self, policy: PlacementPolicy | None, change: ClusterChange) -> bool:
        """The placement's own bindings decide here, never the cluster's fields."""
        return False

    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> Status:
        if state.has_scheduled_or_bound_binding(cluster.metadata.name):
            return Status.already_selected(REASON_ALREADY_SELECTED)
        return Status.success()

    def score(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> tuple[ClusterScore, Status]:
        if state.has_obsolete_binding(cluster.metadata.name):
            return _OBSOLETE, Status.success()
        return _NOT_OBSOLETE, Status.success()

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[Status | None]:
        selected = state.scheduled_or_bound
        return [_ALREADY if f.name in selected else None for f in facts]

    def score_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[ClusterScore | None]:
        obsolete = state.obsolete
        return [_OBSOLETE if f.name in obsolete else _NOT_OBSOLETE for f in facts]


_plugin = SamePlacementAntiAffinity()
_: tuple[BatchFilterPlugin, BatchScorePlugin] = (_plugin, _plugin)  # fails if the contract drifts
