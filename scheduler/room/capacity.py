"""Capacity arithmetic for capacity-aware placement (docs/capacity.md): does a placement's request
fit on a cluster, by how much is it short, and how full would the cluster be.

A cluster's supply is its MemberCluster's `status.resourceUsage.allocatable`; what is already
taken is the sum of its reservations (docs/capacity.md, "the ledger"). Everything here is exact
(`Fraction`), so "fits" never depends on float rounding: 0.1 + 0.2 CPU on a cluster with 0.3 free
fits. The scores follow kube-scheduler's NodeResourcesFit strategies, on the fleet's scale of
0-100 per cluster:

- `least_allocated`: the share left free after placing, averaged over the requested resources
  by weight (spread: emptier clusters score higher);
- `most_allocated`: the share already in use (pack: the fullest clusters first, the fleet form
  of Knative's lowest-ordinal-first; see its doc for why not kube-scheduler's "after placing");
- `requested_to_capacity_ratio`: a piecewise-linear curve of utilisation after placing, given as
  points (utilisation %, score); `least_allocated` is one such curve.

Only resources the placement requests (with a positive amount) count. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from itertools import pairwise
from typing import Final

from hub import names
from hub.kinds import placement_key
from hub.types import CapacityLedger, ClusterResourceBinding, Reservation
from scheduler.explain.explanation import (
    ANNOTATION_NOTES_MARKER,
    MISSING_MARKER,
    SHORTAGE_MARKER,
    ClusterRoom,
    ResourceShortage,
    Shortage,
)
from scheduler.room.quantity import BINARY_SI, QuantityError, parse_quantity
from scheduler.room.requests import RequestsError, decimal_text, parse_requests

__all__ = [
    "MAX_SCORE",
    "RESERVATION_GRACE",
    "ClusterCapacity",
    "Demand",
    "Shortfall",
    "allocated_beside",
    "binding_key",
    "check_shape",
    "format_amount",
    "held",
    "holds",
    "is_active",
    "least_allocated",
    "missing_of",
    "most_allocated",
    "no_room_reason",
    "requested_to_capacity_ratio",
    "room_rows",
    "shortage",
    "shortfalls",
    "shown_requests",
]

MAX_SCORE: Final = 100
# Suffixes an amount is shown with, largest first (Ki is left out: 1024 reads better as such).
_BINARY: Final = sorted(
    ((suffix, 2**power) for suffix, power in BINARY_SI.items() if suffix != "Ki"),
    key=lambda pair: -pair[1],
)


@dataclass(frozen=True, slots=True)
class ClusterCapacity:
    """One cluster's supply and what is taken of it, by resource name.

    `allocatable` holds only the resources the cluster reports with a readable quantity;
    `unreadable` names those it reports with a quantity Go could not parse (they count as not
    reported, and `explain` says why)."""

    allocatable: Mapping[str, Fraction]
    allocated: Mapping[str, Fraction]
    unreadable: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, reported: Mapping[str, str], allocated: Mapping[str, Fraction] | None = None
    ) -> ClusterCapacity:
        """From a MemberCluster's `status.resourceUsage.allocatable` as reported (strings)."""
        readable: dict[str, Fraction] = {}
        unreadable: list[str] = []
        for name, text in reported.items():
            try:
                readable[name] = parse_quantity(text)
            except QuantityError:
                unreadable.append(name)
        return cls(readable, dict(allocated or {}), tuple(sorted(unreadable)))

    def free(self, resource: str) -> Fraction | None:
        """Allocatable minus allocated (negative when the cluster's report shrank below its
        reservations); None when the cluster does not report the resource."""
        supply = self.allocatable.get(resource)
        if supply is None:
            return None
        return supply - self.allocated.get(resource, Fraction(0))


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A requested resource the cluster cannot give: `free` is None when it is not reported."""

    resource: str
    requested: Fraction
    free: Fraction | None

    @property
    def missing(self) -> Fraction:
        """How much more would have to be free for the request to fit."""
        return self.requested - max(self.free or Fraction(0), Fraction(0))

    def reason(self) -> str:
        asked = format_amount(self.requested)
        if self.free is None:
            return f"{self.resource}: {asked} requested, none allocatable (not reported)"
        free = format_amount(max(self.free, Fraction(0)))
        return f"{self.resource}: {asked} requested, {free} free"


def shortfalls(requests: Mapping[str, Fraction], capacity: ClusterCapacity) -> list[Shortfall]:
    """Every requested resource the cluster lacks, in the request's order ([]: it fits)."""
    short: list[Shortfall] = []
    for resource, amount in requests.items():
        if amount <= 0:
            continue
        free = capacity.free(resource)
        if free is None or free < amount:
            short.append(Shortfall(resource, amount, free))
    return short


