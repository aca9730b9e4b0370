"""Binding names (kubefleet-rules 4.11, made deterministic) and the merge patches of binding
writes."""

from __future__ import annotations

import re

import pytest

from hub.validation import is_dns1123_label
from scheduler.bindings.naming import binding_name, name_problem
from scheduler.bindings.writes import apply_merge_patch, merge_diff
from tests.unit.scheduler.cycle_builders import cluster, pick_n, run

LONG_PLACEMENT = "p" * 40
LONG_CLUSTER = "c" * 40


def test_names_follow_kubefleets_pattern_and_truncation() -> None:
    name = binding_name(LONG_PLACEMENT, LONG_CLUSTER, "snap-0", set())
    assert re.fullmatch(r"p{26}-c{27}-[0-9a-f]{8}", name)
    assert len(name) == 63 and is_dns1123_label(name)


def test_names_are_deterministic_and_skip_names_already_taken() -> None:
    first = binding_name("web", "member-1", "web-0", set())
    assert first == binding_name("web", "member-1", "web-0", set())
    second = binding_name("web", "member-1", "web-0", {first})
    assert second != first and second.startswith("web-member-1-")
    assert binding_name("web", "member-1", "web-1", set()) != first


def test_replanning_after_a_lost_create_response_gives_the_same_names() -> None:
    clusters = [cluster("a"), cluster("b")]
    one, two = run(pick_n(2), clusters), run(pick_n(2), clusters)
    assert [b.metadata.name for b in one.plan.create] == [b.metadata.name for b in two.plan.create]


def test_a_new_binding_never_reuses_a_listed_binding_name() -> None:
    from tests.unit.scheduler.cycle_builders import OLD, unscheduled

    taken = binding_name("web", "a", "web-1", set())
    # an unrelated binding (another cluster's, by a previous scheduler) already has the name
    other = unscheduled("zzz", name=taken, snapshot=OLD)
    result = run(pick_n(1), [cluster("a")], [other])
    assert result.plan.create[0].metadata.name != taken


@pytest.mark.parametrize(
    ("placement", "cluster_name", "ok"),
    [
        pytest.param("web", "member-1", True, id="plain"),
        pytest.param("web", "eu.west", False, id="dot-in-cluster"),
        pytest.param("web", "c" * 27 + ".example.com", True, id="dot-truncated-away"),
        pytest.param("web.app", "a", False, id="dot-in-placement"),
        pytest.param("web", "-edge", True, id="cluster-part-may-start-with-dash"),
        pytest.param("Web", "a", False, id="upper-case"),
    ],
)
def test_name_problem_matches_what_the_name_would_be(
    placement: str, cluster_name: str, ok: bool
) -> None:
    assert (name_problem(placement, cluster_name) is None) is ok
    if ok:
        assert is_dns1123_label(binding_name(placement, cluster_name, "s", set()))


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        pytest.param({"a": 1}, {"a": 1}, {}, id="same"),
        pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="changed"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, {"b": None}, id="removed"),
        pytest.param({"a": {"x": 1, "y": 2}}, {"a": {"x": 1}}, {"a": {"y": None}}, id="nested"),
        pytest.param({"l": [1, 2]}, {"l": [2]}, {"l": [2]}, id="lists-replace"),
    ],
)
def test_merge_diff_is_the_rfc7386_patch(old: dict, new: dict, patch: dict) -> None:  # type: ignore[type-arg]
    assert merge_diff(old, new) == patch
    assert apply_merge_patch(old, patch) == new
