"""What every cycle does first (classification, prelude writes, kubefleet-rules 4.1) and how a cycle
that cannot act ends: a clear error, no binding writes, and a False condition when possible."""

from __future__ import annotations

import pytest

from hub import names
from hub.types import ClusterResourceBinding
from scheduler import CycleInput, Profile, schedule
from scheduler.cycles.classify import classify
from scheduler.cycles.schedule import WHY_DANGLING, WHY_DELETING
from scheduler.framework.status import Status
from scheduler.testing import binding, member_cluster, policy_snapshot
from tests.unit.scheduler.cycle_builders import (
    NOW,
    OLD,
    SNAP,
    bound,
    cluster,
    pick_all,
    pick_n,
    run,
    scheduled,
)
from tests.unit.scheduler.fake_plugins import fake_profile


def _b(name: str, cluster_: str, snapshot: str, state: str, **kw: object) -> ClusterResourceBinding:
    return binding("web", cluster_, snapshot, state=state, name=name, **kw)  # type: ignore[arg-type]


def test_bindings_are_classified_by_the_first_matching_rule_in_name_order() -> None:
    clusters = {
        c.metadata.name: c for c in (cluster("a"), member_cluster("leaving", NOW, deleting=True))
    }
    bindings = [
        _b("9-deleting", "a", SNAP, "Bound", deleting=NOW),
        _b("8-unscheduled-gone", "gone", OLD, "Unscheduled"),
        _b("7-dangling", "gone", SNAP, "Bound"),
        _b("6-dangling-leaving", "leaving", OLD, "Scheduled"),
        _b("5-obsolete-odd-state", "a", OLD, ""),
        _b("4-obsolete", "a", OLD, "Bound"),
        _b("3-scheduled", "a", SNAP, "Scheduled"),
        _b("2-bound", "a", SNAP, "Bound"),
        _b("1-ignored", "a", SNAP, ""),
    ]
    c = classify(bindings, clusters, SNAP)

    def names_of(group: list[ClusterResourceBinding]) -> list[str]:
        return [b.metadata.name for b in group]

    assert names_of(c.deleting) == ["9-deleting"]
    assert names_of(c.unscheduled) == ["8-unscheduled-gone"]
    assert names_of(c.dangling) == ["6-dangling-leaving", "7-dangling"]
    assert names_of(c.obsolete) == ["4-obsolete", "5-obsolete-odd-state"]
    assert names_of(c.scheduled) == ["3-scheduled"]
    assert names_of(c.bound) == ["2-bound"]
    assert names_of(c.ignored) == ["1-ignored"]


def test_prelude_removes_our_finalizer_and_unschedules_dangling_bindings() -> None:
    deleting = _b(
        "x-del",
        "a",
        SNAP,
        "Bound",
        deleting=NOW,
        finalizers=(names.SCHEDULER_BINDING_CLEANUP_FINALIZER, names.WORK_FINALIZER),
        resource_version="7",
    )
    others_only = _b(
        "x-other", "a", SNAP, "Bound", deleting=NOW, finalizers=(names.WORK_FINALIZER,)
    )
    dangling = _b("x-gone", "gone", SNAP, "Bound", annotations={"keep": "me"})
    result = run(pick_n(1), [cluster("a")], [deleting, others_only, dangling])
    (finalizer,) = result.plan.remove_finalizers
    assert finalizer.model_dump() == {
        "name": "x-del",
        "resourceVersion": "7",
        "mergePatch": {"metadata": {"finalizers": [names.WORK_FINALIZER], "resourceVersion": "7"}},
        "why": WHY_DELETING,
        "namespace": None,  # a ClusterResourceBinding's
    }
    (unschedule,) = result.plan.unschedule_dangling
    assert unschedule.merge_patch == {
        "metadata": {
            "annotations": {names.PREVIOUS_BINDING_STATE_ANNOTATION: "Bound"},
            "resourceVersion": "1",
        },
        "spec": {"state": "Unscheduled"},
    }
    assert unschedule.why == WHY_DANGLING
    assert [(g.action, g.clusters) for g in result.explanation.bindings[:2]] == [
        ("finalizerRemoved", ["a"]),
        ("unscheduled", ["gone"]),
    ]


def _condition(result: object) -> tuple[str, str, str]:
    c = result.plan.snapshot_status.status.condition("Scheduled")  # type: ignore[attr-defined]
    return c.status, c.reason, c.message


