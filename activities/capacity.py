"""Capacity reservations in the hub: the ledger side of capacity-aware placement
(docs/capacity.md).

A capacity-aware placement (one with the `fleet-scheduler.io/requests` annotation) reserves room
on a cluster's CapacityLedger *before* it creates or revives a binding there, and releases it
*after* the binding is unscheduled or gone. Every ledger write is a compare-and-swap on the
ledger's resourceVersion, so two processes reserving on one cluster are serialised by the hub:
the loser re-reads, sees the winner's reservation, and checks again. Hence, at every moment, for
every cluster, the reservations (a superset of its bindings' requests) fit its allocatable.

Reservations whose binding is not active (missing, Unscheduled, being deleted) are released by
sweeps only once they are older than `SWEEP_GRACE`, longer than a cycle may run: a sweep never
races a cycle that has just reserved and is about to create or revive its binding (a reservation
is re-stamped each time it is made). Placements without the annotation never touch a ledger."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Final

from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, ConflictError, NotFoundError, UnauthorizedError
from hub.kinds import placement_key
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    MemberCluster,
    ObjectMeta,
    Reservation,
)
from scheduler import CapacityInput
from scheduler.capacity import ClusterCapacity, format_amount, no_room_reason, shortfalls
from scheduler.quantity import QuantityError, parse_quantity
from scheduler.requests import RequestsError, parse_requests

__all__ = [
    "CAS_ATTEMPTS",
    "SWEEP_GRACE",
    "CapacityWrites",
    "Ledgers",
    "NoRoomError",
    "binding_key",
    "capacity_input",
    "capacity_writes",
    "held",
    "is_active",
    "release",
    "release_placement",
    "requests_of",
    "reserve",
    "stale_reservations",
    "sweep_ledgers",
    "sweep_own",
]

# Compare-and-swap attempts on one ledger before the activity gives up (and Temporal retries
# it from fresh reads). At ~50 writers per ledger in a burst, conflicts come in runs.
CAS_ATTEMPTS: Final = 50
# Longer than a cycle activity may run (workflows.placement.CYCLE_TIMEOUT, 10 min): a sweep
# never releases a reservation a live cycle has just made.
SWEEP_GRACE: Final = timedelta(minutes=15)


class NoRoomError(Exception):
    """Another placement took the room this cycle planned on: decide again from fresh reads."""


def binding_key(binding: ClusterResourceBinding) -> str:
    """The ledger's key of a binding: its name, or `<namespace>/<name>` for a ResourceBinding."""
    return placement_key(binding.metadata.namespace, binding.metadata.name)


def requests_of(placement: ClusterResourcePlacement) -> str | None:
    """The placement's requests annotation as written, or None: not capacity-aware."""
    return placement.metadata.annotations.get(names.REQUESTS_ANNOTATION)


def held(ledger: CapacityLedger, *, without: Iterable[str] = ()) -> dict[str, Fraction]:
    """What the ledger's reservations hold, by resource; `without` leaves out the reservations
    of these bindings (keys). A reservation with an unreadable amount (hand-edited) counts as
    nothing of that resource."""
    skip = set(without)
    total: dict[str, Fraction] = {}
    for key, reservation in ledger.spec.reservations.items():
        if key in skip:
            continue
        for resource, text in reservation.requests.items():
            try:
                amount = parse_quantity(text)
            except QuantityError:
                continue
            total[resource] = total.get(resource, Fraction(0)) + amount
    return total


@dataclass(frozen=True)
class Ledgers:
    """Every ledger as one cycle read them."""

    by_cluster: Mapping[str, CapacityLedger]

    @classmethod
    def read(cls, client: HubClient, *, tolerant: bool = False) -> Ledgers:
        """Every ledger. `tolerant`: a hub that does not serve the kind (its CRD not installed)
        or does not let us list it has none, for code paths that must not depend on it
        (a placement's cleanup, the reconcile's sweep)."""
        try:
            return cls({ledger.name: ledger for ledger in client.list(CapacityLedger).items})
        except (NotFoundError, UnauthorizedError):
            if not tolerant:
                raise
            return cls({})


def capacity_input(
    text: str, ledgers: Ledgers, bindings: Iterable[ClusterResourceBinding]
) -> CapacityInput:
    """The cycle's capacity view: the placement's requests and what reservations hold on each
    cluster, leaving out those of the placement's own active bindings (a binding it keeps or
    re-points needs no second place). Its other reservations (one whose binding was never
    created, or was unscheduled) still count, as `reserve` counts them: the filter and the
    reservation agree."""
    own = {binding_key(b) for b in bindings if is_active(b)}
    allocated = {
        cluster: {r: format_amount(a) for r, a in amounts.items()}
        for cluster, ledger in ledgers.by_cluster.items()
        if (amounts := held(ledger, without=own))
    }
    return CapacityInput(requests=text, allocated=allocated)