def no_room_reason(short: Sequence[Shortfall]) -> str:
    """The filter reason for a cluster without room: `not enough room: cpu: 2 requested, 1 free`."""
    return "not enough room: " + "; ".join(s.reason() for s in short)


def least_allocated(
    requests: Mapping[str, Fraction],
    capacity: ClusterCapacity,
    weights: Mapping[str, int] | None = None,
) -> int:
    """0-100: the weighted mean share of each requested resource left free after placing."""
    return requested_to_capacity_ratio(requests, capacity, ((0, MAX_SCORE), (100, 0)), weights)


def most_allocated(
    requests: Mapping[str, Fraction],
    capacity: ClusterCapacity,
    weights: Mapping[str, int] | None = None,
) -> int:
    """0-100: the weighted mean share of each requested resource already in use, *before*
    placing: the fullest clusters first, and a cluster with nothing on it last, so clusters in
    use fill up before another is opened (Knative's lowest-ordinal-first in fleet form).

    Not kube-scheduler's MostAllocated, which scores the share in use *after* placing: with
    clusters of different sizes that prefers an empty small cluster the binding fills over a
    half-full large one, and opens a new cluster for nearly every binding (bench/capacity.py
    measured 45 clusters in use against 27 this way, on a fleet that 12 could hold). That one is
    `requested_to_capacity_ratio` with the shape ((0, 0), (100, 100))."""
    return _weighted(requests, capacity, weights, lambda share: share, placing=False)


def requested_to_capacity_ratio(
    requests: Mapping[str, Fraction],
    capacity: ClusterCapacity,
    shape: Sequence[tuple[int, int]],
    weights: Mapping[str, int] | None = None,
) -> int:
    """0-100: `shape` (points of utilisation % -> score, utilisation strictly increasing, both
    within 0-100) at each requested resource's utilisation after placing, interpolated linearly
    and flat beyond the ends, averaged by `weights` (default 1 each; 0 leaves a resource out).
    A resource the cluster does not report, or reports as 0, is full: utilisation 100%.
    No requested resource with weight: 0."""
    check_shape(shape)
    return _weighted(requests, capacity, weights, lambda u: _on_curve(shape, u), placing=True)


def format_amount(amount: Fraction) -> str:
    """An amount as a person reads a quantity: `4Gi`, `1500m`, `2`, `0.000000001` (finer than a
    nano unit, which no quantity is: an approximate decimal)."""
    if amount.denominator == 1:
        whole = amount.numerator
        for suffix, unit in _BINARY:
            if whole and whole % unit == 0:
                return f"{whole // unit}{suffix}"
        return str(whole)
    millis = amount * 1000
    if millis.denominator == 1:
        return f"{millis.numerator}m"
    if (amount * 10**9).denominator == 1:
        return decimal_text(amount)
    return repr(float(amount))


# --- helpers -----------------------------------------------------------------------------------


def check_shape(shape: Sequence[tuple[int, int]]) -> None:
    """Raises ValueError unless `shape` is a usable requested-to-capacity curve."""
    if not shape:
        raise ValueError("a requested-to-capacity shape needs at least one point")
    previous: int | None = None
    for utilisation, score in shape:
        if not (0 <= utilisation <= 100 and 0 <= score <= MAX_SCORE):
            raise ValueError(
                f"shape point ({utilisation}, {score}): utilisation and score must be in 0-100"
            )
        if previous is not None and utilisation <= previous:
            raise ValueError("shape points must have strictly increasing utilisation")
        previous = utilisation


