"""Builders of hub objects, stand-in activities and history readers for the watcher tests.

The workflow under test is the real PlacementWorkflow; its activities are same-named stand-ins
that read the devhub the way the real `schedule_once` does for the phases the watcher cares
about (gone, deleting, otherwise "no latest snapshot": wait for the next event), and a
`cleanup_placement` that removes the scheduler's finalizer so a deleted placement goes away.
What the watcher did is read back from each workflow's event history: every
WorkflowExecutionSignaled event, with its signal name and HubEvent reason."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, fields
from typing import Any, Final, TypeVar

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from control.config import RunConfig
from control.telemetry import WatcherMetrics
from control.watcher import Watcher, WatcherTiming
from hub import names as hub_names
from hub.client import HubClient
from hub.errors import NotFoundError
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
    MemberCluster,
    Taint,
)
from tests.support.waits import until_async
from workers.worker import split_workers
from workflows import names
from workflows.models import (
    CleanupReport,
    CleanupRequest,
    HubEvent,
    PrepareResult,
    TurnRequest,
    TurnResult,
)
from workflows.names import ACTIVITY_CLEANUP_PLACEMENT, ACTIVITY_SCHEDULE_ONCE
from workflows.placement import PlacementWorkflow

T = TypeVar("T")

# Generous for a loaded 2-core CI machine; a healthy run needs well under a second.
WAIT_SECONDS = 20.0
READY_SECONDS = 20.0
# A foreign finalizer, so a deleted object lingers with a deletionTimestamp.
OTHER_FINALIZER = "example.com/other-controller"


def unique(prefix: str) -> str:
    """A placement name no other test (in this session's Temporal) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- hub objects --------------------------------------------------------------------------------


def cluster(name: str, **labels: str) -> MemberCluster:
    return MemberCluster.from_wire(
        {"metadata": {"name": name, "labels": labels}, "spec": {"heartbeatPeriodSeconds": 60}}
    )


# The placements here read the `env` label (a preference of weight 0: it scores nothing), so a
# relabelled `env` may change their decision and is routed to them
# (scheduler.requeue.requeue_hints); a label no placement reads reaches nobody.
READS_ENV: Final = {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 0, "preference": {"labelSelector": {"matchExpressions": [
        {"key": "env", "operator": "Exists"}]}}}
]}}  # fmt: skip


def placement(
    name: str,
    placement_type: str = "PickAll",
    n: int | None = None,
    finalizers: tuple[str, ...] = (hub_names.SCHEDULER_CLEANUP_FINALIZER,),
) -> ClusterResourcePlacement:
    policy: dict[str, Any] = {"placementType": placement_type, "affinity": READS_ENV}
    if n is not None:
        policy["numberOfClusters"] = n
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name, "finalizers": list(finalizers)},
            "spec": {
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace"}],
                "policy": policy,
            },
        }
    )


