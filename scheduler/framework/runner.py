"""Runs a profile's plugins through the extension points of one cycle (kubefleet-rules 4.3).

KubeFleet filters and scores clusters on 4 goroutines; the result does not depend on it because
every later step sorts. We run sequentially: same results, no threads, and a plugin that fails is
reported deterministically (the first failing cluster in input order, not whichever goroutine
lost the race).

Every call into a plugin goes through this module, so this is the one place where a plugin that
raises, or returns a code its stage does not allow, becomes a `PluginError` naming the plugin and
the stage. A plugin returning `None` counts as SUCCESS, as a nil status does in KubeFleet."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from itertools import repeat
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import PluginError
from scheduler.framework.interfaces import BatchFilterPlugin, BatchScorePlugin
from scheduler.framework.profile import Profile, ScoreMode
from scheduler.framework.score import ClusterScore
from scheduler.framework.sharing import SharedResults
from scheduler.framework.status import Code, Status

__all__ = [
    "FILTER",
    "POST_BATCH",
    "PRE_FILTER",
    "PRE_SCORE",
    "SCORE",
    "FilterResult",
    "Filtered",
    "PhaseObserver",
    "Runner",
    "ScoredCluster",
]

# Stage names as they appear in PluginError messages (KubeFleet's extension point names).
POST_BATCH = "PostBatch"
PRE_FILTER = "PreFilter"
FILTER = "Filter"
PRE_SCORE = "PreScore"
SCORE = "Score"

_SUCCESS = Code.SUCCESS
_SKIP = Code.SKIP
_UNSCHEDULABLE = Code.CLUSTER_UNSCHEDULABLE
_ALREADY_SELECTED = Code.CLUSTER_ALREADY_SELECTED


class PhaseObserver(Protocol):
    """Told when each extension point of a cycle starts and ends (e.g. to open a trace span).

    The scheduler stays pure: it only enters the context manager the observer hands back; what
    the observer does with it (timing, tracing) is the caller's business."""

    def phase(self, stage: str) -> AbstractContextManager[object]: ...


P = ParamSpec("P")
R = TypeVar("R")


def _observed(
    stage: str,
) -> Callable[[Callable[Concatenate[Runner, P], R]], Callable[Concatenate[Runner, P], R]]:
    def decorate(
        method: Callable[Concatenate[Runner, P], R],
    ) -> Callable[Concatenate[Runner, P], R]:
        @functools.wraps(method)
        def run(self: Runner, /, *args: P.args, **kwargs: P.kwargs) -> R:
            if self.observer is None:
                return method(self, *args, **kwargs)
            with self.observer.phase(stage):
                return method(self, *args, **kwargs)

        return run

    return decorate


FinalCheck = Callable[[MemberCluster], Status | None]
"""A framework check run after every filter plugin passed a cluster (None = pass). It may also
have an `on_facts(ClusterFacts)` method, the same check on the cluster's facts, which the
batched filter calls instead."""


@dataclass(frozen=True, slots=True)
class Filtered:
    """A cluster the Filter stage rejected: the plugin that did, and the status it returned
    (whose string form is the decision reason)."""

    cluster: MemberCluster
    status: Status
    plugin: str
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", facts_of(self.cluster).name)


@dataclass(slots=True)
class FilterResult:
    passed: list[MemberCluster] = field(default_factory=list)
    filtered: list[Filtered] = field(default_factory=list)
    already_selected: list[str] = field(default_factory=list)
    not_evaluated: int = 0
    """Clusters never looked at because enough feasible ones were found (percentage mode)."""


