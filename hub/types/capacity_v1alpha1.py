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

__all__ = ["CapacityLedger", "CapacityLedgerSpec", "Reservation"]


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


class CapacityLedgerSpec(FleetModel):
    reservations: dict[str, Reservation] = Field(default_factory=dict)
    """Binding key (`<name>`, or `<namespace>/<name>` for a ResourceBinding) -> reservation."""


class CapacityLedger(HubObject):
    GROUP: ClassVar[str] = names.OWN_GROUP
    VERSION: ClassVar[str] = names.OWN_VERSION
    KIND: ClassVar[str] = "CapacityLedger"
    PLURAL: ClassVar[str] = "capacityledgers"
    SINGULAR: ClassVar[str] = "capacityledger"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ledger",)
    CATEGORIES: ClassVar[tuple[str, ...]] = ("fleet-scheduler",)

    spec: CapacityLedgerSpec = Field(default_factory=CapacityLedgerSpec)
