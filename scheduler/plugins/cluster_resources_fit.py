"""ClusterResourcesFit: capacity-aware placement's filter and score (docs/capacity.md).

The fleet form of kube-scheduler's NodeResourcesFit. It acts only in a cycle whose placement
declares requests (`fleet-scheduler.io/requests`, `CycleState.demand`); for every other placement
its PreFilter and PreScore answer SKIP, so neither its Filter nor its Score runs and the cycle is
exactly KubeFleet's.

- Filter: a cluster whose free room (allocatable minus the reservations of other placements)
  cannot take one binding's requests is unschedulable, with a reason naming each short
  resource, what is asked and what is free: `not enough room: cpu: 2 requested, 1 free`.
  Placed last in the default profile, so a cluster it filters passed every other filter: those
  are the clusters a bigger supply would have taken (the placement's shortage).
- Score: 0-100 on the affinity component, by the profile's strategy:

      pluginConfig:
        - name: ClusterResourcesFit
          args:
            scoringStrategy:
              type: MostAllocated          # LeastAllocated (default) | MostAllocated
                                           # | RequestedToCapacityRatio
              resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
              requestedToCapacityRatio:    # RequestedToCapacityRatio only
                shape: [{utilization: 0, score: 0}, {utilization: 80, score: 100},
                        {utilization: 100, score: 50}]

  `resources` weighs the requested resources (default 1 each, 0 leaves one out; resources not
  listed weigh 1). Shape scores are on 0-100 (kube-scheduler's are 0-10)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster, PlacementPolicy
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.score import ClusterScore
from scheduler.framework.sharing import NOT_SHARED
from scheduler.framework.status import Status
from scheduler.requeue.requeue_hints import ClusterChange
from scheduler.room.capacity import (
    Demand,
    check_shape,
    least_allocated,
    most_allocated,
    no_room_reason,
    requested_to_capacity_ratio,
)

__all__ = ["LEAST_ALLOCATED", "MOST_ALLOCATED", "NAME", "RATIO", "ClusterResourcesFit"]

NAME: Final = "ClusterResourcesFit"
LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
RATIO: Final = "RequestedToCapacityRatio"
STRATEGIES: Final = (LEAST_ALLOCATED, MOST_ALLOCATED, RATIO)
NOT_CAPACITY_AWARE: Final = "the placement declares no requests"


class ClusterResourcesFit:
    """PreFilter, Filter (batched), PreScore and Score (batched). Stateless across cycles."""

    name = NAME
    sharing = NOT_SHARED  # reads other placements' reservations (scheduler.framework.sharing)

    def __init__(self, **args: Any) -> None:
        unknown = sorted(set(args) - {"scoringStrategy"})
        if unknown:
            raise TypeError(f"{NAME}: unknown argument(s) {', '.join(unknown)}")
        strategy = args.get("scoringStrategy") or {}
        if not isinstance(strategy, Mapping):
            raise TypeError(f"{NAME}: scoringStrategy must be a mapping, got {strategy!r}")
        unknown = sorted(set(strategy) - {"type", "resources", "requestedToCapacityRatio"})
        if unknown:
            raise ValueError(f"{NAME}: unknown scoringStrategy field(s) {', '.join(unknown)}")
        self.strategy: str = strategy.get("type", LEAST_ALLOCATED)
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"{NAME}: scoringStrategy.type must be one of {', '.join(STRATEGIES)}, "
                f"got {self.strategy!r}"
            )
        self.weights: dict[str, int] | None = _weights(strategy.get("resources"))
        self.shape: tuple[tuple[int, int], ...] = _shape(
            strategy.get("requestedToCapacityRatio"), self.strategy == RATIO
        )

    # --- filter ---------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
        return Status.skip(NOT_CAPACITY_AWARE) if state.demand is None else Status.success()

    def requeue_hint(self, policy: PlacementPolicy | None, change: ClusterChange) -> bool:
        """The cluster's capacity, allocatable and available resources decide here."""
        return change.resources

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status:
        return self._fit(_demand(state), cluster)

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> Sequence[Status | None]:
        demand = _demand(state)
        return [self._fit(demand, f.cluster).or_none() for f in facts]

    @staticmethod
    def _fit(demand: Demand, cluster: MemberCluster) -> Status:
        short = demand.shortfalls_on(
            cluster.metadata.name, cluster.status.resource_usage.allocatable
        )
        if not short:
            return Status.success()
        return Status.unschedulable(no_room_reason(short))

    # --- score ----------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
        return self.pre_filter(state, snapshot)

    def score(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> tuple[ClusterScore, Status]:
        return ClusterScore(affinity_score=self._points(_demand(state), cluster)), Status.success()

    def score_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> Sequence[ClusterScore | None]:
        demand = _demand(state)
        return [ClusterScore(affinity_score=self._points(demand, f.cluster)) for f in facts]

    def _points(self, demand: Demand, cluster: MemberCluster) -> int:
        capacity = demand.on(cluster.metadata.name, cluster.status.resource_usage.allocatable)
        if self.strategy == MOST_ALLOCATED:
            return most_allocated(demand.requests, capacity, self.weights)
        if self.strategy == RATIO:
            return requested_to_capacity_ratio(demand.requests, capacity, self.shape, self.weights)
        return least_allocated(demand.requests, capacity, self.weights)


def _demand(state: CycleState) -> Demand:
    if state.demand is None:  # PreFilter/PreScore skip the stage: the runner never gets here
        raise RuntimeError(f"{NAME} ran in a cycle whose placement declares no requests")
    return state.demand


def _weights(value: object) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise TypeError(f"{NAME}: scoringStrategy.resources must be a list, got {value!r}")
    weights: dict[str, int] = {}
    for index, item in enumerate(value):
        where = f"scoringStrategy.resources[{index}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise TypeError(f"{NAME}: {where} must be {{name: <resource>, weight: <int>}}")
        unknown = sorted(set(item) - {"name", "weight"})
        if unknown:
            raise ValueError(f"{NAME}: {where}: unknown field(s) {', '.join(unknown)}")
        weight = item.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
            raise ValueError(f"{NAME}: {where}.weight must be an integer in 0-100, got {weight!r}")
        if item["name"] in weights:
            raise ValueError(f"{NAME}: {where}: resource {item['name']!r} listed twice")
        weights[item["name"]] = weight
    return weights


def _shape(value: object, required: bool) -> tuple[tuple[int, int], ...]:
    if value is None:
        if required:
            raise ValueError(f"{NAME}: {RATIO} needs requestedToCapacityRatio.shape")
        return ()
    if not required:
        raise ValueError(f"{NAME}: requestedToCapacityRatio is for type {RATIO} only")
    if not isinstance(value, Mapping) or set(value) != {"shape"}:
        raise ValueError(f"{NAME}: requestedToCapacityRatio must be {{shape: [...]}}")
    points = value["shape"]
    if not isinstance(points, list):
        raise TypeError(f"{NAME}: requestedToCapacityRatio.shape must be a list of points")
    shape: list[tuple[int, int]] = []
    for index, point in enumerate(points):
        where = f"requestedToCapacityRatio.shape[{index}]"
        if not isinstance(point, Mapping) or set(point) != {"utilization", "score"}:
            raise ValueError(f"{NAME}: {where} must be {{utilization: <0-100>, score: <0-100>}}")
        u, s = point["utilization"], point["score"]
        if any(isinstance(x, bool) or not isinstance(x, int) for x in (u, s)):
            raise TypeError(f"{NAME}: {where}: utilization and score must be integers")
        shape.append((u, s))
    try:
        check_shape(shape)
    except ValueError as exc:
        raise ValueError(f"{NAME}: requestedToCapacityRatio.shape: {exc}") from None
    return tuple(shape)