def snapshot(
    placement: str, index: int = 0, n: int | None = None
) -> ClusterSchedulingPolicySnapshot:
    annotations = {hub_names.CRP_GENERATION_ANNOTATION: "1"}
    if n is not None:
        annotations[hub_names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(n)
    return ClusterSchedulingPolicySnapshot.from_wire(
        {
            "metadata": {
                "name": f"{placement}-{index}",
                "labels": {
                    hub_names.PARENT_PLACEMENT_LABEL: placement,
                    hub_names.IS_LATEST_SNAPSHOT_LABEL: "true",
                    hub_names.POLICY_INDEX_LABEL: str(index),
                },
                "annotations": annotations,
            },
            "spec": {"policyHash": "aGFzaA=="},
        }
    )


def binding(placement: str, target: str) -> ClusterResourceBinding:
    return ClusterResourceBinding.from_wire(
        {
            "metadata": {
                "name": f"{placement}-{target}",
                "labels": {hub_names.PARENT_PLACEMENT_LABEL: placement},
                "finalizers": [hub_names.SCHEDULER_BINDING_CLEANUP_FINALIZER],
            },
            "spec": {
                "state": hub_names.STATE_BOUND,
                "schedulingPolicySnapshotName": f"{placement}-0",
                "targetCluster": target,
                "clusterDecision": {"clusterName": target, "selected": True, "reason": "picked"},
            },
        }
    )


def relabel(hub: HubClient, name: str, **labels: str) -> None:
    hub.patch(MemberCluster, name, {"metadata": {"labels": labels}})


def add_taint(hub: HubClient, name: str, key: str) -> None:
    current = hub.get(MemberCluster, name)
    taints = [*current.spec.taints, Taint(key=key, effect="NoSchedule")]
    hub.update(
        current.model_copy(update={"spec": current.spec.model_copy(update={"taints": taints})})
    )


def mark_fulfilled(hub: HubClient, name: str, *, pending: bool = False) -> None:
    """Write the Scheduled condition True for the placement's current generation; `pending`:
    Unknown/SchedulePending instead, as a turn whose cycle failed writes it while Temporal
    retries the turn."""
    current = hub.get(ClusterResourcePlacement, name)
    condition = Condition(
        type=hub_names.PLACEMENT_SCHEDULED_CONDITION,
        status=hub_names.UNKNOWN if pending else hub_names.TRUE,
        reason=hub_names.SCHEDULE_PENDING_REASON if pending else hub_names.POLICY_FULFILLED_REASON,
        observed_generation=current.metadata.generation,
    )
    status = current.status.model_copy(update={"conditions": [condition]})
    hub.update_status(current.model_copy(update={"status": status}))


def remove_finalizer(hub: HubClient, name: str, finalizer: str) -> None:
    current = hub.get(ClusterResourcePlacement, name)
    kept = [f for f in current.metadata.finalizers if f != finalizer]
    hub.update(
        current.model_copy(
            update={"metadata": current.metadata.model_copy(update={"finalizers": kept})}
        )
    )


# --- stand-in activities ------------------------------------------------------------------------


class StandIns:
    """Same-named stand-ins for the placement activities, reading one devhub."""

    def __init__(self, hub: HubClient) -> None:
        self._hub = hub
        self.cleanups: list[str] = []

    async def _prepare(self, request: TurnRequest) -> PrepareResult:
        try:
            current = await asyncio.to_thread(
                self._hub.get, ClusterResourcePlacement, request.placement
            )
        except NotFoundError:
            return PrepareResult(phase="gone", message="stand-in: placement not found")
        if current.metadata.deleting:
            return PrepareResult(phase="deleting", message="stand-in: deleting")
        return PrepareResult(phase="no_latest_snapshot", message="stand-in: waiting for events")

    @activity.defn(name=ACTIVITY_SCHEDULE_ONCE)
    async def schedule_once(self, request: TurnRequest) -> TurnResult:
        return TurnResult(prepared=await self._prepare(request))  # never ready: no cycle

    @activity.defn(name=ACTIVITY_CLEANUP_PLACEMENT)
    async def cleanup_placement(self, request: CleanupRequest) -> CleanupReport:
        self.cleanups.append(request.placement)
        with suppress(NotFoundError):
            await asyncio.to_thread(
                remove_finalizer,
                self._hub,
                request.placement,
                hub_names.SCHEDULER_CLEANUP_FINALIZER,
            )
        return CleanupReport(finalizer_removed=True, summary="stand-in cleanup")

    @property
    def activities(self) -> list[Callable[..., Any]]:
        return [self.schedule_once, self.cleanup_placement]


@asynccontextmanager
async def placement_worker(
    client: Client, task_queue: str, hub: HubClient
) -> AsyncIterator[StandIns]:
    """The real PlacementWorkflow with stand-in activities, on `task_queue`."""
    stand_ins = StandIns(hub)
    async with split_workers(
        client,
        task_queue,
        workflows=[PlacementWorkflow],
        activities=stand_ins.activities,
        max_cached_workflows=0,
    ):
        yield stand_ins


_CONFIG_FIELDS = frozenset(f.name for f in fields(RunConfig))
_TIMING_FIELDS = frozenset(f.name for f in fields(WatcherTiming))


def make_watcher(
    hub: HubClient,
    client: Client,
    task_queue: str,
    *,
    metrics: WatcherMetrics | None = None,
    **options: Any,
) -> Watcher:
    """A Watcher on `task_queue`; `options` are RunConfig and WatcherTiming fields by name.
    Turns run on the activity queue unless `local_cycles_up_to` says otherwise: these tests are
    about what the watcher sends, and their stand-in worker caches no workflow, where a local
    turn in flight when a second signal-with-start lands can hold its workflow task until it
    times out (10 s; activities.advice says why a real worker without a cache advises the
    queue)."""
    options.setdefault("local_cycles_up_to", 0)
    unknown = set(options) - _CONFIG_FIELDS - _TIMING_FIELDS
    if unknown:
        raise TypeError(f"neither RunConfig nor WatcherTiming has {sorted(unknown)}")
    config = RunConfig(
        task_queue=task_queue, **{k: v for k, v in options.items() if k in _CONFIG_FIELDS}
    )
    timing = WatcherTiming(**{k: v for k, v in options.items() if k in _TIMING_FIELDS})
    return Watcher(hub, client, config, metrics=metrics, timing=timing)


@asynccontextmanager
async def running_watcher(
    hub: HubClient, client: Client, task_queue: str, *, wait_ready: bool = True, **options: Any
) -> AsyncIterator[Watcher]:
    """A Watcher running in the background until the block ends (then stopped and awaited).
    `options` are RunConfig fields, WatcherTiming fields and `metrics`."""
    watcher = make_watcher(hub, client, task_queue, **options)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    try:
        if wait_ready:
            await watcher.wait_ready(READY_SECONDS)
        yield watcher
    finally:
        stop.set()
        await asyncio.wait_for(task, READY_SECONDS)


# --- reading what the workflows received --------------------------------------------------------


@dataclass(frozen=True)
class Signalled:
    signal: str
    reason: str


async def signals(client: Client, placement: str) -> list[Signalled]:
    """Every signal the placement's latest workflow run received, in order ([] if none ran)."""
    handle = client.get_workflow_handle(names.workflow_id(placement))
    found: list[Signalled] = []
    try:
        async for event in handle.fetch_history_events():
            if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                continue
            attributes = event.workflow_execution_signaled_event_attributes
            reason = ""
            if attributes.input.payloads:
                (decoded,) = await client.data_converter.decode(
                    attributes.input.payloads, [HubEvent]
                )
                reason = decoded.reason
            found.append(Signalled(attributes.signal_name, reason))
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
    return found


async def run_status(
    client: Client, placement: str
) -> tuple[str, WorkflowExecutionStatus | None] | None:
    """(run id, status) of the placement's latest workflow run, or None when none ever ran."""
    try:
        described = await client.get_workflow_handle(names.workflow_id(placement)).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return described.run_id, described.status


async def signals_matching(
    client: Client, placement: str, signal: str, containing: str = ""
) -> list[Signalled]:
    """Wait until the placement received `signal` with a reason containing `containing`."""

    async def check() -> list[Signalled]:
        return [
            s
            for s in await signals(client, placement)
            if s.signal == signal and containing in s.reason
        ]

    return await until_async(check)


async def quiet(watcher: Watcher, seconds: float = 0.3) -> None:
    """Wait until the watcher has been idle (nothing queued, waiting or in flight) for `seconds`."""
    deadline = time.monotonic() + WAIT_SECONDS
    calm_since: float | None = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if watcher.idle:
            calm_since = calm_since or now
            if now - calm_since >= seconds:
                return
        else:
            calm_since = None
        await asyncio.sleep(0.05)
    raise AssertionError(f"the watcher never went quiet: {watcher.stats}")
