"""SamePlacementAntiAffinity: one binding per cluster, and a preference to stay (kubefleet-rules
5.5)."""

from __future__ import annotations

from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Code, Status
from scheduler.plugins.same_placement_anti_affinity import (
    NAME,
    REASON_ALREADY_SELECTED,
    SamePlacementAntiAffinity,
)
from tests.unit.scheduler.plugins.plugin_builders import cluster, snapshot, state

A, B, C = cluster("a"), cluster("b"), cluster("c")


def test_cluster_with_a_current_binding_is_already_selected() -> None:
    cycle = state(A, B, scheduled=["a"], obsolete=["b"])
    status = SamePlacementAntiAffinity().filter(cycle, snapshot(), A)
    assert status.code is Code.CLUSTER_ALREADY_SELECTED
    assert status.reasons == (
        "resource placement has already been scheduled or bounded on the cluster",
    )
    assert status == Status.already_selected(REASON_ALREADY_SELECTED)


def test_clusters_without_a_current_binding_pass() -> None:
    cycle = state(A, B, C, scheduled=["a"], obsolete=["b"])
    plugin = SamePlacementAntiAffinity()
    assert plugin.filter(cycle, snapshot(), B).code is Code.SUCCESS
    assert plugin.filter(cycle, snapshot(), C).code is Code.SUCCESS


def test_obsolete_binding_scores_one_others_zero() -> None:
    cycle = state(A, B, C, scheduled=["a"], obsolete=["b"])
    plugin = SamePlacementAntiAffinity()
    assert plugin.score(cycle, snapshot(), B) == (
        ClusterScore(obsolete_placement_affinity_score=1),
        Status.success(),
    )
    assert plugin.score(cycle, snapshot(), C) == (ClusterScore(), Status.success())


def test_name() -> None:
    assert SamePlacementAntiAffinity().name == NAME == "SamePlacementAntiAffinity"
