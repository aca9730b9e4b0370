"""Sending: the watcher's routes on their way to the placement workflows, coalesced, in priority
order, a few at a time, through the admission window, and retried.

The watcher (control.watcher) decides which placements a hub change reaches and hands each route
to its `Sender`; the sender decides when it goes, and `Delivery` makes the Temporal call.

- Temporal calls are few and bounded: routes for one placement coalesce in the `Outbox` for a
  short window (and while a send for it is in flight), at most `max_in_flight` calls run at
  once, and failed calls are retried per placement with backoff, never raised: a Temporal
  outage delays signals, it does not stop the watch or lose the cache.
- Order: batches go best priority key first, tenants by weight (`Outbox`), and in standalone
  mode at most `admission_window` turns of unscheduled placements per priority key are in
  Temporal at once (`AdmissionWindow`): a backlog of thousands waits here, in order, not in
  Temporal's queues and the workers' slots, where a later placement of higher priority would
  wait behind it (docs/priority.md).
- Late events never resurrect a deleted placement: a workflow is started only for a placement
  the cache (or, failing that, the hub) holds and that still wants the scheduler; anything else
  gets a plain signal, which reaches a running workflow or nothing.

Single-threaded: the watcher's asyncio loop owns it. The sender knows the Temporal call only as
a function of a batch (`Deliver`), so it runs alone in tests with any other."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Final, Literal

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from control.admission import AdmissionWindow, AutoSizing
from control.outbox import Backoff, Batch, Outbox
from control.routes import Route, may_start
from control.telemetry import WatcherStats, span
from hub.kinds import split_key
from hub.types import ClusterResourcePlacement
from scheduler.explain.readable import first_few
from scheduler.framework.queue_sort import QueuePriority, TurnCause
from scheduler.requeue.watch_rules import scheduled_condition_current
from workflows import names
from workflows.models import HubEvent, PlacementInput, TurnExecutionMode, TurnPriority
from workflows.placement import PlacementWorkflow, ResourcePlacementWorkflow
from workflows.starts import start_options, turn_priority

__all__ = [
    "ADMISSION_SIZING",
    "DEFAULT_ADMISSION_TIMEOUT",
    "DEFAULT_COALESCE_SECONDS",
    "DEFAULT_MAX_IN_FLIGHT",
    "SEND_RETRY",
    "Deliver",
    "Delivery",
    "SendOutcome",
    "Sender",
]

_log = logging.getLogger(__name__)

# Routes for one placement that arrive within this window go out as one signal. Short enough to
# be invisible next to a cycle, long enough to fold a burst of watch events into one call.
DEFAULT_COALESCE_SECONDS: Final = 0.05
# Concurrent Temporal calls: a cluster change reaching 10,000 placements opens at most this many.
DEFAULT_MAX_IN_FLIGHT: Final = 32
# Placements a log line names before it counts the rest.
MAX_NAMED: Final = 3
# A turn whose Scheduled condition does not show up in this time (KubeFleet's controller slow or
# absent, a workflow failing) gives its place up anyway.
DEFAULT_ADMISSION_TIMEOUT: Final = 30.0
# How `--admission-window auto` sizes the window (control.admission has the why of each figure).
ADMISSION_SIZING: Final = AutoSizing()
# An automatic window's new size is logged (at debug) when it is this many times the last one
# logged, or that divided by it: a change of a turn or two at every completion is noise.
ADMISSION_LOG_FACTOR: Final = 1.5
# A failed Temporal call is retried per placement after this backoff, resetting on success.
SEND_RETRY: Final = Backoff(initial=0.2, maximum=30.0)
# Bounds each Temporal call, so a hung frontend becomes a retried error, not a stuck slot.
RPC_TIMEOUT: Final = timedelta(seconds=10)
# Temporal answers that retrying the same call cannot change. UNIMPLEMENTED is not one: a
# server that is still starting answers "unknown service ...WorkflowService" for a moment
# (seen in a loaded test run), and dropping a signal then loses an event.
PERMANENT_RPC_STATUSES: Final = frozenset({RPCStatusCode.INVALID_ARGUMENT})
# ...except this INVALID_ARGUMENT: the run has had as many signals as the server allows
# (history.maximumSignalsPerExecution, 10,000 by default). The workflow continues-as-new at the
# end of its turn and the new run takes signals again, so the event waits and is retried.
SIGNAL_LIMIT_MESSAGE: Final = "limit for signal events"

SendOutcome = Literal["signal_with_start", "signalled", "not_running", "gone"]
# One batch to its placement's workflow (`Delivery`); raises what the call raised.
Deliver = Callable[[Batch], Awaitable[SendOutcome]]


class Sender:
    """The routes waiting to go to Temporal, and the sends in flight; `run` sends them.

    Args:
        deliver: makes one batch's Temporal call (`Delivery`).
        placements: the watcher's placement cache by key: whether a send starts a turn (the
            placement is live and not scheduled at its generation) is read from it.
        admission: the admission window (size 0: none).
        stats: the counters the sends add to (the watcher's).
        coalesce_seconds, max_in_flight, send_retry: see the module constants of the same
            meaning.
    """

    def __init__(
        self,
        deliver: Deliver,
        placements: Mapping[str, ClusterResourcePlacement],
        admission: AdmissionWindow | None = None,
        stats: WatcherStats | None = None,
        *,
        coalesce_seconds: float = DEFAULT_COALESCE_SECONDS,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        send_retry: Backoff = SEND_RETRY,
    ) -> None:
        self._deliver = deliver
        self._placements = placements
        if admission is None:  # not `or`: an empty window is falsy
            admission = AdmissionWindow(0, DEFAULT_ADMISSION_TIMEOUT)
        self._admission = admission
        self._stats = WatcherStats() if stats is None else stats
        self._window = coalesce_seconds
        self._send_retry = send_retry
        self._outbox = Outbox()
        self._refused = False  # the window refused a batch in the current take
        self._logged_size = self._admission.size  # an automatic size, as last logged
        self._expiry: asyncio.TimerHandle | None = None
        self._in_flight: set[str] = set()
        self._attempts: dict[str, int] = {}
        # asyncio primitives bind to the loop that first waits on them: the watcher's.
        self._wake = asyncio.Event()
        self._free = max_in_flight  # sends that may start now
        self._stopping = False
        self._sends: set[asyncio.Task[None]] = set()

    # --- what the watcher calls ----------------------------------------------------------------

    def add(self, route: Route, priority: QueuePriority) -> None:
        """Queue `route` at `priority`: it goes after the coalescing window, merged with every
        other route for its placement until then."""
        gated = self._admission.size > 0 and self._awaits_turn(route.placement)
        self._outbox.add(route, priority, gated=gated)
        self._wake.set()

    def wake_up(self) -> None:
        """Look for due batches after the coalescing window, like after any route."""
        self._wake.set()

    def release_done(self, placements: Iterable[str] | None = None) -> None:
        """Free the places of the placements whose turn is done (scheduled at their generation,
        or gone), of `placements` (those the watch just showed; None: every placement holding a
        place, after a full list), and let the best waiting batches in. A turn seen scheduled
        counts toward the drain rate an automatic window is sized from; a placement that went
        away does not."""
        if not self._admission.size or not len(self._admission):
            return
        keys = self._admission.placements() if placements is None else list(placements)
        if not keys:
            return
        now = asyncio.get_running_loop().time()
        released = False
        for key in keys:
            if key in self._admission and not self._awaits_turn(key):
                placement = self._placements.get(key)
                if placement is not None and not placement.metadata.deleting:
                    # Scheduled at its generation: a turn Temporal finished.
                    released = self._admission.finished(key, now) or released
                else:
                    released = self._admission.release(key) or released
                self._outbox.set_gated(key, False)  # what waits for it now needs no place
        grew = self._adapt_window(now)
        if (released or grew) and len(self._outbox):
            self.wake_up()  # after the coalescing window, like any other send

    async def run(self) -> None:
        """Send due batches every coalescing window, at most `max_in_flight` at once. Batches
        stay in the outbox until a send slot is free, so the best one waiting goes next: one
        that arrives behind a backlog overtakes it (docs/priority.md)."""
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            await asyncio.sleep(self._window)
            self._wake.clear()
            self._start_sends()
            due = self._outbox.next_due(loop.time(), self._in_flight)
            if due is not None:
                loop.call_at(due, self._wake.set)

    async def close(self) -> None:
        """Stop sending: the sends in flight are cancelled, and what waits is abandoned (the next
        watcher's start-up signals cover it)."""
        self._stopping = True
        sends = list(self._sends)
        for task in sends:
            task.cancel()
        await asyncio.gather(*sends, return_exceptions=True)

    @property
    def pending(self) -> int:
        """Placements with a signal waiting or in flight."""
        return len(self._outbox) + len(self._in_flight)

    @property
    def admission_window(self) -> int:
        """How many turns per priority key and better the admission window lets into Temporal
        now (0: no window)."""
        return self._admission.size

    @property
    def drain_rate(self) -> float | None:
        """Turns seen done per second while a backlog waited for a place, as last measured
        (None: no window, or not measured yet)."""
        return self._admission.drain_rate

    def admission_figures(self) -> tuple[int, float | None]:
        """The admission window's size now (0: none) and its drain rate (None: not measured)."""
        return self._admission.size, self._admission.drain_rate

    # --- sending -------------------------------------------------------------------------------

    def _start_sends(self) -> None:
        """Start sending the best due batches, as many as there are free slots and the admission
        window lets in."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if expired := self._admission.expire(now):
            self._stats.admissions_expired += len(expired)
            _log.warning(
                "admission: %d turns not seen done within %gs (%s); their places are free",
                len(expired),
                self._admission.timeout,
                first_few(expired, MAX_NAMED),
            )
        admit = None
        if self._admission.size:
            self._adapt_window(now)
            self._refused = False
            admit = functools.partial(self._take_place, now)
        free = self._free
        batches = self._outbox.take_due(now, self._in_flight, limit=free, admit=admit)
        if self._refused:
            self._admission.waiting(now, True)
        elif admit is not None and len(batches) < free:
            # Neither the window nor the send slots held anything back: no backlog waits for
            # a place (the drain rate is measured only while one does).
            self._admission.waiting(now, False)
        self._in_flight.update(batch.placement for batch in batches)
        expiry = self._admission.next_expiry()
        if len(self._outbox) and expiry is not None and self._expiry is None:
            self._expiry = loop.call_at(expiry, self._expired)
        for batch in batches:
            self._free -= 1
            task = asyncio.create_task(self._send(batch), name=f"signal {batch.placement}")
            self._sends.add(task)
            task.add_done_callback(functools.partial(self._sent, batch.placement))

    def _awaits_turn(self, placement_key: str) -> bool:
        """The placement is live and not scheduled at its generation yet: a send starts a turn
        whose end the watcher will see (the Scheduled condition)."""
        placement = self._placements.get(placement_key)
        if placement is None or placement.metadata.deleting:
            return False
        return scheduled_condition_current(placement) is None

    def _take_place(self, now: float, batch: Batch) -> bool:
        """The outbox's admission check: a batch that starts a turn takes a place in the window
        if one is free at its priority key; any other batch goes as it is."""
        if not self._awaits_turn(batch.placement):
            return True
        priority_key = batch.priority.effective_key
        holds = batch.placement in self._admission
        if not holds and not self._admission.admits(priority_key):
            self._refused = True
            return False
        self._admission.admit(batch.placement, priority_key, now)
        batch.admitted = not holds
        return True

    def _adapt_window(self, now: float) -> bool:
        """Measure the drain rate and size an automatic window from it; True when it grew.
        A change by ADMISSION_LOG_FACTOR or more since the last one logged is logged."""
        grew = self._admission.adapt(now)
        size, rate = self._admission.size, self._admission.drain_rate
        if self._admission.auto is not None and (
            size >= self._logged_size * ADMISSION_LOG_FACTOR
            or size * ADMISSION_LOG_FACTOR <= self._logged_size
        ):
            _log.debug(
                "admission: window %d -> %d turns (drain rate %s, %d turns in, %s)",
                self._logged_size,
                size,
                "not known yet" if rate is None else f"{rate:.1f} turns/s",
                len(self._admission),
                "a backlog waits" if self._admission.is_waiting else "nothing waits",
            )
            self._logged_size = size
        return grew

    def _expired(self) -> None:
        self._expiry = None
        if not self._stopping:
            self._start_sends()

    def _sent(self, placement: str, task: asyncio.Task[None]) -> None:
        self._sends.discard(task)
        self._free += 1
        self._in_flight.discard(placement)
        if placement in self._outbox:
            self.wake_up()  # events arrived while it was in flight: coalesce, then send
        elif len(self._outbox) and not self._stopping:
            # A backlog is waiting (each batch of it older than the window): its best batch
            # takes the freed slot at once.
            self._start_sends()

    async def _send(self, batch: Batch) -> None:
        name = batch.placement
        try:
            outcome = await self._deliver(batch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if batch.admitted:  # the place this send took is free: it is not in Temporal
                self._admission.release(name)
                batch.admitted = False
            if _permanent(exc):
                self._stats.dropped += 1
                self._attempts.pop(name, None)
                _log.error("dropping %s for placement %s: %s", batch.signal, name, exc)
                return
            attempt = self._attempts.get(name, 0) + 1
            self._attempts[name] = attempt
            delay = self._send_retry.delay(attempt)
            self._stats.retries += 1
            _log.warning(
                "%s for placement %s failed (attempt %d: %s); retrying in %.1fs",
                batch.signal,
                name,
                attempt,
                exc,
                delay,
            )
            loop = asyncio.get_running_loop()
            self._outbox.put_back(batch, not_before=loop.time() + delay)
            loop.call_later(delay, self.wake_up)
            return
        self._attempts.pop(name, None)
        if outcome in ("not_running", "gone"):
            self._admission.release(name)
        setattr(self._stats, outcome, getattr(self._stats, outcome) + 1)
        _log.debug("%s -> %s: %s (%s)", batch.signal, name, outcome, batch.reason)


class Delivery:
    """One batch to its placement's workflow: signal-with-start for a placement that wants a
    workflow, a plain signal otherwise (`Deliver`).

    Args:
        temporal: a connected client.
        task_queue: where started workflows run.
        placements: the watcher's placement cache by key.
        turn_execution: what the signals say about where turns run (`Watcher.turn_execution`).
        queue_priority: the QueueSort answer for a turn of a placement (`Watcher.queue_priority`).
        read_placement: the placement as the hub holds it now (None: not found), for one the
            cache has not seen; called on a worker thread.
    """

    def __init__(
        self,
        temporal: Client,
        task_queue: str,
        placements: Mapping[str, ClusterResourcePlacement],
        *,
        turn_execution: Callable[[], TurnExecutionMode | None],
        queue_priority: Callable[[str, TurnCause], QueuePriority],
        read_placement: Callable[[str], ClusterResourcePlacement | None],
    ) -> None:
        self._temporal = temporal
        self._task_queue = task_queue
        self._placements = placements
        self._turn_execution = turn_execution
        self._queue_priority = queue_priority
        self._read_placement = read_placement

    async def __call__(self, batch: Batch) -> SendOutcome:
        """Signal the placement's workflow, starting it when the placement wants one."""
        placement = batch.placement
        workflow_id = names.workflow_id_for_key(placement)
        event = HubEvent(
            reason=batch.reason,
            turn_execution=self._turn_execution(),
            priority=self._turn_priority(batch),
        )
        with span("watcher.signal", placement=placement, signal=batch.signal, events=batch.events):
            cached = self._placements.get(placement)
            if cached is not None and may_start(cached):
                await self._signal_with_start(placement, batch.signal, event)
                return "signal_with_start"
            try:
                await self._temporal.get_workflow_handle(workflow_id).signal(
                    batch.signal, event, rpc_timeout=RPC_TIMEOUT
                )
                return "signalled"
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
            # No workflow runs. Start one only for a placement that exists and wants the
            # scheduler; the cache may simply not have seen it yet (its snapshot's event came
            # first), so ask the hub before deciding it is gone.
            if cached is not None or not batch.may_start:
                return "not_running"
            current = await asyncio.to_thread(self._read_placement, placement)
            if current is None or not may_start(current):
                return "gone"
            await self._signal_with_start(placement, batch.signal, event)
            return "signal_with_start"

    async def _signal_with_start(self, placement: str, signal: str, event: HubEvent) -> None:
        namespace, name = split_key(placement)
        await self._temporal.start_workflow(
            ResourcePlacementWorkflow.run if namespace else PlacementWorkflow.run,
            PlacementInput(
                placement=name, namespace=namespace, turn_execution=event.turn_execution
            ),
            start_signal=signal,
            start_signal_args=[event],
            rpc_timeout=RPC_TIMEOUT,
            **start_options(name, self._task_queue, namespace, event.priority),
        )

    def _turn_priority(self, batch: Batch) -> TurnPriority:
        """What the signal tells the workflow: the batch's priority for the turn, the
        placement's own (for a person's requeue), fairness, and where the priority came from."""
        turn = batch.priority
        own = (
            turn
            if not batch.fan_out
            else self._queue_priority(batch.placement, TurnCause.PLACEMENT)
        )
        return turn_priority(own, turn)


def _permanent(exc: Exception) -> bool:
    """Errors that sending the same call again cannot fix: log and drop instead of retrying."""
    if isinstance(exc, RPCError):
        return exc.status in PERMANENT_RPC_STATUSES and SIGNAL_LIMIT_MESSAGE not in exc.message
    # A name the workflow id refuses, or a payload the converter cannot encode.
    return isinstance(exc, ValueError | TypeError)
