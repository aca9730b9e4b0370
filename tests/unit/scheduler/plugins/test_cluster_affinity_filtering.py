"""ClusterAffinity PreFilter and Filter: required terms, ORed (kubefleet-rules 5.1)."""

from __future__ import annotations

import pytest

from hub.types import (
    Affinity,
    ClusterSelector,
    ClusterSelectorTerm,
    MemberCluster,
    PlacementPolicy,
)
from hub.types import (
    ClusterAffinity as ClusterAffinitySpec,
)
from scheduler.framework.status import Code, Status
from scheduler.plugins.cluster_affinity import (
    NAME,
    REASON_CANNOT_EVALUATE,
    REASON_INVALID_TERM,
    REASON_NO_MATCH,
    SKIP_NO_REQUIRED_TERMS,
    ClusterAffinity,
)
from tests.unit.scheduler.plugins.plugin_builders import (
    affinity_policy,
    cluster,
    expr,
    labels,
    prop,
    snapshot,
    state,
    term,
)

NODES = "kubernetes-fleet.io/node-count"
CPU = "resources.kubernetes-fleet.io/total-cpu"
MEMORY = "resources.kubernetes-fleet.io/allocatable-memory"
STORAGE = "resources.kubernetes-fleet.io/available-ephemeral-storage"

NO_MATCH = Status.unschedulable(REASON_NO_MATCH)
PASS = Status.success()


def run(member: MemberCluster, *terms: ClusterSelectorTerm) -> Status:
    snap = snapshot(affinity_policy(required=terms))
    cycle = state(member)
    plugin = ClusterAffinity()
    assert plugin.pre_filter(cycle, snap).is_success
    return plugin.filter(cycle, snap, member)


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param(None, id="nil-policy"),
        pytest.param(PlacementPolicy(), id="no-affinity"),
        pytest.param(PlacementPolicy(affinity=Affinity()), id="no-cluster-affinity"),
        pytest.param(affinity_policy(required=None), id="no-required-selector"),
        pytest.param(affinity_policy(required=[]), id="zero-terms"),
    ],
)
def test_pre_filter_skips_without_required_terms(policy: PlacementPolicy | None) -> None:
    status = ClusterAffinity().pre_filter(state(), snapshot(policy))
    assert status == Status.skip("no required cluster affinity terms to enforce")
    assert status == Status.skip(SKIP_NO_REQUIRED_TERMS)


PROD = cluster("a", {"env": "prod", "region": "eu"}, properties={NODES: "3"})
SIZED = cluster(
    "b",
    {"env": "prod"},
    properties={NODES: "5"},
    capacity={"cpu": "4"},
    allocatable={"memory": "16Gi"},
    available={"ephemeral-storage": "100G"},
)


