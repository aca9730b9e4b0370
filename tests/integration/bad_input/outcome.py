"""What a user sees after bad input, read back from the hub and from Temporal.

`finished()` is the promise every bad-input test checks: the placement's workflow ran its
cycles, is idle waiting for an event, stays idle (no crash loop), holds no pending activity (no
endless retries), and its history shows no activity retry and no failed workflow task (no
traceback in the worker). The hub readers return the conditions and decisions a user would
read with kubectl."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from temporalio.client import Client, WorkflowExecutionStatus

from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterDecision,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
)
from scheduler.framework.status import Status
from tests.support.fleet import WAIT_SECONDS, latest_snapshot, status
from tests.support.history import LOCAL_ACTIVITY_MARKER
from tests.support.waits import until_async
from workflows.models import PlacementStatus
from workflows.names import workflow_id

# How long a finished workflow must stay still to count as finished: several watcher coalesce
# windows and activity round trips, so a loop would show up as more cycles.
QUIET_SECONDS: Final = 1.5
# A bad input may take a few cycles to settle (prepare, the cycle, the status refresh), never
# more: anything above this is a loop that happened to pause.
MAX_CYCLES: Final = 6
SNAPSHOT_CRD_VERSION: Final = "placement.kubernetes-fleet.io/v1beta1"


@dataclass
class Finished:
    """The state of a placement's workflow once it went quiet."""

    status: PlacementStatus
    activities: Counter[str] = field(default_factory=Counter)  # type -> times scheduled
    max_attempt: int = 0
    failures: list[str] = field(default_factory=list)  # messages of failed activity attempts
    workflow_task_failures: int = 0

    @property
    def error(self) -> str | None:
        return self.status.last_error


async def finished(
    client: Client,
    placement: str,
    *,
    cycles: int = 1,
    at_most: int = MAX_CYCLES,
    timeout: float = WAIT_SECONDS,
) -> Finished:
    """Wait until the workflow has run at least `cycles` cycles and is idle, then check that it
    stays idle for QUIET_SECONDS and ran no more than `at_most` cycles in all; return what its
    history says."""
    deadline = time.monotonic() + timeout
    current: PlacementStatus | None = None
    while time.monotonic() < deadline:
        current = await status(client, placement)
        if _idle(current, cycles):
            await asyncio.sleep(QUIET_SECONDS)
            again = await status(client, placement)
            if again is not None and _idle(again, cycles) and again.cycles == current.cycles:
                return await _history(client, placement, again, at_most)
            continue
        await asyncio.sleep(0.2)
    raise AssertionError(f"{placement} did not go quiet within {timeout}s; last status: {current}")


def _idle(current: PlacementStatus | None, cycles: int) -> bool:
    return (
        current is not None
        and current.cycles >= cycles
        and current.phase == "idle"
        and not current.pending_reasons
    )


async def _history(
    client: Client, placement: str, current: PlacementStatus, at_most: int
) -> Finished:
    handle = client.get_workflow_handle(workflow_id(placement))
    description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.RUNNING, description.status
    pending = description.raw_description.pending_activities
    assert not pending, [(a.activity_type.name, a.attempt, a.last_failure.message) for a in pending]
    result = Finished(status=current)
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            result.activities[
                event.activity_task_scheduled_event_attributes.activity_type.name
            ] += 1
        elif event.HasField("activity_task_started_event_attributes"):
            attempt = event.activity_task_started_event_attributes.attempt
            result.max_attempt = max(result.max_attempt, attempt)
        elif event.HasField("activity_task_failed_event_attributes"):
            result.failures.append(event.activity_task_failed_event_attributes.failure.message)
        elif event.HasField("workflow_task_failed_event_attributes"):
            result.workflow_task_failures += 1
        elif event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
            # A turn run as a local activity (docs/operations.md, "Where turns run"): its
            # marker holds the activity type and the attempt, and the failure if it failed.
            marker = event.marker_recorded_event_attributes
            data = json.loads(marker.details["data"].payloads[0].data)
            result.activities[data["activity_type"]] += 1
            result.max_attempt = max(result.max_attempt, int(data["attempt"]))
            if marker.HasField("failure"):
                result.failures.append(marker.failure.message)
    assert result.workflow_task_failures == 0, f"{placement}: a workflow task failed"
    assert current.cycles <= at_most, f"{placement} ran {current.cycles} cycles: a loop?"
    return result



