"""Reports a placement past its scheduling deadline (docs/operations.md, "Scheduling deadlines"):
a Warning Event on the placement, in both modes, and, in standalone mode, the reason of its
Scheduled condition.

The workflow keeps the clock and says, in the turn's request, that the placement is past its
deadline (workflows.deadline); the turn reports it only if its cycle still finds the placement
not fully scheduled. Each miss makes one Event: its name is derived from the placement's uid,
when it became not fully scheduled and the miss's number, so a retried activity, or a turn that
runs again within the same miss, finds the Event already there and writes nothing."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Final

from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError
from hub.types import ClusterResourcePlacement, Condition, Event, ObjectMeta
from hub.types.core_v1 import EventSource, ObjectReference
from scheduler.deadline import DEADLINE_EXCEEDED_REASON
from workflows.models import DeadlineMiss

__all__ = [
    "COMPONENT",
    "EVENT_NAMESPACE",
    "deadline_condition",
    "deadline_event_name",
    "record_deadline_event",
    "unscheduled_since",
]

# Kubernetes puts a cluster-scoped object's events in `default`.
EVENT_NAMESPACE: Final = "default"
COMPONENT: Final = "fleet-scheduler"
WARNING: Final = "Warning"
# The one kind Events are written as (the RBAC scan, tests/unit/deploy, reads it: core/v1 Events
# are no fleet kind, so hub.types.KINDS does not name them).
EVENT_KINDS: Final = (Event,)


def unscheduled_since(placement: ClusterResourcePlacement) -> datetime | None:
    """When the placement's Scheduled condition says it became not fully scheduled: its
    lastTransitionTime while it is not True, the placement's creation while it has none; None
    while it is True."""
    condition = placement.status.condition(placement.SCHEDULED_CONDITION)
    if condition is None:
        return placement.metadata.creation_timestamp
    if condition.status == names.TRUE:
        return None
    return condition.last_transition_time or placement.metadata.creation_timestamp


def deadline_condition(condition: Condition, message: str) -> Condition:
    """The Scheduled condition KubeFleet's rules derive, with our reason and `message` while it
    is not True (its status and lastTransitionTime as derived: nothing else changes)."""
    if condition.status == names.TRUE:
        return condition
    return condition.model_copy(update={"reason": DEADLINE_EXCEEDED_REASON, "message": message})


def deadline_event_name(placement: ClusterResourcePlacement, miss: DeadlineMiss) -> str:
    """The Event of one miss: `<placement>.<hash>`, like the names Kubernetes' recorder gives."""
    identity = f"{placement.metadata.uid}/{miss.since.isoformat()}/{miss.misses}"
    return f"{placement.name}.{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


def record_deadline_event(
    client: HubClient,
    placement: ClusterResourcePlacement,
    miss: DeadlineMiss,
    message: str,
    now: datetime,
) -> bool:
    """Create the miss's Event; False when an earlier attempt already did."""
    namespace = placement.metadata.namespace or EVENT_NAMESPACE
    stamp = now.replace(microsecond=0)
    event = Event(
        metadata=ObjectMeta(name=deadline_event_name(placement, miss), namespace=namespace),
        involved_object=ObjectReference(
            api_version=placement.api_version,
            kind=placement.kind,
            name=placement.name,
            namespace=placement.metadata.namespace,
            uid=placement.metadata.uid,
            resource_version=placement.metadata.resource_version,
        ),
        reason=DEADLINE_EXCEEDED_REASON,
        message=message,
        type=WARNING,
        count=1,
        first_timestamp=stamp,
        last_timestamp=stamp,
        source=EventSource(component=COMPONENT),
        reporting_component=COMPONENT,
    )
    try:
        client.create(event)
    except AlreadyExistsError:
        return False
    return True
