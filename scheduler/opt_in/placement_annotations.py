"""fleet-scheduler's own annotations on a placement: one rule, and one parser, per value.

Every reader of one of these values (the turn, the watcher, the routes, `check`, the queue's
priority) goes through the parser named here, so they all agree on what a value means and say
the same thing when it is wrong (docs/validation.md, "Our annotations"):

| annotation                             | parser                 | reads as                  |
|----------------------------------------|------------------------|---------------------------|
| `fleet-scheduler.io/requests`          | `parse_requests`       | amounts by resource name  |
| `fleet-scheduler.io/priority-class`    | `parse_priority_class` | a PriorityClass name      |
| `fleet-scheduler.io/schedule-deadline` | `parse_deadline`       | a `ScheduleDeadline`      |
| `fleet-scheduler.io/affinity-enforcement` | `parse_enforcement` | enforced during execution? |
| `fleet-scheduler.io/rebalance`         | `parse_rebalance`      | opted in (only `allowed`) |

The requests and deadline parsers live beside what they feed (scheduler.room.requests,
scheduler.opt_in.deadline); the other three are small and live here. Each returns the parsed value
or raises its own `AnnotationError` (scheduler.opt_in.values), never anything else whatever the
string (tests/unit/scheduler/test_placement_annotations.py feeds them arbitrary ones); the message
says what is wrong and what to write, and quotes at most 40 characters of the value. Blanks around a
value are ignored. `annotation_problems` says what is wrong with all of a placement's values at
once, for the Scheduled condition and `explain`. Pure: no I/O, no clock."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from hub import names
from scheduler.opt_in.deadline import DeadlineError, parse_deadline
from scheduler.opt_in.values import AnnotationError, shown
from scheduler.room.requests import RequestsError, parse_requests

__all__ = [
    "DURING_EXECUTION",
    "IGNORED_DURING_EXECUTION",
    "RULES",
    "EnforcementError",
    "PriorityClassError",
    "RebalanceError",
    "Rule",
    "annotation_problems",
    "parse_enforcement",
    "parse_priority_class",
    "parse_rebalance",
    "problem_of",
]

DURING_EXECUTION: Final = "DuringExecution"
IGNORED_DURING_EXECUTION: Final = "IgnoredDuringExecution"  # KubeFleet's, the default
# A PriorityClass is named like any Kubernetes object: a DNS subdomain.
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_MAX: Final = 253


class EnforcementError(AnnotationError):
    """The affinity-enforcement annotation is neither DuringExecution nor
    IgnoredDuringExecution: affinity is then not enforced during execution."""


class PriorityClassError(AnnotationError):
    """The priority-class annotation cannot name a PriorityClass: the placement then gets the
    default priority."""


class RebalanceError(AnnotationError):
    """The rebalance annotation says something other than `allowed`: not rebalanced."""


def parse_enforcement(value: str) -> bool:
    """Is affinity enforced during execution? True for `DuringExecution`, False for KubeFleet's
    `IgnoredDuringExecution`.

    Raises:
        EnforcementError: any other value (then it is not enforced).
    """
    text = value.strip()
    if text == DURING_EXECUTION:
        return True
    if text == IGNORED_DURING_EXECUTION:
        return False
    raise EnforcementError(
        f"affinity enforcement {shown(value)} is neither {DURING_EXECUTION!r} nor "
        f"{IGNORED_DURING_EXECUTION!r}: write one of them (affinity is not enforced during "
        "execution until then)"
    )


def parse_priority_class(value: str) -> str:
    """The name of the PriorityClass the placement's turns take their priority from (whether
    that class exists is the queue's question: scheduler.plugins.priority_sort).

    Raises:
        PriorityClassError: empty, or not a DNS subdomain of at most 253 characters.
    """
    text = value.strip()
    if not text:
        raise PriorityClassError(
            "the priority class is empty: write the name of a PriorityClass, or remove the "
            "annotation for the default priority"
        )
    if len(text) > _SUBDOMAIN_MAX or not _SUBDOMAIN.fullmatch(text):
        raise PriorityClassError(
            f"priority class {shown(value)} is not a PriorityClass name: at most "
            f"{_SUBDOMAIN_MAX} lowercase letters, digits, '-' and '.', e.g. high-priority"
        )
    return text


def parse_rebalance(value: str) -> bool:
    """Does the placement opt in to rebalancing? Only `allowed` does (docs/capacity.md).

    Raises:
        RebalanceError: any other value (then it is not rebalanced).
    """
    if value.strip() == names.REBALANCE_ALLOWED:
        return True
    raise RebalanceError(
        f"rebalance {shown(value)} is not {names.REBALANCE_ALLOWED!r}: write "
        f"{names.REBALANCE_ALLOWED!r} to opt in, or remove the annotation"
    )


@dataclass(frozen=True)
class Rule:
    """One of our annotations: its key, its one parser and the error that parser raises."""

    key: str
    parse: Callable[[str], object]
    error: type[AnnotationError]


RULES: Final = (
    Rule(names.REQUESTS_ANNOTATION, parse_requests, RequestsError),
    Rule(names.PRIORITY_CLASS_ANNOTATION, parse_priority_class, PriorityClassError),
    Rule(names.SCHEDULE_DEADLINE_ANNOTATION, parse_deadline, DeadlineError),
    Rule(names.AFFINITY_ENFORCEMENT_ANNOTATION, parse_enforcement, EnforcementError),
    Rule(names.REBALANCE_ANNOTATION, parse_rebalance, RebalanceError),
)
_BY_KEY: Final = {rule.key: rule for rule in RULES}


def problem_of(key: str, value: str) -> str | None:
    """What is wrong with `value` of our annotation `key`, in the words its parser uses and
    prefixed with the key; None when it reads (or `key` is not one of ours)."""
    rule = _BY_KEY.get(key)
    if rule is None:
        return None
    try:
        rule.parse(value)
    except AnnotationError as exc:
        return f"annotation {key}: {exc}"
    return None


def annotation_problems(annotations: Mapping[str, str], skip: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with each of our annotations the placement has, in the order of `RULES`
    (`skip`: keys whose problem is said elsewhere, e.g. requests, which fail the cycle)."""
    found = []
    for rule in RULES:
        value = annotations.get(rule.key)
        if value is None or rule.key in skip:
            continue
        problem = problem_of(rule.key, value)
        if problem is not None:
            found.append(problem)
    return found
