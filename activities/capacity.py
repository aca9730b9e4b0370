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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Final, Literal

from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, ConflictError, NotFoundError, UnauthorizedError
from hub.kinds import kinds_for, split_key
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    MemberCluster,
    Nomination,
    ObjectMeta,
    Reservation,
)
from scheduler import BindingPlan, CapacityInput
from scheduler.room.capacity import (
    NOMINATION_GRACE,
    RESERVATION_GRACE,
    ClusterCapacity,
    allocated_beside,
    binding_key,
    format_amount,
    held,
    holds,
    is_active,
    no_room_reason,
    shortfalls,
)
from scheduler.room.quantity import parse_quantity
from scheduler.room.requests import RequestsError, parse_requests

__all__ = [
    "CAS_ATTEMPTS",
    "NOMINATION_GRACE",
    "SWEEP_GRACE",
    "CapacityWrites",
    "Ledgers",
    "NoRoomError",
    "Reserved",
    "binding_key",
    "capacity_input",
    "capacity_writes",
    "drop_nominations",
    "held",
    "holds",
    "is_active",
    "ledgers_problem",
    "nominate",
    "release",
    "release_placement",
    "requests_of",
    "reserve",
    "stale_reservations",
    "sweep_ledgers",
    "sweep_nominations",
    "sweep_nominations_of_fleet",
    "sweep_own",
]

# Compare-and-swap attempts on one ledger before the activity gives up (and Temporal retries
# it from fresh reads). At ~50 writers per ledger in a burst, conflicts come in runs.
CAS_ATTEMPTS: Final = 50
# Longer than a cycle activity may run: a sweep never releases a reservation a live cycle has
# just made (scheduler.room.capacity says why this number).
SWEEP_GRACE: Final = RESERVATION_GRACE


class NoRoomError(Exception):
    """Another placement took the room this cycle planned on: decide again from fresh reads."""


def requests_of(placement: ClusterResourcePlacement) -> str | None:
    """The placement's requests annotation as written, or None: not capacity-aware."""
    return placement.metadata.annotations.get(names.REQUESTS_ANNOTATION)


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


def ledgers_problem(error: NotFoundError | UnauthorizedError) -> str:
    """What a capacity-aware cycle says when it cannot list the ledgers: the hub does not serve
    the kind (its CRD is not installed), or we may not read it."""
    kind = f"{CapacityLedger.PLURAL}.{CapacityLedger.GROUP}"
    if isinstance(error, NotFoundError):
        return (
            f"the hub does not serve {kind} (its CRD is not installed: kubectl apply -f "
            f"deploy/crds/{CapacityLedger.GROUP}_{CapacityLedger.PLURAL}.yaml), so no room can "
            f"be reserved for {names.REQUESTS_ANNOTATION}"
        )
    return (
        f"the scheduler may not list {kind} ({error}): grant it in its ClusterRole "
        f"(deploy/base/rbac.yaml), so room can be reserved for {names.REQUESTS_ANNOTATION}"
    )


def capacity_input(
    text: str,
    ledgers: Ledgers,
    bindings: Iterable[ClusterResourceBinding],
    placement: str | None = None,
) -> CapacityInput:
    """The cycle's capacity view: the placement's requests and what reservations and
    nominations hold on each cluster, leaving out those of the placement's own active bindings
    and the room nominated for `placement` itself (scheduler.room.capacity's
    `allocated_beside`)."""
    return CapacityInput(
        requests=text, allocated=allocated_beside(ledgers.by_cluster, bindings, placement)
    )


