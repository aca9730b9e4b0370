"""ClusterAffinity PreScore and Score: preferred terms and property sorters (kubefleet-rules
5.1)."""

from __future__ import annotations

import pytest

from hub.types import (
    Affinity,
    ClusterSchedulingPolicySnapshot,
    ClusterSelectorTerm,
    MemberCluster,
    PlacementPolicy,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Code, Status
from scheduler.plugins.cluster_affinity import SKIP_NO_PREFERRED_TERMS, ClusterAffinity
from scheduler.plugins.cluster_affinity.scoring import round_half_away_from_zero
from tests.unit.scheduler.plugins.plugin_builders import (
    affinity_policy,
    cluster,
    expr,
    labels,
    snapshot,
    state,
    term,
)

NODES = "kubernetes-fleet.io/node-count"
MEMORY = "resources.kubernetes-fleet.io/available-memory"


def nodes(name: str, value: str | None, **labels_: str) -> MemberCluster:
    return cluster(name, labels_, properties={} if value is None else {NODES: value})


def prepared(
    clusters: list[MemberCluster], *preferred: tuple[int, ClusterSelectorTerm]
) -> tuple[CycleState, ClusterSchedulingPolicySnapshot, ClusterAffinity]:
    snap = snapshot(affinity_policy(preferred=preferred))
    cycle = state(*clusters)
    plugin = ClusterAffinity()
    assert plugin.pre_score(cycle, snap).is_success
    return cycle, snap, plugin


def scores(
    clusters: list[MemberCluster], *preferred: tuple[int, ClusterSelectorTerm]
) -> dict[str, int]:
    """Affinity score of every cluster, all of them taken as passing Filter."""
    cycle, snap, plugin = prepared(clusters, *preferred)
    result = {}
    for member in clusters:
        score, status = plugin.score(cycle, snap, member)
        assert status.is_success, status
        assert score.topology_spread_score == score.obsolete_placement_affinity_score == 0
        result[member.metadata.name] = score.affinity_score
    return result


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param(None, id="nil-policy"),
        pytest.param(PlacementPolicy(), id="no-affinity"),
        pytest.param(PlacementPolicy(affinity=Affinity()), id="no-cluster-affinity"),
        pytest.param(affinity_policy(), id="no-preferred-terms"),
    ],
)
def test_pre_score_skips_without_preferred_terms(policy: PlacementPolicy | None) -> None:
    status = ClusterAffinity().pre_score(state(), snapshot(policy))
    assert status == Status.skip("no preferred cluster affinity terms specified")
    assert status == Status.skip(SKIP_NO_PREFERRED_TERMS)


PROD_EU = nodes("a", "3", env="prod", region="eu")
PROD_US = nodes("b", "5", env="prod", region="us")
DEV = nodes("c", None, env="dev")


def test_label_terms_add_their_weight_when_they_match() -> None:
    got = scores(
        [PROD_EU, PROD_US, DEV],
        (20, term(labels({"env": "prod"}))),
        (-30, term(labels(None, expr("region", "In", "us")))),
        (7, term()),
    )
    assert got == {"a": 27, "b": -3, "c": 7}


def test_zero_weight_terms_are_skipped_even_when_invalid() -> None:
    got = scores([PROD_EU], (0, term(labels(None, expr("env", "In")))), (5, term()))
    assert got == {"a": 5}


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        pytest.param("Descending", 11, id="descending"),
        pytest.param("Ascending", 89, id="ascending"),
    ],
)
def test_reference_worked_example(order: str, expected: int) -> None:
    fleet = [nodes("lo", "10"), nodes("mid", "20"), nodes("hi", "100")]
    assert scores(fleet, (100, term(sorter=(NODES, order))))["mid"] == expected


