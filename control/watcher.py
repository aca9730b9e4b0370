"""The watcher: turns hub changes into signals to placement workflows, as KubeFleet's scheduler
watchers turn them into work-queue keys (kubefleet-rules section 7).

It list-then-watches every kind a turn reads (ALL_WATCHED_KINDS): ClusterResourcePlacements,
their policy snapshots and bindings, MemberClusters, and, unless turned off, ResourcePlacements
with theirs; and, without waiting for them to be ready, PriorityClasses (turn order) and
CapacityLedgers (freed room). It keeps an in-memory view of each so an update can be compared
with the object it replaced, routes every change through KubeFleet's filters and ours
(`control.routes` over `scheduler.requeue.watch_rules`) and signals the placement workflows they
name with signal-with-start, so a workflow exists whenever it has work.

What shaped it:

- `HubClient.list_then_watch` blocks, so each kind is watched on its own thread, which hands
  items to the asyncio loop through a bounded queue; all state lives on the loop. A watch that
  fails is restarted with backoff and starts over with a Resync, which the kind's `View` diffs
  against what it held, so changes made while nobody watched (410 Gone, a hub restart) still
  arrive as adds, updates and deletes.
- The watcher decides which placements a change reaches, at which priority; its `Sender`
  (control.sending) decides when each signal goes: coalesced, in priority order, a few calls at
  a time, through the admission window, retried with backoff, never raised. Its gauges are read
  from the caches (control.telemetry).
- Several watchers may run at once (two replicas, a rolling update): signal-with-start on the
  workflow id is idempotent in effect, extra signals only cause extra coalesced cycles."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, ValuesView
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from temporalio.client import Client
from temporalio.service import RPCError

from control.admission import AdmissionWindow, AutoSizing
from control.config import ADMISSION_AUTO, RunConfig
from control.outbox import Backoff
from control.routes import (
    Room,
    Route,
    orphan_snapshot_warning,
    route_change,
    startup_routes,
)
from control.schedules import trigger_reconcile
from control.sending import (
    ADMISSION_SIZING,
    DEFAULT_ADMISSION_TIMEOUT,
    DEFAULT_COALESCE_SECONDS,
    DEFAULT_MAX_IN_FLIGHT,
    SEND_RETRY,
    Delivery,
    Sender,
)
from control.telemetry import WatcherMetrics, WatcherStats, track_watcher
from control.views import Change, View, key_of, routing_copy
from hub.client import HubClient, Resync, WatchEvent
from hub.errors import MalformedObjectError, NotFoundError
from hub.informer import watch_forever
from hub.kinds import NAMESPACED_KINDS, kinds_for, placement_key, split_key
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    PriorityClass,
    ResourceBinding,
    ResourcePlacement,
)
from hub.types.meta import HubObject, ObjectMeta
from scheduler import Profile, default_profile
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.framework.queue_sort import (
    PriorityClasses,
    QueueItem,
    QueuePriority,
    QueueSortPlugin,
    TurnCause,
    no_later_than,
)
from scheduler.requeue.watch_rules import is_fully_scheduled, never_scheduled
from workflows import names
from workflows.models import TurnExecutionMode
from workflows.starts import turn_execution_for

__all__ = [
    "DEFAULT_WATCH_SECONDS",
    "WATCHED_KINDS",
    "WATCH_RETRY",
    "Watcher",
    "WatcherTiming",
]

_log = logging.getLogger(__name__)

# The kinds watched, in the order their threads start. Placements first: every other kind's
# routes are resolved against the placement cache.
WATCHED_KINDS: Final[tuple[type[HubObject], ...]] = (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    ClusterResourceBinding,
)
# ... and, unless turned off (KubeFleet's `--enable-resource-placement=false`), the namespaced
# ResourcePlacements with their snapshots and bindings, in all namespaces (kubefleet-rules 9).
RESOURCE_PLACEMENT_KINDS: Final[tuple[type[HubObject], ...]] = NAMESPACED_KINDS
PLACEMENT_KINDS: Final = (ClusterResourcePlacement, ResourcePlacement)
# The PriorityClasses the QueueSort plugin reads (docs/priority.md). Watched first, so their list
# normally lands before the placements'; but readiness does not wait for them: a hub that denies
# them (a ClusterRole from before priorities) still gets every placement scheduled, at the
# default priority, with the error in /readyz's reason and the log.
PRIORITY_KINDS: Final[tuple[type[HubObject], ...]] = (PriorityClass,)
# Capacity ledgers (docs/capacity.md): room freed on a cluster wakes the capacity-aware
# placements waiting for it, a deleted ledger those whose reservations must be made again. Like
# PriorityClasses, readiness does not wait for them: a hub without the CRD has no ledgers, and
# every placement without requests is scheduled exactly as before.
CAPACITY_KINDS: Final[tuple[type[HubObject], ...]] = (CapacityLedger,)
# Kinds whose first list readiness does not wait for.
OPTIONAL_KINDS: Final = PRIORITY_KINDS + CAPACITY_KINDS
ALL_WATCHED_KINDS: Final = OPTIONAL_KINDS + WATCHED_KINDS + RESOURCE_PLACEMENT_KINDS

# Server-side length of one watch stream. The thread notices a stop request at the next event,
# bookmark or stream end, so this also bounds how long a stopped watcher's thread can linger.
DEFAULT_WATCH_SECONDS: Final = 60
# A failed watch (hub down, forbidden, missing CRD) is restarted after this backoff; it resets
# once a list succeeds.
WATCH_RETRY: Final = Backoff(initial=0.2, maximum=10.0)
# Watch items waiting for the loop; a full hand-off holds the watch threads back.
QUEUE_SIZE: Final = 1024
# Objects per list request: the watch threads keep only `routing_copy` of each, so at most one
# page of full objects per kind is in memory while listing 10,000s of them.
LIST_PAGE_SIZE: Final = 500
# How often a watch thread waiting on a full queue looks at the stop flag.
HANDOVER_POLL_SECONDS: Final = 0.5
# How long stopping waits for watch threads blocked in a stream; they are daemons and exit at
# their next event or stream end.
THREAD_JOIN_SECONDS: Final = 2.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _ignored(error: MalformedObjectError) -> None:
    """One object the watch leaves out: it cannot be read, so it routes nothing."""
    _log.warning(
        "ignoring an object that does not match fleet-scheduler's model, until it is fixed "
        "(no placement is signalled for it): %s",
        error,
    )


class _Placements(Mapping[str, ClusterResourcePlacement]):
    """The placement views of both kinds as one mapping by key. A ResourcePlacement's key has a
    "/", a ClusterResourcePlacement's never, so they cannot collide. Reads each view's current
    dict every time: a Resync replaces it."""

    def __init__(self, views: list[View[Any]]) -> None:
        self._views = views

    def __getitem__(self, key: str) -> ClusterResourcePlacement:
        for view in self._views:
            if (found := view.objects.get(key)) is not None:
                return found  # type: ignore[no-any-return]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        for view in self._views:
            yield from view.objects

    def __len__(self) -> int:
        return sum(len(view.objects) for view in self._views)

    # The loops the routes run over every placement (a cluster change at 10,000 placements) go
    # straight to the dicts, not through __getitem__ per key.
    def values(self) -> ValuesView[ClusterResourcePlacement]:
        return _ChainedValues(self)

    def get(self, key: str, default: Any = None) -> Any:
        for view in self._views:
            if (found := view.objects.get(key)) is not None:
                return found
        return default

    def __contains__(self, key: object) -> bool:
        return any(key in view.objects for view in self._views)

    def iter_values(self) -> Iterator[ClusterResourcePlacement]:
        return itertools.chain.from_iterable(view.objects.values() for view in self._views)


class _ChainedValues(ValuesView[ClusterResourcePlacement]):
    def __iter__(self) -> Iterator[ClusterResourcePlacement]:
        mapping: _Placements = self._mapping  # type: ignore[attr-defined]
        return mapping.iter_values()


@dataclass(frozen=True, slots=True)
class _WatchFailed:
    kind: type[HubObject]
    error: str


_Item = tuple[type[HubObject], "WatchEvent[Any] | Resync[Any] | _WatchFailed"]


class Handoff:
    """Watch items from the watch threads to the loop, in arrival order, the loop woken once per
    batch: a thread appends and goes back to its stream (waiting only while `limit` items are
    already waiting), and the loop takes everything that arrived since it last looked. Handing
    each event over as a coroutine of its own, with the thread waiting for the loop to take it,
    cost a quarter of the watcher's CPU at 1,000 clusters (issue 35)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: deque[_Item] = deque()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._woken = False  # a wake-up is on its way to the loop, or the loop is draining
        self._arrived = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, loop: asyncio.AbstractEventLoop, item: _Item, halt: threading.Event) -> bool:
        """From a watch thread: add `item`; False when stopping (`halt`, or the loop closed)."""
        with self._lock:
            while len(self._items) >= self._limit:
                if halt.is_set():
                    return False
                self._room.wait(HANDOVER_POLL_SECONDS)
            self._items.append(item)
            wake, self._woken = not self._woken, True
        if wake:
            try:
                loop.call_soon_threadsafe(self._arrived.set)
            except RuntimeError:  # the loop is closed: the watcher is gone
                return False
        return not halt.is_set()

    async def take(self) -> list[_Item]:
        """On the loop: every item waiting, at least one."""
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            with self._lock:
                items = list(self._items)
                self._items.clear()
                self._woken = False
                self._room.notify_all()
            if items:
                return items


