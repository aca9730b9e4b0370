"""Shared builders for cycle tests: a fixed "now", short constructors, and `run`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from hub import names
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import CycleInput, CycleResult, Profile, schedule
from scheduler.testing import apply_plan, binding, member_cluster, policy_snapshot
from tests.unit.scheduler.fake_plugins import fake_profile

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
PLACEMENT = "web"
SNAP = "web-1"
OLD = "web-0"

__all__ = [
    "NOW",
    "OLD",
    "PLACEMENT",
    "SNAP",
    "bound",
    "cluster",
    "converge",
    "pick_all",
    "pick_fixed",
    "pick_n",
    "run",
    "scheduled",
    "selected",
    "unscheduled",
]


def cluster(name: str, **labels: str) -> MemberCluster:
    return member_cluster(name, NOW, labels=labels)


def pick_n(n: int, **policy: object) -> ClusterSchedulingPolicySnapshot:
    return policy_snapshot(
        PLACEMENT, {"placementType": "PickN", "numberOfClusters": n, **policy}, index=1
    )


def pick_all(**policy: object) -> ClusterSchedulingPolicySnapshot:
    return policy_snapshot(PLACEMENT, {"placementType": "PickAll", **policy}, index=1)


def pick_fixed(*targets: str) -> ClusterSchedulingPolicySnapshot:
    return policy_snapshot(
        PLACEMENT, {"placementType": "PickFixed", "clusterNames": list(targets)}, index=1
    )


def scheduled(target: str, snapshot: str = SNAP, **kw: Any) -> ClusterResourceBinding:
    return binding(PLACEMENT, target, snapshot, state=names.STATE_SCHEDULED, **kw)


def bound(target: str, snapshot: str = SNAP, **kw: Any) -> ClusterResourceBinding:
    return binding(PLACEMENT, target, snapshot, state=names.STATE_BOUND, **kw)


def unscheduled(
    target: str, previous: str | None = names.STATE_BOUND, snapshot: str = OLD, **kw: Any
) -> ClusterResourceBinding:
    annotations: Mapping[str, str] = (
        {} if previous is None else {names.PREVIOUS_BINDING_STATE_ANNOTATION: previous}
    )
    return binding(
        PLACEMENT,
        target,
        snapshot,
        state=names.STATE_UNSCHEDULED,
        annotations=annotations,
        **kw,
    )


def run(
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: Sequence[MemberCluster],
    bindings: Sequence[ClusterResourceBinding] = (),
    *,
    profile: Profile | None = None,
    fresh: bool = False,
) -> CycleResult:
    return schedule(
        CycleInput(
            snapshot=snapshot,
            clusters=list(clusters),
            bindings=list(bindings),
            now=NOW,
            fresh=fresh,
        ),
        profile if profile is not None else fake_profile(),
    )


def selected(result: CycleResult) -> list[ClusterDecision]:
    write = result.plan.snapshot_status
    assert write is not None
    return [d for d in write.status.target_clusters if d.selected]


def converge(
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: Sequence[MemberCluster],
    bindings: Sequence[ClusterResourceBinding] = (),
    *,
    profile: Profile | None = None,
    max_cycles: int = 50,
) -> tuple[list[CycleResult], list[ClusterResourceBinding], ClusterSchedulingPolicySnapshot]:
    """Runs cycles, applying each plan, until a cycle asks for no requeue."""
    results: list[CycleResult] = []
    current = list(bindings)
    for _ in range(max_cycles):
        result = run(snapshot, clusters, current, profile=profile)
        results.append(result)
        current, snapshot = apply_plan(current, snapshot, result.plan)
        if not result.requeue:
            return results, current, snapshot
    raise AssertionError(f"no fixpoint after {max_cycles} cycles")
