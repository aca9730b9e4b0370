"""Watch: every event after a resourceVersion, in order; 410 when too old; bookmarks; selectors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from devhub import DevHub
from tests.integration.devhub.devhub_helpers import (
    BINDINGS,
    CLUSTERS,
    PLACEMENTS,
    TABLE_ACCEPT,
    Client,
    binding,
    cluster,
)


def _names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def test_watch_from_a_resource_version_sees_every_later_event_in_order(api: Client) -> None:
    start = api.create(CLUSTERS, cluster("before"))["metadata"]["resourceVersion"]
    api.create(CLUSTERS, cluster("a"))
    api.patch(f"{CLUSTERS}/a", {"metadata": {"labels": {"x": "1"}}})
    api.create(PLACEMENTS, {"apiVersion": "placement.kubernetes-fleet.io/v1beta1",
                            "kind": "ClusterResourcePlacement", "metadata": {"name": "other"},
                            "spec": {}})
    api.delete(f"{CLUSTERS}/a")
    with api.watch(CLUSTERS, resourceVersion=start) as watch:
        api.create(CLUSTERS, cluster("live"))
        events = watch.take(4)
    assert _names(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"),
                              ("ADDED", "live")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 4


def test_watch_without_a_resource_version_starts_with_the_current_objects(api: Client) -> None:
    api.create(CLUSTERS, cluster("b"))
    api.create(CLUSTERS, cluster("a"))
    with api.watch(CLUSTERS) as watch:
        assert _names(watch.take(2)) == [("ADDED", "a"), ("ADDED", "b")]
        api.delete(f"{CLUSTERS}/b")
        assert _names([watch.next()]) == [("DELETED", "b")]


def test_deleted_event_carries_the_deletion_resource_version(api: Client) -> None:
    created = api.create(BINDINGS, binding("b1", finalizers=["kubernetes-fleet.io/x"]))
    start = created["metadata"]["resourceVersion"]
    api.delete(f"{BINDINGS}/b1")
    api.patch(f"{BINDINGS}/b1", {"metadata": {"finalizers": None}})
    with api.watch(BINDINGS, resourceVersion=start) as watch:
        marked, gone = watch.take(2)
    assert (marked["type"], gone["type"]) == ("MODIFIED", "DELETED")
    assert marked["object"]["metadata"]["deletionTimestamp"]
    assert int(gone["object"]["metadata"]["resourceVersion"]) > int(
        marked["object"]["metadata"]["resourceVersion"])


def test_watch_from_a_version_older_than_the_window_is_expired(
    devhub_factory: Callable[..., DevHub],
) -> None:
    client = Client(devhub_factory(watch_window=2))
    start = client.create(CLUSTERS, cluster("a"))["metadata"]["resourceVersion"]
    for name in "bcd":
        client.create(CLUSTERS, cluster(name))
    with client.watch(CLUSTERS, resourceVersion=start) as watch:
        event = watch.next()
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410
        assert event["object"]["reason"] == "Expired"
        assert watch.rest() == []


def test_watch_within_the_window_still_replays(devhub_factory: Callable[..., DevHub]) -> None:
    client = Client(devhub_factory(watch_window=2))
    client.create(CLUSTERS, cluster("a"))
    start = client.create(CLUSTERS, cluster("b"))["metadata"]["resourceVersion"]
    client.create(CLUSTERS, cluster("c"))
    client.create(CLUSTERS, cluster("d"))
    with client.watch(CLUSTERS, resourceVersion=start) as watch:
        assert _names(watch.take(2)) == [("ADDED", "c"), ("ADDED", "d")]


def test_timeout_seconds_ends_the_stream(api: Client) -> None:
    rv = api.get(CLUSTERS).json()["metadata"]["resourceVersion"]
    began = time.monotonic()
    with api.watch(CLUSTERS, timeoutSeconds=1, resourceVersion=rv) as watch:
        assert watch.rest() == []
    assert 0.9 <= time.monotonic() - began < 4


def test_bookmarks_arrive_only_when_allowed(api: Client) -> None:
    rv = api.create(CLUSTERS, cluster("a"))["metadata"]["resourceVersion"]
    with api.watch(CLUSTERS, resourceVersion=rv, allowWatchBookmarks="true") as watch:
        event = watch.next()
    assert event["type"] == "BOOKMARK"
    assert event["object"]["kind"] == "MemberCluster"
    assert int(event["object"]["metadata"]["resourceVersion"]) >= int(rv)
    with api.watch(CLUSTERS, resourceVersion=rv, timeoutSeconds=1) as watch:  # > interval
        assert watch.rest() == []


def test_send_initial_events_ends_with_a_marked_bookmark(api: Client) -> None:
    api.create(CLUSTERS, cluster("a"))
    with api.watch(CLUSTERS, sendInitialEvents="true", allowWatchBookmarks="true",
                   resourceVersionMatch="NotOlderThan") as watch:
        added, bookmark = watch.take(2)
    assert added["type"] == "ADDED"
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_label_selector_turns_label_changes_into_added_and_deleted(api: Client) -> None:
    rv = api.create(CLUSTERS, cluster("a"))["metadata"]["resourceVersion"]
    api.patch(f"{CLUSTERS}/a", {"metadata": {"labels": {"env": "prod"}}})
    api.patch(f"{CLUSTERS}/a", {"metadata": {"labels": {"env": "prod", "x": "y"}}})
    api.patch(f"{CLUSTERS}/a", {"metadata": {"labels": {"env": "dev"}}})
    api.create(CLUSTERS, cluster("b", labels={"env": "dev"}))
    api.create(CLUSTERS, cluster("c", labels={"env": "prod"}))
    with api.watch(CLUSTERS, resourceVersion=rv, labelSelector="env=prod") as watch:
        events = watch.take(4)
    assert _names(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"),
                              ("ADDED", "c")]


def test_field_selector_watches_one_object(api: Client) -> None:
    rv = api.create(CLUSTERS, cluster("a"))["metadata"]["resourceVersion"]
    api.create(CLUSTERS, cluster("b"))
    api.delete(f"{CLUSTERS}/a")
    api.delete(f"{CLUSTERS}/b")
    with api.watch(CLUSTERS, resourceVersion=rv, fieldSelector="metadata.name=b") as watch:
        assert _names(watch.take(2)) == [("ADDED", "b"), ("DELETED", "b")]


def test_legacy_watch_path_watches_one_object(api: Client) -> None:
    rv = api.create(CLUSTERS, cluster("a"))["metadata"]["resourceVersion"]
    api.create(CLUSTERS, cluster("b"))
    api.patch(f"{CLUSTERS}/a", {"metadata": {"labels": {"x": "1"}}})
    path = CLUSTERS.replace("/memberclusters", "/watch/memberclusters/a")
    with api.watch(path, resourceVersion=rv) as watch:
        assert _names([watch.next()]) == [("MODIFIED", "a")]


def test_watch_with_a_bad_selector_or_version_is_a_bad_request(api: Client) -> None:
    for params in ({"labelSelector": "a in ("}, {"resourceVersion": "abc"}):
        response = api.get(CLUSTERS, params={"watch": "true", **params})
        assert response.status_code == 400, params
        assert response.json()["kind"] == "Status"


def test_watch_events_can_be_tables(api: Client) -> None:
    rv = api.create(CLUSTERS, cluster("a"))["metadata"]["resourceVersion"]
    api.create(CLUSTERS, cluster("b"))
    with api.watch(CLUSTERS, resourceVersion=rv, read_timeout=5) as watch:
        plain = watch.next()
    assert plain["object"]["kind"] == "MemberCluster"
    response = api.request("GET", CLUSTERS, params={"watch": "true", "resourceVersion": rv,
                                                    "timeoutSeconds": 1},
                           headers={"Accept": TABLE_ACCEPT})
    lines = [line for line in response.text.splitlines() if line]
    assert '"kind":"Table"' in lines[0]
    assert '"cells":["b"' in lines[0]


def test_list_then_watch_never_misses_an_event(api: Client) -> None:
    names = [f"c{i:03d}" for i in range(60)]
    done = threading.Event()

    def writer() -> None:
        for name in names:
            api.create(CLUSTERS, cluster(name))
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.05)
    listing = api.get(CLUSTERS).json()
    listed = {item["metadata"]["name"] for item in listing["items"]}
    seen: set[str] = set()
    with api.watch(CLUSTERS, resourceVersion=listing["metadata"]["resourceVersion"]) as watch:
        for _ in range(len(names) - len(listed)):  # each read is bounded by the watch's timeout
            event = watch.next()
            assert event["type"] == "ADDED"
            name = event["object"]["metadata"]["name"]
            assert name not in listed and name not in seen
            seen.add(name)
    thread.join(timeout=30)
    assert not thread.is_alive(), "the writer did not finish its creates within 30s"
    assert done.is_set()
    assert listed | seen == set(names)


def test_reset_ends_open_watches(devhub_factory: Callable[..., DevHub]) -> None:
    hub = devhub_factory()
    client = Client(hub)
    rv = client.create(CLUSTERS, cluster("a"))["metadata"]["resourceVersion"]
    with client.watch(CLUSTERS, resourceVersion=rv) as watch:
        hub.reset()
        assert watch.rest() == []
    response = client.get(CLUSTERS, params={"watch": "true", "resourceVersion": rv})
    assert '"code":410' in response.text


@pytest.mark.parametrize("watchers", [3])
def test_every_watcher_gets_every_event(api: Client, watchers: int) -> None:
    rv = api.create(CLUSTERS, cluster("seed"))["metadata"]["resourceVersion"]
    streams = [api.watch(CLUSTERS, resourceVersion=rv) for _ in range(watchers)]
    try:
        for name in ("x", "y", "z"):
            api.create(CLUSTERS, cluster(name))
        for stream in streams:
            assert _names(stream.take(3)) == [("ADDED", "x"), ("ADDED", "y"), ("ADDED", "z")]
    finally:
        for stream in streams:
            stream.close()


def test_watch_from_a_version_newer_than_the_hub_must_relist(api: Client) -> None:
    """Such a version predates a restart without --data-dir: waiting for it would miss events."""
    api.create(CLUSTERS, cluster("a"))
    with api.watch(CLUSTERS, resourceVersion="999999999") as watch:
        event = watch.next()
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410


def test_a_watch_fault_fails_the_watch_at_start(api: Client, devhub: DevHub) -> None:
    devhub.faults.inject(verb="watch", resource="memberclusters", status=503)
    response = api.get(CLUSTERS, params={"watch": "true"})
    assert response.status_code == 503
    assert api.get(CLUSTERS).status_code == 200  # list is another verb
