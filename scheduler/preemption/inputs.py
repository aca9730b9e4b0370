"""Preemption's view of the candidate clusters, from what a capacity-aware turn already reads: each
cluster's reported allocatable and its CapacityLedger (docs/capacity.md, "the ledger").

A reservation says which placement holds it and how much; it is an `Occupant` (a binding that
may be preempted) only when its binding is active and its placement's priority is known. Every
other reservation (a binding being deleted or Unscheduled within the sweep's grace, one whose
placement is gone) still counts in the cluster's `allocated` and is never a victim: preempting
it would free nothing now. The preemptor's own active bindings are left out, as its cycle leaves
them out (`scheduler.room.capacity.allocated_beside`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from fractions import Fraction

from hub.types import CapacityLedger
from scheduler.preemption.models import Occupant, Room
from scheduler.room.capacity import ClusterCapacity, held
from scheduler.room.quantity import QuantityError, parse_quantity

__all__ = ["rooms_from_ledgers"]


def rooms_from_ledgers(
    clusters: Iterable[tuple[str, Mapping[str, str]]],
    ledgers: Mapping[str, CapacityLedger],
    active: Collection[str],
    priorities: Mapping[str, int],
    *,
    own: Collection[str] = (),
    nominee: str | None = None,
) -> list[Room]:
    """A `Room` for each (cluster name, reported allocatable) of `clusters`. `active`: ledger keys
    of the active bindings (Scheduled or Bound, not deleting); `priorities`: placement key ->
    priority value (a placement not in it is never preempted); `own`: ledger keys of the
    preemptor's active bindings; `nominee`: the preemptor's key, whose own nominations (room held
    for it) are not taken."""
    rooms = []
    for name, reported in clusters:
        ledger = ledgers.get(name)
        if ledger is None:
            rooms.append(Room(name, ClusterCapacity.of(reported)))
            continue
        occupants = []
        for key, reservation in sorted(ledger.spec.reservations.items()):
            if key in own or key not in active:
                continue
            priority = priorities.get(reservation.placement)
            if priority is None:
                continue
            occupants.append(
                Occupant(key, reservation.placement, priority, _amounts(reservation.requests))
            )
        capacity = ClusterCapacity.of(reported, held(ledger, without=own, nominee=nominee))
        rooms.append(Room(name, capacity, tuple(occupants)))
    return rooms


def _amounts(requests: Mapping[str, str]) -> dict[str, Fraction]:
    """A reservation's amounts; an unreadable one (hand-edited) frees nothing, as `held` counts
    it as nothing."""
    amounts = {}
    for resource, text in requests.items():
        try:
            amounts[resource] = parse_quantity(text)
        except QuantityError:
            continue
    return amounts
