"""PickN (kubefleet-rules 4.6): ranking, ties, the three branches, downscale order,
cross-referencing,
requeue on a batch limit, fresh, and percentageOfClustersToScore."""

from __future__ import annotations

import pytest

from hub import names
from scheduler import ScoreMode
from scheduler.cycles.crossref import WHY_DUPLICATE, WHY_OBSOLETE, WHY_REPOINT, WHY_REVIVE
from scheduler.cycles.decisions import NOT_PICKED, SELECTED
from scheduler.cycles.pick_n import WHY_DOWNSCALE, WHY_DOWNSCALE_OBSOLETE
from scheduler.testing import apply_plan, binding, member_cluster, policy_snapshot
from tests.unit.scheduler.cycle_builders import (
    NOW,
    OLD,
    SNAP,
    bound,
    cluster,
    converge,
    pick_n,
    run,
    scheduled,
    selected,
    unscheduled,
)
from tests.unit.scheduler.fake_plugins import REASON_NOT_READY, fake_profile

PREV = names.PREVIOUS_BINDING_STATE_ANNOTATION


def created(result: object) -> list[str]:
    return [b.spec.target_cluster for b in result.plan.create]  # type: ignore[attr-defined]


def unscheduled_names(result: object) -> list[str]:
    return [p.name for p in result.plan.unschedule]  # type: ignore[attr-defined]


# --- ranking ------------------------------------------------------------------------------


def test_equal_scores_pick_the_larger_names() -> None:
    result = run(pick_n(2), [cluster("member-1"), cluster("member-3"), cluster("member-2")])
    assert created(result) == ["member-3", "member-2"]
    assert result.explanation.picked[0].clusters == ["member-3", "member-2"]
    assert result.explanation.not_picked[0].clusters == ["member-1"]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({"a": {"affinity": "5"}, "b": {}}, ["a"], id="affinity-beats-name"),
        pytest.param(
            {"a": {"topology": "1"}, "b": {"affinity": "90"}}, ["a"], id="topology-beats-affinity"
        ),
        pytest.param(
            {"a": {"topology": "-1000", "affinity": "100"}, "b": {}},
            ["b"],
            id="penalty-outranks-any-affinity",
        ),
    ],
)
def test_components_are_compared_in_order_never_summed(
    labels: dict[str, dict[str, str]], expected: list[str]
) -> None:
    result = run(pick_n(1), [cluster(n, **kv) for n, kv in labels.items()])
    assert created(result) == expected


def test_weighted_sum_profile_ranks_by_the_total() -> None:
    clusters = [cluster("a", topology="1"), cluster("b", affinity="90")]
    profile = fake_profile(mode=ScoreMode.WEIGHTED_SUM)
    assert created(run(pick_n(1), clusters, profile=profile)) == ["b"]
    clusters = [cluster("a", affinity="3"), cluster("b", affinity="3")]
    assert created(run(pick_n(1), clusters, profile=profile)) == ["b"]


def test_the_explanation_gives_every_cluster_one_fate() -> None:
    clusters = [cluster("a", affinity="9"), cluster("b"), cluster("c", ready="false"), cluster("d")]
    result = run(pick_n(2), clusters, [bound("d")])
    assert result.explanation.fates() == [
        ("a", "picked (affinity 9, topology spread 0)"),
        ("b", "not picked (affinity 0, topology spread 0)"),
        ("c", f"filtered by Ready: ClusterUnschedulable, {REASON_NOT_READY}"),
        ("d", "kept: already has a binding of this snapshot"),
    ]
    plan = result.plan
    assert (result.outcome.picked, result.outcome.wanted) == (2, 2)
    assert (len(plan.create), len(plan.patch), len(plan.unschedule)) == (1, 0, 0)
    assert plan.snapshot_status is not None


