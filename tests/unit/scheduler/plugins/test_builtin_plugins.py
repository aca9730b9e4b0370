"""The built-in plugins: KubeFleet's names, and exactly the extension points of kubefleet-rules
5.0; kube-scheduler's PrioritySort, the one QueueSort plugin, and DefaultPreemption, its PostFilter;
and ClusterResourcesFit, ours."""

from __future__ import annotations

import pytest

from scheduler.framework.interfaces import (
    FilterPlugin,
    Plugin,
    PostBatchPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from scheduler.framework.queue_sort import QueueSortPlugin
from scheduler.plugins import BUILTIN_PLUGINS

POINTS: dict[str, type[Plugin]] = {
    "queue_sort": QueueSortPlugin,
    "post_batch": PostBatchPlugin,
    "pre_filter": PreFilterPlugin,
    "filter": FilterPlugin,
    "pre_score": PreScorePlugin,
    "score": ScorePlugin,
    "post_filter": PostFilterPlugin,
}

EXPECTED = {
    "ClusterAffinity": {"pre_filter", "filter", "pre_score", "score"},
    "ClusterEligibility": {"filter"},
    "NamespaceAffinity": {"pre_filter", "filter"},
    "TaintToleration": {"filter"},
    "SamePlacementAntiAffinity": {"filter", "score"},
    "TopologySpreadConstraints": {"post_batch", "pre_filter", "filter", "pre_score", "score"},
    "PrioritySort": {"queue_sort"},
    # Ours (docs/capacity.md): skips itself for placements without requests.
    "ClusterResourcesFit": {"pre_filter", "filter", "pre_score", "score"},
    # kube-scheduler's PostFilter default, ours for placements (docs/priority.md).
    "DefaultPreemption": {"post_filter"},
}


def test_builtin_plugins_are_keyed_by_kubefleets_names() -> None:
    assert set(BUILTIN_PLUGINS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_plugin_implements_exactly_its_extension_points(name: str) -> None:
    plugin = BUILTIN_PLUGINS[name]()
    assert plugin.name == name
    implemented = {point for point in POINTS if callable(getattr(plugin, point, None))}
    assert implemented == EXPECTED[name]
    for point in implemented:
        assert isinstance(plugin, POINTS[point])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_unknown_arguments_are_refused(name: str) -> None:
    with pytest.raises(TypeError, match="argument"):
        BUILTIN_PLUGINS[name](no_such_argument=1)


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        BUILTIN_PLUGINS["Extra"] = BUILTIN_PLUGINS["TaintToleration"]  # type: ignore[index]