def _weighted(
    requests: Mapping[str, Fraction],
    capacity: ClusterCapacity,
    weights: Mapping[str, int] | None,
    score: Callable[[Fraction], Fraction],
    *,
    placing: bool,
) -> int:
    """0-100: `score` of each requested resource's utilisation % (with the request added when
    `placing`), averaged by weight (default 1; 0 leaves a resource out), floored as
    kube-scheduler's integer arithmetic. A resource not reported, or reported as 0, is full."""
    total = Fraction(0)
    weight_sum = 0
    for resource, amount in requests.items():
        weight = 1 if weights is None else weights.get(resource, 1)
        if amount <= 0 or weight <= 0:
            continue
        supply = capacity.allocatable.get(resource, Fraction(0))
        if supply <= 0:
            utilisation = Fraction(100)
        else:
            used = capacity.allocated.get(resource, Fraction(0)) + (amount if placing else 0)
            utilisation = min(max(used * 100 / supply, Fraction(0)), Fraction(100))
        total += weight * score(utilisation)
        weight_sum += weight
    return int(total / weight_sum) if weight_sum else 0


def _on_curve(shape: Sequence[tuple[int, int]], utilisation: Fraction) -> Fraction:
    first_u, first_s = shape[0]
    if utilisation <= first_u:
        return Fraction(first_s)
    for (u0, s0), (u1, s1) in pairwise(shape):
        if utilisation <= u1:
            return s0 + (s1 - s0) * (utilisation - u0) / (u1 - u0)
    return Fraction(shape[-1][1])


# --- one cycle's view, and what it could not place ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Demand:
    """What a capacity-aware cycle knows: what one binding of the placement asks for, and what
    the reservations of *other* placements hold on each cluster (the placement's own reservations
    are left out: a binding it keeps or re-points needs no second place)."""

    requests: Mapping[str, Fraction]
    allocated: Mapping[str, Mapping[str, Fraction]]

    def on(self, cluster: str, reported: Mapping[str, str]) -> ClusterCapacity:
        """The cluster's capacity, from its reported allocatable and its reservations."""
        return ClusterCapacity.of(reported, self.allocated.get(cluster))

    def shortfalls_on(self, cluster: str, reported: Mapping[str, str]) -> list[Shortfall]:
        return shortfalls(self.requests, self.on(cluster, reported))


# --- the ledger's records (docs/capacity.md, "the ledger") -------------------------------------

# How long a reservation whose binding is not active is left alone before a sweep releases it:
# longer than a cycle activity may run (10 minutes), so a sweep never takes a reservation that a
# live cycle has just made and is about to use (a reservation is re-stamped whenever it is
# made again). `fleet-scheduler check` reports reservations older than this without a binding.
RESERVATION_GRACE: Final = timedelta(minutes=15)
# How long room nominated for a preemptor is held for it (docs/priority.md, "Preemption"): far
# longer than its victims' turns take (seconds), short enough that a victim that could not leave
# (its budget tightened meanwhile) does not keep the room from everyone for long.
NOMINATION_GRACE: Final = timedelta(minutes=5)


def binding_key(binding: ClusterResourceBinding) -> str:
    """The ledger's key of a binding: its name, or `<namespace>/<name>` for a ResourceBinding."""
    return placement_key(binding.metadata.namespace, binding.metadata.name)


def is_active(binding: ClusterResourceBinding) -> bool:
    """Does the binding still consume its cluster's room: Scheduled or Bound, not deleting."""
    return binding.spec.state != names.STATE_UNSCHEDULED and not binding.metadata.deleting


def holds(reservation: Reservation, placement: str, requests: Mapping[str, Fraction]) -> bool:
    """Is `reservation` the one a binding of `placement` asking `requests` needs: the same
    placement, the same amounts (compared as quantities, zero amounts aside)?"""
    if reservation.placement != placement:
        return False
    try:
        amounts = {r: parse_quantity(q) for r, q in reservation.requests.items()}
    except QuantityError:
        return False
    wanted = {r: a for r, a in requests.items() if a}
    return {r: a for r, a in amounts.items() if a} == wanted


