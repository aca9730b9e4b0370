"""Retiring patches on the real dev server (workflows.renewal; docs/operations.md, "Retiring
patches"): a run begun by a worker from before patch generations (stood in for by one that
declines GENERATION_PATCH, as a worker without the code would) is found by the reconcile's
query, asked to renew, and continues as new at its next idle point with its state as it was;
a run of the current generation is not asked, nor is a renewed one again. A run asked in the
middle of a turn ends the turn first."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from activities.reconcile import renew_old_runs
from tests.integration.workflows.stand_ins import SCRIPTS, Script
from tests.integration.workflows.workflow_helpers import (
    idle,
    placement_name,
    replays,
    serving,
    status_when,
)
from tests.support.waits import consistently_async, until_async
from workers.devserver import ensure_search_attributes
from workflows import names
from workflows.models import (
    HubEvent,
    PlacementInput,
    PlacementStatus,
    RenewRequest,
    RequeueRequest,
    TurnPriority,
)
from workflows.placement import PlacementWorkflow
from workflows.renewal import PATCH_GENERATION, RENEWAL_MIN_AGE

pytestmark = pytest.mark.asyncio(loop_scope="session")

PRIORITY = TurnPriority(priority_key=2, own_priority_key=2, value=1000, priority_class="high")


async def begin(client: Client, queue: str, script: Script) -> WorkflowHandle[Any, Any]:
    """A placement whose run has some state: a priority, a deadline that is running, two cycles
    and a requeue's reason in its history."""
    name = placement_name()
    SCRIPTS[name] = script
    handle = await client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(placement=name, turn_execution="queue"),
        id=names.workflow_id(name),
        task_queue=queue,
        start_signal=names.SIGNAL_PLACEMENT_CHANGED,
        start_signal_args=[HubEvent(reason="created", priority=PRIORITY)],
    )
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="by hand"))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    return handle


async def generation(handle: WorkflowHandle[Any, Any]) -> int | None:
    described = await handle.describe()
    return described.typed_search_attributes.get(names.SA_PATCH_GENERATION)


def carried(status: PlacementStatus) -> dict[str, Any]:
    """What a continue-as-new carries: the status less this run's own counters and the key
    of its last turn (a run's own, as after its run budget's continue-as-new)."""
    mine = {"cycles_this_run", "turns_this_run", "signals_this_run", "last_turn_key"}
    return status.model_dump(exclude=mine)


def later() -> datetime:
    """A reconcile's clock by which every run begun so far is old enough to be asked."""
    return datetime.now(UTC) + RENEWAL_MIN_AGE + timedelta(minutes=1)


async def latest_run(client: Client, handle: WorkflowHandle[Any, Any]) -> str:
    return (await client.get_workflow_handle(handle.id).describe()).run_id or ""


async def test_the_reconcile_renews_runs_of_an_older_generation_with_their_state(
    temporal_client: Client, task_queue: str
) -> None:
    async with serving(temporal_client, task_queue, old=True):
        olds = [
            await begin(temporal_client, task_queue, Script(deadline="1h", fulfilled=False))
            for _ in range(2)
        ]
    async with serving(temporal_client, task_queue):
        current = await begin(temporal_client, task_queue, Script())
        assert await generation(current) == PATCH_GENERATION
        assert [await generation(old) for old in olds] == [None, None]
        before = {old.id: carried(await old.query(PlacementWorkflow.status)) for old in olds}
        assert all(b["deadline"] is not None and b["priority"] is not None for b in before.values())

        # Visibility follows the upserts: wait until it lists the current run's generation.
        query = f"WorkflowId = '{current.id}' AND FleetPatchGeneration = {PATCH_GENERATION}"

        async def listed() -> int:
            return (await temporal_client.count_workflows(query)).count

        await until_async(listed, what="the current generation listed")
        # Bounded: a pass asks at most `limit` runs; the next pass asks the others (not those
        # the last one asked: they renew at their next idle point).
        first = await renew_old_runs(temporal_client, task_queue, later(), limit=1)
        second = await renew_old_runs(
            temporal_client, task_queue, later(), limit=1, skip=set(first)
        )
        keys = {names.placement_of(old.id)[1] for old in olds}
        assert len(first) == len(second) == 1 and set(first + second) == keys

        for old in olds:
            await until_async(lambda o=old: _continued(temporal_client, o), what="the renewed run")
            renewed = temporal_client.get_workflow_handle(old.id)
            after = await status_when(renewed, lambda s: idle(s) and s.cycles_this_run == 0)
            assert carried(after) == before[old.id]
            assert await generation(renewed) == PATCH_GENERATION
            assert await replays(temporal_client, old.id) == 2
        assert (await current.describe()).run_id == current.first_execution_run_id
        # Renewed runs have the generation: nothing is left to ask.
        await until_async(
            lambda: _none_left(temporal_client, task_queue), what="no run of an older generation"
        )


async def _continued(client: Client, handle: WorkflowHandle[Any, Any]) -> bool:
    first = client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
    return (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW


async def _none_left(client: Client, task_queue: str) -> bool:
    return await renew_old_runs(client, task_queue, later()) == []


async def test_a_run_asked_to_renew_in_the_middle_of_a_turn_ends_the_turn_first(
    temporal_client: Client, task_queue: str
) -> None:
    gate = asyncio.Event()
    script = Script(gate=gate)
    name = placement_name()
    SCRIPTS[name] = script
    async with serving(temporal_client, task_queue):
        handle = await temporal_client.start_workflow(
            PlacementWorkflow.run,
            PlacementInput(placement=name, turn_execution="queue"),
            id=names.workflow_id(name),
            task_queue=task_queue,
        )
        await until_async(lambda: script.cycle_attempts == 1, what="the turn in flight")
        await handle.signal(names.SIGNAL_RENEW_RUN, RenewRequest(reason="by hand"))

        async def same_run() -> None:
            assert await latest_run(temporal_client, handle) == handle.first_execution_run_id
            assert (await handle.query(PlacementWorkflow.status)).phase == "running"

        await consistently_async(same_run, duration=1.0)
        gate.set()
        await until_async(lambda: _continued(temporal_client, handle), what="the renewal")
        renewed = temporal_client.get_workflow_handle(handle.id)
        status = await status_when(renewed, lambda s: s.cycles == 1 and idle(s))
        assert status.cycles_this_run == 0 and len(script.cycles) == 1


async def test_a_namespace_without_the_generation_attribute_skips_renewals_not_the_reconcile(
    temporal_client: Client, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Renewals are never urgent: where the visibility query is refused (here a namespace that
    lacks FleetPatchGeneration, as one an activity worker of the new release reaches before
    `run` registered it), the reconcile's pass renews none and says why, instead of failing
    and retrying its whole pass."""
    namespace = f"fleet-{uuid.uuid4().hex[:8]}"
    await temporal_client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    present = [k for k in names.SEARCH_ATTRIBUTES if k is not names.SA_PATCH_GENERATION]
    await ensure_search_attributes(temporal_client, namespace, present)
    client = Client(
        temporal_client.service_client,
        namespace=namespace,
        data_converter=temporal_client.data_converter,
    )
    with caplog.at_level(logging.WARNING, logger="fleet_scheduler.reconcile"):
        assert await renew_old_runs(client, task_queue, later()) == []
    warned = [r.getMessage() for r in caplog.records if "renew" in r.getMessage()]
    assert warned and "FleetPatchGeneration" in warned[0]
