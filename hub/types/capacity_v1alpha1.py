"""CapacityLedger (fleet-scheduler.io/v1alpha1): one member cluster's capacity reservations.

Our own kind, not KubeFleet's (docs/capacity.md, "the ledger"). One cluster-scoped object per
member cluster, named after it, lists the reservations of capacity-aware placements' bindings
on that cluster. Writers change it only with a compare-and-swap on its resourceVersion, so the
hub itself serialises reservations on one cluster, whichever process makes them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from pydantic import Field, field_validator

from hub import names
from hub.types.meta import FleetModel, HubObject

__all__ = ["CapacityLedger", "CapacityLedgerSpec", "NominatedVictim", "Nomination", "Reservation"]


class Reservation(FleetModel):
    """Room held on the cluster for one binding: made before the binding is created (or
    revived), released after it is unscheduled or gone."""

    placement: str = Field(max_length=317)
    """The placement's key: its name, or `<namespace>/<name>` for a ResourcePlacement."""
    requests: dict[str, str] = Field(default_factory=dict)
    """What the binding consumes, as quantities (the placement's requests when reserved)."""
    reserved_at: datetime
    """When the reservation was last made or confirmed; sweeps leave younger ones alone."""

    @field_validator("reserved_at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        # A hand-written ledger may say "2026-11-27T10:00:00" without a zone; the API server
        # stores what it is given. Read as UTC (as Kubernetes writes times), it compares with
        # the sweeps' clock instead of failing every cycle and reconcile that reads it.
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class NominatedVictim(FleetModel):
    """A binding a preemption takes this cluster's room from (docs/priority.md, "Preemption")."""

    binding: str = Field(max_length=317)
    """Its key, as its reservation is kept: `<name>`, or `<namespace>/<name>`."""
    placement: str = Field(max_length=317)
    priority: int
    """Its placement's priority when it was chosen: always below the nomination's."""


class Nomination(FleetModel):
    """Room held on the cluster for one binding of a placement that preempted here (as
    kube-scheduler's `nominatedNodeName`), from before its victims leave until its binding is
    made: it counts against every other placement's room, so the room freed is the
    preemptor's. Its binding's reservation replaces it in one write; it is dropped when the
    placement goes, no longer needs it, or after the sweeps' grace."""

    priority: int
    requests: dict[str, str] = Field(default_factory=dict)
    """What the preemptor's binding consumes, as quantities."""
    victims: list[NominatedVictim] = Field(default_factory=list, max_length=1000)
    """The bindings chosen to leave (moved if they can go elsewhere, else unscheduled): the
    record that makes a retried preemption finish this one rather than choose again."""
    nominated_at: datetime

    @field_validator("nominated_at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class CapacityLedgerSpec(FleetModel):
    reservations: dict[str, Reservation] = Field(default_factory=dict)
    """Binding key (`<name>`, or `<namespace>/<name>` for a ResourceBinding) -> reservation."""
    nominations: dict[str, Nomination] = Field(default_factory=dict)
    """Placement key -> the room held for it while its victims leave (at most one binding of a
    placement per cluster)."""


class CapacityLedger(HubObject):
    GROUP: ClassVar[str] = names.OWN_GROUP
    VERSION: ClassVar[str] = names.OWN_VERSION
    KIND: ClassVar[str] = "CapacityLedger"
    PLURAL: ClassVar[str] = "capacityledgers"
    SINGULAR: ClassVar[str] = "capacityledger"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ledger",)
    CATEGORIES: ClassVar[tuple[str, ...]] = ("fleet-scheduler",)

    spec: CapacityLedgerSpec = Field(default_factory=CapacityLedgerSpec)
