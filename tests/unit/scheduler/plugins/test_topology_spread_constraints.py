"""TopologySpreadConstraints: skew table, domains over all clusters, exact reasons (ref. 5.6)."""

from __future__ import annotations

import pytest

from hub.types import (
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    PlacementPolicy,
    TopologySpreadConstraint,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Code, Status
from scheduler.plugins.topology_spread_constraints import (
    NAME,
    REASON_VIOLATED,
    SCHEDULE_ANYWAY_PENALTY,
    SKIP_NO_CONSTRAINTS,
    SKIP_NO_DO_NOT_SCHEDULE,
    SKIP_NO_POLICY,
    SKIP_NO_SCORES,
    TopologySpreadConstraints,
)
from scheduler.plugins.topology_spread_constraints.state import (
    DomainCounts,
    TopologyError,
    count_domains,
    go_quote,
    will_violate,
)
from tests.unit.scheduler.plugins.plugin_builders import cluster, snapshot, state

ZONE_VIOLATION = 'violated doNotSchedule topology spread constraint "zone" (max skew 1)'


def spread(
    key: str = "zone", max_skew: int | None = 1, when: str | None = "DoNotSchedule"
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(topology_key=key, max_skew=max_skew, when_unsatisfiable=when)


def pick_n(*constraints: TopologySpreadConstraint) -> ClusterSchedulingPolicySnapshot:
    return snapshot(
        PlacementPolicy(
            placement_type="PickN",
            number_of_clusters=3,
            topology_spread_constraints=list(constraints),
        )
    )


def zoned(name: str, zone: str | None, **labels: str) -> MemberCluster:
    return cluster(name, labels if zone is None else {"zone": zone, **labels})


def outcome(cycle: CycleState, snap: ClusterSchedulingPolicySnapshot) -> dict[str, int | str]:
    """Per cluster: the topology score if it passes Filter, else its filter reason."""
    plugin = TopologySpreadConstraints()
    pre = plugin.pre_filter(cycle, snap)
    assert pre.code in (Code.SUCCESS, Code.SKIP), pre
    result: dict[str, int | str] = {}
    for member in cycle.clusters:
        if pre.is_success:
            status = plugin.filter(cycle, snap, member)
            if status.code is Code.CLUSTER_UNSCHEDULABLE:
                result[member.metadata.name] = status.reasons[0]
                continue
            assert status.is_success
        score, status = plugin.score(cycle, snap, member)
        assert status.is_success, status
        result[member.metadata.name] = score.topology_spread_score
    return result


# --- the worked examples of kubefleet-rules 5.6
# ------------------------------------------------------


def test_worked_example_counts_1_1_0() -> None:
    cycle = state(
        zoned("a1", "A"),
        zoned("a2", "A"),
        zoned("b1", "B"),
        zoned("b2", "B"),
        zoned("c1", "C"),
        scheduled=["a1", "b1"],
    )
    assert outcome(cycle, pick_n(spread())) == {
        "a1": ZONE_VIOLATION,
        "a2": ZONE_VIOLATION,
        "b1": ZONE_VIOLATION,
        "b2": ZONE_VIOLATION,
        "c1": 1,
    }


def test_worked_example_counts_1_0_0() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), zoned("c1", "C"), scheduled=["a1"])
    assert outcome(cycle, pick_n(spread())) == {"a1": ZONE_VIOLATION, "b1": 0, "c1": 0}


def test_counts_0_0_2_make_every_placement_a_violation() -> None:
    cycle = state(
        zoned("a1", "A"),
        zoned("b1", "B"),
        zoned("c1", "C"),
        zoned("c2", "C"),
        scheduled=["c1", "c2"],
    )
    assert set(outcome(cycle, pick_n(spread())).values()) == {ZONE_VIOLATION}


def test_reason_reads_exactly_as_kubefleets() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), scheduled=["a1"])
    status = TopologySpreadConstraints().filter(cycle, pick_n(spread()), cycle.clusters[0])
    assert str(status) == (
        'ClusterUnschedulable, violated doNotSchedule topology spread constraint "zone" '
        "(max skew 1)"
    )


# --- the skew table ----------------------------------------------------------------------------


def counts(*values: int) -> DomainCounts:
    """Domains d0, d1, ... with these binding counts, as count_domains derives them."""
    fleet = [zoned(f"c{i}-{n}", f"d{i}") for i, v in enumerate(values) for n in range(v + 1)]
    return count_domains(fleet, "zone", lambda name: not name.endswith("-0"))


