"""Conformance tests talk to a real devhub over loopback HTTP with `requests`: no mocks.

`api` is a client of the shared session devhub, reset (empty, no faults, zero stats) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devhub import DevHub
from tests.integration.devhub.devhub_helpers import Client


@pytest.fixture
def api(hub_kubeconfig: Path, devhub: DevHub) -> Iterator[Client]:
    client = Client(devhub)
    yield client
    devhub.faults.clear()
    client.session.close()
