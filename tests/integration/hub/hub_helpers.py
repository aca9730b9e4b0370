"""Builders and a threaded event collector shared by the HubClient integration tests."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from hub.types import MemberCluster, Taint

E = TypeVar("E")


def cluster(name: str, *, labels: dict[str, str] | None = None, **extra: Any) -> MemberCluster:
    """A MemberCluster to create; `extra` lands in spec as fields we do not model."""
    return MemberCluster.from_wire(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"heartbeatPeriodSeconds": 60, **extra},
        }
    )


def tainted(obj: MemberCluster, key: str) -> MemberCluster:
    taints = [*obj.spec.taints, Taint(key=key, effect="NoSchedule")]
    return obj.model_copy(update={"spec": obj.spec.model_copy(update={"taints": taints})})


class Collector(Generic[E]):
    """Runs a blocking event iterator on a thread, so a test can act while it waits."""

    def __init__(self, start: Callable[[threading.Event], Iterator[E]]) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._queue: queue.Queue[E] = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(start,), daemon=True)
        self._thread.start()

    def _run(self, start: Callable[[threading.Event], Iterator[E]]) -> None:
        try:
            for item in start(self.stop):
                self._queue.put(item)
                if self.stop.is_set():
                    return
        except BaseException as exc:  # surfaced to the test by take()
            self.error = exc

    def take(self, count: int, timeout: float = 15.0) -> list[E]:
        """The next `count` items; fails the test if they do not arrive in time."""
        deadline = time.monotonic() + timeout
        items: list[E] = []
        while len(items) < count:
            if self.error is not None:
                raise AssertionError(f"the iterator failed: {self.error!r}") from self.error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"got {len(items)} of {count} items in {timeout}s: {items}")
            try:
                items.append(self._queue.get(timeout=min(remaining, 0.2)))
            except queue.Empty:
                continue
        return items

    def close(self, timeout: float = 10.0) -> None:
        self.stop.set()
        self._thread.join(timeout)