@pytest.mark.parametrize(
    ("values", "domain", "max_skew", "expected"),
    [
        pytest.param((1, 1, 1), "d0", 1, (False, 1), id="all-equal-adds-skew"),
        pytest.param((1, 1, 1), "d0", 0, (True, 1), id="all-equal-over-max"),
        pytest.param((0, 1, 1), "d0", 1, (False, -1), id="unique-smallest-reduces-skew"),
        pytest.param((0, 2, 2), "d0", 0, (True, -1), id="unique-smallest-still-over"),
        pytest.param((0, 1, 1), "d1", 1, (True, 1), id="largest-grows-skew"),
        pytest.param((0, 1, 2), "d2", 2, (True, 1), id="largest-over-max-2"),
        pytest.param((0, 1, 2), "d2", 3, (False, 1), id="largest-within-max-3"),
        pytest.param((0, 1, 2), "d1", 2, (False, 0), id="between-keeps-skew"),
        pytest.param((0, 1, 2), "d1", 1, (True, 0), id="between-over-max"),
        pytest.param((0, 0, 1), "d0", 1, (False, 0), id="tied-smallest-keeps-skew"),
        pytest.param((0, 0, 2), "d0", 1, (True, 0), id="tied-smallest-over-max"),
        pytest.param((3,), "d0", 1, (False, 1), id="single-domain"),
        pytest.param((0, 1), "d0", 1, (False, -1), id="two-domains-smaller"),
        pytest.param((0, 1), "d1", 1, (True, 1), id="two-domains-larger"),
        pytest.param((2, 2), "d1", 1, (False, 1), id="two-domains-equal"),
    ],
)
def test_skew_table(
    values: tuple[int, ...], domain: str, max_skew: int, expected: tuple[bool, int]
) -> None:
    assert will_violate(counts(*values), domain, max_skew) == expected


def test_unknown_domain_is_an_internal_error() -> None:
    with pytest.raises(TopologyError, match="not registered"):
        will_violate(counts(0, 1), "elsewhere", 1)


def test_count_domains_derives_the_special_counts() -> None:
    fleet = [zoned("a1", "A"), zoned("a2", "A"), zoned("b1", "B"), zoned("x", None)]
    got = count_domains(fleet, "zone", lambda name: name in {"a1", "a2", "x"})
    assert got == DomainCounts({"A": 2, "B": 0}, 0, 2, 2)
    assert count_domains([zoned("x", None)], "zone", lambda name: True) == DomainCounts({})


# --- what counts, what scores ------------------------------------------------------------------


def test_domains_and_counts_include_ineligible_and_leaving_clusters() -> None:
    leaving = cluster("c1", {"zone": "C"}, deleting=True)
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), leaving, scheduled=["a1", "b1"])
    # C stays at 0 forever: A and B are blocked although C can never be picked.
    assert outcome(cycle, pick_n(spread())) == {
        "a1": ZONE_VIOLATION,
        "b1": ZONE_VIOLATION,
        "c1": 1,
    }


def test_obsolete_bindings_do_not_count() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), obsolete=["a1"])
    assert outcome(cycle, pick_n(spread())) == {"a1": -1, "b1": -1}


def test_clusters_without_the_topology_label_pass_with_score_zero() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), zoned("x", None), scheduled=["a1"])
    assert outcome(cycle, pick_n(spread()))["x"] == 0


def test_larger_max_skew_allows_more_imbalance() -> None:
    cycle = state(zoned("a1", "A"), zoned("a2", "A"), zoned("b1", "B"), scheduled=["a1"])
    assert outcome(cycle, pick_n(spread(max_skew=2))) == {"a1": -1, "a2": -1, "b1": 1}


def test_nil_max_skew_means_one_and_reads_as_one() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), scheduled=["a1"])
    assert outcome(cycle, pick_n(spread(max_skew=None))) == {"a1": ZONE_VIOLATION, "b1": 1}


def test_unknown_when_unsatisfiable_means_do_not_schedule() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), scheduled=["a1"])
    for when in (None, "Sometimes"):
        assert outcome(cycle, pick_n(spread(when=when)))["a1"] == ZONE_VIOLATION


def test_schedule_anyway_violation_costs_a_thousand_but_passes() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), scheduled=["a1"])
    snap = pick_n(spread(when="ScheduleAnyway"))
    assert TopologySpreadConstraints().pre_filter(cycle, snap) == Status.skip(
        SKIP_NO_DO_NOT_SCHEDULE
    )
    assert outcome(cycle, snap) == {"a1": -SCHEDULE_ANYWAY_PENALTY, "b1": 1}
    assert SCHEDULE_ANYWAY_PENALTY == 1000


def test_scores_add_up_over_constraints() -> None:
    fleet = [
        cluster("a1", {"zone": "A", "region": "east"}),
        cluster("b1", {"zone": "B", "region": "east"}),
        cluster("c1", {"zone": "C", "region": "west"}),
    ]
    cycle = state(*fleet, scheduled=["a1"])
    snap = pick_n(spread(max_skew=2), spread("region", when="ScheduleAnyway"))
    # zone counts A1 B0 C0: a1 +1 skew -> -1; b1, c1 tied smallest -> 0.
    # region counts east1 west0: east +1 -> -1 (skew 2 > 1: violated -> -1000); west -1 -> +1.
    assert outcome(cycle, snap) == {"a1": -1 - 1000, "b1": 0 - 1000, "c1": 0 + 1}


