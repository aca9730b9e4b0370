"""The requests annotation (scheduler.room.requests): what it accepts, and how it says what is
wrong."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.room.requests import RequestsError, format_requests, parse_requests


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cpu=2,memory=4Gi", {"cpu": Fraction(2), "memory": Fraction(4 * 2**30)}),
        (" cpu = 500m , memory=1G ", {"cpu": Fraction(1, 2), "memory": Fraction(10**9)}),
        ("nvidia.com/gpu=1", {"nvidia.com/gpu": Fraction(1)}),
        ("ephemeral-storage=0", {"ephemeral-storage": Fraction(0)}),
        ("cpu=1e3", {"cpu": Fraction(1000)}),
        ("cpu=.5", {"cpu": Fraction(1, 2)}),
    ],
)
def test_good_annotations_read_as_exact_amounts(text: str, expected: dict[str, Fraction]) -> None:
    assert parse_requests(text) == expected


def test_names_keep_the_order_they_were_written_in() -> None:
    assert list(parse_requests("memory=1,cpu=1,pods=3")) == ["memory", "cpu", "pods"]


@pytest.mark.parametrize(
    ("text", "entry", "words"),
    [
        ("", None, "empty"),
        ("  ", None, "empty"),
        ("cpu=1,,memory=1Gi", "", "entry 2 of the requests annotation is empty"),
        ("cpu=1,", "", "entry 2"),
        ("cpu", "cpu", "has no '='"),
        ("=2", "=2", "the resource name is empty"),
        ("cpu=2,cpu=3", "cpu=3", "the name is requested twice"),
        ("-cpu=1", "-cpu=1", "is not a resource name"),
        ("c p u=1", "c p u=1", "is not a resource name"),
        ("x" * 64 + "=1", "x" * 64 + "=1", "is not a resource name"),
        ("Nvidia.com/gpu=1", "Nvidia.com/gpu=1", "is not a DNS subdomain"),
        ("/gpu=1", "/gpu=1", "prefix is empty"),
        ("cpu=k", "cpu=k", "the value is not a quantity"),
        ("cpu=", "cpu=", "the value is not a quantity"),
        ("cpu=two", "cpu=two", "the value is not a quantity"),
        ("memory=4GB", "memory=4GB", "memory=4GB"),
        ("cpu=-1", "cpu=-1", "cannot be negative"),
        # Beyond an int64 no cluster reports; 10**5000 once parsed and then raised a bare
        # ValueError (int -> str past 4300 digits) from every shortage line that showed it.
        ("cpu=1e5000", "cpu=1e5000", "more than any cluster has"),
        ("cpu=1" + "0" * 5000, "cpu=1" + "0" * 5000, "more than any cluster has"),
        ("memory=9223372036854775808", "memory=9223372036854775808", "more than any cluster"),
    ],
)
def test_bad_annotations_name_the_entry_and_the_rule(
    text: str, entry: str | None, words: str
) -> None:
    with pytest.raises(RequestsError) as raised:
        parse_requests(text)
    assert raised.value.entry == entry
    assert words in str(raised.value)


def test_the_largest_request_is_what_an_int64_holds() -> None:
    assert parse_requests("memory=9223372036854775807") == {"memory": Fraction(2**63 - 1)}
    assert parse_requests("memory=8Ei") == {"memory": Fraction(2**63 - 1)}  # Go caps it there


def test_a_long_bad_entry_is_shortened_in_the_message() -> None:
    entry = "cpu=" + "9" * 200 + "zz"
    with pytest.raises(RequestsError) as raised:
        parse_requests(entry)
    message = str(raised.value)
    assert "..." in message and "9" * 100 not in message
    assert raised.value.entry == entry  # the whole entry stays on the error


_NAMES = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "example.io/fpga-x_1"])
_NANOS = st.integers(min_value=0, max_value=10**24)


@given(st.dictionaries(_NAMES, _NANOS, min_size=1))
def test_formatting_and_reading_back_give_the_same_amounts(nanos: dict[str, int]) -> None:
    amounts = {name: Fraction(value, 10**9) for name, value in nanos.items()}
    text = format_requests(amounts)
    assert parse_requests(text) == amounts
    assert list(parse_requests(text)) == list(amounts)
