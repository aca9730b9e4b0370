"""Builders for hub objects the activity tests start from, what KubeFleet's other controllers
write (a binding made Available, a move's new binding), and small readers of the result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Final

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.testing import ActivityEnvironment

from activities.cleanup import CleanupPlacement
from activities.fleet_state import read_fleet_state
from activities.plumbing import ActivitySettings
from activities.snapshotter import sync_policy_snapshots
from activities.turn import ScheduleOnce
from control.routes import Room, route_change
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    Condition,
    MemberCluster,
)
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.invariants import find_violations
from scheduler.testing import member_cluster, policy_snapshot
from tests.support.policies import prod_only
from workers.metrics import SchedulerMetrics
from workflows.models import CycleReport, PrepareResult, TurnRequest, TurnResult

SELECTOR: Final = {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
WRITE_VERBS: Final = ("create", "update", "patch", "delete", "deletecollection")


class Activities:
    """Both activities of a worker, bound to one HubClient and one ActivitySettings."""

    def __init__(self, hub: HubClient, settings: ActivitySettings) -> None:
        self.settings = settings
        self.schedule_once = ScheduleOnce(hub, settings).schedule_once
        self.cleanup_placement = CleanupPlacement(hub, settings).cleanup_placement


@dataclass
class Rig:
    """A worker's activities and what they report on the side."""

    activities: Activities
    metrics: SchedulerMetrics
    spans: InMemorySpanExporter


def add_cluster(
    hub: HubClient,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[tuple[str, str | None]] = (),
    allocatable: Mapping[str, str] | None = None,
) -> MemberCluster:
    """A joined, healthy MemberCluster with a fresh heartbeat (status written as an agent would)."""
    wanted = member_cluster(
        name, datetime.now(UTC), labels=labels, taints=taints, allocatable=allocatable
    )
    created = hub.create(wanted)  # the hub drops status on create
    return hub.update_status(created.model_copy(update={"status": wanted.status}))


def add_placement(
    hub: HubClient,
    name: str,
    policy: Mapping[str, Any] | None,
    *,
    annotations: Mapping[str, str] | None = None,
) -> ClusterResourcePlacement:
    spec: dict[str, Any] = {"resourceSelectors": [SELECTOR]}
    if policy is not None:
        spec["policy"] = dict(policy)
    metadata = {"name": name, "annotations": dict(annotations or {})}
    return hub.create(ClusterResourcePlacement.from_wire({"metadata": metadata, "spec": spec}))


def add_snapshot(
    hub: HubClient,
    placement: str,
    policy: Mapping[str, Any] | None,
    *,
    index: int = 0,
    latest: bool = True,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> ClusterSchedulingPolicySnapshot:
    """A policy snapshot as KubeFleet's placement controller makes it (for --no-snapshotter)."""
    model = policy_snapshot(placement, policy, index=index)
    meta = model.metadata.model_copy(
        update={
            "resource_version": None,
            "generation": None,
            "labels": {
                **model.metadata.labels,
                names.IS_LATEST_SNAPSHOT_LABEL: "true" if latest else "false",
                **(labels or {}),
            },
            "annotations": {**model.metadata.annotations, **(annotations or {})},
        }
    )
    return hub.create(model.model_copy(update={"metadata": meta}))


def bindings_of(hub: HubClient, placement: str) -> list[ClusterResourceBinding]:
    listed = hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: placement})
    return sorted(listed, key=lambda b: b.spec.target_cluster)


def targets(bindings: Sequence[ClusterResourceBinding], state: str | None = None) -> list[str]:
    return [b.spec.target_cluster for b in bindings if state is None or b.spec.state == state]


def placement_condition(hub: HubClient, placement: str) -> Condition | None:
    crp = hub.get(ClusterResourcePlacement, placement)
    return crp.status.condition(names.PLACEMENT_SCHEDULED_CONDITION)


def writes(devhub: DevHub, resource: str = "*") -> int:
    """Every write request devhub served for `resource` since its stats were cleared."""
    return sum(devhub.stats.count(verb, resource) for verb in WRITE_VERBS)


def sync_snapshots(hub: HubClient, placement: str) -> tuple[str, str]:
    """The snapshotter's part of a turn alone, so a test can act between it and the cycle:
    returns the latest snapshot's name and what the sync did."""
    synced = sync_policy_snapshots(hub, hub.get(ClusterResourcePlacement, placement))
    assert synced.latest is not None and len(synced.latest) == 1, synced
    return synced.latest[0].name, synced.action


def turn(
    env: ActivityEnvironment,
    activities: Activities,
    placement: str,
    number: int = 1,
    *,
    fresh: bool = False,
) -> TurnResult:
    """One workflow loop turn: `schedule_once` for cycle `number`."""
    request = TurnRequest(placement=placement, cycle=number, fresh=fresh, reason="test")
    result: TurnResult = env.run(activities.schedule_once, request)
    return result


def prepare(env: ActivityEnvironment, activities: Activities, placement: str) -> PrepareResult:
    """How a turn's first half ended (a ready placement's turn also ran its cycle)."""
    return turn(env, activities, placement).prepared


