"""HubClient watches against a real devhub: order, expiry, stream ends, and list_then_watch.

The property that matters: a consumer that applies what `list_then_watch` yields ends up with
exactly the hub's objects, however often streams time out or fall too far behind (410)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hub.client import Bookmark, HubClient, Resync, WatchEvent
from hub.errors import GoneError, NotFoundError
from hub.types import MemberCluster
from tests.integration.hub.hub_helpers import Collector, cluster, tainted

Event = WatchEvent[MemberCluster] | Resync[MemberCluster]


def object_events(events: Iterator[Any], count: int) -> list[WatchEvent[MemberCluster]]:
    """The first `count` object events of a watch, skipping bookmarks; closes the stream."""
    seen: list[WatchEvent[MemberCluster]] = []
    try:
        for event in events:
            if isinstance(event, WatchEvent):
                seen.append(event)
            if len(seen) == count:
                break
    finally:
        events.close()  # type: ignore[attr-defined]
    return seen


def summary(events: list[WatchEvent[MemberCluster]]) -> list[tuple[str, str]]:
    return [(event.type, event.object.name) for event in events]


def position(hub: HubClient) -> str:
    """A resourceVersion to watch from. One write first: on a hub that never saw a write the
    list reports "0", which a watch reads as "start anywhere" rather than "after this"."""
    hub.create(cluster("seed"))
    return hub.list(MemberCluster).resource_version


# --- watch -----------------------------------------------------------------------------------


def test_watch_replays_every_change_after_a_resource_version_in_order(hub: HubClient) -> None:
    start = position(hub)
    a = hub.create(cluster("a"))
    hub.update(tainted(a, "gpu"))
    hub.create(cluster("b"))
    hub.delete(MemberCluster, "a")
    events = object_events(hub.watch(MemberCluster, start, timeout_seconds=5), 4)
    assert summary(events) == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    versions = [int(event.resource_version) for event in events]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert [t.key for t in events[1].object.spec.taints] == ["gpu"]


def test_watch_delivers_changes_made_while_it_waits(hub: HubClient) -> None:
    start = position(hub)
    collector: Collector[Any] = Collector(
        lambda stop: hub.watch(MemberCluster, start, timeout_seconds=2, allow_bookmarks=False)
    )
    try:
        time.sleep(0.3)
        hub.create(cluster("late"))
        (event,) = collector.take(1)
    finally:
        collector.close()
    assert (event.type, event.object.name) == ("ADDED", "late")


def test_watch_reassembles_events_larger_than_one_read(hub: HubClient) -> None:
    start = position(hub)
    big = "x" * 150_000  # several socket reads, under the API's 256 KiB annotation limit
    hub.create(MemberCluster.from_wire({"metadata": {"name": "big", "annotations": {"a": big}}}))
    hub.create(cluster("small"))
    events = object_events(hub.watch(MemberCluster, start, timeout_seconds=5), 2)
    assert summary(events) == [("ADDED", "big"), ("ADDED", "small")]
    assert events[0].object.metadata.annotations["a"] == big


def test_watch_filters_by_label_selector(hub: HubClient) -> None:
    start = position(hub)
    hub.create(cluster("other", labels={"env": "dev"}))
    hub.create(cluster("mine", labels={"env": "prod"}))
    events = object_events(
        hub.watch(MemberCluster, start, label_selector={"env": "prod"}, timeout_seconds=5), 1
    )
    assert summary(events) == [("ADDED", "mine")]


def test_watch_sends_bookmarks_with_the_current_resource_version(hub: HubClient) -> None:
    created = hub.create(cluster("a"))
    events = hub.watch(MemberCluster, created.metadata.resource_version, timeout_seconds=5)
    try:
        bookmark = next(e for e in events if isinstance(e, Bookmark))
    finally:
        events.close()  # type: ignore[attr-defined]
    assert int(bookmark.resource_version) >= int(created.metadata.resource_version or 0)


def test_watch_ends_when_the_server_times_the_stream_out(hub: HubClient) -> None:
    start = position(hub)
    began = time.monotonic()
    events = list(hub.watch(MemberCluster, start, timeout_seconds=1, allow_bookmarks=False))
    assert events == []
    assert 0.5 < time.monotonic() - began < 5.0


def test_watch_from_a_resource_version_older_than_the_window_is_gone(
    devhub_factory: Any,
) -> None:
    server = devhub_factory(watch_window=3)
    with HubClient.from_url(server.url, token=server.token) as client:
        first = client.create(cluster("first"))
        for index in range(5):
            client.create(cluster(f"later-{index}"))
        with pytest.raises(GoneError) as caught:
            next(iter(client.watch(MemberCluster, first.metadata.resource_version)))
    assert caught.value.status == 410


# --- list_then_watch -------------------------------------------------------------------------


def test_list_then_watch_starts_with_the_current_set_then_follows_changes(
    hub: HubClient,
) -> None:
    hub.create(cluster("a"))
    hub.create(cluster("b"))
    collector: Collector[Event] = Collector(
        lambda stop: hub.list_then_watch(MemberCluster, timeout_seconds=5, stop=stop)
    )
    try:
        (resync,) = collector.take(1)
        hub.create(cluster("c"))
        hub.delete(MemberCluster, "a")
        changes = collector.take(2)
    finally:
        collector.close()
    assert isinstance(resync, Resync)
    assert sorted(obj.name for obj in resync.objects) == ["a", "b"]
    assert [(e.type, e.object.name) for e in changes if isinstance(e, WatchEvent)] == [
        ("ADDED", "c"),
        ("DELETED", "a"),
    ]


def test_list_then_watch_resumes_after_the_stream_times_out(hub: HubClient, devhub: Any) -> None:
    devhub.stats.clear()
    collector: Collector[Event] = Collector(
        lambda stop: hub.list_then_watch(MemberCluster, timeout_seconds=1, stop=stop)
    )
    try:
        (resync,) = collector.take(1)
        time.sleep(2.5)  # at least two streams end meanwhile
        hub.create(cluster("after-timeouts"))
        (event,) = collector.take(1)
    finally:
        collector.close()
    assert isinstance(resync, Resync) and resync.objects == []
    assert isinstance(event, WatchEvent)
    assert (event.type, event.object.name) == ("ADDED", "after-timeouts")
    assert devhub.stats.count("watch", "memberclusters") >= 3
    assert devhub.stats.count("list", "memberclusters") == 1  # resumed, not re-listed


def test_list_then_watch_lists_again_after_410(devhub_factory: Any) -> None:
    # No bookmarks and a selector that hides the churn: the watch position stays behind while
    # the window moves on, so resuming after the stream ends gets 410 Expired.
    server = devhub_factory(watch_window=3, bookmark_interval=3600)
    with HubClient.from_url(server.url, token=server.token) as client:
        client.create(cluster("kept", labels={"watched": "yes"}))
        collector: Collector[Event] = Collector(
            lambda stop: client.list_then_watch(
                MemberCluster, label_selector={"watched": "yes"}, timeout_seconds=1, stop=stop
            )
        )
        try:
            (first,) = collector.take(1)
            for index in range(5):
                client.create(cluster(f"churn-{index}"))
            client.delete(MemberCluster, "churn-0")
            (second,) = collector.take(1)
            client.patch(MemberCluster, "kept", {"metadata": {"annotations": {"seen": "yes"}}})
            (change,) = collector.take(1)
        finally:
            collector.close()
    assert isinstance(first, Resync) and isinstance(second, Resync)
    assert [obj.name for obj in first.objects] == [obj.name for obj in second.objects] == ["kept"]
    assert int(second.resource_version) > int(first.resource_version)
    assert isinstance(change, WatchEvent)
    assert change.object.metadata.annotations == {"seen": "yes"}  # watching again after it
    assert server.stats.count("list", "memberclusters") == 2


def apply(view: dict[str, MemberCluster], event: Event) -> None:
    if isinstance(event, Resync):
        view.clear()
        view.update((obj.name, obj) for obj in event.objects)
    elif event.type == "DELETED":
        view.pop(event.object.name, None)
    else:
        view[event.object.name] = event.object


WATCHED_SHARE = 0.15
CHURN_SECONDS = 3.5
CHURN_SECONDS_MAX = 20.0


def test_a_list_then_watch_consumer_converges_on_the_hub_through_timeouts_and_410(
    devhub_factory: Any,
) -> None:
    # One-second streams, a two-event window, rare bookmarks, and most churn outside the
    # selector: the consumer's position falls out of the window between its events, so resuming
    # after a stream often finds it expired (410), while a writer keeps creating, updating and
    # deleting what it watches.
    server = devhub_factory(watch_window=2, bookmark_interval=5)
    watched = {"watched": "yes"}
    rng = random.Random(7)
    with HubClient.from_url(server.url, token=server.token) as client:
        view: dict[str, MemberCluster] = {}
        lock = threading.Lock()

        def consume(stop: threading.Event) -> Iterator[Event]:
            for event in client.list_then_watch(
                MemberCluster, label_selector=watched, timeout_seconds=1, stop=stop
            ):
                with lock:
                    apply(view, event)
                yield event

        def churn(name: str, labels: dict[str, str]) -> None:
            try:
                current = client.get(MemberCluster, name)
            except NotFoundError:
                client.create(cluster(name, labels=labels))
                return
            if rng.random() < 0.3:
                client.delete(MemberCluster, name)
            else:
                client.update(tainted(current, f"t{rng.randrange(1000)}"))

        collector: Collector[Event] = Collector(consume)
        try:
            collector.take(1)
            started = time.monotonic()
            # Churn for a few streams, and on until the consumer has had to re-list at least once.
            while time.monotonic() - started < CHURN_SECONDS or (
                server.stats.count("list", "memberclusters") < 2
                and time.monotonic() - started < CHURN_SECONDS_MAX
            ):
                if rng.random() < WATCHED_SHARE:
                    churn(f"watched-{rng.randrange(8)}", watched)
                else:
                    churn(f"noise-{rng.randrange(8)}", {})
            truth = {obj.name: obj for obj in client.list(MemberCluster, label_selector=watched)}
            settle = time.monotonic() + 10.0
            while time.monotonic() < settle:
                with lock:
                    if view == truth:
                        break
                time.sleep(0.1)
        finally:
            collector.close()
        assert collector.error is None
        with lock:
            assert sorted(view) == sorted(truth)
            assert view == truth
        relists = server.stats.count("list", "memberclusters") - 2  # the first and the truth
        assert relists >= 1, server.stats.snapshot()


def test_list_then_watch_hands_over_transformed_objects_page_by_page(
    hub: HubClient, devhub: Any
) -> None:
    # What the watcher relies on to keep only routing copies: every listed object (on every
    # page) and every watched one goes through `transform` before it is handed over.
    for index in range(5):
        hub.create(cluster(f"listed-{index}"))
    devhub.stats.clear()
    seen: list[str] = []

    def mark(obj: MemberCluster) -> MemberCluster:
        seen.append(obj.name)
        return obj.model_copy(update={"spec": obj.spec.model_copy(update={"taints": []})})

    collector: Collector[Event] = Collector(
        lambda stop: hub.list_then_watch(
            MemberCluster, timeout_seconds=5, stop=stop, page_size=2, transform=mark
        )
    )
    try:
        (resync,) = collector.take(1)
        hub.create(tainted(cluster("watched"), "gpu"))
        (event,) = [e for e in collector.take(1) if isinstance(e, WatchEvent)]
    finally:
        collector.close()
    assert isinstance(resync, Resync)
    assert sorted(obj.name for obj in resync.objects) == [f"listed-{i}" for i in range(5)]
    assert devhub.stats.count("list", "memberclusters") == 3  # pages of 2
    assert (event.object.name, event.object.spec.taints) == ("watched", [])  # transformed
    assert sorted(seen) == sorted([f"listed-{i}" for i in range(5)] + ["watched"])