@pytest.mark.parametrize(
    ("member", "terms", "expected"),
    [
        pytest.param(PROD, [term(labels({"env": "prod"}))], PASS, id="labels-match"),
        pytest.param(PROD, [term(labels({"env": "dev"}))], NO_MATCH, id="labels-miss"),
        pytest.param(PROD, [term()], PASS, id="term-without-selectors-matches-all"),
        pytest.param(PROD, [term(labels())], PASS, id="empty-label-selector-matches-all"),
        pytest.param(
            PROD,
            [term(labels({"env": "dev"})), term(labels({"region": "eu"}))],
            PASS,
            id="terms-are-ored",
        ),
        pytest.param(
            PROD,
            [term(labels({"env": "prod"}, expr("region", "NotIn", "eu")))],
            NO_MATCH,
            id="within-a-term-anded",
        ),
        pytest.param(PROD, [term(None, prop(NODES, "Eq", "3"))], PASS, id="eq"),
        pytest.param(PROD, [term(None, prop(NODES, "Eq", "3000m"))], PASS, id="eq-by-value"),
        pytest.param(PROD, [term(None, prop(NODES, "Eq", "4"))], NO_MATCH, id="eq-miss"),
        pytest.param(PROD, [term(None, prop(NODES, "Ne", "4"))], PASS, id="ne"),
        pytest.param(PROD, [term(None, prop(NODES, "Ne", "3"))], NO_MATCH, id="ne-miss"),
        pytest.param(PROD, [term(None, prop(NODES, "Gt", "2"))], PASS, id="gt"),
        pytest.param(PROD, [term(None, prop(NODES, "Gt", "3"))], NO_MATCH, id="gt-boundary"),
        pytest.param(PROD, [term(None, prop(NODES, "Ge", "3"))], PASS, id="ge-boundary"),
        pytest.param(PROD, [term(None, prop(NODES, "Ge", "3.001"))], NO_MATCH, id="ge-miss"),
        pytest.param(PROD, [term(None, prop(NODES, "Lt", "4"))], PASS, id="lt"),
        pytest.param(PROD, [term(None, prop(NODES, "Lt", "3"))], NO_MATCH, id="lt-boundary"),
        pytest.param(PROD, [term(None, prop(NODES, "Le", "3"))], PASS, id="le-boundary"),
        pytest.param(PROD, [term(None, prop(NODES, "Le", "2999m"))], NO_MATCH, id="le-miss"),
        pytest.param(
            PROD,
            [term(None, prop(NODES, "Gt", "1"), prop(NODES, "Lt", "3"))],
            NO_MATCH,
            id="expressions-anded",
        ),
        pytest.param(
            PROD, [term(None, prop("example.com/gpus", "Gt", "0"))], NO_MATCH, id="missing"
        ),
        pytest.param(
            PROD,
            [term(labels({"env": "prod"}), prop("example.com/gpus", "Gt", "0"))],
            NO_MATCH,
            id="labels-match-property-missing",
        ),
        pytest.param(SIZED, [term(None, prop(CPU, "Ge", "4000m"))], PASS, id="total-cpu"),
        pytest.param(SIZED, [term(None, prop(CPU, "Gt", "4"))], NO_MATCH, id="total-cpu-miss"),
        pytest.param(
            SIZED, [term(None, prop(MEMORY, "Gt", "16G"))], PASS, id="binary-beats-decimal"
        ),
        pytest.param(
            SIZED, [term(None, prop(MEMORY, "Eq", "16384Mi"))], PASS, id="binary-by-value"
        ),
        pytest.param(
            SIZED, [term(None, prop(STORAGE, "Eq", "1e11"))], PASS, id="hyphenated-resource"
        ),
        pytest.param(
            SIZED,
            [term(None, prop("resources.kubernetes-fleet.io/total-memory", "Gt", "0"))],
            NO_MATCH,
            id="resource-not-reported",
        ),
        pytest.param(
            cluster("c", capacity={"cpu": " 2 "}),
            [term(None, prop(CPU, "Eq", "2"))],
            PASS,
            id="resource-quantities-trimmed-like-go-json",
        ),
    ],
)
def test_filter_matches_required_terms(
    member: MemberCluster, terms: list[ClusterSelectorTerm], expected: Status
) -> None:
    assert run(member, *terms) == expected


def test_no_match_reads_as_kubefleets_decision_reason() -> None:
    status = run(PROD, term(labels({"env": "dev"})))
    assert str(status) == (
        "ClusterUnschedulable, cluster does not match with any of the required cluster "
        "affinity terms"
    )


# --- where KubeFleet aborts the cycle, the cluster gets a reason instead ---------------------

BAD_LABELS = term(labels(None, expr("env", "In")))
NOT_A_NAME = "resources.kubernetes-fleet.io/cpu"
UNKNOWN_CAPACITY = "resources.kubernetes-fleet.io/used-cpu"


def invalid(index: int, problem: str) -> Status:
    return Status.unschedulable(REASON_INVALID_TERM.format(index=index, problem=problem))