def cycle(
    env: ActivityEnvironment,
    activities: Activities,
    placement: str,
    snapshot: str,
    number: int = 1,
    *,
    fresh: bool = False,
) -> CycleReport:
    """A turn that must find `snapshot` ready and run cycle `number` on it."""
    result = turn(env, activities, placement, number, fresh=fresh)
    assert result.report is not None, result.prepared
    assert result.report.snapshot == snapshot, (result.report.snapshot, snapshot)
    return result.report


def prepare_and_cycle(
    env: ActivityEnvironment, activities: Activities, placement: str, number: int = 1
) -> tuple[PrepareResult, CycleReport]:
    """One workflow loop turn that finds the placement ready."""
    result = turn(env, activities, placement, number)
    assert result.prepared.phase == "ready", result.prepared
    assert result.report is not None
    return result.prepared, result.report


def violations(hub: HubClient, kinds: set[str]) -> list[str]:
    """The messages of the invariants of `kinds` that `check` finds broken on the hub now."""
    state = read_fleet_state(hub, resource_placements=False)
    return [v.message for v in find_violations(state, datetime.now(UTC)) if v.invariant in kinds]


def routes_for(
    hub: HubClient, change: Any, *, ledgers: Mapping[str, Any] | None = None
) -> list[tuple[str, str]]:
    """(placement, reason) of what the watcher routes for `change`, its caches holding what the
    hub holds now (`ledgers` instead of the hub's, when given)."""
    room = Room(
        clusters={c.name: c for c in hub.list(MemberCluster).items},
        ledgers=(
            dict(ledgers) if ledgers is not None
            else {ledger.name: ledger for ledger in hub.list(CapacityLedger).items}
        ),
        bindings=hub.list(ClusterResourceBinding).items,
    )  # fmt: skip
    routes = route_change(
        change,
        placements={p.name: p for p in hub.list(ClusterResourcePlacement).items},
        standalone=True,
        checker=EligibilityChecker(),
        now=datetime.now(UTC),
        room=room,
    )
    return [(r.placement, r.reason) for r in routes]


def add_budget(hub: HubClient, placement: str, **spec: Any) -> None:
    """A ClusterResourcePlacementDisruptionBudget for `placement` (maxUnavailable=..., or
    minAvailable=...), as a person writes one."""
    hub.create(
        ClusterResourcePlacementDisruptionBudget.from_wire(
            {"metadata": {"name": placement}, "spec": spec}
        )
    )


def make_available(hub: HubClient, binding: ClusterResourceBinding) -> ClusterResourceBinding:
    """What KubeFleet's rollout writes once the binding's resources run on the member: its
    Available condition, True at the binding's generation."""
    condition = {
        "type": names.BINDING_AVAILABLE_CONDITION,
        "status": names.TRUE,
        "reason": "Available",
        "message": "",
        "observedGeneration": binding.metadata.generation or 0,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    return hub.update_status(
        binding.model_copy(update={"status": {**binding.status, "conditions": [condition]}})
    )


def new_binding_for_move(
    hub: HubClient, placement: str, target: str, move: object
) -> ClusterResourceBinding:
    """The binding `activities.moves` creates for `move` (its name, decision and reservation)."""
    from activities.capacity import reserve
    from activities.moves import REBALANCE, _decided
    from hub.types import ClusterDecision, ClusterSchedulingPolicySnapshot
    from scheduler.bindings.naming import binding_name
    from scheduler.bindings.writes import new_binding

    [snapshot] = hub.list(
        ClusterSchedulingPolicySnapshot, {names.PARENT_PLACEMENT_LABEL: placement}
    ).items
    used = {b.name for b in bindings_of(hub, placement)}
    name = binding_name(placement, target, snapshot.name, used)
    reserve(
        hub, target, {"cpu": "8"}, name, placement, {"cpu": Fraction(4)}, lambda: datetime.now(UTC)
    )
    decision = ClusterDecision(
        cluster_name=target,
        selected=True,
        reason=_decided(move, REBALANCE),  # type: ignore[arg-type]
    )
    return new_binding(name, placement, target, snapshot.name, decision)


# Placements that ask for affinity enforcement (docs/enforcement.md), and their rule: env=prod.
ENFORCED: Final = {names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"}
PROD: Final = prod_only()


def relabel(hub: HubClient, cluster: str, labels: Mapping[str, str]) -> None:
    """The member cluster's labels become `labels`, as its owner relabels it."""
    found = hub.get(MemberCluster, cluster)
    meta = found.metadata.model_copy(update={"labels": dict(labels)})
    hub.update(found.model_copy(update={"metadata": meta}))


def active(hub: HubClient, placement: str) -> dict[str, ClusterResourceBinding]:
    """The placement's bindings that are not Unscheduled, by target cluster."""
    return {
        b.spec.target_cluster: b
        for b in bindings_of(hub, placement)
        if b.spec.state != names.STATE_UNSCHEDULED
    }


def pick_n(count: int, **extra: Any) -> dict[str, Any]:
    """A PickN policy of `count` clusters that requires env=prod."""
    return {"placementType": "PickN", "numberOfClusters": count, **PROD, **extra}
