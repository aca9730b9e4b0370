"""Label and field selectors in the query-string syntax of kube-apiserver.

Label selectors: comma-separated requirements, ANDed: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
`k notin (a,b)`, `k` (exists), `!k` (does not exist), `k>1` / `k<1` (integer comparison), the
grammar of apimachinery `labels.Parse`. `!=` and `notin` also match objects without the key, as
there. Field selectors on custom resources support `metadata.name` (and `metadata.namespace`) with
`=`, `==` and `!=`. A malformed selector raises SelectorError, which the server turns into a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from hub.validation import SelectorError, label_key_error, label_value_error

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
    "parse_field_selector",
    "parse_label_selector",
]

_TOKEN: Final = re.compile(r"\s*(==|!=|=|!|,|\(|\)|<|>|[^\s=!,()<>]+)")
_KEYWORDS: Final = frozenset({"in", "notin"})
FIELD_SELECTABLE: Final = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        match self.operator:
            case "=" | "in":
                return present and value in self.values
            case "!=" | "notin":
                return not present or value not in self.values
            case "exists":
                return present
            case "!":
                return not present
            case ">" | "<":
                if value is None:
                    return False
                try:
                    number = int(value)
                except ValueError:
                    return False
                bound = int(self.values[0])
                return number > bound if self.operator == ">" else number < bound
        return False


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if not self.requirements:
            return True
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req.matches(labels) for req in self.requirements)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        found = _TOKEN.match(text, position)
        if found is None:
            raise SelectorError(f"unable to parse requirement: unexpected character at "
                                f"position {position}")
        tokens.append(found.group(1))
        position = found.end()
    return tokens


def _check_key(key: str) -> None:
    if key in ("==", "!=", "=", "!", ",", "(", ")", "<", ">") or key in _KEYWORDS:
        raise SelectorError(f"unable to parse requirement: found '{key}', expected: identifier")
    if err := label_key_error(key):
        raise SelectorError(f'unable to parse requirement: key: Invalid value: "{key}": {err}')


def _check_value(value: str) -> None:
    if err := label_value_error(value):
        raise SelectorError(
            f'unable to parse requirement: values[0]: Invalid value: "{value}": {err}'
        )


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise SelectorError(f"unable to parse requirement: unexpected end of selector "
                                f"{self.text!r}")
        self.position += 1
        return token

    def selector(self) -> LabelSelector:
        requirements = []
        while self.peek() is not None:
            requirements.append(self.requirement())
            token = self.peek()
            if token is None:
                break
            if token != ",":
                raise SelectorError(f"found '{token}', expected: ',' or 'end of string'")
            self.take()
            if self.peek() is None:
                raise SelectorError("found 'end of string', expected: identifier")
        return LabelSelector(tuple(requirements))

    def requirement(self) -> Requirement:
        token = self.take()
        if token == "!":
            key = self.take()
            _check_key(key)
            return Requirement(key, "!")
        _check_key(token)
        key = token
        operator = self.peek()
        if operator is None or operator == ",":
            return Requirement(key, "exists")
        self.take()
        if operator in ("=", "=="):
            return Requirement(key, "=", (self.single_value(),))
        if operator == "!=":
            return Requirement(key, "!=", (self.single_value(),))
        if operator in (">", "<"):
            value = self.take()
            if not re.fullmatch(r"-?\d+", value):
                raise SelectorError(
                    f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                    f"an integer, got {value!r}"
                )
            return Requirement(key, operator, (value,))
        if operator in _KEYWORDS:
            return Requirement(key, operator, self.value_set())
        raise SelectorError(f"found '{operator}', expected: in, notin, =, ==, !=, gt, lt")

    def single_value(self) -> str:
        token = self.peek()
        if token is None or token == ",":
            return ""  # `key=` selects the empty value, as in apimachinery
        if token in ("(", ")", "=", "==", "!=", "!", "<", ">"):
            raise SelectorError(f"found '{token}', expected: identifier")
        self.take()
        _check_value(token)
        return token

    def value_set(self) -> tuple[str, ...]:
        if self.take() != "(":
            raise SelectorError("found '" + self.tokens[self.position - 1] + "', expected: '('")
        values: list[str] = []
        expect_value = True
        while True:
            token = self.take()
            if token == ")":
                if expect_value and values:
                    values.append("")
                break
            if token == ",":
                if expect_value:
                    values.append("")
                expect_value = True
                continue
            if not expect_value:
                raise SelectorError(f"found '{token}', expected: ',' or ')'")
            _check_value(token)
            values.append(token)
            expect_value = False
        if not values:
            raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
        return tuple(values)


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector()
    try:
        return _Parser(text).selector()
    except SelectorError as exc:
        raise SelectorError(f"unable to parse labelSelector {text!r}: {exc}") from None


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[tuple[str, bool, str], ...] = ()  # (field, equal?, value)

    @property
    def empty(self) -> bool:
        return not self.terms

    @property
    def exact_name(self) -> str | None:
        """The one name this selector can match, for a fast path; None if several can."""
        return self._exact("metadata.name")

    @property
    def exact_namespace(self) -> str | None:
        """The one namespace this selector can match, to list only that namespace; or None."""
        return self._exact("metadata.namespace")

    def _exact(self, wanted: str) -> str | None:
        for field, equal, value in self.terms:
            if field == wanted and equal:
                return value
        return None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        for field, equal, value in self.terms:
            actual = meta.get(field.removeprefix("metadata."), "") or ""
            if (actual == value) != equal:
                return False
        return True


_FIELD_TERM: Final = re.compile(r"^([A-Za-z0-9_.\-]+)\s*(==|!=|=)\s*(.*)$")


def parse_field_selector(text: str | None) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    terms = []
    for part in text.split(","):
        found = _FIELD_TERM.match(part.strip())
        if found is None:
            raise SelectorError(f"invalid fieldSelector {text!r}: invalid selector: {part!r}; "
                                "expected field=value, field==value or field!=value")
        field, operator, value = found.groups()
        if field not in FIELD_SELECTABLE:
            raise SelectorError(f'field label not supported: {field} (in fieldSelector "{text}"; '
                                f"custom resources support {', '.join(FIELD_SELECTABLE)})")
        terms.append((field, operator != "!=", value.strip()))
    return FieldSelector(tuple(terms))


Matcher = Callable[[Mapping[str, Any]], bool]
