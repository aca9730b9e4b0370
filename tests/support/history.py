"""Reading a placement's history whichever way its turns ran: on the activity queue (activity
events) or as local activities in the workflow worker (markers; docs/operations.md, "Where turns
run")."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Final

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory

__all__ = [
    "LOCAL_ACTIVITY_MARKER",
    "activity_attempts",
    "completed_activities",
    "event_types",
    "patch_ids",
    "signal_names",
    "turn_places",
]

# The marker the SDK records for a local activity, and for a `workflow.patched` answered yes.
LOCAL_ACTIVITY_MARKER: Final = "core_local_activity"
PATCH_MARKER: Final = "core_patch"


async def completed_activities(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, list[Payload]]]:
    """Each activity the run completed, as (its type, its result payloads), in order."""
    scheduled: dict[int, str] = {}
    done: list[tuple[str, list[Payload]]] = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            kind = event.activity_task_scheduled_event_attributes.activity_type.name
            scheduled[event.event_id] = kind
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            kind = scheduled.get(completed.scheduled_event_id, "")
            done.append((kind, list(completed.result.payloads)))
        elif event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
            marker = event.marker_recorded_event_attributes
            if not marker.HasField("failure"):
                data = json.loads(marker.details["data"].payloads[0].data)
                done.append((data["activity_type"], list(marker.details["result"].payloads)))
    return done


async def activity_attempts(handle: WorkflowHandle[Any, Any]) -> list[int]:
    """The attempt of each activity the run started, on the queue or as a local activity."""
    attempts: list[int] = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_started_event_attributes"):
            attempts.append(event.activity_task_started_event_attributes.attempt)
        elif event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
            data = event.marker_recorded_event_attributes.details["data"].payloads[0].data
            attempts.append(int(json.loads(data)["attempt"]))
    return attempts


async def signal_names(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The signals the run's history holds, in order, by name."""
    return [
        event.workflow_execution_signaled_event_attributes.signal_name
        async for event in handle.fetch_history_events()
        if event.HasField("workflow_execution_signaled_event_attributes")
    ]


async def turn_places(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """Where each activity the run started ran, in order: "queue" (an activity task) or "local"
    (a local activity's marker)."""
    places: list[str] = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_started_event_attributes"):
            places.append("queue")
        elif event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
            places.append("local")
    return places


async def event_types(
    client: Client, handle: WorkflowHandle[Any, Any], run_id: str | None = None
) -> Counter[str]:
    """How many events of each type one run's history has (the handle's run by default; the
    latest with `handle.result_run_id` None)."""
    counts: Counter[str] = Counter()
    run = client.get_workflow_handle(handle.id, run_id=run_id or handle.result_run_id)
    async for event in run.fetch_history_events():
        counts[EventType.Name(event.event_type)] += 1
    return counts


def patch_ids(history: WorkflowHistory) -> list[str]:
    """The ids of a history's patch markers, in order."""
    found = []
    for event in history.events:
        marker = event.marker_recorded_event_attributes
        if marker.marker_name == PATCH_MARKER:
            found.append(json.loads(marker.details["patch-data"].payloads[0].data)["id"])
    return found
