"""Fixtures shared by every test: devhub, the local hub API server, over real HTTP.

- `devhub`: one in-memory DevHub for the whole session (not autouse; tests that need a hub ask).
- `hub_kubeconfig`: resets that DevHub (no objects, no faults, no stats) and returns a kubeconfig
  for it, so each test starts from an empty hub without paying for a new server.
- `hub`: a HubClient on that reset DevHub, built from its kubeconfig as users build one
  (tests.support.hub); faults a test injected are cleared after it.
- `devhub_factory`: makes extra DevHubs (e.g. durable ones with `data_dir`, or a small
  `watch_window`) and stops them at teardown.
- `ruleless_devhub` / `ruleless_hub`: a DevHub serving our CRDs without their CEL rules, as a
  hub whose CRDs predate them (what the rules refuse can be stored, and the snapshotter must
  refuse it), and a HubClient on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devhub import DevHub
from hub.client import HubClient
from hub.crds import VALIDATIONS
from tests.crd_files import write_crds
from tests.support.hub import TEST_TIMEOUT, hub_client

# Bookmarks every half second keep bookmark tests fast; nothing else depends on it.
TEST_BOOKMARK_INTERVAL = 0.5


@pytest.fixture(scope="session")
def devhub() -> Iterator[DevHub]:
    with DevHub(bookmark_interval=TEST_BOOKMARK_INTERVAL) as hub:
        yield hub


@pytest.fixture
def hub_kubeconfig(devhub: DevHub, tmp_path: Path) -> Path:
    devhub.reset()
    return devhub.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def hub(hub_kubeconfig: Path, devhub: DevHub) -> Iterator[HubClient]:
    with hub_client(hub_kubeconfig) as client:
        yield client
        devhub.faults.clear()


@pytest.fixture
def devhub_factory(tmp_path: Path) -> Iterator[Callable[..., DevHub]]:
    started: list[DevHub] = []

    def make(**kwargs: Any) -> DevHub:
        kwargs.setdefault("bookmark_interval", TEST_BOOKMARK_INTERVAL)
        hub = DevHub(**kwargs).start()
        started.append(hub)
        return hub

    yield make
    for hub in reversed(started):
        hub.stop()


@pytest.fixture
def ruleless_devhub(devhub_factory: Callable[..., DevHub], tmp_path: Path) -> DevHub:
    return devhub_factory(crd_dir=write_crds(tmp_path / "ruleless-crds", drop={VALIDATIONS}))


@pytest.fixture
def ruleless_hub(ruleless_devhub: DevHub, tmp_path: Path) -> Iterator[HubClient]:
    kubeconfig = ruleless_devhub.write_kubeconfig(tmp_path / "ruleless-kubeconfig")
    client = HubClient.from_kubeconfig(kubeconfig, timeout=TEST_TIMEOUT)
    yield client
    client.close()
