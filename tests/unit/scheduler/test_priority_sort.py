"""PrioritySort (the default QueueSort plugin), its bands and fairness, the QueueSort point in
profiles, and the example PriorityByLabel plugin."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from hub.types import ObjectMeta
from scheduler import ProfileError, default_profile, load_profile
from scheduler.framework.queue_sort import PriorityClasses, QueueItem, QueuePriority, TurnCause
from scheduler.plugins.examples.priority_by_label import PriorityByLabel
from scheduler.plugins.priority_sort import PrioritySort

ANNOTATION = "fleet-scheduler.io/priority-class"
TENANT = "fleet-scheduler.io/tenant"
CLASSES = PriorityClasses(
    {"critical": 2_000_000_000, "high": 1_000, "mid": 999, "zero": 0, "low": -1}, None
)


class _PC:
    """A PriorityClass-shaped object (PriorityClasses.of reads only these fields)."""

    def __init__(self, name: str, value: int, global_default: bool = False) -> None:
        self.metadata = ObjectMeta(name=name)
        self.value, self.global_default = value, global_default


def item(
    cls: str | None = None,
    cause: TurnCause = TurnCause.PLACEMENT,
    classes: PriorityClasses = CLASSES,
    tenant: str | None = None,
) -> QueueItem:
    annotations = {ANNOTATION: cls} if cls is not None else {}
    labels = {TENANT: tenant} if tenant is not None else {}
    return QueueItem(ObjectMeta(name="web", annotations=annotations, labels=labels), cause, classes)


@pytest.mark.parametrize(
    ("cls", "key", "value"),
    [
        ("critical", 1, 2_000_000_000),
        ("high", 2, 1_000),
        ("mid", 3, 999),
        ("zero", 3, 0),
        ("low", 4, -1),
        (None, 3, 0),
    ],
)
def test_default_bands_map_values_to_keys(cls: str | None, key: int, value: int) -> None:
    got = PrioritySort().queue_sort(item(cls))
    assert (got.priority_key, got.value, got.priority_class) == (key, value, cls)
    assert got.problem is None


@pytest.mark.parametrize(
    ("cls", "own", "fan_out"), [("critical", 1, 2), ("zero", 3, 4), ("low", 4, 5)]
)
def test_a_fan_out_turn_runs_one_key_below_the_placements_own(
    cls: str, own: int, fan_out: int
) -> None:
    plugin = PrioritySort()
    assert plugin.queue_sort(item(cls, TurnCause.PLACEMENT)).priority_key == own
    assert plugin.queue_sort(item(cls, TurnCause.PERSON)).priority_key == own
    assert plugin.queue_sort(item(cls, TurnCause.FAN_OUT)).priority_key == fan_out


def test_fan_out_demotion_is_configurable_and_stops_at_the_last_key() -> None:
    plugin = PrioritySort(fanOutDemotion=3)
    assert plugin.queue_sort(item("high", TurnCause.FAN_OUT)).priority_key == 5
    assert (
        PrioritySort(fanOutDemotion=0).queue_sort(item("high", TurnCause.FAN_OUT)).priority_key == 2
    )


def test_the_global_default_applies_without_the_annotation_as_for_pods() -> None:
    classes = PriorityClasses.of([_PC("batch", -10, True), _PC("web", 5_000)])
    got = PrioritySort().queue_sort(item(None, classes=classes))
    assert (got.value, got.priority_class, got.priority_key) == (-10, "batch", 4)
    named = PrioritySort().queue_sort(item("web", classes=classes))
    assert (named.value, named.priority_key) == (5_000, 2)


def test_of_several_global_defaults_the_lowest_value_counts() -> None:
    classes = PriorityClasses.of([_PC("b", 10, True), _PC("a", 3, True), _PC("c", 3, True)])
    assert classes.global_default == "a"


def test_a_missing_class_gets_the_default_and_says_so() -> None:
    classes = PriorityClasses.of([_PC("batch", -10, True)])
    got = PrioritySort().queue_sort(item("gold", classes=classes))
    assert (got.value, got.priority_class, got.priority_key) == (-10, "batch", 4)
    assert got.problem is not None and "'gold'" in got.problem and ANNOTATION in got.problem
    bare = PrioritySort().queue_sort(item("gold", classes=PriorityClasses()))
    assert (bare.value, bare.priority_class, bare.priority_key) == (0, None, 3)


def test_custom_bands() -> None:
    plugin = PrioritySort(
        bands=[{"minValue": 100, "priorityKey": 1}, {"minValue": -50, "priorityKey": 5}]
    )
    assert plugin.band_key(100) == 1
    assert plugin.band_key(99) == 5
    assert plugin.band_key(-(2**31)) == 5  # below the last band: the last band's key


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"bands": []}, "non-empty list"),
        ({"bands": [{"minValue": 0}]}, "exactly minValue and priorityKey"),
        ({"bands": [{"minValue": 0, "priorityKey": 6}]}, "priorityKey must be"),
        ({"bands": [{"minValue": 2**31, "priorityKey": 1}]}, "int32"),
        (
            {"bands": [{"minValue": 0, "priorityKey": 3}, {"minValue": 10, "priorityKey": 4}]},
            "highest minValue down",
        ),
        (
            {"bands": [{"minValue": 10, "priorityKey": 3}, {"minValue": 0, "priorityKey": 2}]},
            "never rise",
        ),
        ({"fanOutDemotion": 5}, "fanOutDemotion"),
        ({"fanOutDemotion": True}, "fanOutDemotion"),
        ({"fairness": {"enabled": "yes"}}, "fairness.enabled"),
        ({"fairness": {"tenantLabel": "a/b/c"}}, "fairness.tenantLabel"),
        ({"fairness": {"weights": {"a": 0}}}, "fairness.weights.a"),
        ({"fairness": {"defaultWeight": float("inf")}}, "fairness.defaultWeight"),
        ({"fairness": {"weight": 1}}, "unknown keys"),
    ],
)
def test_bad_arguments_are_refused(args: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PrioritySort(**args)  # type: ignore[arg-type]


def test_fairness_is_off_by_default_but_the_tenant_still_shows() -> None:
    got = PrioritySort().queue_sort(item(tenant="team-a"))
    assert (got.fairness_key, got.fairness_weight, got.tenant) == (None, None, "team-a")


def test_fairness_keys_and_weights_come_from_the_label_and_the_profile() -> None:
    plugin = PrioritySort(
        fairness={"enabled": True, "weights": {"team-a": 4}, "defaultWeight": 0.5}
    )
    a = plugin.queue_sort(item(tenant="team-a"))
    b = plugin.queue_sort(item(tenant="team-b"))
    none = plugin.queue_sort(item())
    assert (a.fairness_key, a.fairness_weight) == ("team-a", 4.0)
    assert (b.fairness_key, b.fairness_weight) == ("team-b", 0.5)
    assert (none.fairness_key, none.fairness_weight, none.tenant) == (None, None, None)
    custom = PrioritySort(fairness={"enabled": True, "tenantLabel": "example.com/team"})
    labelled = QueueItem(
        ObjectMeta(name="w", labels={"example.com/team": "t1", TENANT: "ignored"}),
        TurnCause.PLACEMENT,
    )
    assert custom.queue_sort(labelled).fairness_key == "t1"


def test_queue_priority_checks_its_key_and_weight() -> None:
    with pytest.raises(ValueError):
        QueuePriority(priority_key=0)
    with pytest.raises(ValueError):
        QueuePriority(fairness_weight=-1.0)
    assert QueuePriority().effective_key == 3


# --- the QueueSort point in profiles ----------------------------------------------------------


def test_the_default_profile_sorts_with_priority_sort() -> None:
    profile = default_profile()
    assert profile.plugin_names("queueSort") == ("PrioritySort",)
    assert isinstance(profile.queue_sorter, PrioritySort)


def test_plugin_config_reaches_priority_sort_and_base_none_still_has_one() -> None:
    profile = load_profile(
        textwrap.dedent(
            """
            base: none
            plugins: {multiPoint: {enabled: [ClusterEligibility]}}
            pluginConfig:
              - name: PrioritySort
                args: {fanOutDemotion: 2, bands: [{minValue: 0, priorityKey: 2}]}
            """
        )
    )
    assert profile.plugin_names("queueSort") == ("PrioritySort",)
    assert profile.queue_sorter.queue_sort(item("zero", TurnCause.FAN_OUT)).priority_key == 4


def test_bad_priority_sort_arguments_name_their_yaml_path() -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile("pluginConfig: [{name: PrioritySort, args: {fanOutDemotion: 9}}]")
    assert caught.value.path == "pluginConfig[0].args"


@pytest.fixture
def example_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example plugin installed as a distribution declaring its entry point."""
    dist = tmp_path / "fleet_queue_examples-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fleet-queue-examples\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[fleet_scheduler.plugins]\n"
        "PriorityByLabel = scheduler.plugins.examples.priority_by_label:PriorityByLabel\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_an_out_of_tree_queue_sort_plugin_replaces_priority_sort(example_plugins: None) -> None:
    profile = load_profile(
        textwrap.dedent(
            """
            plugins:
              queueSort: {enabled: [{name: PriorityByLabel}]}
            pluginConfig:
              - {name: PriorityByLabel, args: {label: tier, keys: {gold: 1, silver: 2}}}
            """
        )
    )
    assert profile.plugin_names("queueSort") == ("PriorityByLabel",)
    sorter = profile.queue_sorter
    gold = QueueItem(ObjectMeta(name="a", labels={"tier": "gold"}), TurnCause.PLACEMENT)
    other = QueueItem(ObjectMeta(name="b", labels={"tier": "bronze"}), TurnCause.FAN_OUT)
    assert sorter.queue_sort(gold).priority_key == 1
    assert sorter.queue_sort(other).priority_key == 4  # otherwise 3, one lower for a fan-out