def test_selected_and_not_picked_decisions_read_exactly_as_kubefleet() -> None:
    result = run(pick_n(1), [cluster("a", affinity="20"), cluster("b", topology="-3")])
    write = result.plan.snapshot_status
    assert write is not None
    a, b = write.status.target_clusters
    assert a.reason == (
        'Successfully scheduled resources for placement in "a" (affinity score: 20, '
        "topology spread score: 0): picked by scheduling policy"
    )
    assert (a.cluster_score.affinity_score, a.cluster_score.priority_score) == (20, 0)  # type: ignore[union-attr]
    assert (
        b.reason
        == 'Cluster "b" does not score high enough (affinity score: 0, topology spread score: -3)'
    )
    assert not b.selected and b.cluster_score is not None


def test_filtered_clusters_get_the_status_string_and_no_score() -> None:
    result = run(pick_n(2), [cluster("a"), cluster("b", ready="false")])
    write = result.plan.snapshot_status
    assert write is not None
    decision = write.status.target_clusters[-1]
    assert (decision.cluster_name, decision.selected, decision.cluster_score) == ("b", False, None)
    assert decision.reason == f"ClusterUnschedulable, {REASON_NOT_READY}"
    group = result.explanation.filtered[0]
    assert (group.plugin, group.clusters) == ("Ready", ["b"])


def test_too_few_clusters_picks_what_it_can_and_says_so() -> None:
    result = run(pick_n(3), [cluster("a"), cluster("b")])
    condition = result.plan.snapshot_status.status.condition("Scheduled")  # type: ignore[union-attr]
    assert created(result) == ["b", "a"]
    assert (condition.status, condition.reason) == ("False", "SchedulingPolicyUnfulfilled")
    assert condition.message == (
        "could not find all clusters needed as specified by the scheduling policy, "
        "found 2 cluster(s) instead"
    )
    assert not result.requeue
    assert result.outcome.model_dump() == {
        "placementType": "PickN",
        "wanted": 3,
        "picked": 2,
        "fulfilled": False,
    }


# --- branch C: schedule more ----------------------------------------------------------------


def test_existing_current_bindings_are_kept_and_only_the_gap_is_filled() -> None:
    clusters = [cluster("a"), cluster("b"), cluster("c", affinity="1")]
    result = run(pick_n(2), clusters, [bound("a")])
    assert created(result) == ["c"]
    assert result.explanation.kept == ["a"]
    assert [d.cluster_name for d in selected(result)] == ["c", "a"]
    assert result.explanation.branch == "schedule"


def test_a_bound_binding_on_a_now_filtered_cluster_is_kept() -> None:
    clusters = [cluster("a", ready="false"), cluster("b")]
    result = run(pick_n(2), clusters, [bound("a")])
    assert created(result) == ["b"]
    assert result.plan.unschedule == []
    # a's decision comes from its binding (selected), not from the filter
    assert [
        (d.cluster_name, d.selected) for d in result.plan.snapshot_status.status.target_clusters
    ] == [  # type: ignore[union-attr]
        ("b", True),
        ("a", True),
    ]


def test_number_of_clusters_going_up_schedules_more() -> None:
    clusters = [cluster(n) for n in "abcd"]
    bindings = [bound("a"), scheduled("b")]
    assert run(pick_n(2), clusters, bindings).plan.binding_writes == 0
    result = run(pick_n(3), clusters, bindings)
    assert created(result) == ["d"]


def test_an_obsolete_binding_is_re_picked_and_patched_keeping_its_state() -> None:
    # After a policy change both bindings are obsolete; the obsolete-placement preference
    # beats the larger name "c".
    clusters = [cluster("a"), cluster("b"), cluster("c")]
    result = run(
        pick_n(2), clusters, [bound("a", OLD, name="x-a"), scheduled("b", OLD, name="x-b")]
    )
    assert result.plan.create == []
    patches = {p.name: p for p in result.plan.patch}
    assert set(patches) == {"x-a", "x-b"}
    spec = patches["x-a"].merge_patch["spec"]
    assert spec["schedulingPolicySnapshotName"] == SNAP  # type: ignore[index]
    assert "state" not in spec  # type: ignore[operator]
    assert spec["clusterDecision"]["reason"] == SELECTED.format(cluster="a", affinity=0, topology=0)  # type: ignore[index]
    assert patches["x-a"].merge_patch["metadata"] == {"resourceVersion": "1"}
    assert patches["x-a"].why == WHY_REPOINT


