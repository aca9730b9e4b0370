"""The HubClient tests use: built from a kubeconfig, as users build one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from hub.client import HubClient

__all__ = ["TEST_TIMEOUT", "hub_client"]

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
