"""HubClient tests talk to the shared devhub over loopback HTTP, never to a mocked transport.

`hub_kubeconfig` (tests/conftest.py) resets the devhub for each test and hands over a kubeconfig
that carries its URL and token, so every client here is built the way users build one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.client import HubClient

# Short enough that a hanging server fails a test in seconds, long enough for a loaded 2-core
# CI machine to answer a healthy request.
TEST_TIMEOUT = (2.0, 5.0)


@pytest.fixture
def hub(hub_kubeconfig: Path, devhub: Any) -> Iterator[HubClient]:
    client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=TEST_TIMEOUT)
    yield client
    devhub.faults.clear()
    client.close()
