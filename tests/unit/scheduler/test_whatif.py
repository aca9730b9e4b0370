"""scheduler.explain.whatif: two profiles' decisions on the same reads, compared (`plan --all`)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hub.types import ClusterResourceBinding, MemberCluster
from scheduler import CycleInput, Profile, default_profile, load_profile, schedule
from scheduler.cycles.plan import BindingPatch, BindingPlan
from scheduler.explain.whatif import (
    DETAIL_HOLDS,
    DETAIL_KEPT,
    FATE_LOST,
    ClusterChange,
    Fate,
    PlacementWhatIf,
    compare_profiles,
    selected_after,
    summarize,
)
from scheduler.testing import member_cluster
from tests.unit.scheduler.cycle_builders import (
    NOW,
    PLACEMENT,
    SNAP,
    cluster,
    pick_all,
    pick_n,
    scheduled,
    unscheduled,
)

TIER = "tier"
PREFERRED = {
    "affinity": {
        "clusterAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 40, "preference": {"labelSelector": {"matchLabels": {TIER: "silver"}}}},
                {"weight": 10, "preference": {"labelSelector": {"matchLabels": {TIER: "gold"}}}},
            ]
        }
    }
}
# Without ClusterAffinity's scores every cluster ties, and the larger name wins.
NO_AFFINITY_SCORES = load_profile(
    "name: flat\nplugins:\n  score:\n    disabled: [{name: ClusterAffinity}]\n"
)
NO_TAINTS = load_profile(
    "name: no-taints\nplugins:\n  multiPoint:\n    disabled: [{name: TaintToleration}]\n"
)
CLUSTERS = [cluster("a-silver", tier="silver"), cluster("z-gold", tier="gold")]


def compare(
    snapshot_policy: object,
    clusters: Sequence[MemberCluster],
    bindings: Sequence[ClusterResourceBinding] = (),
    candidate: Profile = NO_AFFINITY_SCORES,
) -> PlacementWhatIf:
    return compare_profiles(
        PLACEMENT,
        CycleInput(
            snapshot=snapshot_policy, clusters=list(clusters), bindings=list(bindings), now=NOW
        ),
        default_profile(),
        candidate,
    )


def test_a_steady_pick_n_change_shows_only_when_it_next_evaluates() -> None:
    # It holds z-gold; evaluating again, the default prefers silver, the candidate keeps
    # where it is (every score ties, and holding the binding breaks the tie).
    result = compare(pick_n(1, **PREFERRED), CLUSTERS, [scheduled("z-gold")])
    assert result.changed and not result.at_next_turn
    assert result.changes == (
        ClusterChange(
            cluster="a-silver",
            added=False,
            now=Fate("not picked", "affinity 0", scored=True),
            was=Fate("picked", "affinity 40", scored=True),
        ),
        ClusterChange(
            cluster="z-gold",
            added=True,
            now=Fate("picked", f"affinity 0, {DETAIL_HOLDS}", scored=True),
            was=Fate("not picked", f"affinity 10, {DETAIL_HOLDS}", scored=True),
        ),
    )


def test_a_pick_n_short_of_n_changes_at_its_next_turn() -> None:
    result = compare(pick_n(1, **PREFERRED), CLUSTERS)
    assert result.at_next_turn
    assert [(c.cluster, c.added) for c in result.changes] == [
        ("a-silver", False),
        ("z-gold", True),
    ]


def test_a_plugin_removed_adds_tainted_clusters_to_pick_all_at_its_next_turn() -> None:
    tainted = member_cluster("gpu-1", NOW, taints=[("gpu", "true")])
    result = compare(pick_all(), [*CLUSTERS, tainted], candidate=NO_TAINTS)
    assert result.at_next_turn
    (change,) = result.changes
    assert change.cluster == "gpu-1" and change.added
    assert change.now == Fate("picked")
    assert change.was.state == "filtered by TaintToleration"
    assert "gpu" in change.was.detail


@pytest.mark.parametrize(
    "snapshot",
    [pick_n(1, **PREFERRED), pick_all()],
    ids=["pick-n", "pick-all"],
)
def test_the_same_profile_changes_nothing(snapshot: object) -> None:
    result = compare(snapshot, CLUSTERS, [scheduled("z-gold")], candidate=default_profile())
    assert not result.changed
    assert result.changes == ()


def test_selected_after_applies_the_plan_to_the_active_bindings() -> None:
    bindings = [
        scheduled("a", name="b-a"),
        scheduled("b", name="b-b"),
        unscheduled("c", name="b-c"),
    ]

    def patch(name: str) -> BindingPatch:
        return BindingPatch(name=name, resource_version="1", merge_patch={}, why="")

    plan = BindingPlan(
        create=[scheduled("d", snapshot=SNAP, name="b-d")],
        patch=[patch("b-c")],
        unschedule=[patch("b-a")],
    )
    assert selected_after(bindings, plan) == {"b", "c", "d"}
    assert selected_after(bindings, BindingPlan()) == {"a", "b"}


def test_the_summary_counts_moves_and_ranks_clusters_by_net_change() -> None:
    def change(cluster: str, added: bool) -> ClusterChange:
        return ClusterChange(cluster=cluster, added=added, now=Fate("picked"), was=Fate("x"))

    placements = [
        PlacementWhatIf("p1", "PickN", (change("a", True), change("b", False))),
        PlacementWhatIf("p2", "PickN", (change("a", True), change("c", False))),
        PlacementWhatIf("p3", "PickAll", (change("a", True), change("c", True))),
        PlacementWhatIf("p4", "PickAll"),
    ]
    fleet = summarize(placements)
    assert [p.placement for p in fleet.changed] == ["p1", "p2", "p3"]
    assert (fleet.added, fleet.removed) == (4, 2)
    # a: +3; b: -1; c: +1 -1 (net 0, but it churns)
    assert fleet.busiest(5) == [("a", 3, 0), ("b", 0, 1), ("c", 1, 1)]
    assert fleet.busiest(1) == [("a", 3, 0)]


def test_a_pick_n_change_at_its_next_turn_is_what_its_next_turn_does() -> None:
    """Short of N, a PickN placement's next turn keeps what it holds and picks the rest: what
    `plan` says comes "at its next turn" must be that turn's difference, not the difference of
    two fresh cycles (which would drop, and then re-add, the cluster it already holds)."""
    clusters = [
        cluster("a-silver", tier="silver"),
        cluster("b-silver", tier="silver"),
        cluster("y-gold", tier="gold"),
        cluster("z-gold", tier="gold"),
    ]
    held = [scheduled("z-gold")]
    snapshot = pick_n(2, **PREFERRED)
    result = compare(snapshot, clusters, held)
    assert result.at_next_turn
    # What the next turn does under each profile (the real turn runs this normal cycle).
    turn = CycleInput(snapshot=snapshot, clusters=clusters, bindings=held, now=NOW)
    was = selected_after(held, schedule(turn, default_profile()).plan)
    now = selected_after(held, schedule(turn, NO_AFFINITY_SCORES).plan)
    assert (was, now) == ({"b-silver", "z-gold"}, {"y-gold", "z-gold"})
    assert [(c.cluster, c.added) for c in result.changes] == [("b-silver", False), ("y-gold", True)]


def test_an_enforcing_pick_all_drops_a_cluster_its_candidate_filters_at_its_next_turn() -> None:
    """KubeFleet's PickAll keeps a cluster it holds when the cluster stops passing
    (IgnoredDuringExecution); one that enforces its affinity during execution unschedules the
    binding at its next turn (docs/enforcement.md): with the profile's own filters, so a
    candidate that filters more drops it, and plan says so and why."""
    tainted = member_cluster("gpu-1", NOW, taints=[("gpu", "true")])
    held = [scheduled("gpu-1"), scheduled("z-gold"), scheduled("a-silver")]
    input = CycleInput(
        snapshot=pick_all(), clusters=[*CLUSTERS, tainted], bindings=held, now=NOW
    )
    kubefleet = compare_profiles(PLACEMENT, input, NO_TAINTS, default_profile())
    assert not kubefleet.changed
    enforcing = compare_profiles(PLACEMENT, input, NO_TAINTS, default_profile(), enforcing=True)
    assert enforcing.at_next_turn
    (change,) = enforcing.changes
    assert change.cluster == "gpu-1" and not change.added
    assert change.now.state == FATE_LOST
    assert "taint gpu=true:NoSchedule" in change.now.detail
    assert change.was == Fate("kept", DETAIL_KEPT)
    # The other way round: the candidate stops enforcing the taint, and nothing is dropped.
    back = compare_profiles(PLACEMENT, input, default_profile(), NO_TAINTS, enforcing=True)
    assert [(c.cluster, c.added) for c in back.changes] == [("gpu-1", True)]


def test_an_enforcing_pick_n_moves_a_binding_its_candidate_filters_at_its_next_turn() -> None:
    tainted = member_cluster("gpu-1", NOW, taints=[("gpu", "true")])
    input = CycleInput(
        snapshot=pick_n(1, **PREFERRED),
        clusters=[*CLUSTERS, tainted],
        bindings=[scheduled("gpu-1")],
        now=NOW,
    )
    assert not compare_profiles(PLACEMENT, input, NO_TAINTS, default_profile()).changed
    moved = compare_profiles(PLACEMENT, input, NO_TAINTS, default_profile(), enforcing=True)
    assert moved.at_next_turn
    assert [(c.cluster, c.added, c.now.state) for c in moved.changes] == [
        ("a-silver", True, "picked"),
        ("gpu-1", False, FATE_LOST),
    ]
