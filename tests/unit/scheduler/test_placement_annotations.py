"""scheduler.opt_in.placement_annotations: one parser per annotation value, each fed arbitrary
strings (issue 33): it returns a value or raises its own error, never anything else; its problem
quotes at most 40 characters of the value and stays short; a valid value reads back as written."""

from __future__ import annotations

import ast
import re
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hub import names
from scheduler.opt_in.deadline import ScheduleDeadline, carried_deadline, parse_deadline
from scheduler.opt_in.placement_annotations import (
    DURING_EXECUTION,
    IGNORED_DURING_EXECUTION,
    RULES,
    Rule,
    annotation_problems,
    parse_enforcement,
    parse_priority_class,
    parse_rebalance,
    problem_of,
)
from scheduler.opt_in.values import SHOWN_VALUE
from scheduler.room.capacity import format_amount
from scheduler.room.requests import format_requests, parse_requests

# A problem's whole length: its words, a 40-character quote or two, the hint.
MAX_PROBLEM = 400
ZEROS = "0" * 5000

# Strings a hostile or careless author writes: pieces of valid values, digits of every script,
# blanks, commas and '=', glued at random, sometimes repeated to thousands of characters.
_PIECES = st.sampled_from(
    [
        "0", "1", "9", "00000", "s", "m", "h", ",", "=", " ", "\t", "\n", "aging", "cpu", "e",
        "Ki", "Gi", "k", "m", "/", ".", "-", "+", "nvidia.com/gpu", "allowed", DURING_EXECUTION,
        IGNORED_DURING_EXECUTION, "high", "\u0663", "\uff11", "\U0001d7d7", "\u00a0",
        "\u2028", "é", "\x00", "'", '"', "\\", "e" + "9" * 30,
    ]
)  # fmt: skip
HOSTILE = st.one_of(
    st.text(),
    st.lists(_PIECES, max_size=30).map("".join),
    st.tuples(st.lists(_PIECES, min_size=1, max_size=5).map("".join), st.integers(1, 5000)).map(
        lambda pair: (pair[0] * pair[1])[:5000]
    ),
    st.tuples(_PIECES, st.integers(0, 5000), st.lists(_PIECES, max_size=5).map("".join)).map(
        lambda t: t[0] + "0" * t[1] + t[2]
    ),
)


_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


def quotes_at_most_40(problem: str, value: str) -> bool:
    """Every quote in `problem` (a Python literal, as repr() writes it) holds at most
    SHOWN_VALUE characters, then `...` when cut; and outside the quotes no run of more than
    SHOWN_VALUE characters of `value` appears."""
    sentinel = next(chr(c) for c in range(0x100, 0x10000) if chr(c) not in value)
    for quote in _QUOTED.findall(problem):
        text = ast.literal_eval(quote)
        if len(text.removesuffix("...")) > SHOWN_VALUE:
            return False
    rest = _QUOTED.sub(sentinel, problem)
    width = SHOWN_VALUE + 1
    return not any(rest[i : i + width] in value for i in range(len(rest) - width + 1))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.key.removeprefix(names.OWN_PREFIX))
@settings(max_examples=300, deadline=None)
@given(value=HOSTILE)
@example(value=ZEROS + "1s")
@example(value=ZEROS + "1h" + ZEROS + "1m,aging")
@example(value="cpu=1e" + ZEROS + "1")
@example(value="cpu=1e" + "1" * 5000)
@example(value="cpu=" + "9" * 5000)
@example(value="x" * 120_000)
@example(value="cpu=" + "1" * 120_000)
@example(value="a" * 254)
@example(value="٣s")
@example(value=" , , ")
def test_every_parser_reads_or_says_why_in_few_words(rule: Rule, value: str) -> None:
    try:
        rule.parse(value)
    except rule.error as exc:
        problem = str(exc)
        assert problem, "a problem says something"
        assert len(problem) <= MAX_PROBLEM, problem[:200]
        assert quotes_at_most_40(problem, value), problem
        said = problem_of(rule.key, value)
        assert said is not None and said.endswith(problem)
    else:
        assert problem_of(rule.key, value) is None
        if rule.key == names.REQUESTS_ANNOTATION:
            # What reads is shown in every shortage line: a few characters per amount, never
            # the 5,000 digits `cpu=999...` once parsed to (and then could not be written).
            amounts = parse_requests(value)
            assert all(len(format_amount(amount)) <= 20 for amount in amounts.values())


