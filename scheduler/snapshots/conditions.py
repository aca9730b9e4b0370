"""The placement's Scheduled condition, derived from its latest policy snapshot as KubeFleet's
placement controller derives it (kubefleet-rules 2.7, 9). Pure."""

from __future__ import annotations

from datetime import datetime

from hub import names
from hub.types import (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
)
from scheduler.snapshots.naming import placement_generation

# --- the placement's Scheduled condition -----------------------------------------------------


def placement_scheduled_condition(
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    now: datetime,
) -> Condition:
    """The placement's `ClusterResourcePlacementScheduled` condition (`ResourcePlacementScheduled`
    on a ResourcePlacement), derived from its latest snapshot (kubefleet-rules 2.7, 9).

    Unknown/SchedulePending until the scheduler has reported on this snapshot generation and
    this placement generation; then the snapshot's `Scheduled` status, reason and message.
    `lastTransitionTime` is the placement's existing one unless the status changes (then `now`),
    as Kubernetes' meta.SetStatusCondition does."""
    generation = placement_generation(placement)
    reported = snapshot.status.condition(names.SCHEDULED_CONDITION)
    pending = (
        reported is None
        or (reported.observed_generation or 0) < (snapshot.metadata.generation or 0)
        or (snapshot.status.observed_crp_generation or 0) < generation
        or reported.status == names.UNKNOWN
    )
    if pending or reported is None:
        status, reason, message = (
            names.UNKNOWN,
            names.SCHEDULE_PENDING_REASON,
            names.SCHEDULE_PENDING_MESSAGE,
        )
    else:
        status, reason, message = reported.status, reported.reason, reported.message
    previous = placement.status.condition(placement.SCHEDULED_CONDITION)
    transition = now
    if previous is not None and previous.status == status and previous.last_transition_time:
        transition = previous.last_transition_time
    return Condition(
        type=placement.SCHEDULED_CONDITION,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        last_transition_time=transition,
    )
