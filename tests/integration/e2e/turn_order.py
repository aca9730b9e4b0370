"""What the tests of turn order under load share (test_unsatisfied_first; their Temporal server
of one partition is conftest's `one_partition`): a placement's cycles and queued turn, as
its workflow's `status` query says them."""

from __future__ import annotations

from temporalio.client import Client

from tests.support.fleet import status


async def cycles(client: Client, name: str) -> int:
    current = await status(client, name)
    return 0 if current is None else current.cycles


async def has_cycles(client: Client, name: str, at_least: int) -> bool:
    return await cycles(client, name) >= at_least


async def turn_queued(client: Client, name: str) -> bool:
    current = await status(client, name)
    return current is not None and current.phase == "running"
