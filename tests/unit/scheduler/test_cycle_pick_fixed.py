"""PickFixed (kubefleet-rules 4.7, 4.8.2): valid / invalid / not found targets, and the deliberate
choices for empty and duplicate lists."""

from __future__ import annotations

from hub import names
from scheduler.cycles.crossref import WHY_DUPLICATE, WHY_OBSOLETE
from scheduler.cycles.pick_fixed import NOTE_DUPLICATES, NOTE_EMPTY
from scheduler.testing import apply_plan, member_cluster
from tests.unit.scheduler.cycle_builders import (
    NOW,
    OLD,
    SNAP,
    bound,
    cluster,
    pick_fixed,
    run,
    scheduled,
    unscheduled,
)


def decisions(result: object) -> list[tuple[str, bool, str]]:
    status = result.plan.snapshot_status.status  # type: ignore[attr-defined]
    return [(d.cluster_name, d.selected, d.reason) for d in status.target_clusters]


def condition(result: object) -> tuple[str, str, str]:
    c = result.plan.snapshot_status.status.condition("Scheduled")  # type: ignore[attr-defined]
    return c.status, c.reason, c.message


def test_targets_are_valid_invalid_or_not_found_in_list_order() -> None:
    clusters = [cluster("a"), member_cluster("b", NOW, deleting=True), cluster("c")]
    result = run(pick_fixed("c", "ghost", "b", "a"), clusters)
    assert [b.spec.target_cluster for b in result.plan.create] == ["c", "a"]
    assert result.plan.create[0].spec.cluster_decision.cluster_score is None
    assert decisions(result) == [
        (
            "c",
            True,
            'Successfully scheduled resources for placement in "c": picked by scheduling policy',
        ),
        (
            "a",
            True,
            'Successfully scheduled resources for placement in "a": picked by scheduling policy',
        ),
        (
            "b",
            False,
            'Cluster "b" is not eligible for resource placement yet: cluster has left the fleet',
        ),
        ("ghost", False, 'Specified cluster "ghost" is not found'),
    ]
    assert condition(result) == (
        "False",
        "SchedulingPolicyUnfulfilled",
        "could not find all clusters needed as specified by the scheduling policy, "
        "found 2 cluster(s) instead",
    )
    assert result.outcome.model_dump() == {
        "placementType": "PickFixed",
        "wanted": 4,
        "picked": 2,
        "fulfilled": False,
    }
    assert result.explanation.not_found == ["ghost"]
    assert [t.cluster for t in result.explanation.invalid] == ["b"]


def test_no_plugin_runs_so_a_filtered_cluster_is_still_placed() -> None:
    result = run(pick_fixed("a"), [cluster("a", ready="false")])
    assert [b.spec.target_cluster for b in result.plan.create] == ["a"]
    assert condition(result)[0] == "True"


def test_a_kept_binding_on_an_ineligible_target_is_reported_unselected() -> None:
    clusters = [member_cluster("a", NOW, deleting=True), cluster("b")]
    result = run(pick_fixed("a", "b"), clusters, [bound("a", name="x-a"), bound("b")])
    # "a" left: its binding is dangling, so it is unscheduled by the prelude
    assert [p.name for p in result.plan.unschedule_dangling] == ["x-a"]
    ineligible = member_cluster("a", NOW, joined=False)
    result = run(pick_fixed("a", "b"), [ineligible, cluster("b")], [bound("a"), bound("b")])
    assert result.plan.binding_writes == 0
    assert [(c, s) for c, s, _ in decisions(result)] == [("b", True), ("a", False)]
    assert result.explanation.kept == ["a", "b"]


def test_obsolete_bindings_are_re_pointed_or_unscheduled() -> None:
    bindings = [bound("a", OLD, name="x-a"), bound("z", OLD, name="x-z")]
    result = run(pick_fixed("a"), [cluster("a"), cluster("z")], bindings)
    (patch,) = result.plan.patch
    assert patch.name == "x-a"
    decision = patch.merge_patch["spec"]["clusterDecision"]  # type: ignore[index]
    assert decision["clusterScore"] is None  # the PickN score is removed  # type: ignore[index]
    assert patch.merge_patch["spec"]["schedulingPolicySnapshotName"] == SNAP  # type: ignore[index]
    assert [(p.name, p.why) for p in result.plan.unschedule] == [("x-z", WHY_OBSOLETE)]


def test_only_one_obsolete_binding_per_target_is_re_used() -> None:
    bindings = [bound("a", OLD, name="x-a1"), scheduled("a", OLD, name="x-a2")]
    result = run(pick_fixed("a"), [cluster("a")], bindings)
    assert [p.name for p in result.plan.patch] == ["x-a2"]  # last in name order, as KubeFleet
    assert [(p.name, p.why) for p in result.plan.unschedule] == [("x-a1", WHY_DUPLICATE)]


def test_an_unscheduled_target_binding_is_revived() -> None:
    result = run(
        pick_fixed("a"), [cluster("a")], [unscheduled("a", previous="Scheduled", name="x-a")]
    )
    (patch,) = result.plan.patch
    assert patch.merge_patch["spec"]["state"] == "Scheduled"  # type: ignore[index]
    assert patch.merge_patch["metadata"]["annotations"] == {  # type: ignore[index]
        names.PREVIOUS_BINDING_STATE_ANNOTATION: None
    }


def test_an_empty_list_is_fulfilled_by_design_and_unschedules_old_bindings() -> None:
    result = run(pick_fixed(), [cluster("a")], [bound("a", OLD, name="x-a")])
    assert [p.name for p in result.plan.unschedule] == ["x-a"]
    assert decisions(result) == []
    assert condition(result) == (
        "True",
        "SchedulingPolicyFulfilled",
        "found all cluster needed as specified by the scheduling policy, found 0 cluster(s)",
    )
    assert result.explanation.notes == [NOTE_EMPTY]


def test_a_name_listed_twice_counts_once() -> None:
    snapshot = pick_fixed("a", "b", "a")
    result = run(snapshot, [cluster("a"), cluster("b")])
    assert [b.spec.target_cluster for b in result.plan.create] == ["a", "b"]
    assert [c for c, _, _ in decisions(result)] == ["a", "b"]
    assert result.outcome.wanted == 2 and result.outcome.fulfilled
    assert result.explanation.notes == [NOTE_DUPLICATES.format(count=1)]


def test_a_second_cycle_changes_nothing() -> None:
    clusters = [cluster("a"), cluster("b")]
    first = run(pick_fixed("a", "b", "c"), clusters)
    bindings, snapshot = apply_plan([], pick_fixed("a", "b", "c"), first.plan)
    assert run(snapshot, clusters, bindings).plan.is_empty


def test_a_target_whose_name_cannot_name_a_binding_is_invalid() -> None:
    result = run(pick_fixed("eu.west"), [cluster("eu.west")])
    assert result.error is None and result.plan.create == []
    ((name, chosen, reason),) = decisions(result)
    assert (name, chosen) == ("eu.west", False)
    assert reason.startswith(
        'Cluster "eu.west" is not eligible for resource placement yet: cluster name "eu.west" '
        "cannot be used in a binding name"
    )
