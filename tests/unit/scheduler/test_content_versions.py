"""Content versions (scheduler.requeue.decided): the hub version at which what scheduling reads of
a member cluster last changed, as a watch stream shows it; heartbeats do not move it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hub.types import MemberCluster
from scheduler import default_profile
from scheduler.requeue.decided import ClusterView, ContentVersions, reconcile_versions, view_version
from scheduler.testing import member_cluster

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ineligibility = default_profile().ineligibility


def at(cluster: MemberCluster, version: int | str) -> MemberCluster:
    meta = cluster.metadata.model_copy(update={"resource_version": str(version)})
    return cluster.model_copy(update={"metadata": meta})


def beat(name: str, version: int, now: datetime, **kwargs: object) -> MemberCluster:
    """The cluster as its member agent's heartbeat at `now` leaves it."""
    return at(member_cluster(name, now, heartbeat_age=timedelta(0), **kwargs), version)  # type: ignore[arg-type]


def test_a_heartbeat_keeps_the_content_version_and_a_label_change_moves_it() -> None:
    tracked = ContentVersions(ineligibility)
    tracked.resync([beat("a", 10, NOW), beat("b", 11, NOW)])
    assert tracked.versions() == {"a": 10, "b": 11}
    later = NOW + timedelta(minutes=1)
    tracked.updated(beat("a", 20, later), later)
    tracked.updated(beat("b", 21, later, labels={"env": "prod"}), later)
    assert tracked.versions() == {"a": 10, "b": 21}
    tracked.deleted("a")
    assert tracked.versions() == {"b": 21}


def test_a_heartbeat_that_makes_a_stale_cluster_eligible_again_moves_it() -> None:
    """Staleness comes with no write; the heartbeat that ends it is a change a cycle that judged
    the cluster stale never read (the watcher's "became eligible")."""
    tracked = ContentVersions(ineligibility)
    tracked.resync([beat("a", 10, NOW)])
    late = NOW + timedelta(minutes=30)
    tracked.updated(beat("a", 30, late), late)
    assert tracked.versions() == {"a": 30}
    # Nearly stale counts as stale (the clock margin): the next heartbeat moves it too.
    nearly = late + timedelta(minutes=4, seconds=30)
    tracked.updated(beat("a", 40, nearly), nearly)
    assert tracked.versions() == {"a": 40}


def test_a_relist_keeps_what_it_knew_only_for_an_object_that_did_not_change() -> None:
    tracked = ContentVersions(ineligibility)
    tracked.resync([beat("a", 10, NOW), beat("b", 11, NOW)])
    tracked.updated(beat("a", 20, NOW), NOW)  # a heartbeat: still 10
    # Listed again after a gap: `a` unchanged since (kept), `b` written meanwhile (its own
    # version: what happened in the gap is not known), `c` new, a non-integer version unknown.
    tracked.resync([beat("a", 20, NOW), beat("b", 35, NOW), beat("c", 36, NOW)])
    assert tracked.versions() == {"a": 10, "b": 35, "c": 36}
    tracked.resync([at(beat("a", 1, NOW), "x")])
    assert tracked.versions() == {}


def test_a_view_records_its_largest_content_version_and_a_plain_list_its_largest_version() -> None:
    listed = [beat("a", 40, NOW), beat("b", 50, NOW)]
    assert view_version(listed) == 50
    assert view_version(ClusterView(listed, {"a": 12, "b": 30})) == 30
    assert view_version(ClusterView(listed, {"a": 12})) is None  # b's is not known
    assert view_version(ClusterView([], {})) is None


def test_the_reconcile_takes_a_cache_s_content_version_only_when_the_cache_is_not_behind() -> None:
    """The reconcile listed `a` at 40 and `b` at 50; its process's cache holds `a` at 45 (past
    the list: its content version 12 holds) and `b` at 48 (behind: `b`'s own version 50)."""
    listed = [beat("a", 40, NOW), beat("b", 50, NOW), at(beat("c", 1, NOW), "x")]
    cache = ClusterView([beat("a", 45, NOW), beat("b", 48, NOW)], {"a": 12, "b": 13})
    assert reconcile_versions(listed, cache) == {"a": 12, "b": 50}
    assert reconcile_versions(listed, None) == {"a": 40, "b": 50}
