"""The one list-then-watch loop: what a client-go informer's reflector does, for one kind.

Both readers of the hub that keep a view of it, the worker's MemberCluster cache
(`activities.clusters`) and the watcher's per-kind views (`control.watcher`), run this loop on a
thread of their own: `HubClient.list_then_watch` lists, then watches from the list's
resourceVersion, and lists again (a `Resync`) after a 410 or a broken stream, so no change is
missed. When the list or the watch fails (hub down, forbidden, missing CRD) the loop tells its
owner, waits with exponential backoff, and starts over; the backoff starts again once a list
succeeds. Only `halt`, or an owner's callback answering False, ends it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from hub.client import HubClient, OnMalformed, Resync, WatchEvent
from hub.errors import HubError
from hub.types import HubObject

__all__ = ["Backoff", "watch_forever"]

_log = logging.getLogger(__name__)

T = TypeVar("T", bound=HubObject)

# 2**64 already dwarfs any maximum; a larger exponent only risks float overflow.
_MAX_EXPONENT: Final = 64


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: `initial` seconds, times `factor` per attempt, at most `maximum`."""

    initial: float
    maximum: float
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum or self.factor < 1:
            raise ValueError(f"backoff needs 0 < initial <= maximum and factor >= 1: {self}")

    def delay(self, attempt: int) -> float:
        """The wait before retry number `attempt` (1 for the first retry)."""
        exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
        return float(min(self.initial * self.factor**exponent, self.maximum))


def watch_forever(
    client: HubClient,
    kind: type[T],
    *,
    on_item: Callable[[WatchEvent[T] | Resync[T]], bool],
    on_failure: Callable[[str, float], bool],
    halt: threading.Event,
    backoff: Backoff,
    timeout_seconds: int,
    on_malformed: OnMalformed | None = None,
    transform: Callable[[T], T] | None = None,
    page_size: int | None = None,
) -> None:
    """List-then-watch `kind` until `halt` is set; a thread body. `transform` and `page_size`
    go to `HubClient.list_then_watch`.

    `on_item` gets every event and every Resync; `on_failure` gets why the list or watch failed
    and how long the loop will wait before listing again. Either ends the loop by returning
    False. A failure is never raised: an unexpected exception is logged with its traceback and
    treated like a hub error, so a bug cannot end a view for good."""
    attempt = 0
    while not halt.is_set():
        try:
            for item in client.list_then_watch(
                kind,
                timeout_seconds=timeout_seconds,
                stop=halt,
                on_malformed=on_malformed,
                transform=transform,
                page_size=page_size,
            ):
                if isinstance(item, Resync):
                    attempt = 0
                if not on_item(item):
                    return
        except HubError as exc:
            reason = f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            _log.exception("list-then-watch of %s failed unexpectedly", kind.PLURAL)
            reason = f"unexpected {type(exc).__name__}: {exc}"
        else:
            continue  # list_then_watch returns only when halted
        attempt += 1
        delay = backoff.delay(attempt)
        _log.warning("watch of %s failed (%s); listing again in %.1fs", kind.PLURAL, reason, delay)
        if not on_failure(reason, delay):
            return
        halt.wait(delay)
