"""ClusterAffinity's soft preferences: the affinity score of a cluster (kubefleet-rules 5.1).

affinityScore = the sum over preferred terms with a non-zero weight of: 0 if the term's label
selector does not match; the full weight if it has no property sorter; otherwise the weight
interpolated by where the cluster's value sits between the smallest and largest value of that
property across *all* clusters of the cycle (not only those that passed Filter), rounded half
away from zero. The interpolation uses Go's float conversion of each quantity
(`Quantity.approximate`), so the rounding at .5 lands where KubeFleet's does.

Deviations from KubeFleet, which would abort the cycle in each case:

- a value that is not a quantity, or whose float is infinite, counts as "property not
  available" (ignored for the extremes, 0 for the term);
- equal quantities spelled differently ("0.3" and "300m") can convert to neighbouring floats,
  putting a cluster a hair outside [min, max]; we clamp it instead of failing.

Problems in the policy itself (an invalid label selector, a resource property name that cannot
be read, an unknown sort order) stay internal errors raised exactly where KubeFleet raises them,
with a message that names the term: the API server's validation keeps them out of a real hub."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import cast

from hub.names import SORT_ASCENDING, SORT_DESCENDING
from hub.types import MemberCluster, PlacementPolicy, PreferredClusterSelector
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.framework.errors import SchedulerError
from scheduler.plugins.cluster_affinity.filtering import compile_label_selector
from scheduler.plugins.cluster_affinity.properties import (
    PropertyRef,
    PropertyValueError,
    QuantityCache,
    compile_property,
    lookup,
)
from scheduler.plugins.cluster_affinity.state import Extremes, PreferredTerm, Sorter
from scheduler.room.quantity import Quantity

__all__ = [
    "SKIP_NO_PREFERRED_TERMS",
    "ScoringError",
    "compile_preferred",
    "preferred_terms",
    "round_half_away_from_zero",
    "score_cluster",
    "score_clusters",
]

SKIP_NO_PREFERRED_TERMS = "no preferred cluster affinity terms specified"


class ScoringError(SchedulerError):
    """A preferred term KubeFleet cannot evaluate: the plugin returns an internal error."""


def preferred_terms(policy: PlacementPolicy | None) -> Sequence[PreferredClusterSelector]:
    if policy is None or policy.affinity is None or policy.affinity.cluster_affinity is None:
        return ()
    return policy.affinity.cluster_affinity.preferred_during_scheduling_ignored_during_execution


def compile_preferred(
    terms: Sequence[PreferredClusterSelector],
    clusters: Sequence[MemberCluster] | Sequence[ClusterFacts],
    cache: QuantityCache,
) -> tuple[PreferredTerm, ...]:
    """Compile the terms and find each sorted property's extremes (KubeFleet's PreScore).

    Extremes are computed for every sorter term, whatever its weight, as KubeFleet does; only
    terms with a non-zero weight are kept for Score. Raises ScoringError for a resource
    property name that cannot be read, if there is any cluster to read it from."""
    extremes: dict[str, Extremes] = {}
    compiled: list[PreferredTerm] = []
    for index, term in enumerate(terms):
        preference = term.preference
        sorter = None
        if preference.property_sorter is not None:
            ref = compile_property(preference.property_sorter.name)
            if ref.error is not None and clusters:
                raise ScoringError(f"preferred cluster affinity term {index}: {ref.error}")
            if ref.name not in extremes:
                extremes[ref.name] = _extremes(ref, clusters, cache)
            sorter = Sorter(ref, preference.property_sorter.sort_order, extremes[ref.name])
        if term.weight == 0:
            continue
        labels, problem = compile_label_selector(preference.label_selector)
        compiled.append(
            PreferredTerm(
                index=index,
                weight=term.weight,
                labels=labels,
                label_problem=None
                if problem is None
                else f"preferred cluster affinity term {index}: {problem}",
                sorter=sorter,
            )
        )
    return tuple(compiled)


def _extremes(
    ref: PropertyRef,
    clusters: Sequence[MemberCluster] | Sequence[ClusterFacts],
    cache: QuantityCache,
) -> Extremes:
    if ref.error is not None:
        return Extremes(None, None)
    values: dict[str, Quantity | None] = {}
    readable: list[Quantity] = []
    memo_key = _READABLE + ref.name
    for cluster in clusters:
        facts = cluster if isinstance(cluster, ClusterFacts) else facts_of(cluster)
        derived = facts.derived
        value = derived.get(memo_key, _UNREAD)
        if value is _UNREAD:
            value = derived[memo_key] = _readable(ref, facts, cache)
        values[facts.name] = cast("Quantity | None", value)
        if value is not None:
            readable.append(cast("Quantity", value))
    if not readable:
        return Extremes(None, None, values)
    # min and max keep the first of equal values: the first cluster's spelling wins, as in Go.
    return Extremes(min(readable, key=_NANOS), max(readable, key=_NANOS), values)


_UNREAD = object()
_NANOS = operator.attrgetter("nanos")


_READABLE = "ClusterAffinity/readable:"
"""`ClusterFacts.derived` key prefix (then the property name): the property's readable value,
a function of the facts alone, so a cluster's value is parsed once while its object lives."""


