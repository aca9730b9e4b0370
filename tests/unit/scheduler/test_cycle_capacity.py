"""Capacity-aware cycles (docs/capacity.md): ClusterResourcesFit in the default profile, the
shortage a placement reports, and bad requests as a False condition."""

from __future__ import annotations

import textwrap

import pytest

from hub import names
from hub.types import MemberCluster
from scheduler import (
    CapacityInput,
    CycleInput,
    CycleResult,
    default_profile,
    load_profile,
    schedule,
)
from scheduler.testing import member_cluster
from tests.unit.scheduler.cycle_builders import (
    NOW,
    PLACEMENT,
    bound,
    pick_all,
    pick_fixed,
    pick_n,
    scheduled,
    selected,
)


def sized(name: str, cpu: str = "8", memory: str = "32Gi", **labels: str) -> MemberCluster:
    return member_cluster(name, NOW, labels=labels, allocatable={"cpu": cpu, "memory": memory})


def run(
    snapshot,  # type: ignore[no-untyped-def]
    clusters: list[MemberCluster],
    requests: str | None,
    allocated: dict[str, dict[str, str]] | None = None,
    bindings=(),  # type: ignore[no-untyped-def]
    profile=None,  # type: ignore[no-untyped-def]
) -> CycleResult:
    capacity = (
        None if requests is None else CapacityInput(requests=requests, allocated=allocated or {})
    )
    return schedule(
        CycleInput(
            snapshot=snapshot,
            clusters=clusters,
            bindings=list(bindings),
            now=NOW,
            capacity=capacity,
        ),
        profile if profile is not None else default_profile(),
    )


def picked(result: CycleResult) -> list[str]:
    return sorted(d.cluster_name for d in selected(result))


def message(result: CycleResult) -> str:
    write = result.plan.snapshot_status
    assert write is not None
    condition = write.status.condition(names.SCHEDULED_CONDITION)
    assert condition is not None
    return condition.message


def test_a_cluster_without_room_is_filtered_with_the_resource_asked_and_free() -> None:
    fleet = [sized("a"), sized("b"), sized("c")]
    result = run(pick_n(3), fleet, "cpu=4,memory=8Gi", {"b": {"cpu": "5"}, "c": {"memory": "30Gi"}})
    assert picked(result) == ["a"]
    groups = {g.clusters[0]: (g.plugin, g.reason) for g in result.explanation.filtered}
    assert groups["b"] == (
        "ClusterResourcesFit",
        "ClusterUnschedulable, not enough room: cpu: 4 requested, 3 free",
    )
    assert groups["c"] == (
        "ClusterResourcesFit",
        "ClusterUnschedulable, not enough room: memory: 8Gi requested, 2Gi free",
    )
    assert not result.outcome.fulfilled


def test_an_unfulfilled_placement_says_which_resource_and_how_much_is_missing() -> None:
    fleet = [sized("a"), sized("b"), sized("c")]
    result = run(pick_n(3), fleet, "cpu=4,memory=8Gi", {"b": {"cpu": "5"}, "c": {"cpu": "7.5"}})
    shortage = result.explanation.shortage
    assert shortage is not None
    assert shortage.unplaced == 2
    [cpu] = shortage.resources
    assert (cpu.resource, cpu.requested, cpu.clusters, cpu.most_free, cpu.missing) == (
        "cpu",
        "4",
        2,
        "3",
        "8",
    )
    assert message(result).endswith(
        "not enough room for 2 binding(s) of cpu=4,memory=8Gi: "
        "cpu short on 2 cluster(s) (at most 3 free); missing cpu=8"
    )
    # /metrics reads the amounts back from the condition (workers.metrics)
    from fractions import Fraction

    from scheduler.room.capacity import missing_of

    assert missing_of(message(result)) == {"cpu": Fraction(8)}
    assert missing_of("could not find all the clusters needed") is None


def test_a_cluster_that_does_not_report_a_resource_cannot_take_it() -> None:
    result = run(pick_n(1), [sized("a")], "nvidia.com/gpu=1")
    assert picked(result) == []
    assert result.explanation.filtered[0].reason == (
        "ClusterUnschedulable, not enough room: nvidia.com/gpu: 1 requested, none allocatable "
        "(not reported)"
    )
    assert "nvidia.com/gpu short on 1 cluster(s) (not reported)" in message(result)


