"""Profiles: which plugins run at each extension point, with which arguments, and how scores
combine.

`default_profile()` is KubeFleet's DefaultProfile (kubefleet-rules 5.0): five extension points, the
plugins in KubeFleet's order, scores compared component by component (topology spread, then
affinity, then the obsolete-placement preference), never summed. A profile may instead rank by
a weighted sum, the way kube-scheduler's score weights work:

    total(cluster) = sum over Score plugins p of  weight(p) * (t_p + a_p + o_p)

where (t_p, a_p, o_p) is the ClusterScore plugin p returned for the cluster (each built-in
plugin fills only its own component, so t_p + a_p + o_p is simply its contribution), and
weight(p) defaults to 1. Scores are not normalised first (KubeFleet's plugins already return
bounded numbers). Ranking compares (total, cluster name): equal totals still favour the larger
name, as in lexicographic mode. The persisted decision scores (affinityScore, priorityScore)
stay the unweighted component sums, so their meaning does not depend on the profile.

Profiles load from YAML with `load_profile`; the format, modelled on kube-scheduler's
KubeSchedulerConfiguration profiles, is documented in scheduler/README.md:

    name: spread-gold
    scoreMode: weightedSum            # or lexicographic (the default)
    percentageOfClustersToScore: 40   # PickN only; 0 or 100 = off (the default)
    plugins:
      multiPoint: {disabled: [{name: TaintToleration}]}
      score: {enabled: [{name: ClusterAffinity, weight: 3}, {name: PreferLabel, weight: 2}]}
    pluginConfig:
      - {name: PreferLabel, args: {label: tier, value: gold}}
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from hub.types import MemberCluster
from scheduler.framework.errors import ProfileError
from scheduler.framework.interfaces import (
    FilterPlugin,
    Plugin,
    PostBatchPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    RequeueHint,
    ScorePlugin,
)
from scheduler.framework.queue_sort import QueueSortPlugin
from scheduler.framework.registry import find_factory

__all__ = [
    "DEFAULT_PROFILE_NAME",
    "EXTENSION_POINTS",
    "Profile",
    "ScoreMode",
    "default_profile",
    "load_profile",
]

DEFAULT_PROFILE_NAME = "DefaultProfile"

# Extension point -> (YAML key, the method a plugin needs to run there).
EXTENSION_POINTS: Mapping[str, str] = {
    "queueSort": "queue_sort",
    "postBatch": "post_batch",
    "preFilter": "pre_filter",
    "filter": "filter",
    "preScore": "pre_score",
    "score": "score",
    "postFilter": "post_filter",
}
MULTI_POINT = "multiPoint"

# kubefleet-rules 5.0, in KubeFleet's order.
CLUSTER_AFFINITY = "ClusterAffinity"
CLUSTER_ELIGIBILITY = "ClusterEligibility"
NAMESPACE_AFFINITY = "NamespaceAffinity"
TAINT_TOLERATION = "TaintToleration"
SAME_PLACEMENT_ANTI_AFFINITY = "SamePlacementAntiAffinity"
TOPOLOGY_SPREAD_CONSTRAINTS = "TopologySpreadConstraints"
# kube-scheduler's QueueSort default (scheduler.framework.queue_sort): exactly one per profile.
PRIORITY_SORT = "PrioritySort"
# Capacity-aware placement (docs/capacity.md): skips itself for placements without requests, so
# KubeFleet's plugins alone decide for them. Last in each list: a cluster it filters passed
# every other filter.
CLUSTER_RESOURCES_FIT = "ClusterResourcesFit"
# kube-scheduler's PostFilter default: preemption (docs/priority.md, "Preemption"). It acts only
# for capacity-aware placements left short of room, so KubeFleet's decisions never see it.
DEFAULT_PREEMPTION = "DefaultPreemption"
QUEUE_SORT = "queueSort"
DEFAULT_PLUGINS: Mapping[str, tuple[str, ...]] = {
    QUEUE_SORT: (PRIORITY_SORT,),
    "postBatch": (TOPOLOGY_SPREAD_CONSTRAINTS,),
    "preFilter": (
        CLUSTER_AFFINITY,
        NAMESPACE_AFFINITY,
        TOPOLOGY_SPREAD_CONSTRAINTS,
        CLUSTER_RESOURCES_FIT,
    ),
    "filter": (
        CLUSTER_AFFINITY,
        CLUSTER_ELIGIBILITY,
        NAMESPACE_AFFINITY,
        TAINT_TOLERATION,
        SAME_PLACEMENT_ANTI_AFFINITY,
        TOPOLOGY_SPREAD_CONSTRAINTS,
        CLUSTER_RESOURCES_FIT,
    ),
    "preScore": (CLUSTER_AFFINITY, TOPOLOGY_SPREAD_CONSTRAINTS, CLUSTER_RESOURCES_FIT),
    "score": (
        CLUSTER_AFFINITY,
        SAME_PLACEMENT_ANTI_AFFINITY,
        TOPOLOGY_SPREAD_CONSTRAINTS,
        CLUSTER_RESOURCES_FIT,
    ),
    "postFilter": (DEFAULT_PREEMPTION,),
}

MIN_WEIGHT = 1
MAX_WEIGHT = 100  # kube-scheduler's range for score plugin weights
DEFAULT_WEIGHT = 1


class ScoreMode(enum.Enum):
    LEXICOGRAPHIC = "lexicographic"
    """KubeFleet: compare (topology, affinity, obsolete) in order, then the name."""
    WEIGHTED_SUM = "weightedSum"
    """kube-scheduler style: compare the weighted sum of plugin scores, then the name."""


@dataclass(frozen=True)
class Profile:
    """An immutable, validated set of plugin instances per extension point.

    Plugin instances are shared by every cycle (plugins are stateless), so a Profile is built
    once per process. `plugin_args` records the arguments each plugin was built with (for
    display); `weights` only matters in WEIGHTED_SUM mode. `percentage_of_clusters_to_score`
    (1-99, None = off) lets PickN stop filtering once enough feasible clusters are found; it
    never applies to PickAll or PickFixed (see scheduler/README.md for the trade-off)."""

    name: str
    queue_sort: tuple[QueueSortPlugin, ...] = ()
    """At most one: the QueueSort plugin (none = PrioritySort with its defaults)."""
    post_batch: tuple[PostBatchPlugin, ...] = ()
    pre_filter: tuple[PreFilterPlugin, ...] = ()
    filter: tuple[FilterPlugin, ...] = ()
    pre_score: tuple[PreScorePlugin, ...] = ()
    score: tuple[ScorePlugin, ...] = ()
    post_filter: tuple[PostFilterPlugin, ...] = ()
    """Run by the turn, not the cycle, when a capacity-aware cycle leaves its placement short of
    room: the first plugin that answers with a plan decides (kube-scheduler runs PostFilter
    plugins until one succeeds)."""
    plugin_args: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    score_mode: ScoreMode = ScoreMode.LEXICOGRAPHIC
    weights: Mapping[str, int] = field(default_factory=dict)
    percentage_of_clusters_to_score: int | None = None
    eligibility: Callable[[MemberCluster, datetime], str | None] | None = None
    """PickFixed's eligibility check (None = scheduler.clusters.eligibility with the 5-minute
    defaults), as KubeFleet's framework option WithClusterEligibilityChecker."""
    requeue_hints: tuple[RequeueHint | None, ...] = field(init=False, repr=False, compare=False)
    """Each cycle plugin's requeue hint, in profile order (None: the plugin has none, so every
    change may change its answer), resolved once when the profile is built, as kube-scheduler
    registers each plugin's events once (EventsToRegister): what
    scheduler.requeue.requeue_hints.may_change_decision asks, for every placement a cluster's change
    reaches (scheduler.requeue.reach)."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ProfileError("name", "a profile needs a name")
        for key, method in EXTENSION_POINTS.items():
            seen: set[str] = set()
            for plugin in getattr(self, method):
                name = getattr(plugin, "name", None)
                if not isinstance(name, str) or not name:
                    raise ProfileError(f"plugins.{key}", f"{plugin!r} has no name")
                if not callable(getattr(plugin, method, None)):
                    raise ProfileError(
                        f"plugins.{key}", f"plugin {name} does not implement {method}"
                    )
                if name in seen:
                    raise ProfileError(f"plugins.{key}", f"plugin {name} is listed twice")
                seen.add(name)
        if len(self.queue_sort) > 1:
            raise ProfileError(
                f"plugins.{QUEUE_SORT}",
                "exactly one QueueSort plugin, got " + ", ".join(p.name for p in self.queue_sort),
            )
        for plugin_name, weight in self.weights.items():
            if (
                isinstance(weight, bool)
                or not isinstance(weight, int)
                or not (MIN_WEIGHT <= weight <= MAX_WEIGHT)
            ):
                raise ProfileError(
                    f"weights.{plugin_name}",
                    f"weight must be an integer in [{MIN_WEIGHT}, {MAX_WEIGHT}], got {weight!r}",
                )
        pct = self.percentage_of_clusters_to_score
        if pct is not None and (
            isinstance(pct, bool) or not isinstance(pct, int) or not 1 <= pct <= 99
        ):
            raise ProfileError(
                "percentageOfClustersToScore", f"must be an integer in [1, 99] or None, got {pct!r}"
            )
        hints = tuple(getattr(p, "requeue_hint", None) for p in self.cycle_plugins())
        object.__setattr__(self, "requeue_hints", hints)

    def ineligibility(self, cluster: MemberCluster, now: datetime) -> str | None:
        """Why `cluster` is not eligible for placement at `now` (None = eligible)."""
        check = self.eligibility if self.eligibility is not None else _default_eligibility()
        return check(cluster, now)

    @property
    def queue_sorter(self) -> QueueSortPlugin:
        """The profile's QueueSort plugin."""
        return self.queue_sort[0] if self.queue_sort else _default_queue_sort()

    def weight(self, plugin: str) -> int:
        return self.weights.get(plugin, DEFAULT_WEIGHT)

    def cycle_plugins(self) -> tuple[Plugin, ...]:
        """Every plugin a cycle may call (QueueSort is not one), each once, in profile order:
        what the requeue hints ask (scheduler.requeue.requeue_hints)."""
        seen: dict[int, Plugin] = {}
        for point in (self.post_batch, self.pre_filter, self.filter, self.pre_score, self.score):
            for plugin in point:
                seen.setdefault(id(plugin), plugin)
        return tuple(seen.values())

    def plugin_names(self, point: str) -> tuple[str, ...]:
        """Plugin names at one extension point (YAML key, e.g. "filter"), in order."""
        plugins: Sequence[Plugin] = getattr(self, EXTENSION_POINTS[point])
        return tuple(p.name for p in plugins)


