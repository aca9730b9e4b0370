"""The RBAC of each overlay, checked against the requests fleet-scheduler really sends.

tests/unit/deploy/test_rbac.py derives the permissions from the source; this runs the real
thing (`workers.worker.serve`, worker and watcher, as `fleet-scheduler run` wires them) against
devhub and the Temporal dev server through a placement's life, and compares every (verb,
resource) devhub served with what the overlay's ClusterRoles grant. A request outside them is a
403 waiting to happen in a real hub.

devhub counts every request, the test's own too; the test makes its few requests through
`Own`, which counts them, and they are subtracted."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from temporalio.client import Client

from control.config import RunConfig
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    KINDS,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    ObjectMeta,
    PriorityClass,
)
from scheduler.snapshots import plan_snapshot_sync
from scheduler.testing import member_cluster
from tests.support.deploy import (
    BESIDE_KUBEFLEET,
    STANDALONE,
    granted_permissions,
    kubectl,
    render,
)
from tests.support.waits import until_async
from workers.worker import Serving, serve
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

T = TypeVar("T")
WAIT_SECONDS = 45.0
CLUSTERS = ("rbac-a", "rbac-b", "rbac-c")
# The fleet kinds, and the built-in PriorityClasses the watcher reads (docs/priority.md).
GROUP_OF = {kind.PLURAL: kind.GROUP for kind in (*KINDS, PriorityClass)}

Request = tuple[str, str]  # (verb, resource[/subresource]) as devhub counts them


class Own:
    """The test's own hub requests, counted so they can be told apart from the scheduler's."""

    def __init__(self, hub: HubClient) -> None:
        self.hub = hub
        self.requests: Counter[Request] = Counter()

    def create(self, obj: Any) -> Any:
        self.requests["create", type(obj).PLURAL] += 1
        return self.hub.create(obj)

    def patch(self, kind: Any, name: str, body: dict[str, Any]) -> Any:
        self.requests["patch", kind.PLURAL] += 1
        return self.hub.patch(kind, name, body)

    def delete(self, kind: Any, name: str) -> Any:
        self.requests["delete", kind.PLURAL] += 1
        return self.hub.delete(kind, name)

    def list(self, kind: Any, selector: dict[str, str]) -> list[Any]:
        self.requests["list", kind.PLURAL] += 1
        return self.hub.list(kind, selector).items


@pytest.fixture(autouse=True)
def _kubectl() -> None:
    if kubectl() is None:
        pytest.skip("kubectl is not installed (make system-deps installs Debian's kubectl)")


@asynccontextmanager
async def running(
    client: Client, hub: HubClient, task_queue: str, *, snapshotter: bool
) -> AsyncIterator[None]:
    """`fleet-scheduler run` in-process: worker and watcher, until the block ends."""
    stop = asyncio.Event()
    ready = asyncio.Event()

    def on_ready(_: Serving) -> None:
        ready.set()

    task = asyncio.create_task(
        serve(
            client,
            hub,
            stop,
            RunConfig(task_queue=task_queue, snapshotter=snapshotter),
            on_ready=on_ready,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), WAIT_SECONDS)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT_SECONDS)


def add_clusters(hub: HubClient) -> None:
    now = datetime.now(UTC)
    for name in CLUSTERS:
        wanted = member_cluster(name, now)
        created = hub.create(wanted.model_copy(update={"metadata": ObjectMeta(name=name)}))
        hub.update_status(created.model_copy(update={"status": wanted.status}))


def placement(name: str, clusters: int) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name},
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {"placementType": "PickN", "numberOfClusters": clusters},
            },
        }
    )


def live_bindings(own: Own, name: str) -> list[ClusterResourceBinding]:
    return [
        b
        for b in own.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: name})
        if b.spec.state != names.STATE_UNSCHEDULED and not b.metadata.deleting
    ]


def scheduler_requests(
    devhub: DevHub, before: dict[Request, int], own: Own
) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every request devhub served that the test did not make."""
    after = devhub.stats.snapshot()
    used = set()
    for (verb, resource), count in after.items():
        theirs = count - before.get((verb, resource), 0) - own.requests[verb, resource]
        assert theirs >= 0, f"miscounted own {verb} {resource}"
        if theirs:
            used.add((GROUP_OF[resource.partition("/")[0]], resource, verb))
    return used


async def delete_and_wait(own: Own, client: Client, name: str) -> None:
    own.delete(ClusterResourcePlacement, name)
    handle = client.get_workflow_handle(workflow_id(name))
    await asyncio.wait_for(handle.result(), WAIT_SECONDS)  # cleanup done, workflow complete


async def test_standalone_sends_only_requests_its_rbac_grants(
    hub: HubClient, devhub: DevHub, temporal_client: Client, task_queue: str
) -> None:
    add_clusters(hub)
    own = Own(hub)
    before = devhub.stats.snapshot()
    name = "rbac-standalone"
    async with running(temporal_client, hub, task_queue, snapshotter=True):
        own.create(placement(name, 2))
        await until_async(
            lambda: len(live_bindings(own, name)) == 2 or None,
            what="two bindings",
            blocking=True,
            timeout=WAIT_SECONDS,
        )
        own.patch(ClusterResourcePlacement, name, {"spec": {"policy": {"numberOfClusters": 1}}})
        await until_async(
            lambda: len(live_bindings(own, name)) == 1 or None,
            what="one binding",
            blocking=True,
            timeout=WAIT_SECONDS,
        )
        await delete_and_wait(own, temporal_client, name)
    used = scheduler_requests(devhub, before, own)

    granted = granted_permissions(render(STANDALONE), "fleet-scheduler", "fleet-scheduler")
    assert used - granted == set(), f"refused in a real hub: {sorted(used - granted)}"
    snapshots = ClusterSchedulingPolicySnapshot.PLURAL
    for expected in (
        ("create", ClusterResourceBinding.PLURAL),  # scheduled
        ("create", snapshots),  # the snapshotter made the snapshots
        ("watch", MemberCluster.PLURAL),  # the watcher watched
        ("deletecollection", snapshots),  # cleanup swept the snapshots
    ):
        assert (GROUP_OF[expected[1]], expected[1], expected[0]) in used, expected


async def test_beside_kubefleet_sends_only_requests_its_rbac_grants(
    hub: HubClient, devhub: DevHub, temporal_client: Client, task_queue: str
) -> None:
    add_clusters(hub)
    own = Own(hub)
    before = devhub.stats.snapshot()
    name = "rbac-beside"
    async with running(temporal_client, hub, task_queue, snapshotter=False):
        created = own.create(placement(name, 2))
        # KubeFleet's hub agent makes the policy snapshot; here the test plays that part.
        plan = plan_snapshot_sync(created, [])
        assert plan.create is not None
        own.create(plan.create)
        await until_async(
            lambda: len(live_bindings(own, name)) == 2 or None,
            what="two bindings",
            blocking=True,
            timeout=WAIT_SECONDS,
        )
        await delete_and_wait(own, temporal_client, name)
    used = scheduler_requests(devhub, before, own)

    granted = granted_permissions(render(BESIDE_KUBEFLEET), "fleet-scheduler", "fleet-scheduler")
    assert used - granted == set(), f"refused in a real hub: {sorted(used - granted)}"
    snapshots = ClusterSchedulingPolicySnapshot.PLURAL
    assert (GROUP_OF[snapshots], f"{snapshots}/status", "update") in used  # it did schedule
    assert not {(r, v) for _, r, v in used if r == snapshots and v in ("create", "delete")}