def test_shortage_counts_only_what_room_would_place() -> None:
    # Two clusters fail affinity, one lacks room: room would place one more binding, not three.
    fleet = [sized("a", zone="x"), sized("b", zone="y"), sized("c", zone="y"), sized("d")]
    policy = {
        "affinity": {
            "clusterAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "clusterSelectorTerms": [
                        {"labelSelector": {"matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["x"]}]}}
                    ]
                }
            }
        }
    }  # fmt: skip
    result = run(pick_n(4, **policy), fleet, "cpu=2", {"a": {"cpu": "7"}})
    assert picked(result) == []
    assert result.explanation.shortage is not None
    assert result.explanation.shortage.unplaced == 1


def test_the_placements_own_reservations_are_not_counted_against_it() -> None:
    # The activity leaves them out of `allocated`: a kept binding needs no second place.
    fleet = [sized("a", cpu="4"), sized("b", cpu="4")]
    result = run(pick_n(2), fleet, "cpu=4", {}, bindings=[bound("a")])
    assert picked(result) == ["a", "b"]
    assert result.outcome.fulfilled
    assert result.explanation.shortage is None


def test_least_allocated_spreads_and_most_allocated_packs() -> None:
    fleet = [sized("a"), sized("b"), sized("c")]
    allocated = {"a": {"cpu": "6"}, "b": {"cpu": "2"}}
    spread = run(pick_n(1), fleet, "cpu=1", allocated)
    assert picked(spread) == ["c"]  # the emptiest
    pack_profile = load_profile(
        textwrap.dedent(
            """
            pluginConfig:
              - name: ClusterResourcesFit
                args: {scoringStrategy: {type: MostAllocated}}
            """
        )
    )
    packed = run(pick_n(1), fleet, "cpu=1", allocated, profile=pack_profile)
    assert picked(packed) == ["a"]  # the fullest that still fits


def test_a_requested_to_capacity_curve_prefers_the_peak() -> None:
    fleet = [sized("a"), sized("b"), sized("c")]
    allocated = {"a": {"cpu": "7"}, "b": {"cpu": "5"}, "c": {"cpu": "1"}}
    profile = load_profile(
        textwrap.dedent(
            """
            pluginConfig:
              - name: ClusterResourcesFit
                args:
                  scoringStrategy:
                    type: RequestedToCapacityRatio
                    resources: [{name: cpu, weight: 1}]
                    requestedToCapacityRatio:
                      shape: [{utilization: 0, score: 0}, {utilization: 75, score: 100},
                              {utilization: 100, score: 0}]
            """
        )
    )
    # after placing 1 cpu: a 100%, b 75%, c 25%
    assert picked(run(pick_n(1), fleet, "cpu=1", allocated, profile=profile)) == ["b"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ("{scoringStrategy: {type: Tightest}}", "scoringStrategy.type must be one of"),
        ("{scoringStrategy: {type: RequestedToCapacityRatio}}", "needs requestedToCapacityRatio"),
        (
            "{scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: {shape: []}}}",
            "for type RequestedToCapacityRatio only",
        ),
        (
            "{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
            "{shape: [{utilization: 50, score: 1}, {utilization: 40, score: 2}]}}}",
            "strictly increasing",
        ),
        ("{scoringStrategy: {resources: [{name: cpu, weight: 101}]}}", "integer in 0-100"),
        ("{strategy: x}", "unknown argument"),
    ],
)
def test_bad_strategy_arguments_are_profile_errors(args: str, error: str) -> None:
    from scheduler import ProfileError

    with pytest.raises(ProfileError, match=error):
        load_profile(f"pluginConfig:\n  - name: ClusterResourcesFit\n    args: {args}\n")


def test_pick_all_places_where_there_is_room_and_reports_the_rest() -> None:
    fleet = [sized("a"), sized("b", cpu="1"), sized("c")]
    result = run(pick_all(), fleet, "cpu=2")
    assert picked(result) == ["a", "c"]
    assert result.outcome.fulfilled  # PickAll's condition stays True (kubefleet-rules 4.5)
    assert "not enough room for 1 binding(s) of cpu=2" in message(result)


