"""A ResourcePlacement's cycle (kubefleet-rules 9): the same framework as a
ClusterResourcePlacement's, with NamespaceAffinity active, and ResourceBindings in the
placement's namespace labelled with its name only."""

from __future__ import annotations

from datetime import UTC, datetime

from hub import names
from hub.types import (
    ClusterResourceBinding,
    Condition,
    MemberCluster,
    ResourceBinding,
    SchedulingPolicySnapshot,
)
from scheduler import CycleInput, schedule
from scheduler.plugins.namespace_affinity import REASON_NAMESPACE_MISSING
from scheduler.testing import binding, member_cluster, policy_snapshot

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
COLLECTED = Condition(type=names.NAMESPACE_COLLECTION_CONDITION, status=names.TRUE, reason="OK")


def collecting(name: str, namespaces: dict[str, str] | None) -> MemberCluster:
    """A cluster that reports namespace collection, with these namespaces (None: no data)."""
    cluster = member_cluster(name, NOW)
    status = cluster.status.model_copy(update={"conditions": [COLLECTED], "namespaces": namespaces})
    return cluster.model_copy(update={"status": status})


FLEET = [
    collecting("has-app", {"app": "work-1"}),
    collecting("lacks-app", {"other": "work-2"}),
    member_cluster("no-collection", NOW),
]


def test_pick_all_rp_goes_only_where_its_namespace_is_and_makes_resource_bindings() -> None:
    snapshot = policy_snapshot("web", {"placementType": "PickAll"}, namespace="app")
    assert isinstance(snapshot, SchedulingPolicySnapshot)
    result = schedule(CycleInput(snapshot=snapshot, clusters=FLEET, bindings=[], now=NOW))
    created = {b.spec.target_cluster: b for b in result.plan.create}
    assert sorted(created) == ["has-app", "no-collection"]
    for made in created.values():
        assert type(made) is ResourceBinding
        assert made.metadata.namespace == "app"
        assert made.metadata.labels == {names.PARENT_PLACEMENT_LABEL: "web"}
        assert made.spec.scheduling_policy_snapshot_name == "web-0"
    reasons = {c: g.reason for g in result.explanation.filtered for c in g.clusters}
    assert reasons["lacks-app"].endswith(REASON_NAMESPACE_MISSING)
    status = result.plan.snapshot_status
    assert status is not None
    unselected = [d for d in status.status.target_clusters if not d.selected]
    assert [d.cluster_name for d in unselected] == ["lacks-app"]


def test_the_same_policy_as_a_crp_ignores_namespaces() -> None:
    snapshot = policy_snapshot("web", {"placementType": "PickAll"})
    result = schedule(CycleInput(snapshot=snapshot, clusters=FLEET, bindings=[], now=NOW))
    assert sorted(b.spec.target_cluster for b in result.plan.create) == [
        "has-app",
        "lacks-app",
        "no-collection",
    ]
    assert all(type(b) is ClusterResourceBinding for b in result.plan.create)
    assert all(b.metadata.namespace is None for b in result.plan.create)


def test_writes_to_existing_resource_bindings_name_their_namespace() -> None:
    snapshot = policy_snapshot("web", {"placementType": "PickAll"}, index=1, namespace="app")
    # Scheduled on the old snapshot, on a cluster that lost the namespace: unscheduled; the
    # one still fitting is re-pointed at the new snapshot.
    old = [
        binding("web", "lacks-app", "web-0", namespace="app"),
        binding("web", "has-app", "web-0", namespace="app"),
    ]
    result = schedule(CycleInput(snapshot=snapshot, clusters=FLEET, bindings=old, now=NOW))
    patches = [*result.plan.patch, *result.plan.unschedule]
    assert {p.name for p in patches} == {"web-lacks-app-0", "web-has-app-0"}
    assert {p.namespace for p in patches} == {"app"}
    (unscheduled,) = result.plan.unschedule
    assert unscheduled.name == "web-lacks-app-0"
