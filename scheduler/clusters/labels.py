"""Kubernetes label selectors: validation and matching, compiled once per cycle.

KubeFleet turns every selector into a `labels.Selector` with `metav1.LabelSelectorAsSelector`
(k8s.io/apimachinery), which validates it, and then matches it against each cluster's labels.
We keep those semantics (matchLabels AND matchExpressions; `NotIn` holds when the key is
absent; an empty selector matches everything) but split the two steps: a selector is compiled
once into a predicate, because one cycle matches the same selector against 5,000 clusters."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hub import names
from hub.types import LabelSelector, LabelSelectorRequirement
from hub.validation import (
    MAX_LABEL_LENGTH,
    MAX_SUBDOMAIN_LENGTH,
    SelectorError,
    is_label_value,
    is_qualified_name_part,
    is_subdomain,
)

__all__ = [
    "LabelPredicate",
    "SelectorError",
    "compile_selector",
    "key_problem",
    "matches",
    "validate",
    "value_problem",
]

LabelPredicate = Callable[[Mapping[str, str]], bool]

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = names.LABEL_OPERATORS

# The rules are k8s.io/apimachinery/pkg/util/validation's (IsQualifiedName, IsValidLabelValue,
# IsDNS1123Subdomain), kept once in hub.validation; the reasons below are the scheduler's words.

def _match_all(labels: Mapping[str, str]) -> bool:
    return True


def matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy `selector`; raises SelectorError if the selector is invalid."""
    return compile_selector(selector)(labels)


def validate(selector: LabelSelector) -> str | None:
    """Why Kubernetes would reject `selector`, or None if it is valid."""
    for key, value in selector.match_labels.items():
        problem = key_problem(key) or value_problem(key, value)
        if problem:
            return f"matchLabels: {problem}"
    for index, requirement in enumerate(selector.match_expressions):
        problem = _requirement_problem(requirement)
        if problem:
            return f"matchExpressions[{index}]: {problem}"
    return None


def compile_selector(selector: LabelSelector) -> LabelPredicate:
    """A predicate over a label map; raises SelectorError if the selector is invalid."""
    problem = validate(selector)
    if problem:
        raise SelectorError(problem)
    if not selector.match_labels and not selector.match_expressions:
        return _match_all
    equal = tuple(selector.match_labels.items())
    # (key, values): values None means any value (Exists / DoesNotExist).
    present: list[tuple[str, frozenset[str] | None]] = []  # key present, value in values
    absent_or: list[tuple[str, frozenset[str] | None]] = []  # key absent, or value not in values
    for requirement in selector.match_expressions:
        operator = requirement.operator
        values = None if operator in (EXISTS, DOES_NOT_EXIST) else frozenset(requirement.values)
        if operator in (IN, EXISTS):
            present.append((requirement.key, values))
        else:
            absent_or.append((requirement.key, values))
    return _predicate(equal, tuple(present), tuple(absent_or))


def _predicate(
    equal: tuple[tuple[str, str], ...],
    present: tuple[tuple[str, frozenset[str] | None], ...],
    absent_or: tuple[tuple[str, frozenset[str] | None], ...],
) -> LabelPredicate:
    def predicate(labels: Mapping[str, str]) -> bool:
        for key, value in equal:
            if labels.get(key) != value:
                return False
        for key, values in present:
            found = labels.get(key)
            if found is None or (values is not None and found not in values):
                return False
        for key, values in absent_or:
            found = labels.get(key)
            if found is not None and (values is None or found in values):
                return False
        return True

    return predicate


def _requirement_problem(requirement: LabelSelectorRequirement) -> str | None:
    key, operator, values = requirement.key, requirement.operator, requirement.values
    if operator not in names.LABEL_OPERATORS:
        return (
            f"{operator!r} is not a valid label selector operator "
            "(want In, NotIn, Exists or DoesNotExist)"
        )
    problem = key_problem(key)
    if problem:
        return problem
    if operator in (IN, NOT_IN) and not values:
        return f"key {key!r}: operator {operator} needs at least one value"
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        return f"key {key!r}: operator {operator} takes no values, got {values!r}"
    for value in values:
        problem = value_problem(key, value)
        if problem:
            return problem
    return None


def key_problem(key: str) -> str | None:
    parts = key.split("/")
    if len(parts) > 2:
        return f"invalid label key {key!r}: at most one '/' (an optional DNS subdomain prefix)"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return f"invalid label key {key!r}: the prefix before '/' must not be empty"
        if not is_subdomain(prefix):
            return (
                f"invalid label key {key!r}: the prefix must be a DNS subdomain of at most "
                f"{MAX_SUBDOMAIN_LENGTH} characters (lower-case alphanumerics, '-' and '.')"
            )
    if not name:
        return f"invalid label key {key!r}: the name part must not be empty"
    if not is_qualified_name_part(name):
        return (
            f"invalid label key {key!r}: the name part must be at most {MAX_LABEL_LENGTH} "
            "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        )
    return None


def value_problem(key: str, value: str) -> str | None:
    if not is_label_value(value):
        return (
            f"invalid value {value!r} for label key {key!r}: at most {MAX_LABEL_LENGTH} "
            "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric (or empty)"
        )
    return None
