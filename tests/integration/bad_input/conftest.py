"""The whole system, as the end-to-end tests run it, fed bad input.

Fixtures (all real: devhub over HTTP, the Temporal dev server, the worker and the watcher):

- `hub`: a HubClient on the session devhub, reset for the test (the e2e fixture, reused).
- `standalone`: worker + watcher with the snapshotter on (`fleet-scheduler dev`): bad input is
  written on the placement, as a user would write it.
- `beside_kubefleet`: the snapshotter off (`--no-snapshotter`): the test plays KubeFleet's
  placement controller and writes policy snapshots directly, so annotations and labels that our
  snapshotter would never produce reach the scheduler.
- `skewed_hub` / `skewed_system`: a devhub whose policy-snapshot CRD has no enums, as on a hub
  running another KubeFleet version than the one our CRDs follow (version skew). Placement types
  and operators our schema refuses can then be stored, and the scheduler must cope with them.
- `ruleless_hub` / `ruleless_system`: a devhub whose CRDs have no CEL rules (a hub whose CRDs
  predate them), with the snapshotter on: what the rules refuse is stored, and the snapshotter
  refuses it on the placement.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import pytest_asyncio
from temporalio.client import Client

from control.watcher import Watcher
from devhub import DevHub
from hub.client import HubClient
from hub.types import ClusterSchedulingPolicySnapshot
from hub.types.meta import HubObject
from tests.crd_files import write_crds
from tests.support.hub import TEST_TIMEOUT
from tests.support.hub import raw_create as post_raw
from tests.support.stacks import fleet_scheduler

SNAPSHOT_CRD: Final = (
    f"{ClusterSchedulingPolicySnapshot.GROUP}_{ClusterSchedulingPolicySnapshot.PLURAL}.yaml"
)


@pytest_asyncio.fixture(loop_scope="session")
async def standalone(
    temporal_client: Client, hub: HubClient, task_queue: str
) -> AsyncIterator[Watcher]:
    async with fleet_scheduler(temporal_client, hub, task_queue, snapshotter=True) as watcher:
        yield watcher


@pytest_asyncio.fixture(loop_scope="session")
async def beside_kubefleet(
    temporal_client: Client, hub: HubClient, task_queue: str
) -> AsyncIterator[Watcher]:
    async with fleet_scheduler(temporal_client, hub, task_queue, snapshotter=False) as watcher:
        yield watcher


LOOSENED: Final = ("enum", "maxItems")


@pytest.fixture
def skewed_devhub(devhub_factory: Callable[..., DevHub], tmp_path: Path) -> DevHub:
    crd_dir = write_crds(tmp_path / "crds", drop=LOOSENED, only=[SNAPSHOT_CRD])
    return devhub_factory(crd_dir=crd_dir)


def _client(devhub: DevHub, kubeconfig: Path) -> Iterator[HubClient]:
    client = HubClient.from_kubeconfig(devhub.write_kubeconfig(kubeconfig), timeout=TEST_TIMEOUT)
    yield client
    client.close()


@pytest.fixture
def skewed_hub(skewed_devhub: DevHub, tmp_path: Path) -> Iterator[HubClient]:
    yield from _client(skewed_devhub, tmp_path / "kubeconfig")


@pytest.fixture
def raw_create(skewed_devhub: DevHub) -> Callable[[type[HubObject], dict[str, Any]], None]:
    """POST a wire document to the skewed hub as is, bypassing our models."""

    def create(kind: type[HubObject], doc: dict[str, Any]) -> None:
        post_raw(skewed_devhub, kind, doc)

    return create


@pytest_asyncio.fixture(loop_scope="session")
async def skewed_system(
    temporal_client: Client, skewed_hub: HubClient, task_queue: str
) -> AsyncIterator[Watcher]:
    async with fleet_scheduler(
        temporal_client, skewed_hub, task_queue, snapshotter=False
    ) as watcher:
        yield watcher


@pytest_asyncio.fixture(loop_scope="session")
async def ruleless_system(
    temporal_client: Client, ruleless_hub: HubClient, task_queue: str
) -> AsyncIterator[Watcher]:
    async with fleet_scheduler(
        temporal_client, ruleless_hub, task_queue, snapshotter=True
    ) as watcher:
        yield watcher
