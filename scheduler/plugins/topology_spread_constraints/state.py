"""Topology domains, skew and the per-cycle verdict of every cluster (kubefleet-rules 5.6).

Computed once per cycle in PreFilter, over *all* clusters of the cycle (ineligible and leaving
ones included, as in KubeFleet), then read by Filter and Score. A domain is a distinct value of
the constraint's topology key; its count is the number of its clusters holding a Scheduled or
Bound binding of the current snapshot.

Two KubeFleet gaps closed here: a nil maxSkew means 1 (Go dereferences it while formatting the
violation and panics), and any whenUnsatisfiable other than ScheduleAnyway means DoNotSchedule
(as KubeFleet)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hub import names
from hub.types import MemberCluster, TopologySpreadConstraint
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.framework.cycle_state import StateKey
from scheduler.framework.errors import SchedulerError

__all__ = [
    "NAME",
    "REASON_VIOLATED",
    "SCHEDULE_ANYWAY_PENALTY",
    "SKEW_CHANGE_SCORE_FACTOR",
    "STATE",
    "Constraint",
    "DomainCounts",
    "TopologyError",
    "TopologyState",
    "count_domains",
    "evaluate",
    "go_quote",
    "will_violate",
]

NAME = "TopologySpreadConstraints"
REASON_VIOLATED = "violated doNotSchedule topology spread constraint {key} (max skew {max_skew})"
SKEW_CHANGE_SCORE_FACTOR = -1
SCHEDULE_ANYWAY_PENALTY = 1000


class TopologyError(SchedulerError):
    """An inconsistent domain count; cannot come from user input."""


@dataclass(frozen=True, slots=True)
class Constraint:
    topology_key: str
    max_skew: int
    do_not_schedule: bool
    violation: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # The reason is the same for every violating cluster: format it once.
        reason = REASON_VIOLATED.format(key=go_quote(self.topology_key), max_skew=self.max_skew)
        object.__setattr__(self, "violation", reason)

    @classmethod
    def of(cls, constraint: TopologySpreadConstraint) -> Constraint:
        return cls(
            topology_key=constraint.topology_key,
            max_skew=names.DEFAULT_MAX_SKEW if constraint.max_skew is None else constraint.max_skew,
            do_not_schedule=constraint.when_unsatisfiable != names.SCHEDULE_ANYWAY,
        )


@dataclass(frozen=True, slots=True)
class DomainCounts:
    """Bindings per domain, and the three counts the skew table needs."""

    counts: Mapping[str, int]
    smallest: int = -1
    second_smallest: int = -1
    largest: int = -1


@dataclass(slots=True)
class TopologyState:
    """The verdict of PreFilter: who violates a DoNotSchedule constraint, everyone else's score."""

    do_not_schedule: tuple[Constraint, ...]
    schedule_anyway: tuple[Constraint, ...]
    violations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scores: dict[str, int] = field(default_factory=dict)


STATE: StateKey[TopologyState] = StateKey(f"{NAME}/state")


def count_domains(
    clusters: Sequence[MemberCluster] | Sequence[ClusterFacts],
    key: str,
    has_binding: Callable[[str], bool],
) -> DomainCounts:
    counts: dict[str, int] = {}
    get = counts.get
    for cluster in clusters:
        facts = cluster if isinstance(cluster, ClusterFacts) else facts_of(cluster)
        domain = facts.labels.get(key)
        if domain is None:
            continue  # not part of the spread
        counts[domain] = get(domain, 0) + (1 if has_binding(facts.name) else 0)
    ordered = sorted(counts.values())
    if not ordered:
        return DomainCounts(counts)
    if len(ordered) == 1:
        return DomainCounts(counts, ordered[0], ordered[0], ordered[0])
    if len(ordered) == 2:
        low, high = ordered
        if low < high:
            return DomainCounts(counts, low, high, high)
        return DomainCounts(counts, low, low, low)
    return DomainCounts(counts, ordered[0], ordered[1], ordered[-1])


def will_violate(counts: DomainCounts, domain: str, max_skew: int) -> tuple[bool, int]:
    """(violated, skew change) of placing one more binding in `domain`: the table of 5.6."""
    count = counts.counts.get(domain)
    if count is None:
        raise TopologyError(f"domain {domain} is not registered in the counter")
    smallest, second, largest = counts.smallest, counts.second_smallest, counts.largest
    if count < smallest or count > largest:
        raise TopologyError(
            f"the counter has invalid special counts: [{smallest}, {largest}], received {count}"
        )
    skew = largest - smallest
    if largest == smallest:
        return skew + 1 > max_skew, 1
    if count == smallest and smallest != second:
        return skew - 1 > max_skew, -1
    if count == largest:
        return skew + 1 > max_skew, 1
    return skew > max_skew, 0


def evaluate(
    constraints: Sequence[TopologySpreadConstraint],
    clusters: Sequence[MemberCluster] | Sequence[ClusterFacts],
    has_binding: Callable[[str], bool],
) -> TopologyState:
    """KubeFleet's evaluateAllConstraints: DoNotSchedule constraints first, then ScheduleAnyway.

    A cluster's verdict under one constraint depends only on its domain, so `will_violate` is
    asked once per domain, not once per cluster (the same answers, as KubeFleet's per-cluster
    loop gives them)."""
    parsed = [Constraint.of(c) for c in constraints]
    result = TopologyState(
        do_not_schedule=tuple(c for c in parsed if c.do_not_schedule),
        schedule_anyway=tuple(c for c in parsed if not c.do_not_schedule),
    )
    violations, scores = result.violations, result.scores
    fleet = [c if isinstance(c, ClusterFacts) else facts_of(c) for c in clusters]
    for constraint in result.do_not_schedule + result.schedule_anyway:
        key = constraint.topology_key
        counts = count_domains(fleet, key, has_binding)
        # Per domain: the score change, or None for a DoNotSchedule violation.
        change: dict[str | None, int | None] = {None: 0}  # outside the spread: still scored
        for domain in counts.counts:
            violated, skew_change = will_violate(counts, domain, constraint.max_skew)
            if violated and constraint.do_not_schedule:
                change[domain] = None
            elif violated:
                change[domain] = -SCHEDULE_ANYWAY_PENALTY
            else:
                change[domain] = skew_change * SKEW_CHANGE_SCORE_FACTOR
        violation = (constraint.violation,)
        if not violations and not scores:  # the first constraint: every cluster is open
            changes = [(f.name, change[f.labels.get(key)]) for f in fleet]
            violations.update((name, violation) for name, delta in changes if delta is None)
            scores.update((name, delta) for name, delta in changes if delta is not None)
            continue
        for facts in fleet:
            name = facts.name
            if name in violations:
                continue  # only the first DoNotSchedule violation is recorded
            delta = change[facts.labels.get(key)]
            if delta is None:
                violations[name] = violation
                scores.pop(name, None)
            else:
                scores[name] = scores.get(name, 0) + delta
    return result


def go_quote(text: str) -> str:
    """Go's %q (strconv.Quote) for the strings a topology key can hold."""
    out = ['"']
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}