@functools.cache
def _default_eligibility() -> Callable[[MemberCluster, datetime], str | None]:
    from scheduler.clusters.eligibility import EligibilityChecker

    return EligibilityChecker().check


@functools.cache
def _default_queue_sort() -> QueueSortPlugin:
    from scheduler.plugins.priority_sort import PrioritySort

    return PrioritySort()


@functools.cache
def default_profile() -> Profile:
    """KubeFleet's DefaultProfile (kubefleet-rules 5.0), built from the in-tree plugins."""
    builder = _Builder({}, name=DEFAULT_PROFILE_NAME)
    return builder.build()


def load_profile(source: str | os.PathLike[str]) -> Profile:
    """Builds a profile from a YAML file path or YAML text. Raises ProfileError, whose `path`
    names the offending node (e.g. `plugins.score.enabled[0].weight`)."""
    text = _read(source)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError("", f"invalid YAML: {exc}") from exc
    if doc is None:
        doc = {}
    return _Builder(doc).build()


def _read(source: str | os.PathLike[str]) -> str:
    if isinstance(source, os.PathLike):
        path = Path(source)
    elif "\n" not in source and source.strip().endswith((".yaml", ".yml")):
        path = Path(source.strip())
    elif "\n" not in source and Path(source).is_file():
        path = Path(source)
    else:
        return source
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError("", f"cannot read profile {str(path)!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(
            "",
            f"cannot read profile {str(path)!r}: not UTF-8 text ({exc.reason} at byte {exc.start})",
        ) from exc


