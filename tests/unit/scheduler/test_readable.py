"""What people read of a decision: clean taints, filter reasons collapsed with their counts."""

from __future__ import annotations

import pytest

from hub.types import Taint
from scheduler import Explanation, FilterGroup
from scheduler.explain.readable import (
    filter_reason_line,
    filtered_count,
    first_few,
    main_filter_reasons,
    readable_reason,
    shared_filter_groups,
    shorten,
)
from scheduler.plugins.taint_toleration import REASON_UNTOLERATED, render_taint

MAINTENANCE = Taint(key="fleet.example.com/maintenance", value="true", effect="NoSchedule")


def group(plugin: str, reason: str, *clusters: str) -> FilterGroup:
    return FilterGroup(plugin=plugin, reason=reason, clusters=list(clusters))


def test_a_taint_reads_as_kubectl_shows_it_not_as_go_prints_it() -> None:
    kubefleet = "ClusterUnschedulable, " + REASON_UNTOLERATED.format(
        taint=render_taint(MAINTENANCE)
    )
    assert "&{Key:fleet.example.com/maintenance Value:true Effect:NoSchedule}" in kubefleet
    assert readable_reason(kubefleet) == (
        "taint fleet.example.com/maintenance=true:NoSchedule cannot be tolerated"
    )


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        pytest.param(
            "ClusterUnschedulable, cluster does not match with any of the required cluster "
            "affinity terms",
            "cluster does not match with any of the required cluster affinity terms",
            id="affinity",
        ),
        pytest.param(
            "ClusterUnschedulable, target namespace does not exist on cluster",
            "target namespace does not exist on cluster",
            id="namespace",
        ),
        pytest.param("ClusterUnschedulable", "ClusterUnschedulable", id="code-alone"),
        pytest.param(
            "turn failed: ClusterUnschedulable, x", "turn failed: ClusterUnschedulable, x",
            id="not-in-front",
        ),
    ],
)
def test_kubefleets_status_code_before_its_reasons_is_left_out(reason: str, shown: str) -> None:
    """`ClusterUnschedulable,` before an affinity mismatch reads as a cordoned cluster; the
    fate says the cluster was filtered, the reason says why."""
    assert readable_reason(reason) == shown


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        pytest.param("no match", "no match", id="no-taint"),
        pytest.param("&{Key:gpu Value: Effect:NoSchedule}", "gpu:NoSchedule", id="no-value"),
        pytest.param(
            "&{Key:a Value:1 Effect:NoSchedule} &{Key:b Value:2 Effect:NoExecute}",
            "a=1:NoSchedule b=2:NoExecute",
            id="two",
        ),
    ],
)
def test_readable_reason_rewrites_every_taint_and_nothing_else(reason: str, shown: str) -> None:
    assert readable_reason(reason) == shown


def test_a_shared_reason_has_a_count_and_a_lone_one_names_its_cluster() -> None:
    taint = REASON_UNTOLERATED.format(taint=render_taint(MAINTENANCE))
    assert filter_reason_line(group("ClusterAffinity", "no match", "a", "b", "c")) == (
        "ClusterAffinity, 3 clusters: no match"
    )
    assert filter_reason_line(group("TaintToleration", taint, "west-2")) == (
        "TaintToleration, west-2: taint fleet.example.com/maintenance=true:NoSchedule cannot be "
        "tolerated"
    )


def test_the_reasons_most_clusters_share_come_first_whatever_the_order() -> None:
    groups = [
        group("TaintToleration", "t", "x"),
        group("ClusterEligibility", "left", "p", "q"),
        group("ClusterAffinity", "no match", "a", "b", "c"),
        group("ClusterAffinity", "also", "y"),
    ]
    for ordered in (groups, groups[::-1]):
        explanation = Explanation(placement_type="PickAll", snapshot="s-0", filtered=ordered)
        assert [(g.plugin, g.reason) for g in main_filter_reasons(explanation)] == [
            ("ClusterAffinity", "no match"),
            ("ClusterEligibility", "left"),
            ("ClusterAffinity", "also"),
            ("TaintToleration", "t"),
        ]
        assert filtered_count(explanation) == 7
    explanation = Explanation(placement_type="PickAll", snapshot="s-0", filtered=groups)
    assert shared_filter_groups(explanation) == {1: 1, 2: 2}


def test_shorten_keeps_short_text_and_marks_a_cut() -> None:
    assert shorten("abc", 3) == "abc"
    assert shorten("abcdef", 4) == "abc…"


def test_first_few_names_some_and_counts_the_rest() -> None:
    assert first_few([], 3) == ""
    assert first_few(["a", "b"], 3) == "a, b"
    assert first_few(["a", "b", "c"], 3) == "a, b, c"
    assert first_few(["a", "b", "c", "d", "e"], 3) == "a, b, c and 2 more"
    assert first_few(iter("abcd"), 2, more=" +{} more") == "a, b +2 more"