def reserve(
    client: HubClient,
    cluster: str,
    allocatable: Mapping[str, str],
    binding: str,
    placement: str,
    requests: Mapping[str, Fraction],
    now: Callable[[], datetime],
    *,
    restamp: bool = True,
) -> bool:
    """Hold room for `binding` on `cluster`: True when this call made the reservation, False
    when the binding already had it (then re-stamped with `now()` unless `restamp` is False).
    Compare-and-swap on the ledger, re-read and re-checked on every conflict.

    Raises:
        NoRoomError: the cluster's allocatable cannot take the requests beside the others'.
        ConflictError: CAS_ATTEMPTS conflicts in a row (the activity is retried).
    """
    entry = {r: format_amount(a) for r, a in requests.items()}
    for _ in range(CAS_ATTEMPTS):
        ledger = _get(client, cluster)
        existing = ledger.spec.reservations if ledger is not None else {}
        mine = existing.get(binding)
        if mine is not None and not restamp:
            return False
        if mine is None:
            others = held(ledger) if ledger is not None else {}
            short = shortfalls(requests, ClusterCapacity.of(allocatable, others))
            if short:
                raise NoRoomError(
                    f"cluster {cluster!r} has no room for binding {binding!r} any more: "
                    f"{no_room_reason(short)}"
                )
        reservation = Reservation(
            placement=placement,
            requests=mine.requests if mine is not None else entry,
            reserved_at=now(),
        )
        try:
            _write(client, cluster, ledger, {**existing, binding: reservation})
        except (ConflictError, AlreadyExistsError):
            continue
        return mine is None
    raise ConflictError(
        status=409,
        reason="Conflict",
        message=f"ledger {cluster!r}: {CAS_ATTEMPTS} conflicting writers in a row while reserving",
    )


def release(client: HubClient, cluster: str, bindings: Iterable[str]) -> int:
    """Drop the reservations of `bindings` on `cluster`; how many were there."""
    gone = set(bindings)
    for _ in range(CAS_ATTEMPTS):
        ledger = _get(client, cluster)
        if ledger is None:
            return 0
        kept = {k: v for k, v in ledger.spec.reservations.items() if k not in gone}
        dropped = len(ledger.spec.reservations) - len(kept)
        if not dropped:
            return 0
        try:
            _write(client, cluster, ledger, kept)
        except (ConflictError, NotFoundError):
            continue
        return dropped
    raise ConflictError(
        status=409,
        reason="Conflict",
        message=f"ledger {cluster!r}: {CAS_ATTEMPTS} conflicting writers in a row while releasing",
    )


def stale_reservations(
    ledgers: Ledgers,
    keep: Callable[[str, str, Reservation], bool],
    now: datetime,
    *,
    grace: timedelta = SWEEP_GRACE,
) -> dict[str, list[str]]:
    """Cluster -> binding keys whose reservation may go: older than `grace` and not kept by
    `keep(cluster, key, reservation)`."""
    out: dict[str, list[str]] = {}
    for cluster, ledger in ledgers.by_cluster.items():
        for key, reservation in ledger.spec.reservations.items():
            if now - reservation.reserved_at < grace or keep(cluster, key, reservation):
                continue
            out.setdefault(cluster, []).append(key)
    return out


def _sweep(
    client: HubClient,
    ledgers: Ledgers,
    keep: Callable[[str, str, Reservation], bool],
    now: datetime,
) -> int:
    stale = stale_reservations(ledgers, keep, now)
    return sum(release(client, cluster, keys) for cluster, keys in stale.items())


def _active_keys(bindings: Iterable[ClusterResourceBinding]) -> set[tuple[str, str]]:
    return {(b.spec.target_cluster, binding_key(b)) for b in bindings if is_active(b)}


def is_active(binding: ClusterResourceBinding) -> bool:
    """Does the binding still consume its cluster's room: Scheduled or Bound, not deleting."""
    return binding.spec.state != names.STATE_UNSCHEDULED and not binding.metadata.deleting


