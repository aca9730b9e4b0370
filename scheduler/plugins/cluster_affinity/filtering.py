"""ClusterAffinity's hard constraint: a cluster must match at least one required term.

Reference 5.1 (PreFilter, Filter). Terms are ORed and tried in order; within a term the label
selector and every property expression are ANDed. Where KubeFleet completes a cycle we decide
exactly as it does. Where it would abort the cycle (an invalid label selector, a resource
property name that cannot be read, an expression with the wrong number of values or an unknown
operator, a cluster value that is not a quantity) the term instead does not match that cluster,
and if no other term matches, the cluster's reason names the first such problem; every other
cluster is scheduled normally."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

from hub.types import (
    ClusterSelectorTerm,
    LabelSelector,
    PlacementPolicy,
    PropertySelectorRequirement,
)
from scheduler.clusters.facts import ClusterFacts
from scheduler.clusters.labels import LabelPredicate, SelectorError, compile_selector
from scheduler.framework.status import Status
from scheduler.plugins.cluster_affinity.properties import (
    PropertyValueError,
    QuantityCache,
    compile_property,
    lookup,
)
from scheduler.plugins.cluster_affinity.state import PropertyCheck, RequiredTerm
from scheduler.room.quantity import QuantityError, parse

__all__ = [
    "OPERATORS",
    "REASON_CANNOT_EVALUATE",
    "REASON_INVALID_TERM",
    "REASON_NO_MATCH",
    "SKIP_NO_REQUIRED_TERMS",
    "compile_label_selector",
    "compile_required",
    "filter_cluster",
    "filter_clusters",
    "required_terms",
]

SKIP_NO_REQUIRED_TERMS = "no required cluster affinity terms to enforce"
REASON_NO_MATCH = "cluster does not match with any of the required cluster affinity terms"
_NO_MATCH = Status.unschedulable(REASON_NO_MATCH)  # shared: thousands of clusters get it
# Our reasons where KubeFleet aborts the cycle (see the module docstring).
REASON_INVALID_TERM = "invalid required cluster affinity term {index}: {problem}"
REASON_CANNOT_EVALUATE = "cannot evaluate required cluster affinity term {index}: {problem}"

# Compared in nanos: every quantity is a whole number of them (see scheduler.room.quantity).
OPERATORS: dict[str, Callable[[int, int], bool]] = {
    "Eq": operator.eq,
    "Ne": operator.ne,
    "Gt": operator.gt,
    "Ge": operator.ge,
    "Lt": operator.lt,
    "Le": operator.le,
}


def required_terms(policy: PlacementPolicy | None) -> Sequence[ClusterSelectorTerm]:
    """The required terms, or () when the policy, affinity or selector is absent."""
    if policy is None or policy.affinity is None or policy.affinity.cluster_affinity is None:
        return ()
    required = policy.affinity.cluster_affinity.required_during_scheduling_ignored_during_execution
    return () if required is None else required.cluster_selector_terms


def compile_label_selector(
    selector: LabelSelector | None,
) -> tuple[LabelPredicate | None, str | None]:
    """(predicate, problem): predicate None means "no selector" (or an invalid one)."""
    if selector is None:
        return None, None
    try:
        return compile_selector(selector), None
    except SelectorError as exc:
        return None, f"label selector: {exc}"


def compile_required(terms: Sequence[ClusterSelectorTerm]) -> tuple[RequiredTerm, ...]:
    return tuple(_compile_term(index, term) for index, term in enumerate(terms))


def _compile_term(index: int, term: ClusterSelectorTerm) -> RequiredTerm:
    labels, label_problem = compile_label_selector(term.label_selector)
    expressions = term.property_selector.match_expressions if term.property_selector else []
    return RequiredTerm(
        index=index,
        labels=labels,
        label_problem=None
        if label_problem is None
        else REASON_INVALID_TERM.format(index=index, problem=label_problem),
        properties=tuple(
            _compile_check(index, number, expression)
            for number, expression in enumerate(expressions)
        ),
    )


def _compile_check(
    term_index: int, index: int, expression: PropertySelectorRequirement
) -> PropertyCheck:
    ref = compile_property(expression.name)
    where = f'property selector expression {index} ("{expression.name}")'

    def invalid(problem: str) -> PropertyCheck:
        reason = REASON_INVALID_TERM.format(index=term_index, problem=f"{where}: {problem}")
        return PropertyCheck(index, ref, _never, reason)

    # The same order as KubeFleet: name, number of values, the value, the operator.
    if ref.error is not None:
        return invalid(ref.error)
    if len(expression.values) != 1:
        return invalid(f"want exactly one value, got {len(expression.values)}")
    try:
        expected = parse(expression.values[0]).nanos
    except QuantityError as exc:
        return invalid(f"the expected value is not a quantity: {exc}")
    compare = OPERATORS.get(expression.operator)
    if compare is None:
        return invalid(
            f'unknown operator "{expression.operator}" (want one of {", ".join(OPERATORS)})'
        )
    return PropertyCheck(index, ref, lambda nanos: compare(nanos, expected))


def _never(nanos: int) -> bool:
    return False


def filter_cluster(
    terms: Sequence[RequiredTerm], facts: ClusterFacts, cache: QuantityCache
) -> Status:
    """SUCCESS if any term matches, else CLUSTER_UNSCHEDULABLE with the reason to report."""
    first_problem: str | None = None
    for term in terms:
        outcome = _evaluate(term, facts, cache)
        if outcome is True:
            return Status.success()
        if outcome is not False and first_problem is None:
            first_problem = outcome
    return _NO_MATCH if first_problem is None else Status.unschedulable(first_problem)


def filter_clusters(
    terms: Sequence[RequiredTerm], facts: Sequence[ClusterFacts], cache: QuantityCache
) -> list[Status | None]:
    """`filter_cluster` over many clusters, None where one passes. One term of labels alone, the
    common shape, is decided by its predicate without the per-term walk."""
    if len(terms) == 1 and terms[0].labels_only:
        matches = terms[0].labels
        assert matches is not None  # labels_only says so
        return [None if matches(f.labels) else _NO_MATCH for f in facts]
    return [filter_cluster(terms, f, cache).or_none() for f in facts]


def _evaluate(term: RequiredTerm, facts: ClusterFacts, cache: QuantityCache) -> bool | str:
    """True/False for match/no match, or the reason text of a problem KubeFleet would hit."""
    if term.label_problem is not None:
        return term.label_problem
    if term.labels is not None and not term.labels(facts.labels):
        return False
    for check in term.properties:
        if check.ref.error is not None and check.problem is not None:
            return check.problem  # an unreadable name fails before the lookup, as in KubeFleet
        try:
            value = lookup(check.ref, facts, cache)
        except PropertyValueError as exc:
            return REASON_CANNOT_EVALUATE.format(index=term.index, problem=str(exc))
        if value is None:
            return False
        if check.problem is not None:
            return check.problem
        if not check.holds(value.nanos):
            return False
    return True