def test_extremes_come_from_every_cluster_of_the_cycle_not_only_passing_ones() -> None:
    fleet = [nodes("lo", "10"), nodes("mid", "20"), nodes("hi", "100")]
    cycle, snap, plugin = prepared(fleet, (100, term(sorter=(NODES, "Descending"))))
    # Only "mid" and "hi" passed Filter; "lo" still sets the minimum.
    assert plugin.score(cycle, snap, fleet[1])[0] == ClusterScore(affinity_score=11)
    without_lo = scores(fleet[1:], (100, term(sorter=(NODES, "Descending"))))
    assert without_lo == {"mid": 0, "hi": 100}


@pytest.mark.parametrize(
    ("weight", "order", "expected"),
    [
        pytest.param(1, "Descending", 1, id="half-rounds-up"),
        pytest.param(1, "Ascending", 1, id="half-rounds-up-ascending"),
        pytest.param(-1, "Descending", -1, id="negative-half-rounds-away-from-zero"),
        pytest.param(5, "Descending", 3, id="two-and-a-half-is-three-not-bankers-two"),
        pytest.param(-5, "Ascending", -3, id="minus-two-and-a-half-is-minus-three"),
        pytest.param(3, "Descending", 2, id="one-and-a-half"),
        pytest.param(100, "Descending", 50, id="exact"),
    ],
)
def test_interpolation_rounds_half_away_from_zero(weight: int, order: str, expected: int) -> None:
    fleet = [nodes("lo", "0"), nodes("mid", "1"), nodes("hi", "2")]
    assert scores(fleet, (weight, term(sorter=(NODES, order))))["mid"] == expected


def test_negative_weight_sorter_penalises_the_extreme() -> None:
    fleet = [nodes("lo", "10"), nodes("mid", "20"), nodes("hi", "100")]
    assert scores(fleet, (-50, term(sorter=(NODES, "Descending")))) == {
        "lo": 0,
        "mid": -6,
        "hi": -50,
    }


def test_same_value_everywhere_scores_zero() -> None:
    fleet = [nodes("a", "4"), nodes("b", "4000m")]
    assert scores(fleet, (100, term(sorter=(NODES, "Descending")))) == {"a": 0, "b": 0}


def test_missing_property_scores_zero_and_is_ignored_for_extremes() -> None:
    fleet = [nodes("lo", "10"), nodes("none", None), nodes("hi", "20")]
    got = scores(fleet, (10, term(sorter=(NODES, "Ascending"))))
    assert got == {"lo": 10, "none": 0, "hi": 0}


def test_label_selector_gates_the_sorter() -> None:
    fleet = [nodes("lo", "10", env="dev"), nodes("hi", "20", env="prod")]
    got = scores(fleet, (10, term(labels({"env": "dev"}), sorter=(NODES, "Ascending"))))
    assert got == {"lo": 10, "hi": 0}


def test_binary_and_decimal_quantities_sort_by_value() -> None:
    fleet = [
        cluster("g", available={"memory": "1G"}),
        cluster("gi", available={"memory": "1Gi"}),
        cluster("two", available={"memory": "2Gi"}),
    ]
    got = scores(fleet, (100, term(sorter=(MEMORY, "Descending"))))
    # (2^30 - 10^9) / (2^31 - 10^9) = 0.0627...
    assert got == {"g": 0, "gi": 6, "two": 100}


def test_terms_add_up_and_share_extremes_of_one_property() -> None:
    fleet = [nodes("lo", "10"), nodes("mid", "20"), nodes("hi", "100")]
    got = scores(
        fleet,
        (100, term(sorter=(NODES, "Descending"))),
        (10, term(sorter=(NODES, "Ascending"))),
    )
    assert got == {"lo": 10, "mid": 11 + 9, "hi": 100}


# --- deviations: bad cluster data never aborts the cycle ---------------------------------------


def test_unparsable_values_are_treated_as_not_available() -> None:
    fleet = [nodes("lo", "10"), nodes("bad", "ten"), nodes("hi", "20")]
    got = scores(fleet, (10, term(sorter=(NODES, "Descending"))))
    assert got == {"lo": 0, "bad": 0, "hi": 10}


