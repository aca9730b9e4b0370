"""Profiles: KubeFleet's default profile, YAML loading with errors that point at the YAML node,
and third-party plugins registered through real entry points."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import timedelta
from importlib import metadata
from pathlib import Path

import pytest

from scheduler import Profile, ProfileError, ScoreMode, default_profile, load_profile
from scheduler.framework.registry import ENTRY_POINT_GROUP
from scheduler.testing import member_cluster
from tests.unit.scheduler.cycle_builders import NOW, cluster, pick_fixed, pick_n, run

README = Path(__file__).parents[3] / "scheduler" / "README.md"

KUBEFLEET = {
    "postBatch": ("TopologySpreadConstraints",),
    "preFilter": ("ClusterAffinity", "NamespaceAffinity", "TopologySpreadConstraints"),
    "filter": (
        "ClusterAffinity",
        "ClusterEligibility",
        "NamespaceAffinity",
        "TaintToleration",
        "SamePlacementAntiAffinity",
        "TopologySpreadConstraints",
    ),
    "preScore": ("ClusterAffinity", "TopologySpreadConstraints"),
    "score": ("ClusterAffinity", "SamePlacementAntiAffinity", "TopologySpreadConstraints"),
}
# KubeFleet's DefaultProfile, then ours: ClusterResourcesFit, which skips itself for placements
# without requests (docs/capacity.md), last at the points it implements.
CAPACITY_POINTS = ("preFilter", "filter", "preScore", "score")
DEFAULT = {
    point: plugins + (("ClusterResourcesFit",) if point in CAPACITY_POINTS else ())
    for point, plugins in KUBEFLEET.items()
}


def names(profile: Profile) -> dict[str, tuple[str, ...]]:
    return {point: profile.plugin_names(point) for point in DEFAULT}


def test_the_default_profile_is_kubefleets() -> None:
    profile = default_profile()
    assert profile.name == "DefaultProfile"
    assert names(profile) == DEFAULT
    assert profile.score_mode is ScoreMode.LEXICOGRAPHIC
    assert profile.percentage_of_clusters_to_score is None


def test_an_empty_document_is_the_default_profile() -> None:
    assert names(load_profile("{}\n")) == DEFAULT
    assert names(load_profile("\n")) == DEFAULT


def test_disabling_per_point_and_everywhere() -> None:
    profile = load_profile(
        textwrap.dedent(
            """
            name: quiet
            plugins:
              multiPoint: {disabled: [{name: TaintToleration}]}
              score: {disabled: [SamePlacementAntiAffinity]}
            """
        )
    )
    assert profile.name == "quiet"
    assert "TaintToleration" not in profile.plugin_names("filter")
    assert "SamePlacementAntiAffinity" in profile.plugin_names("filter")
    assert profile.plugin_names("score") == (
        "ClusterAffinity",
        "TopologySpreadConstraints",
        "ClusterResourcesFit",
    )


def test_plugin_args_reach_the_plugin_and_pick_fixed_shares_the_eligibility_timeouts() -> None:
    profile = load_profile(
        textwrap.dedent(
            """
            pluginConfig:
              - name: ClusterEligibility
                args: {heartbeat_timeout_minutes: 20}
            """
        )
    )
    assert profile.plugin_args == {"ClusterEligibility": {"heartbeat_timeout_minutes": 20}}
    late = member_cluster("late", NOW, heartbeat_age=timedelta(minutes=10))
    assert run(pick_n(1), [late], profile=profile).outcome.picked == 1
    assert run(pick_n(1), [late], profile=default_profile()).outcome.picked == 0
    assert run(pick_fixed("late"), [late], profile=profile).outcome.fulfilled
    assert not run(pick_fixed("late"), [late], profile=default_profile()).outcome.fulfilled


def test_percentage_to_score_is_a_profile_setting() -> None:
    assert load_profile("percentageOfClustersToScore: 30").percentage_of_clusters_to_score == 30
    assert load_profile("percentageOfClustersToScore: 100").percentage_of_clusters_to_score is None
    assert load_profile("percentageOfClustersToScore: 0").percentage_of_clusters_to_score is None


def test_base_none_starts_from_nothing() -> None:
    profile = load_profile("base: none\nplugins: {multiPoint: {enabled: [ClusterEligibility]}}")
    assert names(profile) == {
        "postBatch": (),
        "preFilter": (),
        "filter": ("ClusterEligibility",),
        "preScore": (),
        "score": (),
    }


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        pytest.param("nmae: x", "nmae", "unknown key 'nmae'", id="unknown-top-key"),
        pytest.param(
            "plugins: {filter: {enable: []}}",
            "plugins.filter.enable",
            "unknown key",
            id="unknown-set-key",
        ),
        pytest.param("plugins: {sort: {}}", "plugins.sort", "unknown key", id="unknown-point"),
        pytest.param(
            "plugins: {score: {enabled: [{name: Nope}]}}",
            "plugins.score.enabled[0]",
            "unknown plugin 'Nope'",
            id="unknown-plugin",
        ),
        pytest.param(
            "plugins: {filter: {disabled: [{name: ClusterAffinty}]}}",
            "plugins.filter.disabled[0]",
            "not enabled there",
            id="disable-a-typo",
        ),
        pytest.param(
            "plugins: {score: {enabled: [{name: ClusterAffinity, weight: 2}]}}",
            "plugins.score.enabled[0].weight",
            "weights apply only with scoreMode: weightedSum",
            id="weight-in-lexicographic-mode",
        ),
        pytest.param(
            "scoreMode: weightedSum\n"
            "plugins: {score: {enabled: [{name: ClusterAffinity, weight: 0}]}}",
            "plugins.score.enabled[0].weight",
            "expected an integer in [1, 100], got 0",
            id="weight-out-of-range",
        ),
        pytest.param(
            "plugins: {filter: {enabled: [{name: ClusterEligibility, weight: 2}]}}",
            "plugins.filter.enabled[0].weight",
            "unknown key 'weight'",
            id="weight-outside-score",
        ),
        pytest.param(
            "plugins: {postBatch: {enabled: [TaintToleration]}}",
            "plugins.postBatch.enabled[0]",
            "does not implement post_batch",
            id="wrong-extension-point",
        ),
        pytest.param(
            "scoreMode: summed",
            "scoreMode",
            "expected one of lexicographic, weightedSum",
            id="bad-mode",
        ),
        pytest.param(
            "percentageOfClustersToScore: 150",
            "percentageOfClustersToScore",
            "[0, 100]",
            id="bad-percentage",
        ),
        pytest.param(
            "percentageOfClustersToScore: yes",
            "percentageOfClustersToScore",
            "got True",
            id="bool-percentage",
        ),
        pytest.param(
            "pluginConfig: [{name: ClusterEligibility, args: {heartbeat_timeout_minutes: -1}}]",
            "pluginConfig[0].args",
            "bad arguments for plugin 'ClusterEligibility': ValueError",
            id="bad-args",
        ),
        pytest.param(
            "pluginConfig: [{name: ClusterEligibility, args: {colour: blue}}]",
            "pluginConfig[0].args",
            "TypeError",
            id="unknown-arg",
        ),
        pytest.param(
            "plugins: {multiPoint: {disabled: [TaintToleration]}}\n"
            "pluginConfig: [{name: TaintToleration, args: {}}]",
            "pluginConfig[0].args",
            "configured but not enabled",
            id="config-for-disabled-plugin",
        ),
        pytest.param("- a\n- b", "", "expected a mapping, got list", id="not-a-mapping"),
        pytest.param("name: [unclosed", "", "invalid YAML", id="invalid-yaml"),
        pytest.param("base: kubefleet", "base", "expected one of default, none", id="bad-base"),
    ],
)
def test_bad_profiles_say_where_and_what(text: str, path: str, message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(text)
    assert caught.value.path == path
    assert message in caught.value.message


def test_profiles_load_from_files(tmp_path: Path) -> None:
    file = tmp_path / "profile.yaml"
    file.write_text("name: from-file\n")
    assert load_profile(file).name == "from-file"
    assert load_profile(str(file)).name == "from-file"
    with pytest.raises(ProfileError, match="cannot read profile"):
        load_profile(str(tmp_path / "missing.yaml"))


# --- third-party plugins through entry points ---------------------------------------------

TMP_PLUGIN = '''
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Status


class Zoned:
    """Filter + Score: only clusters with a zone label, preferring zone {prefer}."""

    name = "Zoned"

    def __init__(self, prefer="x"):
        self.prefer = prefer

    def filter(self, state, snapshot, cluster):
        if "zone" not in cluster.metadata.labels:
            return Status.unschedulable("cluster has no zone label")
        return Status.success()

    def score(self, state, snapshot, cluster):
        points = 50 if cluster.metadata.labels.get("zone") == self.prefer else 0
        return ClusterScore(affinity_score=points), Status.success()


class Misnamed(Zoned):
    name = "SomethingElse"
'''


@pytest.fixture
def installed_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A real distribution on sys.path: a module and a dist-info declaring entry points."""
    (tmp_path / "fleet_example_plugins.py").write_text(TMP_PLUGIN)
    dist = tmp_path / "fleet_example_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fleet-example-plugins\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        "Zoned = fleet_example_plugins:Zoned\n"
        "Misnamed = fleet_example_plugins:Misnamed\n"
        "Broken = fleet_example_plugins_missing:Plugin\n"
        "PreferLabel = scheduler.plugins.examples.prefer_label:PreferLabel\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("fleet_example_plugins", None)


