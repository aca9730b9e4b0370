"""Riding out a hub outage inside the worker instead of through Temporal's retries.

An activity that cannot reach the hub used to fail, and Temporal retried it with backoff capped
at 60 s, forever: at 10,000 placements a long outage meant about 170 activity retries a second,
each a round trip through the Temporal server and a request to the hub that was already down.
Now the first activity to see the hub down marks the worker's `HubGate` down, and one probe
thread asks the hub every `probe_interval_s` whether it is back. Activities that meet the gate
down wait for it in their slot, heartbeating, and then run their turn from the start (a turn is
idempotent: it re-reads everything). Placements with nothing in a slot wait as queued activity
tasks on the server, which costs nothing. When the probe succeeds every waiting activity goes
at once and the queue drains at the worker's full speed, so the fleet converges as soon as the
hub is back instead of at each placement's next backoff.

Only an unreachable or failing hub (connection errors, timeouts, 5xx) closes the gate: a 429 is
the hub asking this client to slow down, which Temporal's backoff already does per placement.
An activity waits at most `max_wait_s`, well inside its start-to-close timeout, then fails as
before and Temporal retries it (into the same wait, if the hub is still down)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from temporalio.exceptions import ApplicationError

from hub.errors import HubUnavailableError
from workflows import failures

__all__ = ["HubGate", "OutageStats", "through_outages"]

R = TypeVar("R")

PROBE_INTERVAL_S: Final = 2.0
# Inside schedule_once's 10-minute start-to-close, with room for the cycle itself.
MAX_WAIT_S: Final = 300.0
# Below the activities' 30 s heartbeat timeout (the SDK throttles the calls further).
HEARTBEAT_EVERY_S: Final = 10.0

log = logging.getLogger("fleet_scheduler.outage")


@dataclass
class OutageStats:
    """outages: times the gate closed; waits: activities that waited at it; probes: requests
    the probe sent (failed ones included)."""

    outages: int = 0
    waits: int = 0
    probes: int = 0


class HubGate:
    """One per worker process, shared by its activity threads (thread-safe)."""

    def __init__(
        self,
        probe: Callable[[], object],
        *,
        probe_interval_s: float = PROBE_INTERVAL_S,
        max_wait_s: float = MAX_WAIT_S,
    ) -> None:
        self._probe = probe
        self.probe_interval_s = probe_interval_s
        self.max_wait_s = max_wait_s
        self._lock = threading.Lock()
        self._up = threading.Event()
        self._up.set()
        self._down_since: float | None = None
        self._last_error = ""
        self.stats = OutageStats()

    @property
    def is_down(self) -> bool:
        return not self._up.is_set()

    def mark_down(self, error: BaseException) -> None:
        """The hub failed an activity: close the gate and start probing, unless already."""
        with self._lock:
            self._last_error = str(error)
            if not self._up.is_set():
                return
            self._up.clear()
            self._down_since = time.monotonic()
            self.stats.outages += 1
        log.warning("hub unavailable (%s); activities wait for it to come back", error)
        threading.Thread(target=self._probe_until_up, name="hub-probe", daemon=True).start()

    def wait_up(self, deadline: float, heartbeat: Callable[[str], None]) -> bool:
        """Wait until the hub is back or `deadline` (time.monotonic); True when it is back."""
        if self._up.is_set():
            return True
        with self._lock:
            self.stats.waits += 1
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._up.is_set()
            if self._up.wait(min(HEARTBEAT_EVERY_S, remaining)):
                return True
            since = self._down_since if self._down_since is not None else time.monotonic()
            heartbeat(
                f"waiting for the hub, unavailable for {time.monotonic() - since:.0f}s "
                f"({self._last_error})"
            )

    def _probe_until_up(self) -> None:
        while True:
            time.sleep(self.probe_interval_s)
            with self._lock:
                self.stats.probes += 1
            try:
                self._probe()
            except Exception as exc:  # any failure: still down
                self._last_error = str(exc)
                continue
            with self._lock:
                since = self._down_since
                self._down_since = None
                self._up.set()
            log.info(
                "hub is back after %.1fs; waiting activities resume",
                time.monotonic() - since if since is not None else 0.0,
            )
            return


def is_outage(error: ApplicationError) -> bool:
    """A failure that means the hub is down, not busy (see the module docstring)."""
    cause = error.__cause__
    return (
        error.type == failures.HUB_UNAVAILABLE
        and isinstance(cause, HubUnavailableError)
        and (cause.status is None or cause.status >= 500)
    )


def through_outages(
    gate: HubGate | None, heartbeat: Callable[[str], None], call: Callable[[], R]
) -> R:
    """`call()`, run again after the hub comes back whenever it fails for a hub outage, for at
    most the gate's `max_wait_s`; without a gate, `call()` once."""
    if gate is None:
        return call()
    deadline = time.monotonic() + gate.max_wait_s
    while True:
        if gate.is_down:
            gate.wait_up(deadline, heartbeat)
        try:
            return call()
        except ApplicationError as err:
            if not is_outage(err) or time.monotonic() >= deadline:
                raise
            gate.mark_down(err.__cause__ or err)