Reserved = Literal["made", "confirmed", "unchanged", "beyond_room"]
"""What `reserve` did: made (or resized) a reservation that fits; re-stamped one that was
right; found it right and wrote nothing (`restamp=False`); or, for a binding that already
exists, wrote it although the cluster has no room for it (`must_fit=False`: the binding consumes
the room whether we count it or not, so the ledger says so and nothing more goes there)."""


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
    must_fit: bool = True,
) -> Reserved:
    """Make the ledger of `cluster` hold `requests` for `binding` of `placement`: add the
    reservation, or resize one that holds other amounts (the placement's requests changed), or,
    when it is right already, re-stamp it with `now()` (unless `restamp` is False). Compare-and-
    swap on the ledger, re-read and re-checked on every conflict.

    `must_fit`: the binding is about to be created or revived, so the reservation must fit
    beside the others' or nothing is written. False for a binding that exists and stays (a
    placement that declared its requests after it was scheduled, a ledger that was lost): its
    reservation is written whatever the room, and "beyond_room" says it did not fit.

    Raises:
        NoRoomError: `must_fit` and the cluster's allocatable cannot take the requests beside
            the others' reservations.
        ConflictError: CAS_ATTEMPTS conflicts in a row (the activity is retried).
    """
    entry = {r: format_amount(a) for r, a in requests.items()}
    for _ in range(CAS_ATTEMPTS):
        ledger = _get(client, cluster)
        existing = ledger.spec.reservations if ledger is not None else {}
        mine = existing.get(binding)
        right = mine is not None and holds(mine, placement, requests)
        if right and not restamp:
            return "unchanged"
        outcome: Reserved = "confirmed" if right else "made"
        if not right:
            # Room nominated for another placement's preemption is not ours to take; our own
            # nomination is the room this binding takes (docs/priority.md, "Preemption").
            others = (
                held(ledger, without=[binding], nominee=placement) if ledger is not None else {}
            )
            short = shortfalls(requests, ClusterCapacity.of(allocatable, others))
            if short and must_fit:
                raise NoRoomError(
                    f"cluster {cluster!r} has no room for binding {binding!r} any more: "
                    f"{no_room_reason(short)}"
                )
            if short:
                outcome = "beyond_room"
        reservation = Reservation(placement=placement, requests=entry, reserved_at=now())
        nominated = ledger.spec.nominations if ledger is not None else {}
        if must_fit and placement in nominated:
            # The preemptor's binding takes the room nominated for it: one write, so the room
            # is never counted twice nor free in between.
            nominated = {k: n for k, n in nominated.items() if k != placement}
        try:
            _write(client, cluster, ledger, {**existing, binding: reservation}, nominated)
        except (ConflictError, AlreadyExistsError):
            continue
        return outcome
    raise _contended(cluster, "reserving")


def release(
    client: HubClient,
    cluster: str,
    bindings: Iterable[str],
    *,
    judged: Mapping[str, Reservation] | None = None,
) -> int:
    """Drop the reservations of `bindings` on `cluster`; how many were there.

    `judged`: the reservations as a sweep judged them stale, by binding key. Then a reservation
    is dropped only if it is still exactly that one: a cycle that made it again meanwhile (a
    revived binding, a kept one confirmed) re-stamped it, and keeps it. Compare-and-swap on the
    ledger, re-read and re-checked on every conflict."""
    gone = set(bindings)
    for _ in range(CAS_ATTEMPTS):
        ledger = _get(client, cluster)
        if ledger is None:
            return 0
        current = ledger.spec.reservations
        drop = {
            key
            for key in gone
            if key in current and (judged is None or current[key] == judged.get(key))
        }
        if not drop:
            return 0
        kept = {k: v for k, v in current.items() if k not in drop}
        try:
            _write(client, cluster, ledger, kept)
        except (ConflictError, NotFoundError):
            continue
        return len(drop)
    raise _contended(cluster, "releasing")


def stale_reservations(
    ledgers: Ledgers,
    keep: Callable[[str, str, Reservation], bool],
    now: datetime,
    *,
    grace: timedelta = SWEEP_GRACE,
) -> dict[str, dict[str, Reservation]]:
    """Cluster -> {binding key: reservation} that may go: older than `grace` and not kept by
    `keep(cluster, key, reservation)`. The reservations are returned as judged, for `release`
    to drop only those still unchanged."""
    out: dict[str, dict[str, Reservation]] = {}
    for cluster, ledger in ledgers.by_cluster.items():
        for key, reservation in ledger.spec.reservations.items():
            if now - reservation.reserved_at < grace or keep(cluster, key, reservation):
                continue
            out.setdefault(cluster, {})[key] = reservation
    return out


def _sweep(
    client: HubClient,
    ledgers: Ledgers,
    keep: Callable[[str, str, Reservation], bool],
    now: datetime,
) -> int:
    stale = stale_reservations(ledgers, keep, now)
    return sum(release(client, cluster, judged, judged=judged) for cluster, judged in stale.items())