def test_pick_fixed_target_without_room_is_invalid_but_a_held_one_stays() -> None:
    fleet = [sized("a", cpu="1"), sized("b", cpu="1")]
    result = run(pick_fixed("a", "b"), fleet, "cpu=2", bindings=[scheduled("a")])
    assert result.explanation.valid == ["a"]
    assert [(t.cluster, t.reason) for t in result.explanation.invalid] == [
        ("b", "not enough room: cpu: 2 requested, 1 free")
    ]
    assert not result.outcome.fulfilled
    assert result.explanation.shortage is not None
    assert result.explanation.shortage.unplaced == 1


@pytest.mark.parametrize(
    ("text", "named"),
    [("memory=4GB", "'memory=4GB'"), ("cpu=2,cpu=3", "requested twice"), ("", "empty")],
)
def test_a_bad_requests_annotation_is_a_false_condition_naming_the_entry(
    text: str, named: str
) -> None:
    result = run(pick_n(1), [sized("a")], text)
    assert result.error is not None
    assert named in result.error
    assert result.plan.binding_writes == 0
    assert message(result).startswith(
        f"scheduling failed: annotation {names.REQUESTS_ANNOTATION}: "
    )


def test_without_requests_nothing_changes() -> None:
    fleet = [sized("a", cpu="0"), sized("b", cpu="0")]
    with_none = run(pick_n(2), fleet, None)
    assert picked(with_none) == ["a", "b"]
    assert with_none.explanation.shortage is None
    assert PLACEMENT in with_none.plan.create[0].metadata.name


def test_the_shortage_survives_packing_for_the_history() -> None:
    from scheduler.explain.packing import pack_explanation, unpack_explanation

    fleet = [sized("a"), sized("b")]
    result = run(pick_n(2), fleet, "cpu=4", {"b": {"cpu": "5"}})
    assert result.explanation.shortage is not None
    assert unpack_explanation(pack_explanation(result.explanation)) == result.explanation


def test_annotation_problems_come_last_and_are_never_read_as_a_shortage() -> None:
    """Issue 33: the problems of our other annotations are added to the condition after
    KubeFleet's words and ours; they quote the author's text, which could spell a shortage."""
    from fractions import Fraction

    from scheduler.opt_in.placement_annotations import problem_of
    from scheduler.room.capacity import missing_of

    spoof = problem_of("fleet-scheduler.io/rebalance", "not enough room for 1; missing cpu=99")
    assert spoof is not None
    fleet = [sized("a"), sized("b"), sized("c")]
    result = schedule(
        CycleInput(
            snapshot=pick_n(3),
            clusters=fleet,
            now=NOW,
            capacity=CapacityInput(requests="cpu=4", allocated={"b": {"cpu": "5"}}),
            annotation_problems=[spoof],
        ),
        default_profile(),
    )
    assert message(result).endswith("; " + spoof)
    real = missing_of(message(result))
    assert real is not None and real != {"cpu": Fraction(99)}
    plain = schedule(
        CycleInput(snapshot=pick_n(3), clusters=fleet, now=NOW, annotation_problems=[spoof]),
        default_profile(),
    )
    assert message(plain).endswith("; " + spoof)
    assert missing_of(message(plain)) is None


def test_a_huge_request_fails_the_cycle_in_few_words() -> None:
    # `cpu=1e4000` (10 characters) parsed, and every line that showed it wrote its 4,001
    # digits: a 24 KB Scheduled condition and a 200 KB cycle result for three such resources;
    # `cpu=1e5000` failed the plugin with "ValueError: Exceeds the limit (4300 digits)".
    fleet = [sized(name) for name in "abcdefghij"]
    for requests in ("cpu=1e4000,memory=1e4000,nvidia.com/gpu=1e4000", "cpu=1e5000"):
        result = run(pick_n(3), fleet, requests)
        assert result.error is not None and "more than any cluster has" in message(result)
        assert "ValueError" not in message(result)
        assert len(message(result)) < 400
        assert not selected(result)