def _readable(ref: PropertyRef, facts: ClusterFacts, cache: QuantityCache) -> Quantity | None:
    """The value if it is available, parses and converts to a finite float; else None."""
    try:
        value = lookup(ref, facts, cache)
    except PropertyValueError:
        return None
    if value is None or not math.isfinite(value.approximate):
        return None
    return value


def score_cluster(
    terms: Sequence[PreferredTerm], facts: ClusterFacts, cache: QuantityCache
) -> int:
    """The cluster's affinity score; raises ScoringError where KubeFleet fails."""
    total = 0
    labels = facts.labels
    for term in terms:
        if term.label_problem is not None:
            raise ScoringError(term.label_problem)
        if term.labels is not None and not term.labels(labels):
            continue
        if term.sorter is None:
            total += term.weight
        else:
            total += _interpolate(term, term.sorter, facts, cache)
    return total


def score_clusters(
    terms: Sequence[PreferredTerm], facts: Sequence[ClusterFacts], cache: QuantityCache
) -> list[int]:
    """`score_cluster` of each cluster, with each distinct property value interpolated once
    per term (the same value gives the same weight). Raises ScoringError where any cluster's
    `score_cluster` would; the caller then asks cluster by cluster to say which."""
    if not terms or not facts:
        return [0] * len(facts)
    for term in terms:
        if term.label_problem is not None:  # score_cluster raises it for every cluster
            raise ScoringError(term.label_problem)
    totals = [0] * len(facts)
    for term in terms:
        labels, weight, sorter = term.labels, term.weight, term.sorter
        known = sorter.extremes.values if sorter is not None else {}
        weights: dict[int, int] = {}  # id(value) -> weight; values live as long as `known`
        for index, f in enumerate(facts):
            if labels is not None and not labels(f.labels):
                continue
            if sorter is None:
                totals[index] += weight
                continue
            name = f.name
            value = known[name] if name in known else _readable(sorter.ref, f, cache)
            if value is None:
                continue
            earned = weights.get(id(value))
            if earned is None:
                earned = _weight_at(term, sorter, value, name)
                if name in known:  # a value held by `known` keeps its id for this call
                    weights[id(value)] = earned
            totals[index] += earned
    return totals


def _interpolate(
    term: PreferredTerm, sorter: Sorter, facts: ClusterFacts, cache: QuantityCache
) -> int:
    known = sorter.extremes.values
    value = known[facts.name] if facts.name in known else _readable(sorter.ref, facts, cache)
    if value is None:
        return 0
    return _weight_at(term, sorter, value, facts.name)


def _weight_at(term: PreferredTerm, sorter: Sorter, value: Quantity, cluster: str) -> int:
    """The term's weight interpolated at `value`, the property's value on `cluster`."""
    smallest, largest = sorter.extremes.smallest, sorter.extremes.largest
    if smallest is None or largest is None:
        raise ScoringError(
            f'extremes of property "{sorter.ref.name}" are not available, yet cluster '
            f"{cluster} reports a value (is it missing from the cycle's clusters?)"
        )
    if not smallest.nanos <= value.nanos <= largest.nanos:
        raise ScoringError(
            f'cannot interpolate the weight of property "{sorter.ref.name}" for cluster '
            f"{cluster}: its value is outside the values of the cycle's clusters"
        )
    low, high = smallest.approximate, largest.approximate
    if low >= high:
        return 0  # the same value everywhere: KubeFleet gives 0 rather than divide by zero
    observed = min(max(value.approximate, low), high)
    position = (observed - low) / (high - low)
    if sorter.sort_order == SORT_DESCENDING:
        return round_half_away_from_zero(position * term.weight)
    if sorter.sort_order == SORT_ASCENDING:
        return round_half_away_from_zero((1 - position) * term.weight)
    raise ScoringError(
        f'preferred cluster affinity term {term.index}: sort order "{sorter.sort_order}" is '
        f"not {SORT_ASCENDING} or {SORT_DESCENDING}"
    )


def round_half_away_from_zero(x: float) -> int:
    """Go's math.Round, exactly: no x + 0.5, which is wrong for 0.49999999999999994."""
    whole = math.trunc(x)
    if abs(x - whole) >= 0.5:
        whole += 1 if x > 0 else -1
    return whole
