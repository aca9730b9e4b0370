"""--data-dir: a restart keeps every object and uid; resourceVersions keep increasing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from devhub import DevHub
from tests.integration.devhub.devhub_helpers import BINDINGS, CLUSTERS, Client, binding, cluster


def test_a_restart_keeps_objects_uids_and_versions(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    data = tmp_path / "hub"
    first = devhub_factory(data_dir=data)
    client = Client(first)
    kept = client.create(CLUSTERS, cluster("m1", labels={"env": "prod"}))
    doomed = client.create(CLUSTERS, cluster("m2"))
    held = client.create(BINDINGS, binding("b1", finalizers=["kubernetes-fleet.io/x"]))
    client.delete(f"{CLUSTERS}/{doomed['metadata']['name']}")
    client.delete(f"{BINDINGS}/b1")
    last_rv = first.resource_version
    first.stop()

    second = devhub_factory(data_dir=data)
    assert second.token == first.token  # kubeconfigs survive restarts too
    again = Client(second)
    assert again.get(f"{CLUSTERS}/m1").json() == kept
    assert again.get(f"{CLUSTERS}/m2").status_code == 404
    restored = again.get(f"{BINDINGS}/b1").json()
    assert restored["metadata"]["uid"] == held["metadata"]["uid"]
    assert restored["metadata"]["deletionTimestamp"]
    newer = again.create(CLUSTERS, cluster("m3"))
    assert int(newer["metadata"]["resourceVersion"]) > last_rv
    listing = again.get(CLUSTERS).json()
    assert int(listing["metadata"]["resourceVersion"]) >= int(newer["metadata"]["resourceVersion"])


def test_a_watch_from_before_a_restart_must_relist(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    first = devhub_factory(data_dir=tmp_path / "hub")
    rv = Client(first).create(CLUSTERS, cluster("m1"))["metadata"]["resourceVersion"]
    Client(first).create(CLUSTERS, cluster("m2"))
    first.stop()
    second = devhub_factory(data_dir=tmp_path / "hub")
    response = Client(second).get(CLUSTERS, params={"watch": "true", "resourceVersion": rv})
    assert '"code":410' in response.text


def test_reset_clears_the_data_dir_too(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    first = devhub_factory(data_dir=tmp_path / "hub")
    Client(first).create(CLUSTERS, cluster("m1"))
    first.reset()
    rv = first.resource_version
    first.stop()
    second = devhub_factory(data_dir=tmp_path / "hub")
    assert Client(second).get(CLUSTERS).json()["items"] == []
    assert second.resource_version >= rv


def test_without_a_data_dir_nothing_survives(devhub_factory: Callable[..., DevHub]) -> None:
    first = devhub_factory()
    Client(first).create(CLUSTERS, cluster("m1"))
    first.stop()
    second = devhub_factory()
    assert Client(second).get(CLUSTERS).json()["items"] == []