def test_obsolete_bindings_not_picked_are_unscheduled_with_other_annotations_kept() -> None:
    clusters = [cluster("a", affinity="1"), cluster("b")]
    old = bound("b", OLD, name="x-b", annotations={"team": "blue"})
    result = run(pick_n(1), clusters, [old])
    assert created(result) == ["a"]
    (patch,) = result.plan.unschedule
    assert patch.merge_patch == {
        "metadata": {"annotations": {PREV: "Bound"}, "resourceVersion": "1"},
        "spec": {"state": "Unscheduled"},
    }
    assert patch.why == WHY_OBSOLETE


def test_an_unscheduled_binding_of_a_picked_cluster_is_revived_and_its_annotation_removed() -> None:
    old = unscheduled("a", previous="Bound", name="x-a")
    result = run(pick_n(1), [cluster("a")], [old])
    (patch,) = result.plan.patch
    assert patch.why == WHY_REVIVE
    assert patch.merge_patch["spec"]["state"] == "Bound"  # type: ignore[index]
    assert patch.merge_patch["metadata"] == {"annotations": {PREV: None}, "resourceVersion": "1"}
    bindings, _ = apply_plan([old], pick_n(1), result.plan)
    assert bindings[0].spec.state == "Bound" and PREV not in bindings[0].metadata.annotations


def test_an_unscheduled_binding_without_previous_state_fails_the_cycle_cleanly() -> None:
    old = unscheduled("a", previous=None, name="x-a")
    result = run(pick_n(1), [cluster("a")], [old])
    assert result.error == (
        "binding 'x-a' is Unscheduled but has no kubernetes-fleet.io/previous-binding-state "
        "annotation, so it cannot be revived"
    )
    assert result.plan.binding_writes == 0
    condition = result.plan.snapshot_status.status.condition("Scheduled")  # type: ignore[union-attr]
    assert (condition.status, condition.reason) == ("False", "SchedulingPolicyUnfulfilled")
    assert condition.message == f"scheduling failed: {result.error}"


def test_two_bindings_of_one_picked_cluster_are_not_both_revived() -> None:
    bindings = [
        bound("a", OLD, name="x-a1"),
        scheduled("a", "web-00", name="x-a2"),
        unscheduled("a", name="x-a3"),
    ]
    result = run(pick_n(1), [cluster("a")], bindings)
    assert [p.name for p in result.plan.patch] == ["x-a1"]
    assert [(p.name, p.why) for p in result.plan.unschedule] == [("x-a2", WHY_DUPLICATE)]


# --- branches A and B ---------------------------------------------------------------------