def _active_keys(bindings: Iterable[ClusterResourceBinding]) -> set[tuple[str, str]]:
    return {(b.spec.target_cluster, binding_key(b)) for b in bindings if is_active(b)}


@dataclass
class CapacityWrites:
    """A capacity-aware cycle's ledger writes around its binding writes
    (`activities.bindings.apply_binding_plan` calls them in this order): make sure every active
    binding the cycle keeps has its reservation, reserve before a create or a revive, release
    after an unschedule or a finalizer removal."""

    client: HubClient
    placement: str
    requests: Mapping[str, Fraction]
    allocatable: Mapping[str, Mapping[str, str]]
    """Cluster -> its reported allocatable, as the cycle read it."""
    bindings: Mapping[str, ClusterResourceBinding]
    """The placement's bindings as the cycle read them, by name."""
    ledgers: Ledgers
    """The ledgers as the cycle read them: a kept binding whose reservation they show right
    costs no request."""
    now: Callable[[], datetime]
    reserved: int = 0
    released: int = 0
    beyond_room: list[str] = field(default_factory=list)
    """Clusters where a kept binding's reservation was written although it did not fit."""

    def keep(self, plan: BindingPlan) -> None:
        """Every active binding the plan leaves as it is gets its reservation, at the
        placement's current requests: one made before the placement declared them, or whose
        ledger was lost, or that holds amounts the placement no longer asks for. It exists, so
        it is written whatever the room (and reported when beyond it)."""
        writes = (*plan.remove_finalizers, *plan.unschedule_dangling, *plan.patch, *plan.unschedule)
        touched = {p.name for p in writes}
        for name, binding in self.bindings.items():
            if name not in touched and is_active(binding):
                self._keep(binding)

    def before_create(self, binding: ClusterResourceBinding) -> None:
        self._count(self._reserve(binding.spec.target_cluster, binding_key(binding)))

    def before_patch(self, name: str) -> None:
        """A revived binding (Unscheduled until now) must fit, and re-stamps its reservation so
        no sweep takes it meanwhile; a re-pointed one is active already: it is kept."""
        current = self.bindings.get(name)
        if current is None:
            return
        if current.spec.state == names.STATE_UNSCHEDULED:
            self._count(self._reserve(current.spec.target_cluster, binding_key(current)))
        else:
            self._keep(current)

    def after_unschedule(self, name: str) -> None:
        current = self.bindings.get(name)
        if current is not None:
            self.released += release(
                self.client, current.spec.target_cluster, [binding_key(current)]
            )

    def _keep(self, binding: ClusterResourceBinding) -> None:
        cluster, key = binding.spec.target_cluster, binding_key(binding)
        ledger = self.ledgers.by_cluster.get(cluster)
        seen = ledger.spec.reservations.get(key) if ledger is not None else None
        if seen is not None and holds(seen, self.placement, self.requests):
            return
        outcome = self._reserve(cluster, key, restamp=False, must_fit=False)
        self._count(outcome)
        if outcome == "beyond_room":
            self.beyond_room.append(cluster)

    def _reserve(
        self, cluster: str, key: str, *, restamp: bool = True, must_fit: bool = True
    ) -> Reserved:
        return reserve(
            self.client,
            cluster,
            self.allocatable.get(cluster, {}),
            key,
            self.placement,
            self.requests,
            self.now,
            restamp=restamp,
            must_fit=must_fit,
        )

    def _count(self, outcome: Reserved) -> None:
        if outcome in ("made", "beyond_room"):
            self.reserved += 1