@dataclass(slots=True)
class ScoredCluster:
    """A cluster that passed Filter, with its summed score.

    `total` is the weighted sum in `ScoreMode.WEIGHTED_SUM` and None otherwise. `key` is what
    ranking compares: (topology, affinity, obsolete, name), or (total, name) in weighted-sum
    mode; the name comes last so that equal scores favour the larger name. Treat as read-only
    (not frozen only because frozen dataclasses are slow to build, and 5,000 are built per
    cycle)."""

    cluster: MemberCluster
    score: ClusterScore
    total: int | None = None
    name: str = ""
    key: tuple[int | str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            self.name = facts_of(self.cluster).name
        if not self.key:
            s = self.score
            self.key = (
                (self.total, self.name)
                if self.total is not None
                else (
                    s.topology_spread_score,
                    s.affinity_score,
                    s.obsolete_placement_affinity_score,
                    self.name,
                )
            )


_SCORES: dict[tuple[int, int, int], ClusterScore] = {}
"""ClusterScores by their components: frozen and compared by value, so one instance serves
every cluster with the same score (a fleet has few distinct scores; building a frozen
dataclass per cluster was a tenth of a cycle at 5,000 clusters). Cleared when it grows past
`_MAX_SCORES` (a profile with unbounded scores)."""
_MAX_SCORES = 4096


def _scored(
    cluster: MemberCluster,
    name: str,
    topology: int,
    affinity: int,
    obsolete: int,
    total: int,
    weighted: bool,
) -> ScoredCluster:
    """A scored cluster with its ranking key: (total, name) in weighted-sum mode, else the
    three components then the name."""
    key = (topology, affinity, obsolete)
    score = _SCORES.get(key)
    if score is None:
        score = _SCORES[key] = ClusterScore(topology, affinity, obsolete)
    if weighted:
        return ScoredCluster(cluster, score, total, name, (total, name))
    return ScoredCluster(cluster, score, None, name, (topology, affinity, obsolete, name))


def _admit(
    cluster: MemberCluster, final_check: FinalCheck | None, name: str, result: FilterResult
) -> None:
    """A cluster every plugin passed: the framework's final check decides, else it passes."""
    problem = final_check(cluster) if final_check is not None else None
    if problem is None:
        result.passed.append(cluster)
    else:
        result.filtered.append(Filtered(cluster, problem, name))


def _code(status: Status | None) -> Code:
    return _SUCCESS if status is None else status.code


class Runner:
    """Executes one profile. Stateless between cycles; build one per profile and reuse it.

    `shared`, when given, answers the plugins that declare shareable results from answers they
    gave other placements of the same policy (scheduler.framework.sharing); same results."""

    def __init__(
        self,
        profile: Profile,
        observer: PhaseObserver | None = None,
        shared: SharedResults | None = None,
    ) -> None:
        self.profile = profile
        self.observer = observer
        self.shared = shared

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _fail(plugin: str, stage: str, status: Status | None, what: str) -> PluginError:
        if status is not None and status.code is Code.INTERNAL_ERROR:
            return PluginError(plugin, stage, str(status))
        return PluginError(plugin, stage, f"returned {what}, which {stage} does not allow")

    @staticmethod
    def _raised(plugin: str, stage: str, exc: Exception) -> PluginError:
        return PluginError(plugin, stage, f"raised {type(exc).__name__}: {exc}")

    # -- PostBatch ------------------------------------------------------------------------

    @_observed(POST_BATCH)
    def post_batch(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, desired: int
    ) -> int:
        """The batch size limit: the smallest valid plugin limit, at most `desired`."""
        limit = desired
        for plugin in self.profile.post_batch:
            try:
                result = plugin.post_batch(state, snapshot)
            except Exception as exc:  # a plugin bug must fail the cycle, not the process
                raise self._raised(plugin.name, POST_BATCH, exc) from exc
            if not (isinstance(result, tuple) and len(result) == 2):
                raise PluginError(
                    plugin.name, POST_BATCH, f"returned {result!r}, not (limit, Status)"
                )
            candidate, status = result
            code = _code(status)
            if code is _SUCCESS:
                if not isinstance(candidate, int) or isinstance(candidate, bool):
                    raise PluginError(plugin.name, POST_BATCH, f"returned limit {candidate!r}")
                if 0 <= candidate < limit:
                    limit = candidate
            elif code is not _SKIP:
                raise self._fail(plugin.name, POST_BATCH, status, code.value)
        return limit

    # -- PreFilter / PreScore -------------------------------------------------------------

    @_observed(PRE_FILTER)
    def pre_filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> frozenset[str]:
        """Runs PreFilter; returns the names of plugins whose Filter is skipped this cycle."""
        calls = [(p.name, p.pre_filter) for p in self.profile.pre_filter]
        return self._prepare(PRE_FILTER, calls, state, snapshot)

    @_observed(PRE_SCORE)
    def pre_score(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> frozenset[str]:
        """Runs PreScore; returns the names of plugins whose Score is skipped this cycle."""
        shared = self.shared
        calls = [
            (p.name, p.pre_score if shared is None else shared.pre_score(p))
            for p in self.profile.pre_score
        ]
        return self._prepare(PRE_SCORE, calls, state, snapshot)

    def _prepare(
        self,
        stage: str,
        calls: Sequence[
            tuple[str, Callable[[CycleState, ClusterSchedulingPolicySnapshot], Status]]
        ],
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
    ) -> frozenset[str]:
        """PreFilter and PreScore share their rules: SKIP drops the plugin's next stage."""
        skipped: set[str] = set()
        for name, call in calls:
            try:
                status = call(state, snapshot)
            except Exception as exc:  # see post_batch
                raise self._raised(name, stage, exc) from exc
            code = _code(status)
            if code is _SKIP:
                skipped.add(name)
            elif code is not _SUCCESS:
                raise self._fail(name, stage, status, code.value)
        return frozenset(skipped)

    # -- Filter ---------------------------------------------------------------------------

    @_observed(FILTER)
    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        clusters: Sequence[MemberCluster],
        skipped: frozenset[str],
        *,
        final_check: FinalCheck | None = None,
        final_check_name: str = "",
        enough: int | None = None,
    ) -> FilterResult:
        """Filters `clusters` in order; the first non-SUCCESS plugin decides a cluster's fate.

        `enough` (percentage mode, PickN only) stops as soon as that many clusters passed; the
        rest are counted in `not_evaluated`."""
        plugins = [p for p in self.profile.filter if p.name not in skipped]
        batch = [p for p in plugins if isinstance(p, BatchFilterPlugin)]
        if enough is None and len(batch) == len(plugins):
            facts = [facts_of(c) for c in clusters]
            batched = self._filter_batched(state, snapshot, facts, batch, self.shared)
            if batched is not None:
                return self._finish_filter(facts, batched, final_check, final_check_name)
        chain = [(p.name, p.filter) for p in plugins]
        result = FilterResult()
        passed, filtered = result.passed, result.filtered
        for index, cluster in enumerate(clusters):
            if enough is not None and len(passed) >= enough:
                result.not_evaluated = len(clusters) - index
                break
            rejected = False
            for name, fn in chain:
                try:
                    status = fn(state, snapshot, cluster)
                    code = _SUCCESS if status is None else status.code
                except Exception as exc:  # see post_batch
                    raise self._raised(name, FILTER, exc) from exc
                if code is _SUCCESS:
                    continue
                if code is _UNSCHEDULABLE:
                    filtered.append(Filtered(cluster, status, name))
                elif code is _ALREADY_SELECTED:
                    result.already_selected.append(facts_of(cluster).name)
                else:
                    raise self._fail(name, FILTER, status, code.value)
                rejected = True
                break
            if not rejected:
                _admit(cluster, final_check, final_check_name, result)
        return result

    @staticmethod
    def _filter_batched(
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
        plugins: Sequence[BatchFilterPlugin],
        shared: SharedResults | None = None,
    ) -> dict[int, tuple[str, Status]] | None:
        """Each plugin over the clusters the earlier ones passed: the same fates as cluster by
        cluster. Returns the rejected clusters by position (plugin, status), or None when a
        plugin fails, so the caller runs per cluster and reports the failure as it would."""
        rejected: dict[int, tuple[str, Status]] = {}
        remaining = list(range(len(facts)))
        clusters = [f.cluster for f in facts] if shared is not None else []
        for plugin in plugins:
            if not remaining:
                break
            try:
                statuses: Sequence[Status | None] | None = None
                if shared is not None:
                    statuses = shared.filter_all(plugin, state, snapshot, clusters, remaining)
                if statuses is None:
                    subset = (
                        facts if len(remaining) == len(facts) else [facts[i] for i in remaining]
                    )
                    statuses = plugin.filter_all(state, snapshot, subset)
            except Exception:  # the per-cluster run names the failure
                return None
            if len(statuses) != len(remaining):
                return None
            if statuses.count(None) == len(remaining):
                continue  # every cluster passed, the common case: nothing to sort out
            survivors = []
            for index, status in zip(remaining, statuses, strict=True):
                if status is None or status.code is _SUCCESS:
                    survivors.append(index)
                elif status.code is _UNSCHEDULABLE or status.code is _ALREADY_SELECTED:
                    rejected[index] = (plugin.name, status)
                else:
                    return None
            remaining = survivors
        return rejected

    @staticmethod
    def _finish_filter(
        facts: Sequence[ClusterFacts],
        rejected: dict[int, tuple[str, Status]],
        final_check: FinalCheck | None,
        final_check_name: str,
    ) -> FilterResult:
        """The FilterResult of batched fates, in input order as the per-cluster run builds it."""
        result = FilterResult()
        passed, filtered, selected = result.passed, result.filtered, result.already_selected
        get = rejected.get
        # A final check may also take the facts (`on_facts`), saving a lookup per cluster.
        on_facts = getattr(final_check, "on_facts", None)
        for index, f in enumerate(facts):
            fate = get(index)
            if fate is not None:
                plugin, status = fate
                if status.code is _UNSCHEDULABLE:
                    filtered.append(Filtered(f.cluster, status, plugin, f.name))
                else:
                    selected.append(f.name)
                continue
            cluster = f.cluster
            if on_facts is not None:
                problem = on_facts(f)
            else:
                problem = final_check(cluster) if final_check is not None else None
            if problem is None:
                passed.append(cluster)
            else:
                filtered.append(Filtered(cluster, problem, final_check_name, f.name))
        return result

    # -- Score ----------------------------------------------------------------------------

    @_observed(SCORE)
    def score(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        clusters: Sequence[MemberCluster],
        skipped: frozenset[str],
    ) -> list[ScoredCluster]:
        """Scores every passed cluster: components summed over plugins; in weighted-sum mode
        also `total` = sum over plugins of weight x (the plugin's three components added)."""
        profile = self.profile
        weighted = profile.score_mode is ScoreMode.WEIGHTED_SUM
        plugins = [p for p in profile.score if p.name not in skipped]
        batch = [p for p in plugins if isinstance(p, BatchScorePlugin)]
        if len(batch) == len(plugins):
            batched = self._score_batched(state, snapshot, clusters, batch)
            if batched is not None:
                return batched
        chain = [(p.name, p.score, profile.weight(p.name)) for p in plugins]
        scored: list[ScoredCluster] = []
        for cluster in clusters:
            topology = affinity = obsolete = total = 0
            for plugin, fn, weight in chain:
                try:
                    score, status = fn(state, snapshot, cluster)
                    code = _SUCCESS if status is None else status.code
                except Exception as exc:  # see post_batch
                    raise self._raised(plugin, SCORE, exc) from exc
                if code is not _SUCCESS:
                    raise self._fail(plugin, SCORE, status, code.value)
                if score is None:
                    continue
                t = score.topology_spread_score
                a = score.affinity_score
                o = score.obsolete_placement_affinity_score
                topology += t
                affinity += a
                obsolete += o
                if weighted:
                    total += weight * (t + a + o)
            name = facts_of(cluster).name
            scored.append(_scored(cluster, name, topology, affinity, obsolete, total, weighted))
        return scored

    def _score_batched(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        clusters: Sequence[MemberCluster],
        plugins: Sequence[BatchScorePlugin],
    ) -> list[ScoredCluster] | None:
        """Every plugin over all clusters, summed as `score` sums them; None when a plugin
        fails, so the caller runs per cluster and reports the failure as it would."""
        profile = self.profile
        weighted = profile.score_mode is ScoreMode.WEIGHTED_SUM
        count = len(clusters)
        facts = [facts_of(c) for c in clusters]
        if len(_SCORES) > _MAX_SCORES:
            _SCORES.clear()
        answers: list[Sequence[ClusterScore | None]] = []
        weights: list[int] = []
        for plugin in plugins:
            try:
                scores: Sequence[ClusterScore | None] | None = None
                if self.shared is not None:
                    scores = self.shared.score_all(plugin, state, snapshot, clusters, facts)
                if scores is None:
                    scores = plugin.score_all(state, snapshot, facts)
            except Exception:  # the per-cluster run names the failure
                return None
            if len(scores) != count:
                return None
            answers.append(scores)
            weights.append(profile.weight(plugin.name))
        # Plugins answer with few distinct score objects (a fleet has few distinct scores), so
        # the sum is worked out once per combination of the plugins' answers (by identity:
        # every answer stays alive in `answers` meanwhile), not once per cluster.
        combos: Iterable[tuple[int, ...]] = (
            zip(*[list(map(id, scores)) for scores in answers], strict=True)
            if answers
            else repeat((), count)
        )
        sums: dict[tuple[int, ...], tuple[ClusterScore, int, int, int, int | None]] = {}
        memo = _SCORES
        out = []
        for index, (f, combo) in enumerate(zip(facts, combos, strict=True)):
            found = sums.get(combo)
            if found is None:
                t = a = o = total = 0
                for scores, weight in zip(answers, weights, strict=True):
                    score = scores[index]
                    if score is None:
                        continue
                    st = score.topology_spread_score
                    sa = score.affinity_score
                    so = score.obsolete_placement_affinity_score
                    t += st
                    a += sa
                    o += so
                    total += weight * (st + sa + so)
                summed = memo.get((t, a, o))
                if summed is None:
                    summed = memo[(t, a, o)] = ClusterScore(t, a, o)
                found = sums[combo] = (summed, t, a, o, total if weighted else None)
            summed, t, a, o, kept = found
            name = f.name
            key = (kept, name) if kept is not None else (t, a, o, name)
            out.append(ScoredCluster(f.cluster, summed, kept, name, key))
        return out
