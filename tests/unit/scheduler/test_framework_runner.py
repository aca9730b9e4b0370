"""The plugin runner follows kubefleet-rules 4.3: codes, skips, first failure decides, and every
plugin failure becomes a PluginError naming the plugin and the stage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import PluginError
from scheduler.framework.profile import Profile, ScoreMode
from scheduler.framework.runner import Runner
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Code, Status
from scheduler.testing import member_cluster, policy_snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
SNAPSHOT = policy_snapshot("web", {"placementType": "PickN", "numberOfClusters": 1})
CLUSTERS = [member_cluster(n, NOW) for n in ("a", "b", "c")]

Verdict = Callable[[MemberCluster], Status | None]


@dataclass
class Scripted:
    """A plugin whose every answer is given by the test."""

    name: str
    verdict: Verdict = lambda cluster: Status.success()
    pre: Status | None = None
    batch: tuple[int, Status | None] = (0, Status.skip())
    points: int = 0
    calls: int = 0

    def post_batch(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> tuple[int, Status | None]:
        return self.batch

    def pre_filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> Status | None:
        return self.pre

    def pre_score(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> Status | None:
        return self.pre

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status | None:
        self.calls += 1
        return self.verdict(cluster)

    def score(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> tuple[ClusterScore, Status | None]:
        self.calls += 1
        status = self.verdict(cluster)
        return ClusterScore(affinity_score=self.points, topology_spread_score=1), status


def state() -> CycleState:
    return CycleState(clusters=CLUSTERS, now=NOW)


def runner(**points: tuple[Scripted, ...]) -> Runner:
    return Runner(Profile(name="test", **points))  # type: ignore[arg-type]


def reject(*names: str, code: Code = Code.CLUSTER_UNSCHEDULABLE, reason: str = "no") -> Verdict:
    return lambda c: Status(code, (reason,)) if c.metadata.name in names else Status.success()


def test_first_failing_filter_decides_and_is_named() -> None:
    first = Scripted("First", reject("a", reason="first says no"))
    second = Scripted("Second", reject("a", "b", reason="second says no"))
    result = runner(filter=(first, second)).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert [c.metadata.name for c in result.passed] == ["c"]
    assert [(f.name, f.plugin, str(f.status)) for f in result.filtered] == [
        ("a", "First", "ClusterUnschedulable, first says no"),
        ("b", "Second", "ClusterUnschedulable, second says no"),
    ]


def test_already_selected_drops_a_cluster_silently() -> None:
    plugin = Scripted("Anti", reject("b", code=Code.CLUSTER_ALREADY_SELECTED))
    result = runner(filter=(plugin,)).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert [c.metadata.name for c in result.passed] == ["a", "c"]
    assert result.filtered == []
    assert result.already_selected == ["b"]


def test_a_none_status_counts_as_success() -> None:
    plugin = Scripted("Quiet", lambda c: None)
    result = runner(filter=(plugin,)).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert len(result.passed) == 3


def test_pre_filter_skip_turns_the_plugins_filter_off() -> None:
    skipping = Scripted("Skipping", reject("a", "b", "c"), pre=Status.skip("nothing to do"))
    run = runner(pre_filter=(skipping,), filter=(skipping,))
    skipped = run.pre_filter(state(), SNAPSHOT)
    result = run.filter(state(), SNAPSHOT, CLUSTERS, skipped)
    assert skipped == frozenset({"Skipping"})
    assert (len(result.passed), skipping.calls) == (3, 0)


def test_pre_score_skip_turns_the_plugins_score_off() -> None:
    skipping = Scripted("Skipping", pre=Status.skip(), points=50)
    run = runner(pre_score=(skipping,), score=(skipping,))
    scored = run.score(state(), SNAPSHOT, CLUSTERS, run.pre_score(state(), SNAPSHOT))
    assert [s.score for s in scored] == [ClusterScore()] * 3
    assert skipping.calls == 0


STAGES = [
    pytest.param(
        "PreFilter",
        lambda p: runner(pre_filter=(p,)).pre_filter(state(), SNAPSHOT),
        Code.CLUSTER_ALREADY_SELECTED,
        id="pre-filter",
    ),
    pytest.param(
        "PreScore",
        lambda p: runner(pre_score=(p,)).pre_score(state(), SNAPSHOT),
        Code.CLUSTER_UNSCHEDULABLE,
        id="pre-score",
    ),
    pytest.param(
        "PostBatch",
        lambda p: runner(post_batch=(p,)).post_batch(state(), SNAPSHOT, 5),
        Code.CLUSTER_UNSCHEDULABLE,
        id="post-batch",
    ),
    pytest.param(
        "Filter",
        lambda p: runner(filter=(p,)).filter(state(), SNAPSHOT, CLUSTERS, frozenset()),
        Code.SKIP,
        id="filter",
    ),
    pytest.param(
        "Score",
        lambda p: runner(score=(p,)).score(state(), SNAPSHOT, CLUSTERS, frozenset()),
        Code.SKIP,
        id="score",
    ),
]


def broken(status: Status) -> Scripted:
    return Scripted("Broken", lambda c: status, pre=status, batch=(0, status))


@pytest.mark.parametrize(("stage", "build", "wrong_code"), STAGES)
def test_an_internal_error_fails_the_cycle(
    stage: str, build: Callable[[Scripted], object], wrong_code: Code
) -> None:
    with pytest.raises(PluginError) as caught:
        build(broken(Status.internal_error("disk on fire")))
    assert (caught.value.plugin, caught.value.stage) == ("Broken", stage)
    assert caught.value.detail == "InternalError, disk on fire"


@pytest.mark.parametrize(("stage", "build", "wrong_code"), STAGES)
def test_a_code_the_stage_does_not_allow_fails_the_cycle(
    stage: str, build: Callable[[Scripted], object], wrong_code: Code
) -> None:
    with pytest.raises(PluginError) as caught:
        build(broken(Status(wrong_code, ("why",))))
    assert (caught.value.plugin, caught.value.stage) == ("Broken", stage)
    assert caught.value.detail == f"returned {wrong_code.value}, which {stage} does not allow"


def test_a_plugin_that_raises_is_named_with_its_stage() -> None:
    def boom(cluster: MemberCluster) -> Status:
        raise KeyError("zone")

    with pytest.raises(PluginError) as caught:
        runner(filter=(Scripted("Boom", boom),)).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert str(caught.value) == "plugin Boom failed at Filter: raised KeyError: 'zone'"


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        pytest.param([(2, Status.success())], 2, id="smaller-limit-wins"),
        pytest.param([(3, Status.success()), (1, Status.success())], 1, id="minimum-of-limits"),
        pytest.param([(-1, Status.success())], 5, id="negative-ignored"),
        pytest.param([(9, Status.success())], 5, id="larger-than-desired-ignored"),
        pytest.param([(0, Status.success())], 0, id="zero-is-valid"),
        pytest.param([(1, Status.skip())], 5, id="skip-ignored"),
    ],
)
def test_post_batch_takes_the_smallest_valid_limit(
    answers: list[tuple[int, Status]], expected: int
) -> None:
    plugins = tuple(Scripted(f"P{i}", batch=a) for i, a in enumerate(answers))
    assert runner(post_batch=plugins).post_batch(state(), SNAPSHOT, 5) == expected


def test_scores_add_up_component_wise() -> None:
    run = runner(score=(Scripted("A", points=20), Scripted("B", points=5)))
    scored = run.score(state(), SNAPSHOT, CLUSTERS[:1], frozenset())
    assert scored[0].score == ClusterScore(topology_spread_score=2, affinity_score=25)
    assert scored[0].total is None


def test_weighted_sum_multiplies_each_plugins_contribution_by_its_weight() -> None:
    profile = Profile(
        name="w",
        score=(Scripted("A", points=20), Scripted("B", points=5)),  # type: ignore[arg-type]
        score_mode=ScoreMode.WEIGHTED_SUM,
        weights={"A": 3},
    )
    scored = Runner(profile).score(state(), SNAPSHOT, CLUSTERS[:1], frozenset())
    # A: 3 x (20 + 1); B: 1 x (5 + 1)
    assert scored[0].total == 69
    assert scored[0].key == (69, "a")


def test_enough_stops_filtering_and_counts_the_rest() -> None:
    recorder = Scripted("Recorder")
    many = [member_cluster(f"m{i}", NOW) for i in range(10)]
    result = runner(filter=(recorder,)).filter(state(), SNAPSHOT, many, frozenset(), enough=4)
    assert [c.metadata.name for c in result.passed] == ["m0", "m1", "m2", "m3"]
    assert (recorder.calls, result.not_evaluated) == (4, 6)


def test_final_check_runs_only_after_every_plugin_passed() -> None:
    seen: list[str] = []

    def check(cluster: MemberCluster) -> Status | None:
        seen.append(cluster.metadata.name)
        return Status.unschedulable("bad name") if cluster.metadata.name == "c" else None

    result = runner(filter=(Scripted("F", reject("a")),)).filter(
        state(), SNAPSHOT, CLUSTERS, frozenset(), final_check=check, final_check_name="BindingName"
    )
    assert seen == ["b", "c"]
    assert [(f.name, f.plugin) for f in result.filtered] == [
        ("a", "F"),
        ("c", "BindingName"),
    ]


Snapshot = ClusterSchedulingPolicySnapshot
_OK = Status.success()


@dataclass
class Batched(Scripted):
    """Scripted with batch forms answering from the same verdicts (or raising, if told to)."""

    batch_calls: int = 0
    broken: bool = False

    def filter_all(
        self, state: CycleState, snapshot: Snapshot, facts: list[ClusterFacts]
    ) -> list[Status | None]:
        self.batch_calls += 1
        if self.broken:
            raise RuntimeError("batch bug")
        return [self.verdict(f.cluster) for f in facts]

    def score_all(
        self, state: CycleState, snapshot: Snapshot, facts: list[ClusterFacts]
    ) -> list[ClusterScore | None]:
        self.batch_calls += 1
        if self.broken or any(self.verdict(f.cluster) not in (None, _OK) for f in facts):
            raise RuntimeError("a cluster failed")
        return [ClusterScore(affinity_score=self.points, topology_spread_score=1) for _ in facts]


def test_batched_filters_decide_as_per_cluster_ones_and_skip_what_earlier_ones_rejected() -> None:
    first = Batched("first", verdict=reject("a"))
    second = Batched("second", verdict=reject("b", code=Code.CLUSTER_ALREADY_SELECTED))
    result = runner(filter=(first, second)).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert [c.metadata.name for c in result.passed] == ["c"]
    assert [(f.name, f.plugin) for f in result.filtered] == [("a", "first")]
    assert result.already_selected == ["b"]
    assert (first.batch_calls, second.batch_calls, first.calls, second.calls) == (1, 1, 0, 0)
    per_cluster = runner(filter=(Scripted("first", reject("a")), Scripted("second", reject(
        "b", code=Code.CLUSTER_ALREADY_SELECTED)))).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert result == per_cluster


@pytest.mark.parametrize("broken", [True, False], ids=["raises", "internal-error"])
def test_a_failing_batch_is_reported_as_the_per_cluster_run_reports_it(broken: bool) -> None:
    """A batch that raises or answers INTERNAL_ERROR sends the stage back to the per-cluster
    path, so the PluginError names the first failing cluster's plugin as it always did."""
    verdict = reject("b", code=Code.INTERNAL_ERROR) if not broken else reject()
    first = Batched("first", verdict=verdict, broken=broken)
    if broken:
        result = runner(filter=(first,)).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
        assert [c.metadata.name for c in result.passed] == ["a", "b", "c"]
        assert first.calls == 3  # answered per cluster after the batch raised
        return
    with pytest.raises(PluginError) as failed:
        runner(filter=(first,)).filter(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert failed.value.plugin == "first" and first.calls == 2  # a, then b failed


def test_batched_scores_add_up_as_per_cluster_ones_and_a_failure_falls_back() -> None:
    plugins = (Batched("x", points=2), Batched("y", points=3))
    scored = runner(score=plugins).score(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert [(s.name, s.score.affinity_score, s.score.topology_spread_score) for s in scored] == [
        ("a", 5, 2), ("b", 5, 2), ("c", 5, 2)]  # fmt: skip
    assert all(p.calls == 0 for p in plugins)
    failing = Batched("z", verdict=reject("c", code=Code.INTERNAL_ERROR))
    with pytest.raises(PluginError) as failed:
        runner(score=(failing,)).score(state(), SNAPSHOT, CLUSTERS, frozenset())
    assert failed.value.plugin == "z" and failing.calls == 3
