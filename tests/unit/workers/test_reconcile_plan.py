"""The reconcile's decisions, from what it read: start, finish, requeue, or leave alone."""

from __future__ import annotations

from datetime import UTC, datetime

from hub import names
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.testing import binding, member_cluster, policy_snapshot
from workers.reconcile import GONE_REASON, START_REASON, plan_reconcile

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def placement(name: str, generation: int = 1, policy: str = "PickAll") -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {
                "name": name,
                "generation": generation,
                "finalizers": [names.SCHEDULER_CLEANUP_FINALIZER],
            },
            "spec": {
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace"}],
                "policy": {"placementType": policy},
            },
        }
    )


def scheduled(name: str, crp_generation: int = 1) -> ClusterSchedulingPolicySnapshot:
    """The latest snapshot, reported on by the scheduler for its own and the placement's
    generation."""
    snapshot = policy_snapshot(name, {"placementType": "PickAll"}, crp_generation=crp_generation)
    status = {
        "observedCRPGeneration": crp_generation,
        "conditions": [
            {
                "type": names.SCHEDULED_CONDITION,
                "status": names.TRUE,
                "reason": "SchedulingPolicyFulfilled",
                "message": "",
                "observedGeneration": snapshot.metadata.generation,
                "lastTransitionTime": NOW.isoformat(),
            }
        ],
    }
    return ClusterSchedulingPolicySnapshot.model_validate(
        {**snapshot.model_dump(mode="json", by_alias=True), "status": status}
    )


def clusters(*labels: str) -> list[MemberCluster]:
    return [member_cluster(f"c{i}", NOW, labels={"env": env}) for i, env in enumerate(labels)]


def plan(**overrides: object):  # type: ignore[no-untyped-def]
    read: dict[str, object] = {
        "placements": [placement("a"), placement("b")],
        "latest_snapshots": [scheduled("a"), scheduled("b")],
        "clusters": clusters("prod", "dev"),
        "bindings": [binding("a", "c0", "a-0"), binding("b", "c1", "b-0")],
        "running": {"a", "b"},
        "previous_clusters": None,
    }
    read.update(overrides)
    return plan_reconcile(**read, standalone=True, now=NOW)  # type: ignore[arg-type]


def test_nothing_changed_means_nothing_to_do_and_the_next_run_sees_the_same_fleet() -> None:
    first = plan()
    again = plan(previous_clusters=first.clusters)
    assert (again.start, again.finish, again.requeue) == ({}, {}, {})
    assert set(first.clusters) == {"c0", "c1"} and again.clusters == first.clusters


def test_a_placement_without_a_workflow_is_started_and_an_orphan_finished() -> None:
    result = plan(running={"a", "gone"})
    assert result.start == {"b": START_REASON}
    assert result.finish == {"gone": GONE_REASON}
    assert result.requeue == {}


def test_a_placement_whose_scheduling_lags_its_generation_is_requeued() -> None:
    result = plan(placements=[placement("a", generation=2), placement("b")])
    assert list(result.requeue) == ["a"]
    assert "not scheduled for its generation" in result.requeue["a"]


def test_a_relabelled_or_deleted_cluster_reaches_the_placements_kubefleet_would_requeue() -> None:
    before = plan().clusters
    relabelled = plan(clusters=clusters("staging", "dev"), previous_clusters=before)
    assert set(relabelled.requeue) == {"a", "b"}  # PickAll: every cluster change matters
    assert "cluster c0 changed" in relabelled.requeue["a"]
    gone = plan(clusters=clusters("prod"), previous_clusters=before)
    assert "binding b-c1-0 targets a cluster that is gone" in gone.requeue["b"]
    assert "cluster c1 left the fleet" in gone.requeue["a"]


def test_a_binding_being_deleted_requeues_its_placement() -> None:
    deleting = binding("a", "c0", "a-0", deleting=NOW)
    result = plan(bindings=[deleting, binding("b", "c1", "b-0")])
    assert list(result.requeue) == ["a"]