def test_two_queue_sort_plugins_are_refused(example_plugins: None) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(
            textwrap.dedent(
                """
                plugins:
                  queueSort: {enabled: [PriorityByLabel, PrioritySort]}
                pluginConfig:
                  - {name: PriorityByLabel, args: {label: tier, keys: {gold: 1}}}
                """
            )
        )
    assert caught.value.path == "plugins.queueSort.enabled[1]"
    assert "exactly one QueueSort plugin" in str(caught.value)


def test_a_filter_plugin_cannot_be_a_queue_sort() -> None:
    with pytest.raises(ProfileError, match=r"does not implement queue_sort"):
        load_profile("plugins: {queueSort: {enabled: [ClusterAffinity]}}")


def test_priority_by_label_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match=r"keys\.gold"):
        PriorityByLabel(label="tier", keys={"gold": 0})
    with pytest.raises(ValueError, match="otherwise"):
        PriorityByLabel(label="tier", keys={"gold": 1}, otherwise=6)


# --- unsatisfied first (issue 35) ------------------------------------------------------------


def unsatisfied(cls: str | None = None, cause: TurnCause = TurnCause.PLACEMENT) -> QueueItem:
    """A turn of a placement that has less than it asks for: new, short of N, or changed."""
    return QueueItem(
        ObjectMeta(name="web", annotations={ANNOTATION: cls} if cls else {}),
        cause,
        CLASSES,
        unsatisfied=True,
    )


