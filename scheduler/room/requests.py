"""A placement's resource requests: what one of its bindings consumes on the cluster it targets.

Capacity-aware placement is opt-in per placement (issue 15): a placement declares its demand in
the annotation `fleet-scheduler.io/requests`, e.g. `cpu=2,memory=4Gi,nvidia.com/gpu=1`. Each
entry is a resource name and a Kubernetes quantity, read by `scheduler.room.quantity` exactly as for
KubeFleet's property values; entries are separated by commas, and blanks around names, values
and commas are ignored.

A bad annotation is the user's to fix, not something a retry can mend: `RequestsError` says
which entry is wrong and why, in words a Scheduled condition can carry as they are. Rules:

- at least one entry; no empty entry (`cpu=1,,memory=1Gi`);
- a name is a Kubernetes resource name: an optional DNS-subdomain prefix and `/`, then a name
  of at most 63 characters of letters, digits, `-`, `_` and `.`, starting and ending with a
  letter or digit (`cpu`, `ephemeral-storage`, `nvidia.com/gpu`);
- a name appears once;
- a value is a quantity with at least one digit (Go reads a bare `k` as zero; a request of `k`
  is surely a mistake) and not negative; zero is allowed and asks for nothing.

Pure: no I/O, no clock."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Final

from scheduler.opt_in.values import AnnotationError, shown
from scheduler.room.quantity import QuantityError, parse_quantity

__all__ = ["RequestsError", "decimal_text", "format_requests", "parse_requests"]

_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_PREFIX_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_PREFIX_MAX: Final = 253
# The largest amount a request may ask: Go's int64, what Kubernetes counts a resource in (and
# where a binary suffix is capped: `8Ei`). Larger amounts fit no cluster, and their thousands of
# digits would be copied into every line that shows the request.
MAX_REQUEST: Final = (1 << 63) - 1


class RequestsError(AnnotationError):
    """The requests annotation cannot be read; the message names the entry and the rule, and
    quotes at most 40 characters of it (scheduler.opt_in.values)."""

    def __init__(self, message: str, entry: str | None = None) -> None:
        super().__init__(message)
        self.entry = entry


def parse_requests(text: str) -> dict[str, Fraction]:
    """The amounts `text` asks for, by resource name, in the order written.

    Raises:
        RequestsError: the text breaks one of the module's rules; `entry` is the offending
            entry (None when the whole text is empty).
    """
    entries = text.split(",")
    if not text.strip():
        raise RequestsError("the requests annotation is empty: write e.g. cpu=2,memory=4Gi")
    amounts: dict[str, Fraction] = {}
    for position, raw in enumerate(entries, start=1):
        entry = raw.strip()
        if not entry:
            raise RequestsError(f"entry {position} of the requests annotation is empty", entry)
        name, equals, value = entry.partition("=")
        name, value = name.strip(), value.strip()
        quoted = shown(entry)
        if not equals:
            raise RequestsError(
                f"requests entry {quoted} has no '=': write name=quantity, e.g. cpu=2", entry
            )
        if problem := _name_problem(name):
            raise RequestsError(f"requests entry {quoted}: {problem}", entry)
        if name in amounts:
            raise RequestsError(f"requests entry {quoted}: the name is requested twice", entry)
        amounts[name] = _amount(value, quoted, entry)
    return amounts


def format_requests(amounts: Mapping[str, Fraction]) -> str:
    """`amounts` written back as an annotation value; `parse_requests` reads it as equal.

    Whole numbers are written as integers, others as exact decimals in nano units (`1500m`
    would be ambiguous to nobody, but `0.000000001` is plain and exact)."""
    return ",".join(f"{name}={decimal_text(amount)}" for name, amount in amounts.items())


# --- helpers -----------------------------------------------------------------------------------


def _name_problem(name: str) -> str | None:
    if not name:
        return "the resource name is empty"
    prefix, slash, base = name.rpartition("/")
    if slash:
        if not prefix or len(prefix) > _PREFIX_MAX:
            return f"the prefix is empty or longer than {_PREFIX_MAX} characters"
        if not all(_PREFIX_LABEL.fullmatch(label) for label in prefix.split(".")):
            return "the prefix before '/' is not a DNS subdomain (e.g. nvidia.com)"
    if not _NAME.fullmatch(base):
        return (
            "the name is not a resource name: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def _amount(value: str, quoted: str, entry: str) -> Fraction:
    if not any("0" <= ch <= "9" for ch in value):
        raise RequestsError(
            f"requests entry {quoted}: the value is not a quantity (e.g. 2, 500m, 4Gi)", entry
        )
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        raise RequestsError(f"requests entry {quoted}: {exc}", entry) from exc
    if amount < 0:
        raise RequestsError(f"requests entry {quoted}: a request cannot be negative", entry)
    if amount > MAX_REQUEST:
        raise RequestsError(
            f"requests entry {quoted}: the amount is more than any cluster has (at most "
            f"{MAX_REQUEST}, Kubernetes' int64)",
            entry,
        )
    return amount


def decimal_text(amount: Fraction) -> str:
    """A whole number of nano units as exact decimal text (`2`, `0.5`, `0.000000001`).

    Raises:
        ValueError: the amount is finer than a nano unit (no quantity is).
    """
    if amount.denominator == 1:
        return str(amount.numerator)
    nanos = amount * 10**9
    if nanos.denominator == 1:
        whole, rest = divmod(nanos.numerator, 10**9)
        return f"{whole}.{rest:09d}".rstrip("0")
    # Quantities are exact to the nano; anything finer did not come from parse_quantity.
    raise ValueError(f"{amount} is not a whole number of nano units")
