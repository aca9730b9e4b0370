"""Standalone mode's policy snapshotter: apply `scheduler.snapshots.plan_snapshot_sync`.

The decisions (refresh in place, demote, trim history, create `<name>-<index>`) are made by the
pure planner, exactly as KubeFleet's placement controller makes them (kubefleet-rules 2.2-2.5); this
module does the reads and writes, in the planner's order. Every write is safe to repeat: the
label/annotation update carries the resourceVersion read (a race is a Conflict, retried on a
fresh read), deletes ignore NotFound, and a create that meets AlreadyExists adopts the snapshot
when it belongs to this placement (an earlier attempt made it).

Problems that no retry can fix (a snapshot with a broken label or annotation, a placement the
planner cannot encode, a snapshot the hub refuses) leave as `SnapshotError`, whose message names
the object and the fix; the activity writes it into the placement's Scheduled condition."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final

from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, InvalidObjectError, NotFoundError
from hub.kinds import kinds_for
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot
from scheduler.snapshots import SnapshotError, SnapshotUpdate, UpdatePurpose, plan_snapshot_sync

__all__ = [
    "SnapshotRefusedError",
    "SnapshotSync",
    "SnapshotTakenError",
    "sync_policy_snapshots",
]

_PAST: Final[dict[UpdatePurpose, str]] = {"refresh": "refreshed", "demote": "demoted"}


class SnapshotRefusedError(SnapshotError):
    """The hub refused a policy snapshot derived from the placement (HTTP 422)."""


class SnapshotTakenError(SnapshotError):
    """The name of the snapshot to create is held by another placement's snapshot."""


@dataclass(frozen=True)
class SnapshotSync:
    """What a sync did, and the placement's latest snapshots when the sync already knows them.

    `latest` saves the caller a second list: it holds the objects labelled latest after the
    sync (zero, one, or, on a hub in a bad state, several) when no write of ours could have
    changed them since they were read, or the snapshot we just created. None: list again."""

    action: str
    latest: tuple[ClusterSchedulingPolicySnapshot, ...] | None = None


def sync_policy_snapshots(client: HubClient, placement: ClusterResourcePlacement) -> SnapshotSync:
    """Make the placement's latest policy snapshot match its policy; say what was done.

    Raises:
        SnapshotError: see the module docstring; nothing more should be tried until the named
            object changes.
        HubError: transient and concurrency failures, for the caller to map.
    """
    namespace = placement.metadata.namespace
    kind = kinds_for(namespace).snapshot
    listing = client.list(kind, {names.PARENT_PLACEMENT_LABEL: placement.name}, namespace=namespace)
    plan = plan_snapshot_sync(placement, listing.items)
    done: list[str] = []
    if plan.update is not None:
        _update(client, kind, plan.update, namespace)
        done.append(f"{_PAST[plan.update.purpose]} {plan.update.name}")
    for name in plan.delete:
        with suppress(NotFoundError):  # already gone: what we wanted
            client.delete(kind, name, namespace=namespace)
        done.append(f"deleted {name}")
    if plan.create is not None:
        said, created = _create(client, placement, plan.create)
        done.append(said)
        # The plan's update (if any) took the latest label off the previous snapshot.
        latest = (created,) if created is not None else None
        return SnapshotSync(", ".join(done), latest)
    if done:
        return SnapshotSync(", ".join(done))
    unchanged = tuple(
        s for s in listing.items if s.placement_name == placement.name and s.is_latest
    )
    return SnapshotSync("unchanged", unchanged)


def _update(
    client: HubClient,
    kind: type[ClusterSchedulingPolicySnapshot],
    update: SnapshotUpdate,
    namespace: str | None,
) -> None:
    metadata: dict[str, Any] = {}
    if update.labels:
        metadata["labels"] = dict(update.labels)
    if update.annotations:
        metadata["annotations"] = dict(update.annotations)
    try:
        client.patch_unread(  # the patched snapshot is not read back: nothing uses it
            kind,
            update.name,
            {"metadata": metadata},
            resource_version=update.resource_version,
            namespace=namespace,
        )
    except InvalidObjectError as exc:
        raise SnapshotRefusedError(
            f"the hub refused to update policy snapshot {update.name!r}: {exc}"
        ) from exc


def _create(
    client: HubClient,
    placement: ClusterResourcePlacement,
    new: ClusterSchedulingPolicySnapshot,
) -> tuple[str, ClusterSchedulingPolicySnapshot | None]:
    """Create the snapshot; say so, with the object when we made it (None when adopted)."""
    try:
        created = client.create(new)
    except InvalidObjectError as exc:
        raise SnapshotRefusedError(
            f"the hub refused policy snapshot {new.name!r} for placement {placement.name!r}: "
            f"{exc}; fix the placement"
        ) from exc
    except AlreadyExistsError:
        existing = client.get(type(new), new.name, namespace=new.metadata.namespace)
        if existing.placement_name != placement.name:
            raise SnapshotTakenError(
                f"policy snapshot {new.name!r} already exists and belongs to placement "
                f"{existing.placement_name!r}, not {placement.name!r}; delete or rename it"
            ) from None
        return f"adopted {new.name}", None
    return f"created {new.name}", created