@pytest.mark.parametrize("cls", ["critical", "zero", "low", None])
def test_an_unsatisfied_turn_goes_before_a_re_decision_of_its_class(cls: str | None) -> None:
    plugin = PrioritySort()
    own = plugin.queue_sort(item(cls)).priority_key
    for cause in TurnCause:
        wanting = plugin.queue_sort(unsatisfied(cls, cause))
        settled = plugin.queue_sort(item(cls, cause))
        assert wanting.order < settled.order, cause
        # Never past its band: the key of the placement's own turns at best.
        assert wanting.priority_key == own, cause
    # Within the key a re-decision of a satisfied placement comes after.
    assert plugin.queue_sort(item(cls)).order == (own, 2)
    assert plugin.queue_sort(unsatisfied(cls)).order == (own, 1)


def new(cls: str | None = None, cause: TurnCause = TurnCause.PLACEMENT) -> QueueItem:
    """A turn of a placement that has nothing yet: never scheduled."""
    return dataclasses.replace(unsatisfied(cls, cause), new=True)


@pytest.mark.parametrize("cls", ["critical", "zero", "low", None])
def test_a_new_placement_goes_before_one_that_wants_more_or_changed(cls: str | None) -> None:
    """New first (issue 35): a placement that has nothing yet before an edited one or one
    short of its N, before a satisfied re-decision, all at the key of the placement's own
    turns; `new` alone (a caller that did not say unsatisfied) means unsatisfied too."""
    plugin = PrioritySort()
    own = plugin.queue_sort(item(cls)).priority_key
    for cause in TurnCause:
        first = plugin.queue_sort(new(cls, cause))
        assert first.order == (own, 0), cause
        assert first.order < plugin.queue_sort(unsatisfied(cls, cause)).order, cause
        alone = QueueItem(
            ObjectMeta(name="web", annotations=new(cls).placement.annotations),
            cause,
            CLASSES,
            new=True,
        )
        assert plugin.queue_sort(alone).order == (own, 0), cause


