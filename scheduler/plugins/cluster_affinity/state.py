"""What ClusterAffinity keeps in the cycle store, and how its selectors look once compiled.

Selectors are compiled once per cycle (label selectors into predicates, property names into
`PropertyRef`s, expected values parsed) because Filter and Score run once per cluster, and a
fleet may have 5,000. Problems found while compiling are kept, not raised: KubeFleet reports
them only when a cluster's evaluation reaches them, and so do we."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scheduler.clusters.labels import LabelPredicate
from scheduler.framework.cycle_state import StateKey
from scheduler.plugins.cluster_affinity.properties import PropertyRef, QuantityCache
from scheduler.room.quantity import Quantity

__all__ = [
    "NAME",
    "PREFERRED",
    "QUANTITIES",
    "REQUIRED",
    "Extremes",
    "PreferredTerm",
    "PropertyCheck",
    "RequiredTerm",
    "Sorter",
]

NAME = "ClusterAffinity"


@dataclass(frozen=True, slots=True)
class PropertyCheck:
    """One property selector expression.

    `problem` (wrong number of values, an expected value that is not a quantity, an unknown
    operator) is reported only for clusters that have the property, as in KubeFleet."""

    index: int
    ref: PropertyRef
    holds: Callable[[int], bool]  # called with the cluster value in nanos
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class RequiredTerm:
    """One required cluster selector term: labels (if any), then properties, all ANDed."""

    index: int
    labels: LabelPredicate | None
    label_problem: str | None
    properties: tuple[PropertyCheck, ...]

    @property
    def labels_only(self) -> bool:
        """A valid label selector and nothing else: the predicate alone decides."""
        return self.labels is not None and self.label_problem is None and not self.properties


@dataclass(frozen=True, slots=True)
class Extremes:
    """Smallest and largest value of a property across all clusters of the cycle (or None), and
    each cluster's readable value by name, read once for both PreScore and Score."""

    smallest: Quantity | None
    largest: Quantity | None
    values: Mapping[str, Quantity | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sorter:
    ref: PropertyRef
    sort_order: str
    extremes: Extremes


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """One preferred term with a non-zero weight (KubeFleet skips zero weights in Score)."""

    index: int
    weight: int
    labels: LabelPredicate | None
    label_problem: str | None
    sorter: Sorter | None


REQUIRED: StateKey[tuple[RequiredTerm, ...]] = StateKey(f"{NAME}/required")
PREFERRED: StateKey[tuple[PreferredTerm, ...]] = StateKey(f"{NAME}/preferred")
QUANTITIES: StateKey[QuantityCache] = StateKey(f"{NAME}/quantities")