@settings(max_examples=200, deadline=None)
@given(
    hours=st.integers(0, 8760),
    minutes=st.integers(0, 59),
    seconds=st.integers(0, 59),
    aging=st.booleans(),
    zeros=st.integers(0, 5000),
)
def test_a_deadline_reads_back_as_written(
    hours: int, minutes: int, seconds: int, aging: bool, zeros: int
) -> None:
    total = hours * 3600 + minutes * 60 + seconds
    if not 1 <= total <= 365 * 86400:
        return
    deadline = ScheduleDeadline(total, aging=aging)
    assert parse_deadline(deadline.text) == deadline
    padded = "0" * zeros + deadline.text
    assert parse_deadline(padded) == deadline
    assert carried_deadline(padded) == (deadline.text, None)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"]),
        st.integers(0, 10**12).map(lambda n: Fraction(n, 1000)),
        min_size=1,
    )
)
def test_requests_read_back_as_written(amounts: dict[str, Fraction]) -> None:
    assert parse_requests(format_requests(amounts)) == amounts


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?(\.[a-z0-9]{1,20}){0,3}", fullmatch=True))
def test_a_priority_class_name_reads_back_as_written(name: str) -> None:
    assert parse_priority_class(name) == name
    assert parse_priority_class(f" {name} ") == name


def test_the_words_of_enforcement_and_rebalance_read_back() -> None:
    assert parse_enforcement(DURING_EXECUTION) is True
    assert parse_enforcement(f" {IGNORED_DURING_EXECUTION}\n") is False
    assert parse_rebalance(names.REBALANCE_ALLOWED) is True


@settings(max_examples=100, deadline=None)
@given(value=HOSTILE)
@example(value="x" * 120_000)
def test_a_carried_deadline_is_bounded_and_tells_values_apart(value: str) -> None:
    """Finding 6: what crosses Temporal is the deadline as written back or a digest stand-in,
    never the raw value; two different bad values carry different stand-ins."""
    carried, problem = carried_deadline(value)
    assert len(carried) <= len("8760h,aging") or carried.startswith("invalid:")
    assert len(carried) <= 24
    assert carried_deadline(carried)[0] == carried  # reading it again changes nothing
    if problem is not None:
        assert quotes_at_most_40(problem, value)
        assert carried_deadline(value + "!")[0] != carried


def test_problems_of_a_placement_name_each_key_and_skip_what_is_said_elsewhere() -> None:
    annotations = {
        names.REQUESTS_ANNOTATION: "cpu=two",
        names.SCHEDULE_DEADLINE_ANNOTATION: ZEROS + "1s",  # fine: 1s
        names.AFFINITY_ENFORCEMENT_ANNOTATION: "x" * 120_000,
        names.REBALANCE_ANNOTATION: "Allowed",
        names.PRIORITY_CLASS_ANNOTATION: "High Priority",
        "unrelated": "x" * 100,
    }
    problems = annotation_problems(annotations, skip=(names.REQUESTS_ANNOTATION,))
    assert [p.split(":")[0] for p in problems] == [
        f"annotation {names.PRIORITY_CLASS_ANNOTATION}",
        f"annotation {names.AFFINITY_ENFORCEMENT_ANNOTATION}",
        f"annotation {names.REBALANCE_ANNOTATION}",
    ]
    assert sum(len(p) for p in problems) < 3 * MAX_PROBLEM
    assert annotation_problems({"unrelated": "x"}) == []