def test_a_third_party_plugin_is_found_through_its_entry_point(installed_plugins: None) -> None:
    names_ = {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert {"Zoned", "PreferLabel"} <= names_
    profile = load_profile(
        textwrap.dedent(
            """
            plugins:
              multiPoint: {enabled: [{name: Zoned}]}
            pluginConfig:
              - {name: Zoned, args: {prefer: y}}
            """
        )
    )
    assert profile.plugin_names("filter")[-1] == "Zoned"
    assert profile.plugin_names("score")[-1] == "Zoned"
    clusters = [cluster("a", zone="x"), cluster("b", zone="y"), cluster("c")]
    result = run(pick_n(1), clusters, profile=profile)
    assert [b.spec.target_cluster for b in result.plan.create] == ["b"]
    assert result.explanation.filtered[0].plugin == "Zoned"


def test_the_example_plugin_with_weights(installed_plugins: None) -> None:
    profile = load_profile(
        textwrap.dedent(
            """
            scoreMode: weightedSum
            plugins:
              score:
                enabled:
                  - {name: PreferLabel, weight: 3}
            pluginConfig:
              - {name: PreferLabel, args: {label: tier, value: gold, points: 10}}
            """
        )
    )
    assert profile.weight("PreferLabel") == 3 and profile.weight("ClusterAffinity") == 1
    result = run(pick_n(1), [cluster("a", tier="gold"), cluster("b")], profile=profile)
    assert [b.spec.target_cluster for b in result.plan.create] == ["a"]
    assert result.explanation.picked[0].total == 30
    # the persisted score stays the unweighted component
    assert result.plan.create[0].spec.cluster_decision.cluster_score.affinity_score == 10  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("Misnamed", "calls itself 'SomethingElse'", id="name-mismatch"),
        pytest.param("Broken", "cannot load plugin 'Broken'", id="import-fails"),
    ],
)
def test_a_bad_third_party_plugin_is_a_profile_error(
    installed_plugins: None, name: str, message: str
) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(f"plugins: {{filter: {{enabled: [{name}]}}}}")
    assert caught.value.path == "plugins.filter.enabled[0]"
    assert message in caught.value.message


