"""The Temporal Schedules fleet-scheduler keeps: `fleet-reconcile` (the safety net, on by
default; docs/operations.md) and `fleet-rebalance` (off by default; docs/capacity.md), created
or updated by `fleet-scheduler run` and `dev`, and the reconcile triggered at a watcher's start."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from scheduler.moves.rebalance import Strategy
from workflows import names
from workflows.models import RebalanceInput, ReconcileInput

__all__ = [
    "DEFAULT_RECONCILE_EVERY",
    "ensure_rebalance_schedule",
    "ensure_reconcile_schedule",
    "remove_reconcile_schedule",
    "trigger_reconcile",
    "upsert_schedule",
]

DEFAULT_RECONCILE_EVERY: Final = timedelta(minutes=5)


def _reconcile_schedule(
    task_queue: str,
    every: timedelta,
    standalone: bool,
    local_cycles_up_to: int | None,
    resource_placements: bool = True,
) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            names.RECONCILE_WORKFLOW,
            ReconcileInput(
                task_queue=task_queue,
                standalone=standalone,
                local_cycles_up_to=local_cycles_up_to,
                resource_placements=resource_placements,
            ),
            id=names.reconcile_schedule_id(task_queue),
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_reconcile_schedule(
    client: Client,
    task_queue: str,
    every: timedelta,
    *,
    standalone: bool,
    local_cycles_up_to: int | None = None,
    resource_placements: bool = True,
) -> str:
    """Create the reconcile Schedule, or update it to these settings; returns its id."""
    schedule_id = names.reconcile_schedule_id(task_queue)
    wanted = _reconcile_schedule(
        task_queue, every, standalone, local_cycles_up_to, resource_placements
    )
    await upsert_schedule(client, schedule_id, wanted)
    return schedule_id


async def upsert_schedule(client: Client, schedule_id: str, wanted: Schedule) -> None:
    """Create the Schedule, or replace an existing one's settings with `wanted`."""
    try:
        await client.create_schedule(schedule_id, wanted)
    except ScheduleAlreadyRunningError:

        def update(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=wanted)

        await client.get_schedule_handle(schedule_id).update(update)


async def remove_reconcile_schedule(client: Client, task_queue: str) -> bool:
    """Delete the reconcile Schedule of `task_queue`; False when there was none."""
    try:
        await client.get_schedule_handle(names.reconcile_schedule_id(task_queue)).delete()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def trigger_reconcile(client: Client, task_queue: str) -> bool:
    """Run the reconcile now (a watcher start does, instead of signalling every placement);
    False when there is no such Schedule."""
    try:
        await client.get_schedule_handle(names.reconcile_schedule_id(task_queue)).trigger(
            overlap=ScheduleOverlapPolicy.SKIP
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def _rebalance_schedule(task_queue: str, every: timedelta, strategy: Strategy) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            names.REBALANCE_WORKFLOW,
            RebalanceInput(strategy=strategy),
            id=names.rebalance_schedule_id(task_queue),
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_rebalance_schedule(
    client: Client, task_queue: str, every: timedelta, strategy: Strategy
) -> str:
    """Create the rebalance Schedule, or update it to these settings; returns its id."""
    schedule_id = names.rebalance_schedule_id(task_queue)
    await upsert_schedule(client, schedule_id, _rebalance_schedule(task_queue, every, strategy))
    return schedule_id