def test_only_the_first_do_not_schedule_violation_is_recorded() -> None:
    fleet = [
        cluster("a1", {"zone": "A", "rack": "r1"}),
        cluster("b1", {"zone": "B", "rack": "r2"}),
    ]
    cycle = state(*fleet, scheduled=["a1"])
    snap = pick_n(spread("rack"), spread("zone"))
    status = TopologySpreadConstraints().filter(cycle, snap, fleet[0])
    assert status.reasons == (REASON_VIOLATED.format(key='"rack"', max_skew=1),)


def test_do_not_schedule_violators_get_no_schedule_anyway_penalty_or_score() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), scheduled=["a1"])
    plugin = TopologySpreadConstraints()
    snap = pick_n(spread(), spread(when="ScheduleAnyway"))
    plugin.pre_filter(cycle, snap)
    _, status = plugin.score(cycle, snap, cycle.clusters[0])
    assert status == Status.internal_error("no score found for cluster a1")


# --- extension points --------------------------------------------------------------------------


def test_post_batch_limits_to_one_cluster_per_cycle() -> None:
    plugin = TopologySpreadConstraints()
    assert plugin.post_batch(state(), pick_n(spread())) == (1, Status.success())
    _, status = plugin.post_batch(state(), pick_n())
    assert status == Status.skip(SKIP_NO_CONSTRAINTS)
    _, status = plugin.post_batch(state(), snapshot(None))
    assert status == Status.internal_error("policy does not exist")


def test_pre_filter_skips_without_constraints() -> None:
    plugin = TopologySpreadConstraints()
    assert plugin.pre_filter(state(), snapshot(None)) == Status.skip(SKIP_NO_POLICY)
    assert plugin.pre_filter(state(), pick_n()) == Status.skip(SKIP_NO_CONSTRAINTS)
    assert SKIP_NO_CONSTRAINTS == "no topology spread constraint is present"
    assert SKIP_NO_DO_NOT_SCHEDULE == "no DoNotSchedule topology spread constraint is present"


def test_pre_score() -> None:
    plugin = TopologySpreadConstraints()
    assert plugin.pre_score(state(), snapshot(None)).code is Code.INTERNAL_ERROR
    assert plugin.pre_score(state(), pick_n()) == Status.skip(SKIP_NO_CONSTRAINTS)
    assert plugin.pre_score(state(), pick_n(spread())) == Status.skip(SKIP_NO_SCORES)
    assert SKIP_NO_SCORES == "no available scores"
    cycle = state(zoned("a1", "A"))
    assert plugin.pre_filter(cycle, pick_n(spread())).is_success
    assert plugin.pre_score(cycle, pick_n(spread())).is_success


def test_pre_score_skips_when_every_cluster_violates() -> None:
    cycle = state(
        zoned("a1", "A"),
        zoned("b1", "B"),
        zoned("c1", "C"),
        zoned("c2", "C"),
        scheduled=["c1", "c2"],
    )
    plugin = TopologySpreadConstraints()
    plugin.pre_filter(cycle, pick_n(spread()))
    assert plugin.pre_score(cycle, pick_n(spread())) == Status.skip(SKIP_NO_SCORES)


def test_score_reports_its_component_only() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), scheduled=["a1"])
    plugin = TopologySpreadConstraints()
    plugin.pre_filter(cycle, pick_n(spread()))
    assert plugin.score(cycle, pick_n(spread()), cycle.clusters[1]) == (
        ClusterScore(topology_spread_score=1),
        Status.success(),
    )


def test_filter_without_pre_filter_evaluates_itself() -> None:
    cycle = state(zoned("a1", "A"), zoned("b1", "B"), scheduled=["a1"])
    status = TopologySpreadConstraints().filter(cycle, pick_n(spread()), cycle.clusters[0])
    assert status == Status.unschedulable(ZONE_VIOLATION)
    assert TopologySpreadConstraints().filter(state(), pick_n(), cycle.clusters[0]).is_success


@pytest.mark.parametrize(
    ("key", "quoted"),
    [
        ("zone", '"zone"'),
        ("topology.kubernetes.io/zone", '"topology.kubernetes.io/zone"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("tab\there\n", '"tab\\there\\n"'),
        ("\x00\x7f", '"\\x00\\x7f"'),
        ("zone-é", '"zone-é"'),
        ("\u200b", '"\\u200b"'),
    ],
)
def test_go_quote_matches_strconv_quote(key: str, quoted: str) -> None:
    assert go_quote(key) == quoted


def test_name() -> None:
    assert TopologySpreadConstraints().name == NAME == "TopologySpreadConstraints"
