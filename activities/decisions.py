"""A placement's PlacementDecisions (KEP-5313) on the hub: published by its turn, in step with
the bindings that turn leaves, and withdrawn by its cleanup (docs/decisions.md).

What the slices say is `scheduler.bindings.published`'s; this module reads the slices there are,
writes only the ones that differ, and deletes the ones no longer needed. Safe to repeat: a
retried turn finds the slices an earlier attempt wrote and leaves them.

A hub that cannot take them (no PlacementDecision CRD, the namespace missing, RBAC from before
them) costs the turn nothing but a warning, said once per process and reason: the decisions are
for other readers, and the bindings, which KubeFleet reads, are already written."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, NotFoundError, UnauthorizedError
from hub.types import PlacementDecision
from scheduler.bindings.published import DecisionTarget, desired_slices, same_slice

__all__ = ["DecisionSettings", "publish", "publishing", "target_for", "withdraw"]

log = logging.getLogger("fleet_scheduler.decisions")


@dataclass(frozen=True)
class DecisionSettings:
    """Where decisions go: a ClusterResourcePlacement's slices in `namespace` (a
    ResourcePlacement's in its own), referencing ClusterProfiles in `profile_namespace`.

    `publish` False (turned off): turns write none, but a placement's cleanup still deletes
    any it finds, quietly, so that slices published while they were on never outlive their
    placement and keep sending its workloads somewhere."""

    namespace: str = names.FLEET_SYSTEM_NAMESPACE
    profile_namespace: str = names.FLEET_SYSTEM_NAMESPACE
    publish: bool = True


def publishing(settings: DecisionSettings | None) -> DecisionSettings | None:
    """`settings` when decisions are published, else None (nothing to check)."""
    return settings if settings is not None and settings.publish else None


def target_for(settings: DecisionSettings, placement: str, namespace: str | None) -> DecisionTarget:
    return DecisionTarget(
        placement=placement,
        namespaced=namespace is not None,
        namespace=namespace or settings.namespace,
        profile_namespace=settings.profile_namespace,
    )


_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _unavailable(target: DecisionTarget, exc: NotFoundError | UnauthorizedError) -> None:
    """Say once per process why decisions cannot be written in this namespace."""
    reason = "forbidden" if isinstance(exc, UnauthorizedError) else "not found"
    with _warned_lock:
        if (target.namespace, reason) in _warned:
            return
        _warned.add((target.namespace, reason))
    log.warning(
        "PlacementDecisions are not written in namespace %s (%s: %s): install the "
        "placementdecisions.multicluster.x-k8s.io CRD, create the namespace and grant the "
        "scheduler write access, or turn them off with --placement-decisions=off "
        "(docs/decisions.md); bindings are written as always",
        target.namespace,
        reason,
        exc,
    )


def publish(client: HubClient, target: DecisionTarget, active: dict[str, str]) -> int:
    """Make the placement's slices say `active` (cluster -> reason); the writes made."""
    try:
        return _publish(client, target, active)
    except (NotFoundError, UnauthorizedError) as exc:
        _unavailable(target, exc)
        return 0


def _publish(client: HubClient, target: DecisionTarget, active: dict[str, str]) -> int:
    existing = {
        d.name: d
        for d in client.list(PlacementDecision, target.selector, namespace=target.namespace)
    }
    writes = 0
    for wanted in desired_slices(target, active):
        current = existing.pop(wanted.name, None)
        if current is None:
            try:
                client.create(wanted)
            except AlreadyExistsError:
                # Another attempt of this turn made it meanwhile: replace what it holds.
                current = client.get(PlacementDecision, wanted.name, namespace=target.namespace)
            else:
                writes += 1
                continue
        if same_slice(current, wanted):
            continue
        labels = {**current.metadata.labels, **wanted.metadata.labels}
        metadata = current.metadata.model_copy(update={"labels": labels})
        try:
            client.update(wanted.model_copy(update={"metadata": metadata}))
        except NotFoundError:
            # Deleted since the list (by hand): made again. A second miss is no CRD or no
            # namespace after all, and `publish` says so.
            client.create(wanted)
        writes += 1
    for leftover in existing.values():
        # A slice past the last one needed: the placement is bound to fewer clusters now.
        try:
            client.delete(
                PlacementDecision,
                leftover.name,
                namespace=target.namespace,
                resource_version=leftover.metadata.resource_version,
            )
        except NotFoundError:
            continue
        writes += 1
    return writes


def withdraw(client: HubClient, target: DecisionTarget, *, quiet: bool = False) -> int:
    """Delete every slice of the placement (its cleanup); how many there were. `quiet`: a hub
    that serves no PlacementDecisions, or does not let us see them, is no news (decisions off,
    beside KubeFleet)."""
    try:
        found = client.list(PlacementDecision, target.selector, namespace=target.namespace)
        if len(found):
            client.delete_collection(
                PlacementDecision, target.selector, namespace=target.namespace
            )
        return len(found)
    except (NotFoundError, UnauthorizedError) as exc:
        if not quiet:
            _unavailable(target, exc)
        return 0