def test_new_first_can_be_turned_off_in_the_profile() -> None:
    plugin = load_profile(
        "pluginConfig: [{name: PrioritySort, args: {newFirst: false}}]"
    ).queue_sorter
    for cause in TurnCause:
        assert (
            plugin.queue_sort(new("zero", cause)).order
            == plugin.queue_sort(unsatisfied("zero", cause)).order
        )
        assert (
            plugin.queue_sort(new("zero", cause)).order
            < plugin.queue_sort(item("zero", cause)).order
        )
    off = load_profile("pluginConfig: [{name: PrioritySort, args: {unsatisfiedFirst: false}}]")
    assert off.queue_sorter.queue_sort(new("zero")).order == (3, 0)
    assert off.queue_sorter.queue_sort(item("zero")).order == (3, 0)
    with pytest.raises(ValueError, match="newFirst"):
        PrioritySort(newFirst=1)  # type: ignore[arg-type]


def test_a_fan_out_to_a_placement_short_of_its_n_is_not_demoted() -> None:
    """On Temporal's queues only whole keys count: an unsatisfied placement's fan-out turn runs
    at the key of its own turns, ahead of the demoted fan-outs of satisfied ones."""
    plugin = PrioritySort()
    assert plugin.queue_sort(unsatisfied("zero", TurnCause.FAN_OUT)).priority_key == 3
    assert plugin.queue_sort(item("zero", TurnCause.FAN_OUT)).priority_key == 4


def test_unsatisfied_first_can_be_turned_off_in_the_profile() -> None:
    plugin = load_profile(
        "pluginConfig: [{name: PrioritySort, args: {unsatisfiedFirst: false}}]"
    ).queue_sorter
    for cause in TurnCause:
        assert plugin.queue_sort(unsatisfied("zero", cause)) == plugin.queue_sort(
            item("zero", cause)
        )
        assert plugin.queue_sort(unsatisfied("zero", cause)).order[1] == 0
    assert plugin.queue_sort(unsatisfied("zero", TurnCause.FAN_OUT)).priority_key == 4
    with pytest.raises(ValueError, match="unsatisfiedFirst"):
        PrioritySort(unsatisfiedFirst="no")  # type: ignore[arg-type]


def test_the_within_key_order_stays_out_of_the_reconciles_digests() -> None:
    """The reconcile's priority digests use repr: a fleet's digests stay what they were."""
    from scheduler.requeue.reconcile import DEFAULT_PRIORITY_KEY, priority_digests

    plugin = PrioritySort()
    settled, wanting = plugin.queue_sort(item("zero")), plugin.queue_sort(unsatisfied("zero"))
    assert repr(settled) == repr(wanting) and settled == wanting
    assert settled.order != wanting.order
    digests = priority_digests({DEFAULT_PRIORITY_KEY: settled, "web": wanting})
    assert list(digests) == [DEFAULT_PRIORITY_KEY]