def test_steady_state_only_refreshes_the_status_from_the_bindings() -> None:
    result = run(
        pick_n(2), [cluster("a"), cluster("b"), cluster("c")], [scheduled("a"), bound("b")]
    )
    assert result.plan.binding_writes == 0
    assert result.explanation.branch == "steady"
    # groups (bound, scheduled): b first
    assert [d.cluster_name for d in selected(result)] == ["b", "a"]
    assert len(result.plan.snapshot_status.status.target_clusters) == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("n", "bindings", "trimmed", "remaining"),
    [
        pytest.param(
            2,
            [
                scheduled("a", score=(5, 0)),
                scheduled("b", score=(1, 0)),
                scheduled("c", score=None),
                bound("d", score=(0, 0)),
            ],
            ["c", "b"],
            ["a", "d"],
            id="some-scheduled-unscored-first",
        ),
        pytest.param(
            2,
            [scheduled("a", score=(9, 0)), scheduled("b", score=(9, 0)), bound("c"), bound("d")],
            ["a", "b"], ["c", "d"],
            id="all-scheduled-before-any-bound",
        ),
        pytest.param(
            1,
            [
                scheduled("a"),
                bound("b", score=(3, 0)),
                bound("c", score=(1, 0)),
                bound("d", score=None),
            ],
            ["a", "d", "c"],
            ["b"],
            id="scheduled-then-lowest-bound",
        ),
        pytest.param(
            2,
            [bound("a", score=(0, 2)), bound("b", score=(50, 1)), bound("c", score=(0, 1))],
            ["c"], ["a", "b"],
            id="topology-first-then-affinity",
        ),
        pytest.param(
            2,
            [bound("a", score=(1, 0)), bound("b", score=(1, 0)), bound("c", score=(1, 0))],
            ["a"], ["b", "c"],
            id="ties-drop-the-smaller-name",
        ),
        pytest.param(0, [scheduled("a"), bound("b")], ["a", "b"], [], id="down-to-zero"),
    ],
)
def test_downscale_trims_the_lowest_ranked_bindings(
    n: int, bindings: list[object], trimmed: list[str], remaining: list[str]
) -> None:
    clusters = [cluster(c) for c in "abcd"]
    result = run(pick_n(n), clusters, bindings)  # type: ignore[arg-type]
    targets = {b.metadata.name: b.spec.target_cluster for b in bindings}  # type: ignore[attr-defined]
    assert [targets[p.name] for p in result.plan.unschedule] == trimmed
    assert {p.why for p in result.plan.unschedule} <= {WHY_DOWNSCALE}
    assert (
        sorted(d.cluster_name for d in result.plan.snapshot_status.status.target_clusters)
        == remaining
    )  # type: ignore[union-attr]
    assert result.explanation.branch == "downscale"
    assert result.outcome.fulfilled


def test_lingering_obsolete_bindings_alone_trigger_the_cleanup_branch() -> None:
    bindings = [bound("a"), bound("b"), bound("c", OLD, name="x-c")]
    result = run(pick_n(2), [cluster(c) for c in "abc"], bindings)
    assert [(p.name, p.why) for p in result.plan.unschedule] == [("x-c", WHY_DOWNSCALE_OBSOLETE)]
    assert result.plan.create == []


# --- requeue ------------------------------------------------------------------------------


def test_a_batch_limit_of_one_schedules_one_cluster_per_cycle_and_requeues() -> None:
    clusters = [cluster(c, affinity=str(i)) for i, c in enumerate("abcd")]
    profile = fake_profile(batch=1)
    first = run(pick_n(3), clusters, profile=profile)
    assert (created(first), first.requeue, first.plan.snapshot_status) == (["d"], True, None)
    assert first.requeue_after_seconds is None  # KubeFleet never asks for a delayed requeue
    results, bindings, snapshot = converge(pick_n(3), clusters, profile=profile)
    assert [r.requeue for r in results] == [True, True, False]
    assert sorted(b.spec.target_cluster for b in bindings) == ["b", "c", "d"]
    condition = snapshot.status.condition("Scheduled")
    assert condition is not None and condition.status == "True"


def test_a_batch_limit_stops_requeueing_when_no_cluster_is_left() -> None:
    results, bindings, snapshot = converge(
        pick_n(3), [cluster("a"), cluster("b")], profile=fake_profile(batch=1)
    )
    assert [r.requeue for r in results] == [True, True, False]
    assert len(bindings) == 2
    assert snapshot.status.condition("Scheduled").status == "False"  # type: ignore[union-attr]


def test_a_batch_limit_of_zero_does_not_requeue_forever() -> None:
    result = run(pick_n(2), [cluster("a"), cluster("b")], profile=fake_profile(batch=0))
    assert (result.plan.create, result.requeue) == ([], False)
    assert result.outcome.picked == 0 and not result.outcome.fulfilled
    assert result.plan.snapshot_status is not None