def test_the_readme_profile_example_loads(installed_plugins: None) -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "scheduler/README.md has a YAML profile example"
    for block in blocks:
        profile = load_profile(block)
        assert profile.name


class HintLookups:
    """A filter plugin that counts how often its requeue hint is looked up; its hint says no
    change matters to it."""

    name = "HintLookups"
    lookups = 0

    def filter(self, state: object, snapshot: object, cluster: object) -> None:
        raise AssertionError("no cycle runs here")

    @property
    def requeue_hint(self) -> Callable[[object, object], bool]:
        self.lookups += 1
        return lambda policy, change: False


def test_each_plugins_requeue_hint_is_resolved_once_when_the_profile_is_built() -> None:
    """kube-scheduler registers each plugin's events once (EventsToRegister): a profile looks
    its plugins' hints up when it is built, not for every placement a cluster's change reaches;
    a plugin without one is None (every change may matter to it)."""
    from hub.types import ClusterResourcePlacement
    from scheduler.requeue.reach import ClusterEvent, reach

    plugin = HintLookups()
    profile = Profile(name="counted", filter=(plugin,), score=default_profile().score[:1])
    assert plugin.lookups == 1
    assert profile.requeue_hints[0] is not None and profile.requeue_hints[1] is not None
    assert Profile(name="plain", filter=(plugin,)) == Profile(name="plain", filter=(plugin,))
    fleet = [
        ClusterResourcePlacement.from_wire(
            {"metadata": {"name": f"p{i}"}, "spec": {"resourceSelectors": []}}
        )
        for i in range(20)
    ]
    old = member_cluster("c0", NOW, labels={"unread": "1"})
    new = member_cluster("c0", NOW, labels={"unread": "2"})
    # Every placement is PickAll (KubeFleet's rule reaches it); no hint says the label matters.
    assert reach(ClusterEvent.updated(old, new, profile, NOW), fleet, profile) == []
    assert plugin.lookups == 3  # the two equal profiles above, then no lookup per placement

    hintless = Profile(name="hintless", filter=(plugin,), score=(HintlessScore(),))
    assert hintless.requeue_hints[1] is None
    reached = reach(ClusterEvent.updated(old, new, hintless, NOW), fleet, hintless)
    assert [r.placement for r in reached] == [p.metadata.name for p in fleet]


class HintlessScore:
    """A score plugin with no requeue hint (an out-of-tree plugin that knows nothing of them)."""

    name = "HintlessScore"

    def score(self, state: object, snapshot: object, cluster: object) -> None:
        raise AssertionError("no cycle runs here")
