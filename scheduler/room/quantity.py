"""Kubernetes resource quantities, read exactly as KubeFleet's scheduler reads them.

Property selectors compare cluster properties by exact value and property sorters interpolate
with floats (kubefleet-rules 5.1). Both must agree with Go's `resource.ParseQuantity` and
`Quantity.AsApproximateFloat64` (k8s.io/apimachinery, `pkg/api/resource/quantity.go`), or a
hub that switches schedulers would see placements move. So this module follows Go's scanner,
not only the documented grammar:

    <quantity>  ::= <sign>? <digits>? ("." <digits>?)? <suffix>
    <suffix>    ::= "" | n | u | m | k | M | G | T | P | E         decimal SI
                  | Ki | Mi | Gi | Ti | Pi | Ei                      binary SI
                  | ("e" | "E") <sign>? <digits>                    decimal exponent

Go's quirks, kept on purpose because they decide which clusters match:

- the number may be empty: "k", "-", "." and "Mi" all read as zero;
- a value finer than 1n is rounded away from zero to the next nano ("0.1n" is 1n);
- binary-suffixed magnitudes are capped at 2^63-1 ("8Ei" is 9223372036854775807);
- floats come from Go's internal (mantissa, exponent) pair, so equal quantities spelled
  differently can convert to neighbouring floats ("0.3" vs "300m").

One deliberate difference: Go accepts any decimal exponent that fits an int64 (truncating it to
int32) and keeps it symbolic; exact arithmetic on 10**2000000000 would hang Python, so we reject
exponents beyond +-MAX_EXPONENT. Such values are far beyond float range either way."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from scheduler.framework.errors import SchedulerError
from scheduler.opt_in.values import SHOWN_VALUE

__all__ = [
    "BINARY_SI",
    "MAX_EXPONENT",
    "Quantity",
    "QuantityError",
    "parse",
    "parse_quantity",
    "quoted",
]

MAX_EXPONENT = 10_000
"""Largest decimal exponent accepted (Go accepts any int32; see the module docstring)."""

_NANO_DIGITS = 9  # Go rounds anything finer than 1e-9 up to 1e-9
_NANOS_PER_UNIT = 10**_NANO_DIGITS
_MAX_INT64 = (1 << 63) - 1
_INT64_DIGITS = 18  # apimachinery's maxInt64Factors: digits that always fit an int64
_CHUNK_DIGITS = 4000  # below Python's int(str) digit limit (sys.int_max_str_digits)

_SHOWN_CHARS = SHOWN_VALUE  # scheduler.opt_in.values: a problem quotes at most 40 characters
_DIGITS = frozenset("0123456789")
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_EXPONENT = re.compile(r"[+-]?[0-9]+")

_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Binary suffixes and their powers of two.
BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

# Go's math.Pow10 tables: the product/quotient of two table entries is what Go computes, and
# it is not always the correctly rounded power of ten.
_POW10 = tuple(float(f"1e{i}") for i in range(32))
_POW10_POS32 = tuple(float(f"1e{32 * i}") for i in range(10))
_POW10_NEG32 = tuple(float(f"1e-{32 * i}") for i in range(11))


class QuantityError(SchedulerError, ValueError):
    """A string that is not a Kubernetes quantity (Go's ParseQuantity would fail too)."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: its exact value, and Go's internal form for float conversion.

    Every quantity Go can parse is a whole number of nanos (it rounds finer values up), so the
    exact value is kept as the integer `nanos`: comparing two quantities is comparing two ints,
    which matters when one selector meets 5,000 clusters. Go keeps `mantissa * 10**exponent`;
    `approximate` is that pair converted the way `AsApproximateFloat64` converts it (possibly
    an ulp off the exact value, possibly inf, or nan for "0e400")."""

    nanos: int
    mantissa: int
    exponent: int
    approximate: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "approximate", _go_float(self.mantissa, self.exponent))

    @property
    def value(self) -> Fraction:
        return Fraction(self.nanos, _NANOS_PER_UNIT)


def parse_quantity(text: str) -> Fraction:
    """The exact value of `text`; raises QuantityError if Go could not parse it."""
    return parse(text).value


# Parsed quantities by text. A fleet repeats a few thousand distinct property values, and every
# cycle of every placement with a property selector or sorter parses one per cluster: the
# profile of an end-to-end burst had parsing as the single largest cost of a 100-cluster cycle.
# Bounded; failures are not cached (they raise).
PARSE_CACHE_SIZE = 1 << 16


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def parse(text: str) -> Quantity:
    """Parse `text` as Go's `resource.ParseQuantity` does; raises QuantityError."""
    if not text:
        raise QuantityError("invalid quantity '': a quantity cannot be empty")
    if text == "0":
        return _ZERO
    positive, value, num, denom, suffix = _scan(text)
    base, exponent = _interpret_suffix(text, suffix)
    sign = 1 if positive else -1

    # Go's fast path: the value fits an int64 at nano precision, kept as (mantissa, exponent).
    if base == 10:
        scale = exponent - len(denom)
        if len(num) + len(denom) <= _INT64_DIGITS and scale >= -_NANO_DIGITS:
            mantissa = sign * int(num + denom)
            return Quantity(_nanos(mantissa, scale), mantissa, scale)
    elif not denom and len(num) + exponent * 3 // 10 + 1 <= 15:
        magnitude = int(num) << exponent
        if magnitude <= _MAX_INT64:
            return Quantity(sign * magnitude * _NANOS_PER_UNIT, sign * magnitude, 0)
    return _parse_slow(text, value, base, exponent)


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """Go's parseQuantityString: (positive, number text, integer digits, fraction, suffix)."""
    end = len(text)
    pos = 0
    positive = True
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:
        return positive, "0", "0", "", ""  # only a sign and zeros: Go reads zero
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(
            f"invalid quantity {quoted(text)}: unexpected {text[pos]!r} at position {pos}; "
            "want <sign><digits>.<digits><suffix>, e.g. 1.5, 100m, 4Gi or 12e6"
        )
    return positive, value, num, denom, text[suffix_start:]


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int]:
    """(base, exponent) of a suffix, as Go's quantitySuffixer.interpret."""
    if suffix in _DECIMAL_SI:
        return 10, _DECIMAL_SI[suffix]
    if suffix in BINARY_SI:
        return 2, BINARY_SI[suffix]
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        # Zeros first, so int() never sees more than its 4300 digits (a bare ValueError).
        sign, digits = ("-", suffix[2:]) if suffix[1] == "-" else ("", suffix[1:].lstrip("+"))
        digits = digits.lstrip("0") or "0"
        exponent = int(sign + digits) if len(digits) <= _INT64_DIGITS else MAX_EXPONENT + 1
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(
                f"invalid quantity {quoted(text)}: the exponent is beyond +-{MAX_EXPONENT}"
            )
        return 10, exponent
    raise QuantityError(
        f"invalid quantity {quoted(text)}: unknown suffix {quoted(suffix)} "
        "(want one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>)"
    )


