"""The worker's MemberCluster cache: what KubeFleet's scheduler reads clusters from.

KubeFleet lists all MemberClusters from its informer cache in every cycle and reads only the
placement's bindings from the API server (kubefleet-rules 4.1, steps 2 and 3): a stale binding read
could over-schedule, a cluster read a moment old cannot. Listing the whole fleet from the hub
in every cycle instead cost a 5,000-cluster worker most of its time (a 6.7 MB response parsed
into models per cycle, sixteen cycles at once, and the garbage collector walking all of them)
and ~900 MB of memory; from this cache a cycle gets the current list for the price of a lock.

One thread list-then-watches MemberClusters (`hub.informer.watch_forever`, the loop the
watcher's views run too, so no change is missed: a Resync replaces the whole view) and keeps the
models, which are frozen, so every
cycle can share them. `clusters()` returns the name-ordered list, rebuilt only after a change.
Until the first list has arrived, or while the watch is failing, `clusters()` returns None and
the activity lists from the hub itself, as before.

Like KubeFleet's, this cache can be a moment behind the hub. Unlike KubeFleet's, it is not the
same informer as the watcher's, which may run in another process; a cluster change the watcher
signals reaches this cache through its own watch, over a far shorter path (one watch event)
than the signal's (coalescing, Temporal, a workflow task, a turn).

It also follows each cluster's content version (`scheduler.requeue.decided.ContentVersions`:
the hub version at which what scheduling reads of it last changed, which heartbeats do not
move): `clusters()` is a `ClusterView` carrying them, so a cycle records the largest (its
FleetClustersVersion) and the reconcile judges a cluster's change by it."""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from hub.client import HubClient, Resync, WatchEvent
from hub.informer import Backoff, watch_forever
from hub.types import MemberCluster
from scheduler import default_profile
from scheduler.requeue.decided import ClusterView, ContentVersions, Ineligibility

__all__ = ["ClusterCache"]

log = logging.getLogger(__name__)

# Server-side length of one watch stream; the thread re-watches from where it stopped.
WATCH_SECONDS: Final = 300
# A failed list or watch is retried after 0.5 s, doubling up to 10 s, until a list succeeds.
RETRY: Final = Backoff(initial=0.5, maximum=10.0)


class ClusterCache:
    """MemberClusters as last seen by a list+watch; thread-safe, started once."""

    def __init__(
        self,
        client: HubClient,
        *,
        watch_seconds: int = WATCH_SECONDS,
        ineligibility: Ineligibility | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`ineligibility`: the profile's verdict, which content versions judge a heartbeat
        by (None: the default profile's)."""
        self._client = client
        self._watch_seconds = watch_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._objects: dict[str, MemberCluster] = {}
        self._versions = ContentVersions(ineligibility or default_profile().ineligibility)
        self._ordered: ClusterView | None = None  # None: rebuild on the next read
        self._live = False  # listed, and the watch has not failed since
        self._synced = threading.Event()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ClusterCache:
        if self._thread is not None:
            raise RuntimeError("a ClusterCache starts once")
        self._thread = threading.Thread(target=self._run, name="cluster-cache", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the watch thread to end; it notices at its next event or stream end."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first list has been applied (False after `timeout` seconds)."""
        return self._synced.wait(timeout)

    def clusters(self) -> ClusterView | None:
        """Every MemberCluster in name order with their content versions, or None while the
        cache cannot be trusted."""
        with self._lock:
            if not self._live:
                return None
            if self._ordered is None:
                self._ordered = ClusterView(
                    (self._objects[name] for name in sorted(self._objects)),
                    self._versions.versions(),
                )
            return ClusterView(self._ordered, self._ordered.versions)

    def size(self) -> int | None:
        """How many MemberClusters the cache holds (None while it cannot be trusted): what
        `clusters` would list, without building the list."""
        with self._lock:
            return len(self._objects) if self._live else None

    def _run(self) -> None:
        watch_forever(
            self._client,
            MemberCluster,
            on_item=self._apply,
            on_failure=self._failed,
            halt=self._halt,
            backoff=RETRY,
            timeout_seconds=self._watch_seconds,
        )

    def _failed(self, reason: str, delay: float) -> bool:
        with self._lock:
            self._live = False  # cycles list from the hub until the next list lands
        return True

    def _apply(self, item: WatchEvent[MemberCluster] | Resync[MemberCluster]) -> bool:
        now = self._clock()
        with self._lock:
            if isinstance(item, Resync):
                self._objects = {c.metadata.name: c for c in item.objects}
                self._versions.resync(item.objects)
                self._live = True
            elif item.type == "DELETED":
                self._objects.pop(item.object.metadata.name, None)
                self._versions.deleted(item.object.metadata.name)
            else:
                self._objects[item.object.metadata.name] = item.object
                self._versions.updated(item.object, now)
            self._ordered = None
        if isinstance(item, Resync):
            # The listed models live until their cluster changes. Moved out of the collector's
            # generations, they are not walked by every full collection: at 5,000 clusters
            # (35 MB of objects) one took ~140 ms, a pause in whichever cycle triggered it.
            gc.freeze()
            if not self._synced.is_set():
                log.info("MemberCluster cache: %d clusters listed", len(item.objects))
                self._synced.set()
        return True
