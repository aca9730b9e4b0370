"""Reports a placement past its scheduling deadline (docs/operations.md, "Scheduling deadlines"):
a Warning Event on the placement, in both modes, and, in standalone mode, the reason of its
Scheduled condition.

The workflow keeps the clock and says, in the turn's request, that the placement is past its
deadline (workflows.deadline); the turn reports it only if its cycle still finds the placement
not fully scheduled. A placement has one such Event, whatever its deadline, as Kubernetes' event
recorder aggregates repeats: created at its first miss, then patched with the count of missed
periods, the latest message and lastTimestamp, at most once per EVENT_REFRESH (a `1s` deadline
would otherwise write every second, for ever). Its name is derived from the placement's uid,
and an annotation says up to which miss of which stretch it counts, so a retried activity, or a
turn that runs again within the same miss, changes nothing.

A miss that falls while the workflow is idle is reported alone (`ReportDeadlineMiss`): nothing
has changed since its last cycle, or an event would have brought a turn, so the decision
stands and the report is the placement read once, the condition patched and the Event written,
one request each, and no cycle. What it cannot speak for (the placement gone, being deleted,
fully scheduled by now, or asking for another deadline) it leaves to a turn."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Final

from temporalio import activity

from activities.conditions import write_scheduled_condition
from activities.plumbing import ActivitySettings
from activities.translate import hub_failures
from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, ConflictError, NotFoundError
from hub.kinds import kinds_for, placement_key
from hub.types import ClusterResourcePlacement, Condition, Event, ObjectMeta
from hub.types.core_v1 import EventSource, ObjectReference
from scheduler.opt_in.deadline import (
    DEADLINE_EXCEEDED_REASON,
    REPORT_INTERVAL,
    ScheduleDeadline,
    carried_deadline,
    exceeded_message,
)
from workflows.models import DeadlineMiss, DeadlineReport, DeadlineReported
from workflows.names import ACTIVITY_REPORT_DEADLINE_MISS

__all__ = [
    "COMPONENT",
    "EVENT_NAMESPACE",
    "EVENT_REFRESH",
    "EVENT_REFRESH_SLACK",
    "REPORTED_ANNOTATION",
    "ReportDeadlineMiss",
    "deadline_condition",
    "deadline_event_name",
    "record_deadline_event",
    "unscheduled_since",
]

# Kubernetes puts a cluster-scoped object's events in `default`.
EVENT_NAMESPACE: Final = "default"
COMPONENT: Final = "fleet-scheduler"
WARNING: Final = "Warning"
# How often a placement's Event is brought up to date at most: Kubernetes' event recorder lets
# one event per object through every 5 minutes once its burst is spent. Misses in between are
# counted in the next update, not lost.
EVENT_REFRESH: Final = REPORT_INTERVAL
# Less this: the workflow runs a miss's turn REPORT_INTERVAL after the last it counted, by its
# own clock, and the last write is stamped when its turn ran, which may have been later.
EVENT_REFRESH_SLACK: Final = timedelta(seconds=30)
# On the Event: `<when the stretch began>,<deadline seconds>s/<misses>`, the last miss it counts.
REPORTED_ANNOTATION: Final = names.OWN_PREFIX + "deadline-reported"
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


def deadline_event_name(placement: ClusterResourcePlacement) -> str:
    """The placement's deadline Event: `<placement>.<hash>`, like the names Kubernetes' recorder
    gives; one per placement (its uid: a placement created again under the name gets its own)."""
    identity = f"{placement.metadata.uid}/{DEADLINE_EXCEEDED_REASON}"
    return f"{placement.name}.{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


def warning_event(
    placement: ClusterResourcePlacement,
    metadata: ObjectMeta,
    reason: str,
    message: str,
    stamp: datetime,
    *,
    count: int = 1,
) -> Event:
    """A Warning Event about `placement`, from the scheduler, first and last seen at `stamp`."""
    return Event(
        metadata=metadata,
        involved_object=ObjectReference(
            api_version=placement.api_version,
            kind=placement.kind,
            name=placement.name,
            namespace=placement.metadata.namespace,
            uid=placement.metadata.uid,
            resource_version=placement.metadata.resource_version,
        ),
        reason=reason,
        message=message,
        type=WARNING,
        count=count,
        first_timestamp=stamp,
        last_timestamp=stamp,
        source=EventSource(component=COMPONENT),
        reporting_component=COMPONENT,
    )


def record_deadline_event(
    client: HubClient,
    placement: ClusterResourcePlacement,
    miss: DeadlineMiss,
    message: str,
    now: datetime,
) -> bool:
    """Report the miss on the placement's Event: create it, or add the misses it does not count
    yet, unless it was written less than EVENT_REFRESH ago. True when it was written."""
    namespace = placement.metadata.namespace or EVENT_NAMESPACE
    name = deadline_event_name(placement)
    stamp = now.replace(microsecond=0)
    # A stretch is counted per deadline: changed within it, the workflow counts its misses from
    # 1 again, and they add to the Event's count rather than fall under the old deadline's.
    stretch = f"{miss.since.isoformat()},{miss.seconds}s"
    reported = f"{stretch}/{miss.misses}"

    def read() -> Event | None:
        try:
            return client.get(Event, name, namespace=namespace)
        except NotFoundError:
            return None

    # A stretch's first miss is most often the placement's first: created in one request, and
    # read only when it exists already (a retry, an earlier stretch's Event).
    current = None if miss.misses == 1 else read()
    if current is None:
        event = warning_event(
            placement,
            ObjectMeta(name=name, namespace=namespace, annotations={REPORTED_ANNOTATION: reported}),
            DEADLINE_EXCEEDED_REASON,
            message,
            stamp,
            count=miss.misses,
        )
        try:
            client.create(event)
            return True
        except AlreadyExistsError:
            current = read() if miss.misses == 1 else None
            if current is None:
                return False  # a concurrent attempt's, or gone again: the next miss updates it
    counted = _counted(
        current.metadata.annotations.get(REPORTED_ANNOTATION), (stretch, miss.since.isoformat())
    )
    last = current.last_timestamp
    if miss.misses <= counted or (
        last is not None and stamp - last < EVENT_REFRESH - EVENT_REFRESH_SLACK
    ):
        return False
    patch = {
        "metadata": {"annotations": {REPORTED_ANNOTATION: reported}},
        "message": message,
        "count": (current.count or 0) + miss.misses - counted,
        "lastTimestamp": Event(last_timestamp=stamp).to_wire()["lastTimestamp"],
    }
    try:
        client.patch(
            Event,
            name,
            patch,
            namespace=namespace,
            resource_version=current.metadata.resource_version,
        )
    except (ConflictError, NotFoundError):
        return False  # changed or removed meanwhile: the next miss reports again
    return True


class ReportDeadlineMiss:
    """The activity that reports a miss without a cycle, one instance per worker process (like
    activities.turn.ScheduleOnce, whose HubClient and settings it shares)."""

    def __init__(self, client: HubClient, settings: ActivitySettings | None = None) -> None:
        self._client = client
        self._settings = settings or ActivitySettings()

    @activity.defn(name=ACTIVITY_REPORT_DEADLINE_MISS)
    def report_deadline_miss(self, request: DeadlineReport) -> DeadlineReported:
        key = placement_key(request.namespace, request.placement)
        with hub_failures(f"the deadline miss of placement {key!r}"):
            return self._report(request)

    def _report(self, request: DeadlineReport) -> DeadlineReported:
        client, miss = self._client, request.miss
        kind = kinds_for(request.namespace).placement
        try:
            placement = client.get(kind, request.placement, namespace=request.namespace)
        except NotFoundError:
            return DeadlineReported(summary="the placement is gone: a turn decides")
        if placement.metadata.deletion_timestamp is not None:
            return DeadlineReported(summary="the placement is being deleted: a turn decides")
        annotation = placement.metadata.annotations.get(names.SCHEDULE_DEADLINE_ANNOTATION)
        # Both as carried, as the cycle's report compares them (activities.turn.cycle).
        if annotation is None or carried_deadline(annotation) != carried_deadline(miss.deadline):
            return DeadlineReported(summary="the deadline changed: a turn decides")
        condition = placement.status.condition(placement.SCHEDULED_CONDITION)
        if condition is not None and condition.status == names.TRUE:
            return DeadlineReported(summary="fully scheduled since: a turn decides")
        deadline = ScheduleDeadline(seconds=miss.seconds)
        message = exceeded_message(deadline, miss.misses, request.missing)
        written = False
        if self._settings.snapshotter:
            if condition is None:  # no cycle has written ours yet
                return DeadlineReported(summary="no Scheduled condition yet: a turn decides")
            last = condition

            def ours(current: ClusterResourcePlacement) -> Condition:
                found = current.status.condition(current.SCHEDULED_CONDITION) or last
                return deadline_condition(found, message)

            written = write_scheduled_condition(client, placement, ours)
        now = self._settings.now()
        event = record_deadline_event(client, placement, miss, message, now)
        return DeadlineReported(
            summary=f"deadline miss {miss.misses} reported: {message}",
            reported=True,
            event_written=event,
            condition_written=written,
        )


def _counted(annotation: str | None, stretch: tuple[str, ...]) -> int:
    """How many misses of `stretch` (when it began and its deadline, or as an Event written
    before the deadline was part of it said: when it began) the Event counts already (0: none,
    it counts an earlier stretch or deadline, or its annotation cannot be read)."""
    began, _, misses = (annotation or "").rpartition("/")
    readable = misses.isascii() and misses.isdigit() and len(misses) < 10
    return int(misses) if began in stretch and readable else 0