def allocated_beside(
    ledgers: Mapping[str, CapacityLedger],
    bindings: Iterable[ClusterResourceBinding],
    placement: str | None = None,
) -> dict[str, dict[str, str]]:
    """What the reservations and nominations hold on each cluster (cluster -> resource ->
    quantity), leaving out those of a placement's own active `bindings` (a binding it keeps or
    re-points needs no second place) and the room nominated for `placement` itself (its
    preemption freed it for it). Its other reservations (one whose binding was never created, or
    was unscheduled) still count, as a reservation counts them: the filter and the reservation
    agree."""
    own = {binding_key(b) for b in bindings if is_active(b)}
    return {
        cluster: {r: format_amount(a) for r, a in amounts.items()}
        for cluster, ledger in ledgers.items()
        if (amounts := held(ledger, without=own, nominee=placement))
    }


def held(
    ledger: CapacityLedger,
    *,
    without: Iterable[str] = (),
    nominations: bool = True,
    nominee: str | None = None,
) -> dict[str, Fraction]:
    """What the ledger holds, by resource: its reservations and, unless `nominations` is False,
    the room nominated for preemptors (docs/priority.md, "Preemption"), which no other placement
    may take. `without` leaves out the reservations of these bindings (keys); `nominee` the
    nomination of this placement (key): the room it holds for itself. A reservation with an
    unreadable amount (hand-edited) counts as nothing of that resource."""
    skip = set(without)
    total: dict[str, Fraction] = {}
    entries: list[Mapping[str, str]] = [
        r.requests for key, r in ledger.spec.reservations.items() if key not in skip
    ]
    if nominations:
        entries += [n.requests for key, n in ledger.spec.nominations.items() if key != nominee]
    for requests in entries:
        for resource, text in requests.items():
            try:
                amount = parse_quantity(text)
            except QuantityError:
                continue
            total[resource] = total.get(resource, Fraction(0)) + amount
    return total


def missing_of(message: str) -> dict[str, Fraction] | None:
    """What a Scheduled condition's message says is missing (`Shortage.message`), by resource;
    None when it reports no shortage."""
    message = message.partition(ANNOTATION_NOTES_MARKER)[0]  # the author's text: not ours
    if SHORTAGE_MARKER not in message:
        return None
    _, marker, missing = message.rpartition(MISSING_MARKER)
    if not marker:
        return None
    missing = missing.partition("; ")[0]  # what follows says why (preempted by ...)
    try:
        return parse_requests(missing)
    except RequestsError:
        return None


def shown_requests(requests: Mapping[str, Fraction]) -> str:
    """Requests as a person reads them: `cpu=4,memory=8Gi`."""
    return ",".join(f"{name}={format_amount(amount)}" for name, amount in requests.items())


def room_rows(
    demand: Demand, clusters: Iterable[tuple[str, Mapping[str, str]]]
) -> list[ClusterRoom]:
    """`explain`'s room column for (name, reported allocatable) of each cluster, in the
    requested resources only."""
    rows = []
    for name, reported in clusters:
        held = demand.allocated.get(name, {})
        rows.append(
            ClusterRoom(
                cluster=name,
                allocatable=",".join(
                    f"{r}={reported[r]}" for r in demand.requests if r in reported
                ),
                allocated=",".join(
                    f"{r}={format_amount(held[r])}" for r in demand.requests if held.get(r)
                ),
            )
        )
    return rows


def shortage(
    requests: Mapping[str, Fraction], unplaced: int, short: Sequence[Sequence[Shortfall]]
) -> Shortage | None:
    """What `unplaced` bindings that found no room lack, from the shortfalls of the clusters
    that were filtered only for room (`short`, one list per cluster); None when nothing is
    unplaced for lack of room."""
    if unplaced <= 0 or not short:
        return None
    by_resource: dict[str, list[Shortfall]] = {}
    for cluster in short:
        for item in cluster:
            by_resource.setdefault(item.resource, []).append(item)
    resources = []
    for resource, amount in requests.items():
        items = by_resource.get(resource)
        if not items:
            continue
        frees = [max(i.free, Fraction(0)) for i in items if i.free is not None]
        resources.append(
            ResourceShortage(
                resource=resource,
                requested=format_amount(amount),
                clusters=len(items),
                most_free=format_amount(max(frees)) if frees else None,
                missing=format_amount(amount * unplaced),
            )
        )
    return Shortage(unplaced=unplaced, requests=shown_requests(requests), resources=resources)