def _parse_slow(text: str, value: str, base: int, exponent: int) -> Quantity:
    """Go's inf.Dec path: exact value, rounded up to nano, binary capped at 2^63-1."""
    unsigned = value.lstrip("+-")
    negative = value.startswith("-")
    whole, _, fraction = unsigned.partition(".")
    digits = whole + fraction
    if not digits:
        raise QuantityError(f"invalid quantity {quoted(text)}: no digits in the numeric part")
    unscaled = _int(digits)
    scale = len(fraction)  # value = unscaled / 10**scale
    if base == 10:
        scale -= exponent
    else:
        unscaled <<= exponent
    if unscaled == 0:
        return Quantity(0, 0, -scale)
    # ceil(unscaled / 10**scale * 10**9): Go rounds the magnitude up (away from zero) to nanos.
    shift = _NANO_DIGITS - scale
    nanos = unscaled * 10**shift if shift >= 0 else -(-unscaled // 10**-shift)
    if base == 2 and nanos > _MAX_INT64 * _NANOS_PER_UNIT:
        nanos, mantissa, go_exponent = _MAX_INT64 * _NANOS_PER_UNIT, _MAX_INT64, 0
    else:
        mantissa, go_exponent = nanos, -_NANO_DIGITS
    if negative:
        return Quantity(-nanos, -mantissa, go_exponent)
    return Quantity(nanos, mantissa, go_exponent)


def quoted(text: str) -> str:
    """The offending text for an error message, quoted and cut short: values come from member
    clusters and annotations."""
    return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "...")


def _nanos(mantissa: int, exponent: int) -> int:
    """mantissa * 10**exponent in nanos, for exponent >= -9 (exact)."""
    return mantissa * int(10 ** (exponent + _NANO_DIGITS))


def _int(digits: str) -> int:
    """int(digits) without Python's 4300-digit limit (Go has none)."""
    if len(digits) <= _CHUNK_DIGITS:
        return int(digits)
    result = 0
    for start in range(0, len(digits), _CHUNK_DIGITS):
        chunk = digits[start : start + _CHUNK_DIGITS]
        result = result * 10 ** len(chunk) + int(chunk)
    return result


def _go_float(mantissa: int, exponent: int) -> float:
    """Go's AsApproximateFloat64: float(mantissa) * math.Pow10(exponent), inf on overflow."""
    try:
        base = float(mantissa)
    except OverflowError:
        base = math.inf if mantissa > 0 else -math.inf
    if exponent == 0:
        return base
    return base * _go_pow10(exponent)


def _go_pow10(n: int) -> float:
    """Go's math.Pow10, table for table."""
    if 0 <= n <= 308:
        return _POW10_POS32[n // 32] * _POW10[n % 32]
    if -323 <= n <= 0:
        return _POW10_NEG32[-n // 32] / _POW10[-n % 32]
    return math.inf if n > 0 else 0.0


_ZERO = Quantity(0, 0, 0)
