"""Waiting for the system under test, one way: poll a check until it holds, fail with what was
seen last. Every test waits through these, never a fixed sleep where an event can be awaited.

- `until(check)`: a blocking check that returns something truthy when done (its value is
  returned); for hub reads, subprocess output, files.
- `await until_async(check)`: the same in a test's event loop; `check` may be a coroutine
  function (a Temporal query), or a plain function, which runs in a thread when `blocking`
  (a hub read must not stall the loop the watcher and the worker run on).
- `await within(awaitable, what=...)`: one awaitable (a workflow's result, a gate) given at
  most `timeout` seconds, failing with what was awaited.
- `passes(check)`: a check written with asserts, retried until it stops raising
  AssertionError; `consistently(check)` holds it true for a while, and
  `await consistently_async(check)` does so in an event loop. A test that asserts nothing
  happens (no further cycle, no further start) checks it all along a quiet period this way,
  not once after a sleep.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

__all__ = [
    "WAIT_S",
    "consistently",
    "consistently_async",
    "passes",
    "until",
    "until_async",
    "within",
]

T = TypeVar("T")

# Long enough for a cold Temporal dev server on a loaded 2-core machine, not a hang.
WAIT_S: Final = 60.0
# Polls start fast and back off: a condition that is already true costs one check.
FIRST_POLL_S: Final = 0.02
MAX_POLL_S: Final = 0.25


def _polls() -> Callable[[], float]:
    delay = FIRST_POLL_S

    def next_delay() -> float:
        nonlocal delay
        current, delay = delay, min(delay * 2, MAX_POLL_S)
        return current

    return next_delay


def until(check: Callable[[], T | None], *, what: str = "", timeout: float = WAIT_S) -> T:
    """`check()`'s first truthy value; AssertionError naming `what` and the last value after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    delay = _polls()
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'condition'} not reached within {timeout:g}s; "
                                 f"last: {last!r}")
        time.sleep(delay())


async def until_async(
    check: Callable[[], Awaitable[T | None]] | Callable[[], T | None],
    *,
    what: str = "",
    timeout: float = WAIT_S,
    blocking: bool = False,
) -> T:
    """`until` in an event loop: `check` is awaited if it returns an awaitable, and run in a
    thread when `blocking`."""
    deadline = time.monotonic() + timeout
    delay = _polls()
    while True:
        if blocking:
            last = await asyncio.to_thread(check)
        else:
            last = check()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'condition'} not reached within {timeout:g}s; "
                                 f"last: {last!r}")
        await asyncio.sleep(delay())


async def within(awaitable: Awaitable[T], *, what: str, timeout: float = WAIT_S) -> T:
    """`awaitable`'s result; AssertionError naming `what` if it is not done within `timeout`
    seconds (a TimeoutError raised by the awaitable itself passes through as it is)."""
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise AssertionError(f"{what} not done within {timeout:g}s") from None
        raise


def passes(check: Callable[[], T], *, timeout: float = WAIT_S) -> T:
    """`check()`'s value once it stops raising AssertionError; its last AssertionError after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    delay = _polls()
    while True:
        try:
            return check()
        except AssertionError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"still failing after {timeout:g}s: {exc}") from exc
        time.sleep(delay())


def consistently(check: Callable[[], object], *, duration: float, poll: float = 0.2) -> None:
    """`check()` keeps passing for `duration` seconds; its first AssertionError fails at once."""
    deadline = time.monotonic() + duration
    while True:
        try:
            check()
        except AssertionError as exc:
            raise AssertionError(f"stopped holding within {duration:g}s: {exc}") from exc
        if time.monotonic() > deadline:
            return
        time.sleep(poll)


async def consistently_async(
    check: Callable[[], Awaitable[object]] | Callable[[], object],
    *,
    duration: float,
    poll: float = 0.2,
    blocking: bool = False,
) -> None:
    """`consistently` in an event loop: `check` (asserts; awaited if it returns an awaitable,
    run in a thread when `blocking`) keeps passing for `duration` seconds."""
    deadline = time.monotonic() + duration
    while True:
        try:
            result = await asyncio.to_thread(check) if blocking else check()
            if inspect.isawaitable(result):
                await result
        except AssertionError as exc:
            raise AssertionError(f"stopped holding within {duration:g}s: {exc}") from exc
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(poll)
