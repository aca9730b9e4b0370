"""Quantities parse exactly as Go's resource.ParseQuantity, floats as AsApproximateFloat64."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.room.quantity import MAX_EXPONENT, QuantityError, parse, parse_quantity

F = Fraction
MAX_INT64 = 2**63 - 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1", F(1), id="plain"),
        pytest.param("1000m", F(1), id="milli-equals-one"),
        pytest.param("1Ki", F(1024), id="kibi"),
        pytest.param("1k", F(1000), id="kilo"),
        pytest.param("1.5Gi", F(3 * 2**29), id="fractional-binary"),
        pytest.param("2Mi", F(2 * 2**20), id="mebi"),
        pytest.param("3Ti", F(3 * 2**40), id="tebi"),
        pytest.param("1Pi", F(2**50), id="pebi"),
        pytest.param("1Ei", F(2**60), id="exbi"),
        pytest.param("5n", F(5, 10**9), id="nano"),
        pytest.param("5u", F(5, 10**6), id="micro"),
        pytest.param("5M", F(5 * 10**6), id="mega"),
        pytest.param("5G", F(5 * 10**9), id="giga"),
        pytest.param("5T", F(5 * 10**12), id="tera"),
        pytest.param("5P", F(5 * 10**15), id="peta"),
        pytest.param("5E", F(5 * 10**18), id="exa-not-exponent"),
        pytest.param("1e3", F(1000), id="exponent"),
        pytest.param("1E3", F(1000), id="upper-exponent"),
        pytest.param("1e+3", F(1000), id="signed-exponent"),
        pytest.param("25e-2", F(1, 4), id="negative-exponent"),
        pytest.param("-1.5", F(-3, 2), id="negative"),
        pytest.param("+1.5", F(3, 2), id="plus-sign"),
        pytest.param(".5", F(1, 2), id="no-integer-part"),
        pytest.param("1.", F(1), id="no-fraction-digits"),
        pytest.param("1.e3", F(1000), id="dot-then-exponent"),
        pytest.param("007", F(7), id="leading-zeros"),
        pytest.param("0", F(0), id="zero"),
        pytest.param("-0", F(0), id="negative-zero"),
        pytest.param("0.1n", F(1, 10**9), id="below-nano-rounds-up"),
        pytest.param("-0.1n", F(-1, 10**9), id="below-nano-rounds-away-from-zero"),
        pytest.param("1.0000000001", F(1_000_000_001, 10**9), id="rounds-up-to-nano"),
        pytest.param("1e-10", F(1, 10**9), id="tiny-exponent-rounds-up"),
        pytest.param("8Ei", F(MAX_INT64), id="binary-capped"),
        pytest.param("-8Ei", F(-MAX_INT64), id="negative-binary-capped"),
        pytest.param("7Ei", F(7 * 2**60), id="binary-below-cap"),
        pytest.param("10E", F(10**19), id="decimal-not-capped"),
        pytest.param("k", F(0), id="go-quirk-suffix-only"),
        pytest.param("-", F(0), id="go-quirk-sign-only"),
        pytest.param(".", F(0), id="go-quirk-dot-only"),
        pytest.param("Mi", F(0), id="go-quirk-binary-suffix-only"),
    ],
)
def test_parse_reads_the_kubernetes_grammar(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        pytest.param("", "cannot be empty", id="empty"),
        pytest.param("abc", "unexpected 'a'", id="letters"),
        pytest.param("1K", "unknown suffix 'K'", id="upper-kilo"),
        pytest.param("1ki", "unknown suffix 'ki'", id="lower-kibi"),
        pytest.param("1e", "unknown suffix 'e'", id="bare-exponent"),
        pytest.param("1e+", "unknown suffix 'e+'", id="exponent-without-digits"),
        pytest.param("1Mi3", "unknown suffix 'Mi3'", id="digits-after-binary"),
        pytest.param("--1", "unknown suffix", id="double-sign"),
        pytest.param("1.5.5", "unexpected '.'", id="two-dots"),
        pytest.param(" 1", "unexpected ' '", id="leading-space"),
        pytest.param("1 ", "unexpected ' '", id="trailing-space"),
        pytest.param("e-10", "no digits", id="no-digits-finer-than-nano"),
        pytest.param("1\u00b5", "unexpected", id="micro-sign"),
        pytest.param(f"1e{MAX_EXPONENT + 1}", "exponent", id="exponent-too-large"),
    ],
)
def test_parse_rejects_what_go_rejects(text: str, complaint: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity") as raised:
        parse(text)
    assert complaint in str(raised.value)


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_quantity("nope")


def test_error_messages_cut_long_values_short() -> None:
    with pytest.raises(QuantityError) as raised:
        parse("x" * 10_000)
    assert len(str(raised.value)) < 300


def test_numbers_longer_than_pythons_int_limit_parse() -> None:
    digits = "1" * 5000
    assert parse_quantity(digits) == F(int("1" * 2500) * 10**2500 + int("1" * 2500))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1", 1.0, id="integer"),
        pytest.param("1Ki", 1024.0, id="binary"),
        pytest.param("0.3", 0.30000000000000004, id="go-three-tenths"),
        pytest.param("300m", 0.3, id="go-three-hundred-milli"),
        pytest.param("1.5Gi", 1610612736.0, id="slow-path-nano-mantissa"),
        pytest.param("8Ei", float(MAX_INT64), id="capped"),
        pytest.param("1e400", math.inf, id="beyond-float"),
        pytest.param("-1e400", -math.inf, id="beyond-float-negative"),
    ],
)
def test_approximate_float_follows_go(text: str, expected: float) -> None:
    assert parse(text).approximate == expected


def test_equal_quantities_can_have_neighbouring_floats() -> None:
    # Go keeps (3, -1) and (300, -3); 3 * 0.1 and 300 * 0.001 round differently.
    assert parse_quantity("0.3") == parse_quantity("300m")
    assert parse("0.3").approximate > parse("300m").approximate


def test_zero_with_a_huge_exponent_is_nan_as_in_go() -> None:
    assert math.isnan(parse("0e400").approximate)


_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@given(st.integers(-(10**15), 10**15), st.sampled_from(sorted(_DECIMAL_SUFFIXES)))
def test_integer_with_decimal_suffix_is_exact(number: int, suffix: str) -> None:
    assert parse_quantity(f"{number}{suffix}") == number * F(10) ** _DECIMAL_SUFFIXES[suffix]


@given(st.integers(-(10**6), 10**6), st.sampled_from(sorted(_BINARY_SUFFIXES)))
def test_integer_with_binary_suffix_is_exact_up_to_the_cap(number: int, suffix: str) -> None:
    exact = number * 2 ** _BINARY_SUFFIXES[suffix]
    capped = max(-MAX_INT64, min(MAX_INT64, exact))
    assert parse_quantity(f"{number}{suffix}") == capped


@given(
    st.decimals(
        min_value=-(10**12), max_value=10**12, places=9, allow_nan=False, allow_infinity=False
    )
)
def test_decimal_strings_round_trip(number: Decimal) -> None:
    # str(Decimal) writes forms like "1.5", "-0.000001" and "1E-9": all quantities.
    assert parse_quantity(str(number)) == F(number)


@given(st.fractions(min_value=-1000, max_value=1000), st.integers(-12, 3))
def test_values_finer_than_nano_round_away_from_zero(value: Fraction, exponent: int) -> None:
    text = f"{Decimal(value.numerator) / Decimal(value.denominator):.15f}e{exponent}"
    exact = F(Decimal(text))
    nanos = exact * 10**9
    rounded = math.ceil(nanos) if nanos >= 0 else math.floor(nanos)
    assert parse_quantity(text) == F(rounded, 10**9)