@dataclass
class CapacityWrites:
    """A capacity-aware cycle's ledger writes around its binding writes
    (`activities.bindings.apply_binding_plan` calls them in this order): reserve before a
    create or a revive, release after an unschedule or a finalizer removal."""

    client: HubClient
    placement: str
    requests: Mapping[str, Fraction]
    allocatable: Mapping[str, Mapping[str, str]]
    """Cluster -> its reported allocatable, as the cycle read it."""
    bindings: Mapping[str, ClusterResourceBinding]
    """The placement's bindings as the cycle read them, by name."""
    now: Callable[[], datetime]
    reserved: int = 0
    released: int = 0

    def before_create(self, binding: ClusterResourceBinding) -> None:
        self._reserve(binding.spec.target_cluster, binding_key(binding))

    def before_patch(self, name: str) -> None:
        """A re-pointed binding keeps its reservation (made if it has none); a revived one
        (Unscheduled until now) re-stamps it, so no sweep takes it meanwhile."""
        current = self.bindings.get(name)
        if current is not None:
            revived = current.spec.state == names.STATE_UNSCHEDULED
            self._reserve(current.spec.target_cluster, binding_key(current), restamp=revived)

    def after_unschedule(self, name: str) -> None:
        current = self.bindings.get(name)
        if current is not None:
            self.released += release(
                self.client, current.spec.target_cluster, [binding_key(current)]
            )

    def _reserve(self, cluster: str, key: str, *, restamp: bool = True) -> None:
        allocatable = self.allocatable.get(cluster, {})
        made = reserve(
            self.client,
            cluster,
            allocatable,
            key,
            self.placement,
            self.requests,
            self.now,
            restamp=restamp,
        )
        self.reserved += made


def capacity_writes(
    client: HubClient,
    placement: str,
    text: str,
    fleet_clusters: Iterable[MemberCluster],
    bindings: Iterable[ClusterResourceBinding],
    now: Callable[[], datetime],
) -> CapacityWrites | None:
    """The ledger writes of a capacity-aware cycle; None when its requests cannot be read (the
    cycle then fails with a condition naming the entry, and writes no binding)."""
    try:
        requests = parse_requests(text)
    except RequestsError:
        return None
    return CapacityWrites(
        client=client,
        placement=placement,
        requests=requests,
        allocatable={c.metadata.name: c.status.resource_usage.allocatable for c in fleet_clusters},
        bindings={b.metadata.name: b for b in bindings},
        now=now,
    )


def sweep_own(
    client: HubClient,
    ledgers: Ledgers,
    placement: str,
    bindings: Iterable[ClusterResourceBinding],
    now: datetime,
) -> int:
    """Release the placement's reservations that outlived their binding by SWEEP_GRACE (a
    release lost to a crash between a binding's unschedule and its release); how many."""
    active = _active_keys(bindings)
    return _sweep(
        client,
        ledgers,
        lambda cluster, key, r: r.placement != placement or (cluster, key) in active,
        now,
    )


def release_placement(client: HubClient, placement: str) -> int:
    """Release every reservation of `placement` (deleted: its bindings are being deleted)."""
    released = 0
    for cluster, ledger in Ledgers.read(client, tolerant=True).by_cluster.items():
        keys = [k for k, r in ledger.spec.reservations.items() if r.placement == placement]
        if keys:
            released += release(client, cluster, keys)
    return released


def sweep_ledgers(
    client: HubClient,
    capacity_aware: Iterable[str],
    bindings: Iterable[ClusterResourceBinding],
    now: datetime,
) -> int:
    """The fleet-wide sweep (the reconcile runs it): release every reservation older than
    SWEEP_GRACE whose binding is not active on its cluster, or whose placement is gone or no
    longer capacity-aware (it dropped the annotation: its bindings no longer count). What a
    placement's own cycles and cleanup cannot see: placements that vanished unseen, or that
    stopped being capacity-aware. How many were released."""
    ledgers = Ledgers.read(client, tolerant=True)
    aware = set(capacity_aware)
    active = _active_keys(bindings)
    return _sweep(
        client,
        ledgers,
        lambda cluster, key, r: r.placement in aware and (cluster, key) in active,
        now,
    )


# --- helpers -----------------------------------------------------------------------------------


def _get(client: HubClient, cluster: str) -> CapacityLedger | None:
    try:
        return client.get(CapacityLedger, cluster)
    except NotFoundError:
        return None


def _write(
    client: HubClient,
    cluster: str,
    ledger: CapacityLedger | None,
    reservations: dict[str, Reservation],
) -> None:
    spec = CapacityLedgerSpec(reservations=reservations)
    if ledger is None:
        client.create(CapacityLedger(metadata=ObjectMeta(name=cluster), spec=spec))
    else:
        client.update(ledger.model_copy(update={"spec": spec}))
