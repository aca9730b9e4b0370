"""The placement's ClusterResourcePlacementScheduled condition, written in standalone mode.

Beside KubeFleet's hub agent its placement controller owns this condition (kubefleet-rules 2.7);
when fleet-scheduler runs standalone the activities write it instead: derived from the latest policy
snapshot after each cycle, or False with the reason below when the placement's snapshots cannot
be kept (so a user sees why nothing is scheduled, instead of a stuck placement).

Other controllers write other conditions of the same list, so the write is a status merge
patch of the whole list with ours upserted, carrying the resourceVersion read: a concurrent
change is a Conflict, answered with one fresh read and a re-derived condition. Nothing is
written when the condition would not change, so a cycle that changes nothing writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

from hub import names
from hub.client import HubClient
from hub.errors import ConflictError
from hub.types import ClusterResourcePlacement, Condition

__all__ = [
    "INVALID_PLACEMENT_MESSAGE",
    "INVALID_PLACEMENT_REASON",
    "SNAPSHOT_SYNC_FAILED_MESSAGE",
    "SNAPSHOT_SYNC_FAILED_REASON",
    "sync_failed_condition",
    "write_scheduled_condition",
]

# Our reason when the placement's policy snapshots cannot be created or updated (KubeFleet's
# placement controller has none: it logs and retries forever).
SNAPSHOT_SYNC_FAILED_REASON: Final = "PolicySnapshotSyncFailed"
SNAPSHOT_SYNC_FAILED_MESSAGE: Final = "cannot keep this placement's policy snapshots: {error}"
# Ours when the placement itself is what KubeFleet's webhook would have refused
# (docs/validation.md): nothing is scheduled until the user changes it.
INVALID_PLACEMENT_REASON: Final = "InvalidPlacement"
INVALID_PLACEMENT_MESSAGE: Final = "invalid placement, not scheduled until it is fixed: {error}"
# Re-reads of the placement after a Conflict before the Conflict is raised to Temporal.
CONFLICT_REREADS: Final = 1

Derive = Callable[[ClusterResourcePlacement], Condition]


def _transition_time(placement: ClusterResourcePlacement, status: str, now: datetime) -> datetime:
    """Kubernetes' SetStatusCondition rule: the time moves only when the status changes."""
    previous = placement.status.condition(placement.SCHEDULED_CONDITION)
    if previous is not None and previous.status == status and previous.last_transition_time:
        return previous.last_transition_time
    return now.replace(microsecond=0)  # metav1.Time has second precision


def sync_failed_condition(
    placement: ClusterResourcePlacement, error: str, now: datetime, *, invalid: bool = False
) -> Condition:
    """False, PolicySnapshotSyncFailed, with `error` saying which object to fix; InvalidPlacement
    when the placement itself is at fault (`invalid`)."""
    reason, message = (
        (INVALID_PLACEMENT_REASON, INVALID_PLACEMENT_MESSAGE)
        if invalid
        else (SNAPSHOT_SYNC_FAILED_REASON, SNAPSHOT_SYNC_FAILED_MESSAGE)
    )
    return Condition(
        type=placement.SCHEDULED_CONDITION,
        status=names.FALSE,
        reason=reason,
        message=message.format(error=error),
        observed_generation=placement.metadata.generation,
        last_transition_time=_transition_time(placement, names.FALSE, now),
    )


def _unchanged(placement: ClusterResourcePlacement, wanted: Condition) -> bool:
    current = placement.status.condition(wanted.type)
    return current is not None and (
        current.status,
        current.reason,
        current.message,
        current.observed_generation,
        current.last_transition_time,
    ) == (
        wanted.status,
        wanted.reason,
        wanted.message,
        wanted.observed_generation,
        wanted.last_transition_time,
    )


def _upserted(conditions: Sequence[Condition], wanted: Condition) -> list[dict[str, Any]]:
    """The condition list with `wanted` in place of its type (kept in position), else appended."""
    out = [wanted if c.type == wanted.type else c for c in conditions]
    if not any(c.type == wanted.type for c in conditions):
        out.append(wanted)
    return [c.to_wire() for c in out]


def write_scheduled_condition(
    client: HubClient, placement: ClusterResourcePlacement, derive: Derive
) -> bool:
    """Write `derive(placement)` as the placement's Scheduled condition; False if unchanged.

    Raises:
        ConflictError: the placement kept changing under us; re-run with fresh reads.
        HubError: any other failure of the read or the write.
    """
    for attempt in range(CONFLICT_REREADS + 1):
        wanted = derive(placement)
        if _unchanged(placement, wanted):
            return False
        try:
            # The patched placement is not read back: nothing here uses it.
            client.patch_unread(
                type(placement),
                placement.name,
                {"status": {"conditions": _upserted(placement.status.conditions, wanted)}},
                resource_version=placement.metadata.resource_version,
                subresource="status",
                namespace=placement.metadata.namespace,
            )
            return True
        except ConflictError:
            if attempt == CONFLICT_REREADS:
                raise
            placement = client.get(
                type(placement), placement.name, namespace=placement.metadata.namespace
            )
    raise AssertionError("unreachable")  # pragma: no cover