def test_values_beyond_float_range_are_treated_as_not_available() -> None:
    fleet = [nodes("lo", "10"), nodes("huge", "1e400"), nodes("hi", "20")]
    got = scores(fleet, (10, term(sorter=(NODES, "Descending"))))
    assert got == {"lo": 0, "huge": 0, "hi": 10}


def test_equal_values_with_neighbouring_floats_are_clamped_not_failed() -> None:
    # "0.3" is the minimum Go finds first; "300m" is equal but converts to a smaller float,
    # which KubeFleet rejects as outside [min, max].
    fleet = [nodes("first", "0.3"), nodes("second", "300m"), nodes("hi", "1")]
    got = scores(fleet, (10, term(sorter=(NODES, "Ascending"))))
    assert got == {"first": 10, "second": 10, "hi": 0}


# --- problems in the policy stay internal errors, raised where KubeFleet raises them ----------


def test_unknown_sort_order_is_an_internal_error_naming_the_term() -> None:
    fleet = [nodes("lo", "10"), nodes("hi", "20")]
    cycle, snap, plugin = prepared(fleet, (5, term()), (10, term(sorter=(NODES, "Upward"))))
    score, status = plugin.score(cycle, snap, fleet[0])
    assert status == Status.internal_error(
        'preferred cluster affinity term 1: sort order "Upward" is not Ascending or Descending'
    )
    assert score == ClusterScore()


def test_unknown_sort_order_is_not_reached_when_all_values_are_equal() -> None:
    fleet = [nodes("a", "10"), nodes("b", "10")]
    assert scores(fleet, (10, term(sorter=(NODES, "Upward")))) == {"a": 0, "b": 0}


def test_invalid_label_selector_in_a_weighted_term_is_an_internal_error() -> None:
    cycle, snap, plugin = prepared([PROD_EU], (10, term(labels(None, expr("env", "In")))))
    _, status = plugin.score(cycle, snap, PROD_EU)
    assert status.code is Code.INTERNAL_ERROR
    assert status.error is not None
    assert status.error.startswith("preferred cluster affinity term 0: label selector:")


def test_unreadable_resource_property_name_fails_pre_score_when_there_are_clusters() -> None:
    bad = term(sorter=("resources.kubernetes-fleet.io/memory", "Descending"))
    snap = snapshot(affinity_policy(preferred=[(10, bad)]))
    status = ClusterAffinity().pre_score(state(PROD_EU), snap)
    assert status.code is Code.INTERNAL_ERROR
    assert status.error is not None
    assert status.error.startswith("preferred cluster affinity term 0: invalid resource property")
    assert ClusterAffinity().pre_score(state(), snap).is_success


def test_a_cluster_outside_the_cycle_beyond_the_extremes_is_an_internal_error() -> None:
    cycle, snap, plugin = prepared(
        [nodes("lo", "1"), nodes("hi", "2")], (10, term(sorter=(NODES, "Descending")))
    )
    _, status = plugin.score(cycle, snap, nodes("stranger", "3"))
    assert status.code is Code.INTERNAL_ERROR


def test_score_without_pre_score_prepares_itself() -> None:
    fleet = [nodes("lo", "10"), nodes("mid", "20"), nodes("hi", "100")]
    snap = snapshot(affinity_policy(preferred=[(100, term(sorter=(NODES, "Descending")))]))
    score, status = ClusterAffinity().score(state(*fleet), snap, fleet[1])
    assert (score.affinity_score, status) == (11, Status.success())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.5, 1),
        (-0.5, -1),
        (1.5, 2),
        (2.5, 3),
        (-2.5, -3),
        (0.49999999999999994, 0),
        (-0.49999999999999994, 0),
        (10.4, 10),
        (-10.6, -11),
        (0.0, 0),
    ],
)
def test_round_half_away_from_zero_is_gos_math_round(value: float, expected: int) -> None:
    assert round_half_away_from_zero(value) == expected