@dataclass(frozen=True)
class WatcherTiming:
    """The watcher's clocks and limits: not flags, but what tests and benches shrink. See the
    module constants of the same meaning."""

    coalesce_seconds: float = DEFAULT_COALESCE_SECONDS
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    watch_seconds: int = DEFAULT_WATCH_SECONDS
    watch_retry: Backoff = WATCH_RETRY
    send_retry: Backoff = SEND_RETRY
    admission_timeout: float = DEFAULT_ADMISSION_TIMEOUT
    admission_sizing: AutoSizing = ADMISSION_SIZING

    def __post_init__(self) -> None:
        if self.coalesce_seconds < 0:
            raise ValueError(f"coalesce_seconds must not be negative, got {self.coalesce_seconds}")
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {self.max_in_flight}")
        if self.watch_seconds < 1:
            raise ValueError(f"watch_seconds must be at least 1, got {self.watch_seconds}")


class Watcher:
    """Watches the hub and signals placement workflows; one `run` per instance.

    Args:
        hub: the hub to watch; shared with nothing that closes it while the watcher runs.
        temporal: a connected client (with the pydantic data converter, like every client here).
        config: the process's RunConfig; the watcher reads its part of it:
            - `task_queue`: where started workflows run;
            - `snapshotter`: standalone mode (our workflows create policy snapshots): placement
              creation and spec changes signal `placement_changed`, and start-up signals use
              it too. False beside KubeFleet's hub agent: those arrive as snapshot events;
            - `reconciles`: the process keeps the reconcile Schedule, so start-up triggers one
              reconcile instead of signalling every placement;
            - `local_cycles_up_to`: None (the default): every start and signal lets the
              workers choose where each turn runs; N, for experiments: turns run as local
              activities while the fleet has at most N member clusters, and on the activity
              queue above (0: always; docs/operations.md, "Where turns run");
            - `admission_window`: how many turns of placements not scheduled at their
              generation may be in Temporal at once, per priority key and better
              (control.admission.AdmissionWindow; 0: no window); `auto`: as many as it drains in
              `timing.admission_sizing.target_wait_s` (control.admission). Standalone mode
              only: beside KubeFleet there is no window, whatever it says;
            - `resource_placements`: watch namespaced ResourcePlacements and their kinds.
        metrics: counts every routed change as `count_watcher_event(kind, event, action)`,
            action "signalled" or "ignored" (and one "RESYNC"/"listed" per full list), and
            exports the gauges read from the caches and the admission window's size and drain
            rate (control.telemetry.track_watcher).
        queue_sort: the profile's QueueSort plugin (default: `profile`'s).
        profile: the profile the cycles run (default: KubeFleet's default profile): its
            plugins' requeue hints decide which placements a member cluster's update reaches.
        timing: clocks and limits (WatcherTiming).
        eligibility: decides "became eligible" on MemberCluster updates.
        clock: wall-clock time for eligibility.
    """

    def __init__(
        self,
        hub: HubClient,
        temporal: Client,
        config: RunConfig | None = None,
        *,
        metrics: WatcherMetrics | None = None,
        queue_sort: QueueSortPlugin | None = None,
        profile: Profile | None = None,
        timing: WatcherTiming | None = None,
        eligibility: EligibilityChecker | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        config = config or RunConfig()
        timing = timing or WatcherTiming()
        self._hub = hub
        self._temporal = temporal
        self.config = config
        self.task_queue = config.task_queue
        self.snapshotter = config.snapshotter
        self._metrics = metrics
        self._checker = eligibility or EligibilityChecker()
        self._clock = clock
        self._watch_seconds = timing.watch_seconds
        self._watch_retry = timing.watch_retry
        self._reconcile_at_start = config.reconciles
        self._local_cycles_up_to = config.local_cycles_up_to

        self.kinds = (
            OPTIONAL_KINDS
            + WATCHED_KINDS
            + (RESOURCE_PLACEMENT_KINDS if config.resource_placements else ())
        )
        # The cycles' profile: its QueueSort orders turns, its plugins' requeue hints narrow
        # member-cluster updates to the placements they may change
        # (scheduler.requeue.requeue_hints).
        self._profile = profile or default_profile()
        self._sorter = queue_sort or self._profile.queue_sorter
        self._classes = PriorityClasses()
        self._sort_failures = 0
        self._views: dict[type[HubObject], View[Any]] = {kind: View(kind) for kind in self.kinds}
        # Both placement kinds' views, as one mapping by key: a ResourcePlacement's key has a
        # "/", a ClusterResourcePlacement's never, so they cannot collide.
        self._placement_views = [self._views[k] for k in PLACEMENT_KINDS if k in self._views]
        self._placements = _Placements(self._placement_views)
        # A turn is seen done by the Scheduled condition our activities write in standalone
        # mode. Beside KubeFleet that condition is its controller's, written on its own time:
        # no window there, automatic or not (docs/priority.md, "Admission").
        size: int | AutoSizing = 0
        if config.snapshotter:
            setting = config.admission_window
            size = timing.admission_sizing if setting == ADMISSION_AUTO else int(setting)
        self._stats = WatcherStats()
        delivery = Delivery(
            temporal,
            self.task_queue,
            self._placements,
            turn_execution=self.turn_execution,
            queue_priority=self.queue_priority,
            read_placement=self._read_placement,
        )
        self._sender = Sender(
            delivery,
            self._placements,
            AdmissionWindow(size, timing.admission_timeout),
            self._stats,
            coalesce_seconds=timing.coalesce_seconds,
            max_in_flight=timing.max_in_flight,
            send_retry=timing.send_retry,
        )
        if metrics is not None:
            track_watcher(
                metrics,
                placements=self._placements,
                clusters=self._views[MemberCluster],
                ledgers=self._views[CapacityLedger],
                clock=clock,
                admission=self._sender.admission_figures,
            )
        self._watch_errors: dict[type[HubObject], str] = {}
        self._started = False
        # asyncio primitives bind to the loop that first waits on them: run() and wait_ready()
        # must share one loop, like everything else about a Watcher.
        self._handoff = Handoff(QUEUE_SIZE)
        self._ready = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()  # the start-up reconcile's trigger

    # --- public view ---------------------------------------------------------------------------

    def _room(self) -> Room:
        """The capacity view the routes of capacity-aware placements read."""
        binding_views = [
            self._views[k] for k in (ClusterResourceBinding, ResourceBinding) if k in self._views
        ]
        return Room(
            clusters=self._views[MemberCluster].objects,
            ledgers=self._views[CapacityLedger].objects,
            bindings=itertools.chain.from_iterable(v.objects.values() for v in binding_views),
        )

    @property
    def ready(self) -> bool:
        """Every kind routes read from has been listed once: the caches hold the whole hub and
        every existing placement has been queued for its start-up signal. Stays True through
        later re-lists. (PriorityClasses only order turns: see PRIORITY_KINDS.)"""
        return all(view.synced for kind, view in self._views.items() if kind not in OPTIONAL_KINDS)

    def readiness(self) -> tuple[bool, str]:
        """`(ready, reason)` for `/readyz` (a `workers.health.ReadyCheck`)."""
        if self.ready:
            notes = []
            for kinds, what in (
                (PRIORITY_KINDS, "default priorities"),
                (CAPACITY_KINDS, "freed room wakes nobody until the reconcile"),
            ):
                problem = [
                    f"{k.PLURAL}: {self._watch_errors[k]}" for k in kinds if k in self._watch_errors
                ]
                if problem:
                    notes.append(f"{what}: {'; '.join(problem)}")
            return True, "ok" + (f" ({'; '.join(notes)})" if notes else "")
        waiting = [
            kind.PLURAL
            for kind, view in self._views.items()
            if not view.synced and kind not in OPTIONAL_KINDS
        ]
        reason = "waiting for the first list of " + ", ".join(waiting)
        errors = [f"{kind.PLURAL}: {self._watch_errors[kind]}" for kind in self._watch_errors]
        return False, reason + (f" (last errors: {'; '.join(errors)})" if errors else "")

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Return once `ready`; TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            await self._ready.wait()

    @property
    def stats(self) -> WatcherStats:
        """A snapshot of the counters."""
        return self._stats.copy()

    @property
    def admission_window(self) -> int:
        """How many turns per priority key and better the admission window lets into Temporal
        now (0: no window); an automatic window's size changes with its drain rate."""
        return self._sender.admission_window

    @property
    def drain_rate(self) -> float | None:
        """Turns seen done per second while a backlog waited for a place, as last measured
        (None: no window, or not measured yet)."""
        return self._sender.drain_rate

    @property
    def pending(self) -> int:
        """Placements with a signal waiting or in flight."""
        return self._sender.pending

    @property
    def idle(self) -> bool:
        """Nothing handed over and unprocessed, waiting to be sent or in flight (events still on
        the wire or in a watch thread are not counted)."""
        return not self._handoff and self.pending == 0

    @property
    def priority_classes(self) -> PriorityClasses:
        """The PriorityClasses as the watcher knows them (empty until listed)."""
        return self._classes

    def synced(self, kind: type[HubObject]) -> bool:
        """`kind` has been listed once."""
        return self._views[kind].synced

    def cached(self, kind: type[HubObject]) -> int:
        """How many objects of `kind` the watcher's view holds."""
        return len(self._views[kind])

    # --- running ---------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Watch and signal until `stop` is set (or the task is cancelled); then stop the watch
        threads and abandon unsent signals (the next watcher's start-up signals cover them).

        Never raises for hub or Temporal trouble: it logs, backs off and carries on."""
        if self._started:
            raise RuntimeError("a Watcher runs once; make a new one")
        self._started = True
        loop = asyncio.get_running_loop()
        halt = threading.Event()
        threads = [
            threading.Thread(
                target=self._watch_kind,
                args=(kind, loop, halt),
                name=f"watch-{kind.PLURAL}",
                daemon=True,
            )
            for kind in self.kinds
        ]
        tasks = [
            asyncio.create_task(self._consume(), name="watcher-consume"),
            asyncio.create_task(self._sender.run(), name="watcher-flush"),
        ]
        for thread in threads:
            thread.start()
        _log.info(
            "watcher started (task queue %s, %s mode)",
            self.task_queue,
            "standalone" if self.snapshotter else "beside-KubeFleet",
        )
        try:
            await stop.wait()
        finally:
            halt.set()
            pending = [*tasks, *self._tasks]
            for task in pending:
                task.cancel()
            await self._sender.close()
            await asyncio.gather(*pending, return_exceptions=True)
            await asyncio.to_thread(_join, threads, THREAD_JOIN_SECONDS)
            _log.info("watcher stopped: %s", self._stats)

    # --- watch threads ---------------------------------------------------------------------------

    def _watch_kind(
        self, kind: type[HubObject], loop: asyncio.AbstractEventLoop, halt: threading.Event
    ) -> None:
        """Thread body: the shared list-then-watch loop for `kind`, handing every event, Resync
        and failure over to the loop's queue."""
        watch_forever(
            self._hub,
            kind,
            on_item=lambda item: self._hand_over(loop, (kind, item), halt),
            on_failure=lambda reason, _: self._hand_over(
                loop, (kind, _WatchFailed(kind, reason)), halt
            ),
            halt=halt,
            backoff=self._watch_retry,
            timeout_seconds=self._watch_seconds,
            on_malformed=_ignored,
            transform=routing_copy,
            page_size=LIST_PAGE_SIZE,
        )

    def _hand_over(
        self, loop: asyncio.AbstractEventLoop, item: _Item, halt: threading.Event
    ) -> bool:
        """Hand `item` to the loop, waiting while the hand-off is full; False when stopping."""
        return self._handoff.put(loop, item, halt)

    # --- the loop: caches and routes -------------------------------------------------------------

    async def _consume(self) -> None:
        while True:
            for kind, item in await self._handoff.take():
                try:
                    self._apply(kind, item)
                except Exception:  # one bad item must not end the watcher
                    _log.exception("could not process a %s watch item", kind.PLURAL)

    def _apply(
        self, kind: type[HubObject], item: WatchEvent[Any] | Resync[Any] | _WatchFailed
    ) -> None:
        view = self._views[kind]
        if isinstance(item, _WatchFailed):
            self._stats.watch_failures += 1
            self._watch_errors[kind] = item.error
            return
        self._watch_errors.pop(kind, None)
        if kind in PRIORITY_KINDS:
            self._apply_priority_classes(view, item)
            return
        if isinstance(item, Resync):
            first = not view.synced
            changes = view.apply_resync(item)
            self._stats.resyncs += 1
            self._count(kind, "RESYNC", "listed")
            _log.info(
                "listed %d %s%s",
                len(item.objects),
                kind.PLURAL,
                "" if first else f" again: {len(changes)} changes while not watching",
            )
            quiet_start = first and self._reconcile_at_start
            if first and kind in PLACEMENT_KINDS and not quiet_start:
                self._signal_every_placement(view.values())
            if first:  # routed as nothing, but broken objects found at start are still named
                for obj in item.objects:
                    self._warn_if_orphan(Change("ADDED", None, obj))
            if not quiet_start:
                for change in changes:
                    self._route(change)
            if kind in PLACEMENT_KINDS:
                self._sender.release_done()  # every placement holding a place
            if first and self.ready and not self._ready.is_set():
                self._ready.set()
                _log.info("watcher ready: %d placements cached", len(self._placements))
                if self._reconcile_at_start:
                    task = asyncio.create_task(self._reconcile_once())
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            return
        event_change = view.apply_event(item)
        if event_change is not None:
            self._route(event_change)
            if kind in PLACEMENT_KINDS:
                self._sender.release_done([key_of(item.object)])

    def _apply_priority_classes(self, view: View[Any], item: WatchEvent[Any] | Resync[Any]) -> None:
        """PriorityClasses route nothing: a change takes effect on each placement's next turn."""
        if isinstance(item, Resync):
            view.apply_resync(item)
            self._stats.resyncs += 1
        else:
            view.apply_event(item)
        before, self._classes = self._classes, PriorityClasses.of(view.values())
        if before == self._classes or not self.ready:
            return  # before ready, start-up signals carry the priorities
        reason = "PriorityClasses changed"
        for key in list(self._placements):
            was = self.queue_priority(key, TurnCause.PLACEMENT, before)
            if was != self.queue_priority(key, TurnCause.PLACEMENT):
                self._enqueue(
                    Route(key, names.SIGNAL_PRIORITY_CHANGED, reason, may_start=False, fan_out=True)
                )

    def queue_priority(
        self,
        key: str,
        cause: TurnCause,
        classes: PriorityClasses | None = None,
        *,
        wanting: bool = False,
    ) -> QueuePriority:
        """The profile's QueueSort answer for a turn of placement `key` caused by `cause`, with
        the PriorityClasses known now (or `classes`), and whether the placement has what it
        asks for as the watcher last saw it. A plugin that fails gives the default
        priority (and a log line), never a lost signal."""
        cached = self._placements.get(key)
        if cached is not None:
            meta = cached.metadata
        else:
            namespace, name = split_key(key)
            meta = ObjectMeta(name=name, namespace=namespace)
        # Has less than it asks for (PrioritySort's unsatisfied first): not seen yet, new, below
        # its N, or changed since it was scheduled (Scheduled not True at its generation); or
        # `wanting`, a change its condition does not show yet (a binding or itself deleting).
        unsatisfied = (
            wanting or cached is None or cached.metadata.deleting or not is_fully_scheduled(cached)
        )
        # Has nothing yet (PrioritySort's new first): never scheduled, or not seen yet.
        new = cached is None or never_scheduled(cached)
        try:
            known = self._classes if classes is None else classes
            return self._sorter.queue_sort(QueueItem(meta, cause, known, unsatisfied, new))
        except Exception:  # a third-party plugin may fail in any way
            self._sort_failures += 1
            if self._sort_failures == 1 or self._sort_failures % 1000 == 0:
                _log.exception(
                    "QueueSort plugin %s failed (%d times so far); default priority for %s",
                    self._sorter.name,
                    self._sort_failures,
                    key,
                )
            return QueuePriority()

    def _signal_every_placement(
        self, placements: Iterable[ClusterResourcePlacement] | None = None
    ) -> None:
        """Start-up signals for `placements` (every cached placement of both kinds if None)."""
        chosen = self._placements.values() if placements is None else placements
        for route in startup_routes(chosen, standalone=self.snapshotter):
            self._enqueue(route)

    async def _reconcile_once(self) -> None:
        """A start with the reconcile Schedule in place: instead of a cycle for every placement,
        one reconcile run acts on what changed while nobody watched (workers/reconcile.py).
        Without the Schedule (or Temporal refusing), every placement is signalled as before."""
        try:
            triggered = await trigger_reconcile(self._temporal, self.task_queue)
        except RPCError as exc:
            _log.warning("cannot trigger the reconcile (%s); signalling every placement", exc)
            triggered = False
        if triggered:
            _log.info("watcher start: triggered the reconcile instead of signalling placements")
            return
        _log.warning(
            "no reconcile Schedule for task queue %s; signalling every placement", self.task_queue
        )
        self._signal_every_placement()
        self._sender.wake_up()

    def _route(self, change: Change[Any]) -> None:
        routes = route_change(
            change,
            placements=self._placements,
            standalone=self.snapshotter,
            checker=self._checker,
            now=self._clock(),
            room=self._room(),
            profile=self._profile,
        )
        if not routes and (moved := _priority_inputs_changed(change)):
            routes = [moved]
        self._stats.events += 1
        self._count(type(change.new), change.type, "signalled" if routes else "ignored")
        if not routes:
            self._warn_if_orphan(change)
        for route in routes:
            self._enqueue(route)

    @staticmethod
    def _warn_if_orphan(change: Change[Any]) -> None:
        if warning := orphan_snapshot_warning(change):
            _log.warning("%s", warning)

    def _enqueue(self, route: Route) -> None:
        self._stats.routes += 1
        cause = TurnCause.FAN_OUT if route.fan_out else TurnCause.PLACEMENT
        wanting = route.signal in UNSATISFYING_SIGNALS
        priority = self.queue_priority(route.placement, cause, wanting=wanting)
        if route.for_placement is not None:
            waiting = self.queue_priority(route.for_placement, TurnCause.PLACEMENT, wanting=True)
            priority = no_later_than(priority, waiting)
        self._sender.add(route, priority)

    def _count(self, kind: type[HubObject], event: str, action: str) -> None:
        if self._metrics is not None:
            self._metrics.count_watcher_event(kind.KIND, event, action)

    def turn_execution(self) -> TurnExecutionMode | None:
        """What the watcher's signals say about where turns run: "auto" (the workers choose),
        unless `local_cycles_up_to` forces it by the fleet's size; then None (the workflows
        keep what they have) until the cluster list has arrived."""
        clusters = self._views[MemberCluster]
        return turn_execution_for(
            len(clusters) if clusters.synced else None, self._local_cycles_up_to
        )

    def _read_placement(self, key: str) -> ClusterResourcePlacement | None:
        namespace, name = split_key(key)
        try:
            return self._hub.get(kinds_for(namespace).placement, name, namespace=namespace)
        except NotFoundError:
            return None


# Signals whose turn finds the placement short of what it asks for before its Scheduled
# condition can say so: one of its bindings is going away, or the placement itself.
UNSATISFYING_SIGNALS: Final = frozenset(
    {names.SIGNAL_BINDING_DELETING, names.SIGNAL_PLACEMENT_DELETING}
)


def _priority_inputs_changed(change: Change[Any]) -> Route | None:
    """A placement whose labels or fleet-scheduler.io/ annotations (what a QueueSort plugin
    reads) changed, and nothing else KubeFleet routes: its workflow hears of the new priority
    (SIGNAL_PRIORITY_CHANGED, no turn). Never starts a workflow."""
    old, new = change.old, change.new
    if change.type != "MODIFIED" or not isinstance(new, ClusterResourcePlacement):
        return None
    if old is None or (
        old.metadata.labels == new.metadata.labels
        and old.metadata.annotations == new.metadata.annotations
    ):
        return None
    key = placement_key(new.metadata.namespace, new.metadata.name)
    return Route(
        key,
        names.SIGNAL_PRIORITY_CHANGED,
        f"placement {key}: labels or annotations changed",
        may_start=False,
    )


def _join(threads: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():
            _log.info("%s is still in a watch stream; it ends at its next event", thread.name)
