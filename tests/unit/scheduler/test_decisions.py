"""Decisions and the Scheduled condition (kubefleet-rules 4.10): the 1000/20 caps with KubeFleet's
arithmetic (minus the overflow of 10.10), the skip-if-unchanged rule, lastTransitionTime."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hub.types import ClusterDecision, Condition
from scheduler.cycles.decisions import (
    decisions_from_bindings,
    equal_decisions,
    scheduled_condition,
    status_write,
)
from scheduler.framework.score import ClusterScore
from tests.unit.scheduler.cycle_builders import NOW, SNAP, bound, pick_n


def bindings(prefix: str, count: int) -> list[object]:
    return [bound(f"{prefix}{i:04d}", name=f"b-{prefix}{i:04d}") for i in range(count)]


def not_picked(count: int) -> list[tuple[str, ClusterScore]]:
    return [(f"np{i}", ClusterScore()) for i in range(count)]


def filtered(count: int) -> list[tuple[str, str]]:
    return [(f"f{i:02d}", "ClusterUnschedulable, no") for i in range(count)]


def kinds(decisions: list[ClusterDecision]) -> tuple[int, int, int]:
    selected = sum(d.selected for d in decisions)
    scored = sum(not d.selected and d.cluster_score is not None for d in decisions)
    return selected, scored, len(decisions) - selected - scored


@pytest.mark.parametrize(
    ("groups", "n_not_picked", "n_filtered", "expected"),
    [
        pytest.param([3], 5, 5, (3, 5, 5), id="small"),
        pytest.param([3], 15, 30, (3, 15, 5), id="unselected-capped-at-20"),
        pytest.param([990], 15, 30, (990, 10, 0), id="slots-left-for-10"),
        pytest.param([995], 0, 30, (995, 0, 5), id="filtered-use-remaining-slots"),
        pytest.param([1000], 15, 30, (1000, 0, 0), id="exactly-1000"),
        pytest.param([600, 600], 15, 30, (1000, 0, 0), id="over-1000-never-more-than-1000"),
        pytest.param([1005], 15, 30, (1000, 0, 0), id="kubefleet-would-add-20-here"),
    ],
)
def test_decision_caps(
    groups: list[int], n_not_picked: int, n_filtered: int, expected: tuple[int, int, int]
) -> None:
    group_bindings = [bindings(f"g{i}-", n) for i, n in enumerate(groups)]
    decisions = decisions_from_bindings(
        group_bindings,  # type: ignore[arg-type]
        not_picked(n_not_picked),
        filtered(n_filtered),
    )
    assert kinds(decisions) == expected
    assert len(decisions) <= 1000


def test_a_filtered_cluster_already_decided_still_uses_up_an_index() -> None:
    # KubeFleet's loop runs i over the first `maxUnselected` filtered entries and skips seen
    # ones without finding a replacement.
    decisions = decisions_from_bindings(
        [[bound("f00")]],  # type: ignore[list-item]
        [],
        filtered(25),
        max_unselected=3,
    )
    assert [d.cluster_name for d in decisions] == ["f00", "f01", "f02"]


def test_not_picked_clusters_already_decided_are_skipped_without_using_a_slot() -> None:
    decisions = decisions_from_bindings(
        [[bound("np0")]],  # type: ignore[list-item]
        not_picked(3),
        [],
        max_unselected=2,
    )
    assert [d.cluster_name for d in decisions] == ["np0", "np1", "np2"]


def test_a_cluster_with_two_live_bindings_gets_one_decision() -> None:
    two = [bound("a", name="x-1", score=(1, 0)), bound("a", name="x-2"), bound("b", name="x-3")]
    decisions = decisions_from_bindings([two], [], [])  # type: ignore[list-item]
    assert [(d.cluster_name, d.cluster_score.affinity_score) for d in decisions] == [  # type: ignore[union-attr]
        ("a", 1),
        ("b", 0),
    ]


def _decision(name: str, reason: str = "r") -> ClusterDecision:
    return ClusterDecision(cluster_name=name, selected=True, reason=reason)


@pytest.mark.parametrize(
    ("current", "desired", "equal"),
    [
        pytest.param(
            [_decision("a"), _decision("b")],
            [_decision("b"), _decision("a")],
            True,
            id="order-ignored",
        ),
        pytest.param([_decision("a")], [_decision("a", "other")], False, id="reason-compared"),
        pytest.param([_decision("a")], [_decision("a"), _decision("b")], False, id="length"),
        pytest.param(
            [_decision("a")],
            [ClusterDecision(cluster_name="a", selected=True, reason="r", cluster_score={})],  # type: ignore[arg-type]
            False,
            id="score-presence-compared",
        ),
    ],
)
def test_decisions_compare_as_a_set(
    current: list[ClusterDecision], desired: list[ClusterDecision], equal: bool
) -> None:
    assert equal_decisions(current, desired) is equal


def _with_status(
    decisions: list[ClusterDecision], condition: Condition, crp_generation: int = 1
) -> object:
    snapshot = pick_n(1)
    status = snapshot.status.model_copy(
        update={
            "observed_crp_generation": crp_generation,
            "conditions": [condition],
            "target_clusters": decisions,
        }
    )
    return snapshot.model_copy(update={"status": status})


def _true(count: int = 1, generation: int = 1) -> Condition:
    condition = scheduled_condition(pick_n(1), fulfilled=True, count=count)
    return condition.model_copy(
        update={"observed_generation": generation, "last_transition_time": NOW - timedelta(days=1)}
    )


@pytest.mark.parametrize(
    ("existing", "skipped"),
    [
        pytest.param(_with_status([_decision("a")], _true()), True, id="unchanged"),
        pytest.param(_with_status([_decision("a")], _true(count=7)), True, id="message-ignored"),
        pytest.param(
            _with_status([_decision("a")], _true(generation=5)),
            True,
            id="newer-observed-generation",
        ),
        pytest.param(
            _with_status([_decision("a")], _true(generation=0)),
            False,
            id="older-observed-generation",
        ),
        pytest.param(
            _with_status([_decision("a")], _true(), crp_generation=0),
            False,
            id="crp-generation-changed",
        ),
        pytest.param(_with_status([_decision("a", "old")], _true()), False, id="decision-changed"),
        pytest.param(pick_n(1), False, id="no-status-yet"),
    ],
)
def test_the_status_write_is_skipped_only_when_nothing_kubefleet_compares_changed(
    existing: object, skipped: bool
) -> None:
    condition = scheduled_condition(pick_n(1), fulfilled=True, count=1)
    write = status_write(existing, 1, [_decision("a")], condition, NOW)  # type: ignore[arg-type]
    assert (write is None) is skipped


def test_last_transition_time_changes_only_when_the_status_changes() -> None:
    existing = _with_status([_decision("a", "old")], _true())
    same = status_write(
        existing, 1, [_decision("a")], scheduled_condition(pick_n(1), fulfilled=True, count=1), NOW
    )  # type: ignore[arg-type]
    assert same is not None
    assert same.status.conditions[0].last_transition_time == NOW - timedelta(days=1)
    flipped = status_write(
        existing,  # type: ignore[arg-type]
        1,
        [_decision("a")],
        scheduled_condition(pick_n(1), fulfilled=False, count=0),
        NOW + timedelta(microseconds=123),
    )
    assert flipped is not None
    (condition,) = flipped.status.conditions
    assert (condition.status, condition.last_transition_time) == ("False", NOW)
    assert condition.message == (
        "could not find all clusters needed as specified by the scheduling policy, "
        "found 0 cluster(s) instead"
    )


def test_other_conditions_are_kept_and_the_snapshot_version_is_carried() -> None:
    other = Condition(type="SomethingElse", status="True")
    snapshot = pick_n(1)
    snapshot = snapshot.model_copy(
        update={"status": snapshot.status.model_copy(update={"conditions": [other]})}
    )
    write = status_write(
        snapshot, 1, [], scheduled_condition(snapshot, fulfilled=True, count=0), NOW
    )
    assert write is not None
    assert [c.type for c in write.status.conditions] == ["SomethingElse", "Scheduled"]
    assert (write.name, write.resource_version) == ("web-1", "1")
    assert write.name == SNAP
