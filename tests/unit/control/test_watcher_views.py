"""The watcher's per-kind view: watch events and re-lists become changes with the old object."""

from __future__ import annotations

import pytest

from control.views import View
from hub.client import Resync, WatchEvent
from hub.types import MemberCluster, MemberClusterSpec, ObjectMeta


def cluster(name: str, rv: str, **labels: str) -> MemberCluster:
    return MemberCluster(
        metadata=ObjectMeta(name=name, resource_version=rv, labels=labels),
        spec=MemberClusterSpec(),
    )


def resync(*objects: MemberCluster) -> Resync[MemberCluster]:
    return Resync(objects=list(objects), resource_version="100")


def event(kind: str, obj: MemberCluster) -> WatchEvent[MemberCluster]:
    return WatchEvent(type=kind, object=obj, resource_version=obj.metadata.resource_version or "")  # type: ignore[arg-type]


def test_the_first_resync_fills_the_view_without_changes() -> None:
    view = View(MemberCluster)
    assert view.apply_resync(resync(cluster("a", "1"), cluster("b", "2"))) == []
    assert view.synced and sorted(view.objects) == ["a", "b"]


def test_a_later_resync_yields_adds_updates_and_deletes_by_name() -> None:
    view = View(MemberCluster)
    view.apply_resync(resync(cluster("a", "1"), cluster("b", "2"), cluster("c", "3")))
    changes = view.apply_resync(
        resync(cluster("a", "1"), cluster("b", "7", env="prod"), cluster("d", "8"))
    )
    assert [(c.type, c.name, c.resynced) for c in changes] == [
        ("MODIFIED", "b", True),
        ("DELETED", "c", True),
        ("ADDED", "d", True),
    ]
    modified, deleted, added = changes
    assert modified.old is not None and modified.old.metadata.labels == {}
    assert modified.new.metadata.labels == {"env": "prod"}
    assert deleted.new.metadata.resource_version == "3"  # the last state seen
    assert added.old is None
    assert sorted(view.objects) == ["a", "b", "d"]


@pytest.mark.parametrize(
    ("kind", "obj", "expected"),
    [
        pytest.param("ADDED", cluster("new", "5"), ("ADDED", False), id="add"),
        pytest.param("MODIFIED", cluster("a", "5", x="y"), ("MODIFIED", True), id="update"),
        pytest.param("ADDED", cluster("a", "5"), ("MODIFIED", True), id="add-of-known-is-update"),
        pytest.param("DELETED", cluster("a", "5"), ("DELETED", True), id="delete"),
        pytest.param("MODIFIED", cluster("a", "1"), None, id="same-version-replayed"),
        pytest.param("DELETED", cluster("unknown", "5"), None, id="delete-of-unknown"),
    ],
)
def test_watch_events_become_changes_with_the_cached_old_object(kind, obj, expected) -> None:
    view = View(MemberCluster)
    view.apply_resync(resync(cluster("a", "1")))
    change = view.apply_event(event(kind, obj))
    if expected is None:
        assert change is None
        return
    assert change is not None
    assert (change.type, change.old is not None) == expected
    assert not change.resynced
    assert (obj.name in view.objects) is (kind != "DELETED")