# --- YAML -> Profile ---------------------------------------------------------------------------

_TOP_KEYS = ("name", "base", "scoreMode", "percentageOfClustersToScore", "plugins", "pluginConfig")
_BASES = ("default", "none")
_SET_KEYS = ("enabled", "disabled")
_ALL = "*"


def _mapping(value: object, path: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ProfileError(path, f"expected a mapping, got {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise ProfileError(path, f"keys must be strings, got {key!r}")
    return value


def _list(value: object, path: str) -> list[object]:
    if not isinstance(value, list):
        raise ProfileError(path, f"expected a list, got {_kind(value)}")
    return value


def _only(mapping: dict[str, object], allowed: Sequence[str], path: str) -> None:
    for key in mapping:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise ProfileError(where, f"unknown key {key!r}; expected one of {', '.join(allowed)}")


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _int(value: object, path: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProfileError(path, f"expected an integer in [{low}, {high}], got {value!r}")
    return value


def _str(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ProfileError(path, f"expected a non-empty string, got {value!r}")
    return value


class _Builder:
    """Turns a parsed YAML document into a Profile, keeping the YAML path of every node."""

    def __init__(self, doc: object, name: str | None = None) -> None:
        self._doc = _mapping(doc, "")
        self._name = name
        self._args: dict[str, tuple[str, dict[str, object]]] = {}
        self._instances: dict[str, Plugin] = {}
        self._weights: dict[str, int] = {}
        self._queue_sort_enabled: str | None = None

    def build(self) -> Profile:
        doc = self._doc
        _only(doc, _TOP_KEYS, "")
        name = self._name or _str(doc.get("name", "custom"), "name")
        base = doc.get("base", "default")
        if base not in _BASES:
            raise ProfileError("base", f"expected one of {', '.join(_BASES)}, got {base!r}")
        mode_value = doc.get("scoreMode", ScoreMode.LEXICOGRAPHIC.value)
        try:
            mode = ScoreMode(mode_value)
        except ValueError:
            modes = ", ".join(m.value for m in ScoreMode)
            raise ProfileError(
                "scoreMode", f"expected one of {modes}, got {mode_value!r}"
            ) from None
        pct = _int(doc.get("percentageOfClustersToScore", 0), "percentageOfClustersToScore", 0, 100)

        self._parse_plugin_config(doc.get("pluginConfig", []))
        lists = {
            key: list(DEFAULT_PLUGINS[key]) if base == "default" else [] for key in EXTENSION_POINTS
        }
        self._apply_plugin_sets(doc.get("plugins", {}), lists, mode)
        if not lists[QUEUE_SORT]:
            # QueueSort is never empty: a profile that enables none (base: none, or PrioritySort
            # disabled) orders turns with PrioritySort, as kube-scheduler's defaults do.
            lists[QUEUE_SORT].append(PRIORITY_SORT)
        enabled = {n for names in lists.values() for n in names}
        for plugin_name, (path, _) in self._args.items():
            if plugin_name not in enabled:
                raise ProfileError(path, f"plugin {plugin_name!r} is configured but not enabled")

        plugins = {
            key: tuple(self._instance(n, f"plugins.{key}") for n in lists[key])
            for key in EXTENSION_POINTS
        }
        return Profile(
            name=name,
            queue_sort=plugins[QUEUE_SORT],  # type: ignore[arg-type]
            post_batch=plugins["postBatch"],  # type: ignore[arg-type]
            pre_filter=plugins["preFilter"],  # type: ignore[arg-type]
            filter=plugins["filter"],  # type: ignore[arg-type]
            pre_score=plugins["preScore"],  # type: ignore[arg-type]
            score=plugins["score"],  # type: ignore[arg-type]
            post_filter=plugins["postFilter"],  # type: ignore[arg-type]
            plugin_args={n: args for n, (_, args) in self._args.items()},
            score_mode=mode,
            weights=dict(self._weights),
            percentage_of_clusters_to_score=None if pct in (0, 100) else pct,
            eligibility=self._eligibility(),
        )

    def _eligibility(self) -> Callable[[MemberCluster, datetime], str | None] | None:
        """PickFixed checks eligibility with the ClusterEligibility plugin's own checker, so one
        set of timeouts governs both (None = the default checker)."""
        plugin = self._instances.get(CLUSTER_ELIGIBILITY)
        check = getattr(getattr(plugin, "checker", None), "check", None)
        return check if callable(check) else None

    def _parse_plugin_config(self, value: object) -> None:
        for index, entry in enumerate(_list(value, "pluginConfig")):
            path = f"pluginConfig[{index}]"
            item = _mapping(entry, path)
            _only(item, ("name", "args"), path)
            plugin_name = _str(item.get("name"), f"{path}.name")
            if plugin_name in self._args:
                raise ProfileError(f"{path}.name", f"plugin {plugin_name!r} is configured twice")
            args = _mapping(item.get("args", {}), f"{path}.args")
            self._args[plugin_name] = (f"{path}.args", dict(args))

    def _instance(self, plugin_name: str, path: str) -> Plugin:
        if plugin_name in self._instances:
            return self._instances[plugin_name]
        factory = find_factory(plugin_name, path)
        args_path, args = self._args.get(plugin_name, (path, {}))
        try:
            plugin = factory(**args)
        except Exception as exc:  # plugin constructors validate their arguments any way they like
            raise ProfileError(
                args_path, f"bad arguments for plugin {plugin_name!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if getattr(plugin, "name", None) != plugin_name:
            raise ProfileError(
                path,
                f"plugin registered as {plugin_name!r} calls itself "
                f"{getattr(plugin, 'name', None)!r}",
            )
        self._instances[plugin_name] = plugin
        return plugin

    def _entries(
        self, value: object, path: str, *, weights: bool
    ) -> list[tuple[str, str, int | None]]:
        """(name, path, weight) for each entry of an enabled/disabled list."""
        out: list[tuple[str, str, int | None]] = []
        for index, entry in enumerate(_list(value, path)):
            entry_path = f"{path}[{index}]"
            if isinstance(entry, str):
                out.append((_str(entry, entry_path), entry_path, None))
                continue
            item = _mapping(entry, entry_path)
            _only(item, ("name", "weight") if weights else ("name",), entry_path)
            weight = item.get("weight")
            if weight is not None:
                weight = _int(weight, f"{entry_path}.weight", MIN_WEIGHT, MAX_WEIGHT)
            out.append((_str(item.get("name"), f"{entry_path}.name"), entry_path, weight))
        return out

    def _choose_queue_sort(self, chosen: list[str], plugin_name: str, path: str) -> None:
        """Enabling a QueueSort plugin replaces the default one; two enabled is an error."""
        if self._queue_sort_enabled not in (None, plugin_name):
            raise ProfileError(
                path,
                f"exactly one QueueSort plugin per profile: {self._queue_sort_enabled!r} is "
                f"enabled already, cannot also enable {plugin_name!r}",
            )
        self._queue_sort_enabled = plugin_name
        chosen[:] = [plugin_name]

    def _apply_plugin_sets(
        self, value: object, lists: dict[str, list[str]], mode: ScoreMode
    ) -> None:
        plugins = _mapping(value, "plugins")
        _only(plugins, (MULTI_POINT, *EXTENSION_POINTS), "plugins")
        sets: dict[str, dict[str, object]] = {}
        for key, body in plugins.items():
            sets[key] = _mapping(body, f"plugins.{key}")
            _only(sets[key], _SET_KEYS, f"plugins.{key}")

        # Disabled first (multiPoint, then per point), then enabled, as kube-scheduler does.
        for key in (MULTI_POINT, *EXTENSION_POINTS):
            if key not in sets:
                continue
            path = f"plugins.{key}.disabled"
            points = list(EXTENSION_POINTS) if key == MULTI_POINT else [key]
            for plugin_name, entry_path, _ in self._entries(
                sets[key].get("disabled", []), path, weights=False
            ):
                if plugin_name == _ALL:
                    for point in points:
                        lists[point].clear()
                    continue
                found = False
                for point in points:
                    if plugin_name in lists[point]:
                        lists[point].remove(plugin_name)
                        found = True
                if not found:
                    raise ProfileError(
                        entry_path,
                        f"plugin {plugin_name!r} is not enabled there, cannot disable it",
                    )

        for key in (MULTI_POINT, *EXTENSION_POINTS):
            if key not in sets:
                continue
            path = f"plugins.{key}.enabled"
            weighted_point = key in (MULTI_POINT, "score")
            for plugin_name, entry_path, weight in self._entries(
                sets[key].get("enabled", []), path, weights=weighted_point
            ):
                plugin = self._instance(plugin_name, entry_path)
                if key == MULTI_POINT:
                    points = [
                        p for p, m in EXTENSION_POINTS.items() if callable(getattr(plugin, m, None))
                    ]
                    if not points:
                        raise ProfileError(
                            entry_path, f"plugin {plugin_name!r} implements no extension point"
                        )
                else:
                    if not callable(getattr(plugin, EXTENSION_POINTS[key], None)):
                        raise ProfileError(
                            entry_path,
                            f"plugin {plugin_name!r} does not implement {EXTENSION_POINTS[key]}",
                        )
                    points = [key]
                for point in points:
                    if point == QUEUE_SORT:
                        self._choose_queue_sort(lists[point], plugin_name, entry_path)
                    elif plugin_name not in lists[point]:
                        lists[point].append(plugin_name)
                if weight is not None:
                    if mode is not ScoreMode.WEIGHTED_SUM:
                        raise ProfileError(
                            f"{entry_path}.weight",
                            "weights apply only with scoreMode: weightedSum",
                        )
                    if not callable(getattr(plugin, "score", None)):
                        raise ProfileError(
                            f"{entry_path}.weight", f"plugin {plugin_name!r} does not score"
                        )
                    self._weights[plugin_name] = weight
