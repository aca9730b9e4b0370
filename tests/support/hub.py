"""The HubClient tests use: built from a kubeconfig, as users build one; and a raw create past
our models, for what another client may store."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from devhub import DevHub
from hub.client import HubClient
from hub.types.meta import HubObject

__all__ = ["TEST_TIMEOUT", "hub_client", "raw_create"]

# (connect, read) seconds: short enough that a hanging server fails a test in seconds, long
# enough for a loaded 2-core CI machine to answer a healthy request.
TEST_TIMEOUT: Final = (2.0, 5.0)


@contextmanager
def hub_client(kubeconfig: Path) -> Iterator[HubClient]:
    client = HubClient.from_kubeconfig(kubeconfig, timeout=TEST_TIMEOUT)
    try:
        yield client
    finally:
        client.close()


def raw_create(devhub: DevHub, kind: type[HubObject], doc: dict[str, Any]) -> None:
    """POST a wire document to `devhub` as is, bypassing our models."""
    request = urllib.request.Request(
        f"{devhub.url}{kind.api_path()}",
        data=json.dumps(doc).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {devhub.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201, response.read()