@pytest.mark.parametrize(
    ("snapshot", "error"),
    [
        pytest.param(
            policy_snapshot("web", {"placementType": "PickSome"}, index=1),
            'unknown placement type "PickSome" (expected PickAll, PickN or PickFixed)',
            id="unknown-placement-type",
        ),
        pytest.param(
            policy_snapshot("web", {"placementType": "PickN"}, index=1),
            "policy snapshot 'web-1' has no kubernetes-fleet.io/number-of-clusters annotation"
            "; fix the annotation or delete the snapshot",
            id="missing-number-of-clusters",
        ),
        pytest.param(
            policy_snapshot("web", {"placementType": "PickN"}, index=1, number_of_clusters="two"),
            "policy snapshot 'web-1': annotation kubernetes-fleet.io/number-of-clusters='two' "
            "is not an integer"
            "; fix the annotation or delete the snapshot",
            id="bad-number-of-clusters",
        ),
        pytest.param(
            policy_snapshot("web", {"placementType": "PickN"}, index=1, number_of_clusters="-1"),
            "policy snapshot 'web-1': annotation kubernetes-fleet.io/number-of-clusters='-1' "
            "is negative"
            "; fix the annotation or delete the snapshot",
            id="negative-number-of-clusters",
        ),
    ],
)
def test_a_snapshot_the_cycle_cannot_act_on_gets_a_false_condition_and_no_writes(
    snapshot: object, error: str
) -> None:
    bindings = [bound("a", OLD), _b("x-gone", "gone", SNAP, "Bound")]
    result = run(snapshot, [cluster("a")], bindings)  # type: ignore[arg-type]
    assert result.error == error
    assert result.plan.binding_writes == 0 and not result.requeue
    assert _condition(result) == (
        "False",
        "SchedulingPolicyUnfulfilled",
        f"scheduling failed: {error}",
    )
    assert result.plan.snapshot_status.status.observed_crp_generation == 1  # type: ignore[union-attr]
    assert result.outcome.picked == 0 and result.plan.binding_writes == 0


def test_an_error_status_already_written_is_not_written_again() -> None:
    snapshot = policy_snapshot("web", {"placementType": "PickSome"}, index=1)
    first = run(snapshot, [cluster("a")])
    again = run(
        snapshot.model_copy(update={"status": first.plan.snapshot_status.status}), [cluster("a")]
    )  # type: ignore[union-attr]
    assert again.error == first.error and again.plan.is_empty


@pytest.mark.parametrize(
    ("crp_generation", "error"),
    [
        pytest.param(
            None,
            "policy snapshot 'web-1' has no kubernetes-fleet.io/CRP-generation annotation"
            "; fix the annotation or delete the snapshot",
            id="missing",
        ),
        pytest.param(
            " 3",
            "policy snapshot 'web-1': annotation kubernetes-fleet.io/CRP-generation=' 3' "
            "is not an integer"
            "; fix the annotation or delete the snapshot",
            id="not-go-int",
        ),
    ],
)
def test_an_unreadable_crp_generation_writes_nothing_at_all(
    crp_generation: str | None, error: str
) -> None:
    snapshot = policy_snapshot(
        "web", {"placementType": "PickAll"}, index=1, crp_generation=crp_generation
    )
    result = run(snapshot, [cluster("a")])
    assert result.error == error
    assert result.plan.is_empty


def test_go_style_integers_with_a_sign_are_accepted() -> None:
    snapshot = policy_snapshot("web", {"placementType": "PickAll"}, index=1, crp_generation="+4")
    assert run(snapshot, [cluster("a")]).plan.snapshot_status.status.observed_crp_generation == 4  # type: ignore[union-attr]


def test_a_snapshot_without_its_placement_label_is_an_error() -> None:
    snapshot = pick_all()
    labels = {
        k: v for k, v in snapshot.metadata.labels.items() if k != names.PARENT_PLACEMENT_LABEL
    }
    snapshot = snapshot.model_copy(
        update={"metadata": snapshot.metadata.model_copy(update={"labels": labels})}
    )
    result = run(snapshot, [cluster("a")])
    assert result.error == "policy snapshot 'web-1' has no kubernetes-fleet.io/parent-CRP label"


def test_duplicate_cluster_names_are_an_error_not_a_guess() -> None:
    result = run(pick_all(), [cluster("a"), cluster("b"), cluster("a")])
    assert result.error == "member cluster names listed more than once: a"
    assert result.plan.binding_writes == 0


def test_a_plugin_that_raises_fails_the_cycle_with_its_name() -> None:
    class Exploding:
        name = "Exploding"

        def filter(self, state: object, snapshot: object, cluster: object) -> Status:
            raise RuntimeError("bad day")

    profile = Profile(name="boom", filter=(Exploding(),))  # type: ignore[arg-type]
    result = run(pick_n(1), [cluster("a")], [scheduled("b", OLD)], profile=profile)
    assert result.error == "plugin Exploding failed at Filter: raised RuntimeError: bad day"
    assert result.plan.binding_writes == 0
    assert _condition(result)[2] == f"scheduling failed: {result.error}"


def test_the_input_round_trips_as_a_compact_camel_case_payload() -> None:
    cycle = CycleInput(snapshot=pick_all(), clusters=[cluster("a")], bindings=[bound("a")], now=NOW)
    wire = cycle.model_dump_json()
    assert '"fresh":false' in wire and '"now":"2025-06-01T12:00:00Z"' in wire
    assert CycleInput.model_validate_json(wire) == cycle
    result = schedule(cycle, fake_profile())
    assert type(result).model_validate_json(result.model_dump_json()) == result


def test_a_naive_now_is_rejected_when_the_input_is_built() -> None:
    with pytest.raises(ValueError, match="timezone"):
        CycleInput(snapshot=pick_all(), now=NOW.replace(tzinfo=None))
