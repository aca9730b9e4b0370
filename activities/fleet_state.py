"""One reading of the hub for the invariants (scheduler.invariants): every kind they read, listed
at once, for `fleet-scheduler check` and the reconcile alike.

Kinds a hub may not serve or may not let us read are tolerated, each in its own way: no
CapacityLedgers reads as `ledgers=None` (every capacity-aware binding then lacks its
reservation, which is the truth); no disruption budgets as none; no ResourcePlacements or
ResourceBindings as `namespaced=False`, so nothing is concluded about them."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from activities.decisions import DecisionSettings
from hub import names
from hub.client import HubClient
from hub.errors import NotFoundError, UnauthorizedError
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    PlacementDecision,
    ResourceBinding,
    ResourcePlacement,
    SchedulingPolicySnapshot,
)
from hub.types.meta import HubObject
from scheduler.invariants import FleetState

__all__ = ["read_fleet_state"]

log = logging.getLogger("fleet_scheduler.invariants")

T = TypeVar("T", bound=HubObject)

LATEST: dict[str, str] = {names.IS_LATEST_SNAPSHOT_LABEL: "true"}


# The kinds the invariants cannot do without (`_listed`).
REQUIRED_KINDS: tuple[type[HubObject], ...] = (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    ClusterResourceBinding,
    MemberCluster,
)
# The kinds a hub may not serve or let us read (see the module doc).
OPTIONAL_KINDS: tuple[type[HubObject], ...] = (
    CapacityLedger,
    PlacementDecision,
    ClusterResourcePlacementDisruptionBudget,
    ResourcePlacement,
    SchedulingPolicySnapshot,
    ResourceBinding,
)


def _served(
    hub: HubClient, kind: type[T], selector: dict[str, str] | None = None, *, strict: bool = False
) -> list[T] | None:
    """Every object of `kind`; None when the hub does not serve it (404: no CRD) or does not let
    us read it (403: a ClusterRole from before it). `strict`: a 401 or 403 is raised, naming the
    kind: the objects may be there, unread, and what the invariants say without them is no
    verdict (`check`)."""
    try:
        return list(hub.list(kind, selector).items)
    except UnauthorizedError as exc:
        if strict:
            raise UnauthorizedError(
                status=exc.status,
                reason=exc.reason,
                message=f"may not list {kind.PLURAL}.{kind.GROUP} ({exc.message})",
            ) from exc
        log.info("invariants: %s not read: %s", kind.PLURAL, exc)
        return None
    except NotFoundError as exc:
        log.info("invariants: %s not read: %s", kind.PLURAL, exc)
        return None


def _listed(hub: HubClient, kind: type[T], selector: dict[str, str] | None = None) -> list[T]:
    """Every object of a kind the invariants cannot do without; a hub that does not serve it
    says which (its 404 names no kind)."""
    try:
        return list(hub.list(kind, selector).items)
    except NotFoundError as exc:
        raise NotFoundError(
            status=exc.status,
            reason=exc.reason,
            message=f"the hub does not serve {kind.PLURAL}.{kind.GROUP} ({exc.message})",
        ) from exc


def read_fleet_state(
    hub: HubClient,
    *,
    resource_placements: bool = True,
    strict: bool = False,
    decisions: DecisionSettings | None = None,
) -> FleetState:
    """Everything the invariants read, listed in parallel (Temporal's workflows aside: the
    caller adds them). `resource_placements` False: ResourcePlacements are not read
    (`--no-resource-placements`). `strict` (`check`): a kind the hub serves but does not let
    us read raises (see `_served`); only a kind it does not serve is tolerated. `decisions`:
    where PlacementDecisions are published; None, they are not read or checked."""
    served = functools.partial(_served, hub, strict=strict)

    reads: dict[str, Callable[[], Any]] = {
        "placements": lambda: _listed(hub, ClusterResourcePlacement),
        "snapshots": lambda: _listed(hub, ClusterSchedulingPolicySnapshot, LATEST),
        "bindings": lambda: _listed(hub, ClusterResourceBinding),
        "clusters": lambda: _listed(hub, MemberCluster),
        "ledgers": lambda: served(CapacityLedger),
        "budgets": lambda: served(ClusterResourcePlacementDisruptionBudget) or [],
    }
    if resource_placements:
        reads["rps"] = lambda: served(ResourcePlacement)
        reads["rp_snapshots"] = lambda: served(SchedulingPolicySnapshot, LATEST)
        reads["rbs"] = lambda: served(ResourceBinding)
    if decisions is not None:
        reads["decisions"] = lambda: served(PlacementDecision)
    with ThreadPoolExecutor(max_workers=len(reads), thread_name_prefix="fleet-state") as pool:
        futures = {name: pool.submit(read) for name, read in reads.items()}
        got = {name: future.result() for name, future in futures.items()}
    rps, rbs = got.get("rps"), got.get("rbs")
    namespaced = rps is not None and rbs is not None
    return FleetState(
        placements=_joined(got["placements"], rps if namespaced else None),
        snapshots=_joined(got["snapshots"], got.get("rp_snapshots") if namespaced else None),
        bindings=_joined(got["bindings"], rbs if namespaced else None),
        clusters=got["clusters"],
        ledgers=got["ledgers"],
        budgets=got["budgets"],
        namespaced=namespaced,
        decisions=got.get("decisions"),
        decisions_namespace=(decisions or DecisionSettings()).namespace,
        profile_namespace=(decisions or DecisionSettings()).profile_namespace,
    )


def _joined(first: Sequence[Any], second: Sequence[Any] | None) -> list[Any]:
    return [*first, *(second or [])]
