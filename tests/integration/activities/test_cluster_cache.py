"""The worker's MemberCluster cache against a real devhub: it follows creates, label changes
and deletes, run_cycle schedules from it, and it answers None (cycles list from the hub) until
its first list and after its watch fails."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from temporalio.testing import ActivityEnvironment

from activities.clusters import ClusterCache
from devhub import DevHub
from hub.client import HubClient
from hub.types import MemberCluster
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    prepare_and_cycle,
    targets,
)
from tests.support.waits import until

T = TypeVar("T")
WAIT_S = 10.0


@pytest.fixture
def cache(hub: HubClient) -> Iterator[ClusterCache]:
    started = ClusterCache(hub, watch_seconds=5).start()
    yield started
    started.stop()


def names(cache: ClusterCache) -> list[str] | None:
    listed = cache.clusters()
    return None if listed is None else [c.metadata.name for c in listed]


def test_the_cache_follows_creates_label_changes_and_deletes(
    hub: HubClient, cache: ClusterCache
) -> None:
    add_cluster(hub, "b")
    add_cluster(hub, "a", labels={"env": "prod"})
    assert cache.wait_synced(WAIT_S)
    until(lambda: names(cache) == ["a", "b"], what="both clusters, in name order", timeout=WAIT_S)
    assert cache.size() == 2  # what the turn advisor reads, without a list

    hub.patch(MemberCluster, "a", {"metadata": {"labels": {"env": "dev"}}})
    until(
        lambda: (c := cache.clusters()) and c[0].metadata.labels.get("env") == "dev",
        what="a's new label",
        timeout=WAIT_S,
    )
    hub.delete(MemberCluster, "b")
    until(lambda: names(cache) == ["a"], what="b gone", timeout=WAIT_S)
    assert cache.size() == 1


def test_run_cycle_schedules_from_the_cache(
    hub: HubClient,
    cache: ClusterCache,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    for name in ("a", "b", "c"):
        add_cluster(hub, name)
    until(lambda: names(cache) == ["a", "b", "c"], what="three clusters cached", timeout=WAIT_S)
    rig = make_activities(clusters=cache.clusters)
    add_placement(hub, "web", {"placementType": "PickAll"})

    _, report = prepare_and_cycle(env, rig.activities, "web")

    assert report.clusters_seen == 3
    assert sorted(targets(bindings_of(hub, "web"), "Scheduled")) == ["a", "b", "c"]
    (read,) = [s for s in rig.spans.get_finished_spans() if s.name == "read"]
    assert read.attributes is not None and read.attributes["clusters_cached"] is True


def test_until_listed_and_after_a_failed_watch_the_cache_answers_none(
    devhub_factory: Callable[..., DevHub],
) -> None:
    hub_server = devhub_factory()
    client = HubClient.from_url(hub_server.url, token=hub_server.token, timeout=(1.0, 2.0))
    cache = ClusterCache(client, watch_seconds=5)
    try:
        assert cache.clusters() is None and cache.size() is None  # not started: nothing listed
        cache.start()
        assert cache.wait_synced(WAIT_S)
        assert cache.clusters() == [] and cache.size() == 0
        hub_server.stop()
        until(lambda: cache.clusters() is None, what="the cache to distrust itself", timeout=WAIT_S)
        assert cache.size() is None
    finally:
        cache.stop()
        client.close()


def test_a_full_list_moves_the_listed_models_out_of_the_garbage_collector(
    hub: HubClient,
) -> None:
    """After each full list the cache freezes what is alive (gc.freeze): the listed models are
    then not walked by every full collection, a long pause at thousands of clusters."""
    add_cluster(hub, "a")
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    started = ClusterCache(hub, watch_seconds=5).start()
    try:
        assert started.wait_synced(WAIT_S)
        listed = started.clusters()
        assert listed is not None and [c.metadata.name for c in listed] == ["a"]
        assert gc.get_freeze_count() > 0
        collected = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
        assert not any(id(c) in collected for c in listed)  # frozen: in no generation
    finally:
        started.stop()
        gc.unfreeze()