@pytest.mark.parametrize(
    ("member", "terms", "expected"),
    [
        pytest.param(
            PROD,
            [BAD_LABELS],
            invalid(
                0,
                "label selector: matchExpressions[0]: key 'env': operator In needs at "
                "least one value",
            ),
            id="invalid-label-selector",
        ),
        pytest.param(PROD, [BAD_LABELS, term(labels({"env": "prod"}))], PASS, id="other-term"),
        pytest.param(
            PROD,
            [term(labels({"env": "dev"})), BAD_LABELS],
            invalid(
                1,
                "label selector: matchExpressions[0]: key 'env': operator In needs at "
                "least one value",
            ),
            id="problem-named-over-plain-no-match",
        ),
        pytest.param(
            PROD,
            [term(None, prop(NOT_A_NAME, "Gt", "1"))],
            invalid(
                0,
                f'property selector expression 0 ("{NOT_A_NAME}"): invalid resource property '
                f'name "{NOT_A_NAME}": want resources.kubernetes-fleet.io/'
                "<total|allocatable|available>-<resource>",
            ),
            id="unreadable-resource-name",
        ),
        pytest.param(
            PROD,
            [term(None, prop(UNKNOWN_CAPACITY, "Gt", "1"))],
            invalid(
                0,
                f'property selector expression 0 ("{UNKNOWN_CAPACITY}"): invalid capacity type '
                f'"used" in resource property name "{UNKNOWN_CAPACITY}" (want total, '
                "allocatable or available)",
            ),
            id="unknown-capacity-type",
        ),
        pytest.param(
            PROD,
            [term(None, prop(NODES, "Gt"))],
            invalid(
                0, f'property selector expression 0 ("{NODES}"): want exactly one value, got 0'
            ),
            id="no-value",
        ),
        pytest.param(
            PROD,
            [term(None, prop(NODES, "Gt", "1", "2"))],
            invalid(
                0, f'property selector expression 0 ("{NODES}"): want exactly one value, got 2'
            ),
            id="two-values",
        ),
        pytest.param(
            PROD,
            [term(None, prop(NODES, "Gx", "1"))],
            invalid(
                0,
                f'property selector expression 0 ("{NODES}"): unknown operator "Gx" (want one '
                "of Eq, Ne, Gt, Ge, Lt, Le)",
            ),
            id="unknown-operator",
        ),
        pytest.param(
            PROD,
            [term(None, prop(NODES, "Gt", "one"))],
            invalid(
                0,
                f'property selector expression 0 ("{NODES}"): the expected value is not a '
                "quantity: invalid quantity 'one': unexpected 'o' at position 0; want "
                "<sign><digits>.<digits><suffix>, e.g. 1.5, 100m, 4Gi or 12e6",
            ),
            id="expected-value-not-a-quantity",
        ),
        pytest.param(
            cluster("x"),
            [term(None, prop(NODES, "Gx", "1"))],
            NO_MATCH,
            id="expression-problem-unreached-without-the-property",
        ),
        pytest.param(
            PROD,
            [term(labels({"env": "dev"}), prop(NODES, "Gt"))],
            NO_MATCH,
            id="expression-problem-unreached-after-label-miss",
        ),
        pytest.param(
            PROD,
            [term(None, prop(NODES, "Gt", "5"), prop(NODES, "Gx", "1"))],
            NO_MATCH,
            id="expression-problem-unreached-after-failed-expression",
        ),
    ],
)
def test_problems_kubefleet_would_abort_on_name_the_term(
    member: MemberCluster, terms: list[ClusterSelectorTerm], expected: Status
) -> None:
    assert run(member, *terms) == expected


GARBLED = cluster("g", {"env": "prod"}, properties={NODES: "three"}, capacity={"cpu": "lots"})


def test_unparsable_cluster_value_is_named_in_the_reason() -> None:
    status = run(GARBLED, term(None, prop(NODES, "Gt", "1")))
    assert status == Status.unschedulable(
        REASON_CANNOT_EVALUATE.format(
            index=0,
            problem=f'property "{NODES}" has value "three", which is not a quantity',
        )
    )
    assert str(status) == (
        "ClusterUnschedulable, cannot evaluate required cluster affinity term 0: property "
        '"kubernetes-fleet.io/node-count" has value "three", which is not a quantity'
    )


def test_unparsable_resource_value_is_named_in_the_reason() -> None:
    status = run(GARBLED, term(None, prop(CPU, "Gt", "1")))
    assert status.reasons == (
        f'cannot evaluate required cluster affinity term 0: property "{CPU}" has value '
        '"lots", which is not a quantity',
    )


def test_unparsable_value_does_not_stop_another_term_from_matching() -> None:
    assert run(GARBLED, term(None, prop(NODES, "Gt", "1")), term(labels({"env": "prod"}))) == PASS


def test_unparsable_property_values_are_not_trimmed() -> None:
    member = cluster("w", properties={NODES: " 3"})
    assert (
        run(member, term(None, prop(NODES, "Eq", "3")))
        .reasons[0]
        .startswith("cannot evaluate required cluster affinity term 0")
    )


def test_filter_without_pre_filter_compiles_the_terms_itself() -> None:
    snap = snapshot(affinity_policy(required=[term(labels({"env": "prod"}))]))
    assert ClusterAffinity().filter(state(PROD), snap, PROD) == PASS
    other = cluster("d", {"env": "dev"})
    assert ClusterAffinity().filter(state(other), snap, other).code is Code.CLUSTER_UNSCHEDULABLE


def test_filter_without_required_terms_passes() -> None:
    assert ClusterAffinity().filter(state(PROD), snapshot(None), PROD) == PASS


def test_required_selector_object_with_terms_runs() -> None:
    policy = PlacementPolicy(
        affinity=Affinity(
            cluster_affinity=ClusterAffinitySpec(
                required_during_scheduling_ignored_during_execution=ClusterSelector(
                    cluster_selector_terms=[term(labels({"env": "prod"}))]
                )
            )
        )
    )
    assert ClusterAffinity().pre_filter(state(), snapshot(policy)).is_success


def test_name() -> None:
    assert ClusterAffinity().name == NAME == "ClusterAffinity"