def capacity_writes(
    client: HubClient,
    placement: str,
    text: str,
    fleet_clusters: Iterable[MemberCluster],
    bindings: Iterable[ClusterResourceBinding],
    ledgers: Ledgers,
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
        ledgers=ledgers,
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
    released = _sweep(
        client,
        ledgers,
        lambda cluster, key, r: r.placement != placement or (cluster, key) in active,
        now,
    )
    return released + sweep_nominations(client, ledgers, now, only=placement)


def release_placement(client: HubClient, placement: str) -> int:
    """Release every reservation of `placement` (deleted: its bindings are being deleted), and
    drop the room nominated for it."""
    released = 0
    ledgers = Ledgers.read(client, tolerant=True)
    for cluster, ledger in ledgers.by_cluster.items():
        keys = [k for k, r in ledger.spec.reservations.items() if r.placement == placement]
        if keys:
            released += release(client, cluster, keys)
    nominated = [
        c for c, ledger in ledgers.by_cluster.items() if placement in ledger.spec.nominations
    ]
    drop_nominations(client, placement, nominated)
    return released


def sweep_ledgers(
    client: HubClient,
    capacity_aware: Iterable[str],
    bindings: Iterable[ClusterResourceBinding],
    now: datetime,
    *,
    namespaced: bool = True,
) -> int:
    """The fleet-wide sweep (the reconcile runs it): release every reservation older than
    SWEEP_GRACE whose binding is not active on its cluster, or whose placement is gone or no
    longer capacity-aware (it dropped the annotation: its bindings no longer count). What a
    placement's own cycles and cleanup cannot see: placements that vanished unseen, or that
    stopped being capacity-aware. How many were released.

    `namespaced`: the ResourcePlacements and their ResourceBindings were read. When they were
    not (`--no-resource-placements`, a hub that does not serve or let us read them), their
    reservations (keys `<namespace>/<name>`) are left alone: not reading a binding does not
    make it gone."""
    ledgers = Ledgers.read(client, tolerant=True)
    aware = set(capacity_aware)
    active = _active_keys(bindings)

    def keep(cluster: str, key: str, reservation: Reservation) -> bool:
        if not namespaced and "/" in key:
            return True
        if reservation.placement in aware and (cluster, key) in active:
            return True
        # Judged on what the caller read earlier: read the placement and the binding again
        # (a stale one is rare), so a placement that declared its requests again, or a binding
        # revived, since then keeps its reservation.
        return _still_needed(client, cluster, key, reservation)

    return _sweep(client, ledgers, keep, now)


def sweep_nominations_of_fleet(
    client: HubClient,
    capacity_aware: Iterable[str],
    now: datetime,
    *,
    namespaced: bool = True,
) -> int:
    """The reconcile's sweep of nominations (docs/priority.md, "Preemption"): drop those older
    than NOMINATION_GRACE, and those whose placement is gone, being deleted or no longer
    capacity-aware (read again before it is judged so). How many were dropped. `namespaced`:
    as `sweep_ledgers`'s: ResourcePlacements' nominations are judged only by their age when
    ResourcePlacements were not read."""
    aware = set(capacity_aware)

    def wanted(key: str) -> bool:
        if (not namespaced and "/" in key) or key in aware:
            return True
        namespace, name = split_key(key)
        try:
            placement = client.get(kinds_for(namespace).placement, name, namespace=namespace)
        except NotFoundError:
            return False
        return requests_of(placement) is not None and not placement.metadata.deleting

    ledgers = Ledgers.read(client, tolerant=True)
    return sweep_nominations(client, ledgers, now, wanted=wanted)


def _still_needed(client: HubClient, cluster: str, key: str, reservation: Reservation) -> bool:
    placement_namespace, placement_name = split_key(reservation.placement)
    binding_namespace, binding_name = split_key(key)
    try:
        placement = client.get(
            kinds_for(placement_namespace).placement, placement_name, namespace=placement_namespace
        )
        binding = client.get(
            kinds_for(binding_namespace).binding, binding_name, namespace=binding_namespace
        )
    except NotFoundError:
        return False
    return (
        requests_of(placement) is not None
        and binding.spec.target_cluster == cluster
        and is_active(binding)
    )


def nominate(
    client: HubClient,
    cluster: str,
    placement: str,
    nomination: Nomination,
    allocatable: Mapping[str, str],
) -> bool:
    """Add the nomination to the cluster's ledger if the plan still holds there: each victim
    still holds its reservation, and with them gone one binding of the preemptor fits beside
    everything else (other nominations included). Compare-and-swap, re-read on conflict. True
    when the ledger holds it (an earlier attempt's counts)."""
    requests = _amounts(nomination.requests)
    for _ in range(CAS_ATTEMPTS):
        try:
            ledger = client.get(CapacityLedger, cluster)
        except NotFoundError:
            return False
        if placement in ledger.spec.nominations:
            return True
        reservations = ledger.spec.reservations
        gone = [v.binding for v in nomination.victims]
        if any(
            v.binding not in reservations or reservations[v.binding].placement != v.placement
            for v in nomination.victims
        ):
            return False
        taken = held(ledger, without=gone, nominee=placement)
        if shortfalls(requests, ClusterCapacity.of(allocatable, taken)):
            return False
        spec = CapacityLedgerSpec(
            reservations=dict(reservations),
            nominations={**ledger.spec.nominations, placement: nomination},
        )
        try:
            client.update(ledger.model_copy(update={"spec": spec}))
        except ConflictError:
            continue
        return True
    raise _contended(cluster, "nominating")


def drop_nominations(
    client: HubClient,
    placement: str,
    clusters: Iterable[str],
    *,
    judged: Mapping[str, Nomination] | None = None,
) -> int:
    """Drop the placement's nominations on these clusters; how many were there. `judged`:
    cluster -> the nomination as a sweep judged it stale, dropped only if it is still that one."""
    dropped = 0
    for cluster in sorted(set(clusters)):
        for _ in range(CAS_ATTEMPTS):
            try:
                ledger = client.get(CapacityLedger, cluster)
            except NotFoundError:
                break
            current = ledger.spec.nominations.get(placement)
            if current is None or (judged is not None and judged.get(cluster) != current):
                break
            spec = CapacityLedgerSpec(
                reservations=dict(ledger.spec.reservations),
                nominations={k: n for k, n in ledger.spec.nominations.items() if k != placement},
            )
            try:
                client.update(ledger.model_copy(update={"spec": spec}))
            except (ConflictError, NotFoundError):
                continue
            dropped += 1
            break
    return dropped


def stale_nominations(
    ledgers: Ledgers,
    now: datetime,
    *,
    only: str | None = None,
    wanted: Callable[[str], bool] = lambda key: True,
) -> dict[str, dict[str, Nomination]]:
    """Placement -> {cluster: nomination} that may go: older than NOMINATION_GRACE, or whose
    placement is not `wanted` (gone, no longer capacity-aware); `only`: this placement's."""
    out: dict[str, dict[str, Nomination]] = {}
    for cluster, ledger in ledgers.by_cluster.items():
        for key, nomination in ledger.spec.nominations.items():
            if only is not None and key != only:
                continue
            if now - nomination.nominated_at < NOMINATION_GRACE and wanted(key):
                continue
            out.setdefault(key, {})[cluster] = nomination
    return out


def sweep_nominations(
    client: HubClient,
    ledgers: Ledgers,
    now: datetime,
    *,
    only: str | None = None,
    wanted: Callable[[str], bool] = lambda key: True,
) -> int:
    """Drop every nomination `stale_nominations` finds, if it is still the one judged."""
    stale = stale_nominations(ledgers, now, only=only, wanted=wanted)
    return sum(
        drop_nominations(client, key, judged, judged=judged) for key, judged in stale.items()
    )


def _amounts(requests: Mapping[str, str]) -> dict[str, Fraction]:
    return {r: parse_quantity(q) for r, q in requests.items()}


# --- helpers -----------------------------------------------------------------------------------


def _contended(cluster: str, doing: str) -> ConflictError:
    """What a writer raises after CAS_ATTEMPTS conflicts in a row (the activity is retried)."""
    return ConflictError(
        status=409,
        reason="Conflict",
        message=f"ledger {cluster!r}: {CAS_ATTEMPTS} conflicting writers in a row while {doing}",
    )


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
    nominations: Mapping[str, Nomination] | None = None,
) -> None:
    """Write the ledger's reservations (and nominations; None: as they are), conditioned on the
    resourceVersion it was read at."""
    if nominations is None:
        nominations = ledger.spec.nominations if ledger is not None else {}
    spec = CapacityLedgerSpec(reservations=reservations, nominations=dict(nominations))
    if ledger is None:
        client.create(CapacityLedger(metadata=ObjectMeta(name=cluster), spec=spec))
    else:
        client.update(ledger.model_copy(update={"spec": spec}))
