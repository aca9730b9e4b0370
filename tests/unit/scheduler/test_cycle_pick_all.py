"""PickAll (kubefleet-rules 4.5): every feasible cluster, in name order, never removing a current
binding, condition always True."""

from __future__ import annotations

from hub import names
from hub.types import PlacementPolicy
from scheduler.bindings.naming import BINDING_NAME_CHECK
from scheduler.cycles.crossref import WHY_OBSOLETE
from scheduler.cycles.decisions import SELECTED
from scheduler.testing import apply_plan, policy_snapshot
from tests.unit.scheduler.cycle_builders import (
    OLD,
    SNAP,
    bound,
    cluster,
    pick_all,
    run,
    scheduled,
    selected,
)
from tests.unit.scheduler.fake_plugins import REASON_NOT_READY


def test_every_feasible_cluster_gets_a_binding_in_name_order() -> None:
    result = run(pick_all(), [cluster("c"), cluster("a"), cluster("b", ready="false")])
    assert [b.spec.target_cluster for b in result.plan.create] == ["a", "c"]
    new = result.plan.create[0]
    assert new.metadata.labels == {names.PARENT_PLACEMENT_LABEL: "web"}
    assert new.metadata.finalizers == [names.SCHEDULER_BINDING_CLEANUP_FINALIZER]
    assert new.spec.model_dump(by_alias=True, exclude_none=True) == {
        "state": "Scheduled",
        "resourceSnapshotName": "",
        "schedulingPolicySnapshotName": SNAP,
        "targetCluster": "a",
        "clusterDecision": {
            "clusterName": "a",
            "selected": True,
            "clusterScore": {"affinityScore": 0, "priorityScore": 0},
            "reason": SELECTED.format(cluster="a", affinity=0, topology=0),
        },
    }
    status = result.plan.snapshot_status.status  # type: ignore[union-attr]
    assert [(d.cluster_name, d.selected) for d in status.target_clusters] == [
        ("a", True),
        ("c", True),
        ("b", False),
    ]
    assert status.target_clusters[2].reason == f"ClusterUnschedulable, {REASON_NOT_READY}"
    condition = status.condition("Scheduled")
    assert (condition.status, condition.reason, condition.message) == (  # type: ignore[union-attr]
        "True",
        "SchedulingPolicyFulfilled",
        "found all cluster needed as specified by the scheduling policy, found 2 cluster(s)",
    )
    assert status.observed_crp_generation == 1


def test_no_policy_means_pick_all() -> None:
    result = run(policy_snapshot("web", None, index=1), [cluster("a")])
    assert result.outcome.placement_type == "PickAll"
    assert [b.spec.target_cluster for b in result.plan.create] == ["a"]


def test_an_empty_placement_type_means_pick_all() -> None:
    snapshot = policy_snapshot("web", PlacementPolicy(), index=1)
    assert run(snapshot, [cluster("a")]).outcome.placement_type == "PickAll"


def test_a_current_binding_on_a_cluster_that_no_longer_fits_is_kept() -> None:
    result = run(pick_all(), [cluster("a", ready="false"), cluster("b")], [bound("a")])
    assert result.plan.unschedule == []
    assert [(d.cluster_name, d.selected) for d in selected(result)] == [("b", True), ("a", True)]
    # the filtered decision for "a" is dropped: its binding's decision was seen first
    assert len(result.plan.snapshot_status.status.target_clusters) == 2  # type: ignore[union-attr]
    assert result.outcome.picked == 2 and result.outcome.fulfilled


def test_obsolete_bindings_are_re_pointed_or_unscheduled() -> None:
    bindings = [bound("a", OLD, name="x-a"), scheduled("b", OLD, name="x-b")]
    result = run(pick_all(), [cluster("a"), cluster("b", ready="false")], bindings)
    assert [p.name for p in result.plan.patch] == ["x-a"]
    assert [(p.name, p.why) for p in result.plan.unschedule] == [("x-b", WHY_OBSOLETE)]
    assert result.plan.create == []


def test_a_second_cycle_changes_nothing() -> None:
    clusters = [cluster("a"), cluster("b"), cluster("c", ready="false")]
    first = run(pick_all(), clusters)
    bindings, snapshot = apply_plan([], pick_all(), first.plan)
    second = run(snapshot, clusters, bindings)
    assert second.plan.is_empty
    assert second.explanation.kept == ["a", "b"]


def test_a_cluster_whose_name_cannot_name_a_binding_is_filtered_not_fatal() -> None:
    result = run(pick_all(), [cluster("eu.west"), cluster("a")])
    assert result.error is None
    assert [b.spec.target_cluster for b in result.plan.create] == ["a"]
    (group,) = result.explanation.filtered
    assert group.plugin == BINDING_NAME_CHECK and group.clusters == ["eu.west"]
    decision = result.plan.snapshot_status.status.target_clusters[-1]  # type: ignore[union-attr]
    assert decision.reason == (
        'ClusterUnschedulable, cluster name "eu.west" cannot be used in a binding name: '
        '"web-eu.west-xxxxxxxx" is not a valid DNS-1123 label (lowercase letters, digits and '
        "'-', starting and ending with a letter or digit)"
    )
