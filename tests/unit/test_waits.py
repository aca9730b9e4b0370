"""tests/support/waits.py's `within`: an awaitable gets a bound, and a failure says what was
awaited."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.waits import within


async def test_within_returns_what_the_awaitable_returns() -> None:
    async def answer() -> int:
        return 42

    assert await within(answer(), what="the answer", timeout=5) == 42


async def test_within_fails_naming_what_it_awaited() -> None:
    with pytest.raises(AssertionError, match=r"the gate to open not done within 0\.05s"):
        await within(asyncio.Event().wait(), what="the gate to open", timeout=0.05)


async def test_a_timeout_of_the_awaitable_itself_is_not_taken_for_ours() -> None:
    async def times_out() -> None:
        raise TimeoutError("its own")

    with pytest.raises(TimeoutError, match="its own"):
        await within(times_out(), what="anything", timeout=5)
