"""Pausing a stack's Schedules, for tests whose window a scheduled run must not cross.

The reconcile and rebalance Schedules start their runs on the wall clock's marks (every 5
minutes by default), not when a test starts: a test that plants something a run would sweep
(a stale reservation) or that counts the hub's requests in a quiet window pauses them first."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from workflows import names

__all__ = ["pause_schedules", "unpause_schedules"]


def _schedule_ids(task_queue: str) -> tuple[str, str]:
    return names.reconcile_schedule_id(task_queue), names.rebalance_schedule_id(task_queue)


async def pause_schedules(client: Client, task_queue: str, note: str) -> list[str]:
    """Pause the reconcile and rebalance Schedules of `task_queue` that exist; their ids. A
    paused Schedule starts no run; one already running goes on (wait for it yourself)."""
    paused = []
    for schedule_id in _schedule_ids(task_queue):
        try:
            await client.get_schedule_handle(schedule_id).pause(note=note)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            continue
        paused.append(schedule_id)
    return paused


async def unpause_schedules(client: Client, schedule_ids: list[str]) -> None:
    for schedule_id in schedule_ids:
        await client.get_schedule_handle(schedule_id).unpause(note="test over")