def test_a_batch_limit_unschedules_obsolete_bindings_not_in_this_batch() -> None:
    # kubefleet-rules 10.13: only one cluster is picked, every other obsolete binding goes now.
    bindings = [bound(c, OLD, name=f"x-{c}") for c in "abc"]
    result = run(pick_n(3), [cluster(c) for c in "abc"], bindings, profile=fake_profile(batch=1))
    assert [p.name for p in result.plan.patch] == ["x-c"]
    assert unscheduled_names(result) == ["x-a", "x-b"]
    assert result.requeue


# --- fresh --------------------------------------------------------------------------------


def test_fresh_lets_current_bindings_compete_again() -> None:
    clusters = [cluster("a"), cluster("b"), cluster("c", affinity="5")]
    bindings = [bound("a", name="x-a"), bound("b", name="x-b")]
    assert run(pick_n(2), clusters, bindings).plan.binding_writes == 0
    result = run(pick_n(2), clusters, bindings, fresh=True)
    assert created(result) == ["c"]
    # b keeps its place over a through the larger name; its binding is re-used
    assert [p.name for p in result.plan.patch] == ["x-b"]
    assert unscheduled_names(result) == ["x-a"]


def test_fresh_keeps_a_current_binding_whose_decision_does_not_change() -> None:
    clusters = [cluster("a")]
    _, bindings, snapshot = converge(pick_n(1), clusters)
    again = run(snapshot, clusters, bindings, fresh=True)
    assert again.plan.binding_writes == 0
    assert again.explanation.picked[0].clusters == ["a"]
    assert again.explanation.picked[0].obsolete == 1  # competed as an obsolete binding


# --- percentageOfClustersToScore ----------------------------------------------------------


def test_percentage_to_score_stops_filtering_early_but_still_fills_n() -> None:
    clusters = [cluster(f"m{i:03d}") for i in range(300)]
    full = run(pick_n(5), clusters)
    partial = run(pick_n(5), clusters, profile=fake_profile(percentage=10))
    assert full.explanation.not_evaluated == 0
    assert partial.explanation.not_evaluated == 200  # at least 100 feasible are examined
    assert len(created(partial)) == 5
    assert created(full) == [f"m{i:03d}" for i in range(299, 294, -1)]


def test_percentage_to_score_order_is_stable_across_cycles() -> None:
    clusters = [cluster(f"m{i:03d}") for i in range(300)]
    profile = fake_profile(percentage=10)
    assert created(run(pick_n(3), clusters, profile=profile)) == created(
        run(pick_n(3), list(reversed(clusters)), profile=profile)
    )


def test_percentage_to_score_evaluates_clusters_with_obsolete_bindings_first() -> None:
    clusters = [cluster(f"m{i:03d}") for i in range(300)]
    old = [bound(f"m{i:03d}", OLD, name=f"x-{i:03d}") for i in (7, 150, 222)]
    result = run(pick_n(3), clusters, old, profile=fake_profile(percentage=10))
    assert result.plan.create == [] and result.plan.unschedule == []
    assert sorted(p.name for p in result.plan.patch) == ["x-007", "x-150", "x-222"]


def test_a_deleting_cluster_makes_its_binding_dangling() -> None:
    clusters = [cluster("a"), member_cluster("b", NOW, deleting=True)]
    bindings = [bound("b", name="x-b"), binding("web", "gone", SNAP, state="Bound", name="x-gone")]
    result = run(pick_n(1), clusters, bindings)
    assert [p.name for p in result.plan.unschedule_dangling] == ["x-b", "x-gone"]
    assert created(result) == ["a"]


def test_the_annotation_not_the_policy_says_how_many() -> None:
    # Changing only numberOfClusters updates the annotation, not the snapshot's spec (10.21).
    snapshot = policy_snapshot(
        "web", {"placementType": "PickN", "numberOfClusters": 1}, index=1, number_of_clusters=2
    )
    assert created(run(snapshot, [cluster("a"), cluster("b"), cluster("c")])) == ["c", "b"]


def test_not_picked_uses_template_constant() -> None:
    assert NOT_PICKED.format(cluster="x", affinity=1, topology=2) == (
        'Cluster "x" does not score high enough (affinity score: 1, topology spread score: 2)'
    )