def assert_no_retries(done: Finished) -> None:
    """Bad input is not a transient error: no activity ran twice, none failed."""
    assert done.max_attempt == 1, (done.max_attempt, done.failures)
    assert not done.failures, done.failures


def filtered(reason: str) -> str:
    """A filtered cluster's decision reason: the plugin's status, as KubeFleet renders it."""
    return str(Status.unschedulable(reason))


def policy_condition(hub: HubClient, placement: str) -> Condition | None:
    """The Scheduled condition of the placement's latest policy snapshot."""
    snapshot = latest_snapshot(hub, placement)
    return None if snapshot is None else snapshot.status.condition(names.SCHEDULED_CONDITION)


def placement_condition(hub: HubClient, placement: str) -> Condition | None:
    crp = hub.get(ClusterResourcePlacement, placement)
    return crp.status.condition(names.PLACEMENT_SCHEDULED_CONDITION)


async def refused(hub: HubClient, placement: str, field: str) -> Condition:
    """Wait until the snapshotter refuses the placement (its Scheduled condition False, naming
    `field`), then check that nothing was scheduled for it; returns the condition."""

    def shown() -> Condition | None:
        condition = placement_condition(hub, placement)
        ok = condition is not None and condition.status == names.FALSE
        return condition if ok and condition is not None and field in condition.message else None

    condition = await until_async(
        shown, what=f"{placement}'s condition naming {field}", timeout=WAIT_SECONDS, blocking=True
    )
    assert latest_snapshot(hub, placement) is None
    return condition


def decisions(hub: HubClient, placement: str) -> dict[str, ClusterDecision]:
    snapshot = latest_snapshot(hub, placement)
    assert snapshot is not None, f"{placement} has no latest policy snapshot"
    return {d.cluster_name: d for d in snapshot.status.target_clusters}


def snapshot_doc(
    placement: str,
    policy: dict[str, Any] | None,
    *,
    index: int = 0,
    labels: dict[str, str | None] | None = None,
    annotations: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """A policy snapshot as KubeFleet's placement controller writes one (its three labels,
    CRP-generation 1, PickN's number-of-clusters), in wire form, with `labels` / `annotations`
    overriding (None removes) what it would set."""
    wanted_labels: dict[str, str | None] = {
        names.PARENT_PLACEMENT_LABEL: placement,
        names.IS_LATEST_SNAPSHOT_LABEL: "true",
        names.POLICY_INDEX_LABEL: str(index),
        **(labels or {}),
    }
    wanted_annotations: dict[str, str | None] = {names.CRP_GENERATION_ANNOTATION: "1"}
    if policy is not None and policy.get("placementType") == names.PICK_N:
        wanted_annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(policy["numberOfClusters"])
    wanted_annotations.update(annotations or {})
    spec: dict[str, Any] = {"policyHash": ""}
    if policy is not None:
        spec["policy"] = policy
    return {
        "apiVersion": SNAPSHOT_CRD_VERSION,
        "kind": ClusterSchedulingPolicySnapshot.KIND,
        "metadata": {
            "name": f"{placement}-{index}",
            "labels": {k: v for k, v in wanted_labels.items() if v is not None},
            "annotations": {k: v for k, v in wanted_annotations.items() if v is not None},
        },
        "spec": spec,
    }


def add_snapshot(
    hub: HubClient,
    placement: str,
    policy: dict[str, Any] | None,
    *,
    index: int = 0,
    labels: dict[str, str | None] | None = None,
    annotations: dict[str, str | None] | None = None,
) -> ClusterSchedulingPolicySnapshot:
    """Create `snapshot_doc(...)` through our client (so our models must accept it)."""
    doc = snapshot_doc(placement, policy, index=index, labels=labels, annotations=annotations)
    return hub.create(ClusterSchedulingPolicySnapshot.from_wire(doc))

