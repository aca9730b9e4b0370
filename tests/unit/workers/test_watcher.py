"""Watcher construction and readiness before any server answers (no network is touched)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from hub.client import HubClient, Resync
from hub.types import MemberCluster
from workers.watcher import WATCHED_KINDS, Watcher

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def lazy_client() -> AsyncIterator[Client]:
    # lazy: nothing connects until a call is made, and no call is made here.
    yield await Client.connect("127.0.0.1:1", lazy=True)


@pytest.fixture
def hub() -> HubClient:
    return HubClient.from_url("http://127.0.0.1:1")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"coalesce_seconds": -1.0}, "coalesce_seconds", id="negative-window"),
        pytest.param({"max_in_flight": 0}, "max_in_flight", id="no-slots"),
        pytest.param({"watch_seconds": 0}, "watch_seconds", id="no-watch-time"),
    ],
)
async def test_nonsense_settings_are_refused_with_their_name(
    hub: HubClient, lazy_client: Client, options: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Watcher(hub, lazy_client, **options)  # type: ignore[arg-type]


async def test_a_new_watcher_is_not_ready_and_says_which_lists_it_waits_for(
    hub: HubClient, lazy_client: Client
) -> None:
    watcher = Watcher(hub, lazy_client)
    ready, reason = watcher.readiness()
    assert not ready and not watcher.ready
    assert reason == "waiting for the first list of " + ", ".join(k.PLURAL for k in watcher.kinds)
    assert set(WATCHED_KINDS) < set(watcher.kinds)
    assert watcher.idle and watcher.pending == 0
    assert watcher.stats.sent == 0


UNKNOWN_SERVICE = "unknown service temporal.api.workflowservice.v1.WorkflowService"
# What the server answers once a run has had history.maximumSignalsPerExecution signals.
SIGNAL_LIMIT = "exceeded workflow execution limit for signal events"


@pytest.mark.parametrize(
    ("status", "message", "permanent"),
    [
        pytest.param(RPCStatusCode.INVALID_ARGUMENT, "bad payload", True, id="invalid-argument"),
        pytest.param(RPCStatusCode.UNIMPLEMENTED, UNKNOWN_SERVICE, False, id="server-starting"),
        pytest.param(RPCStatusCode.UNAVAILABLE, "connection refused", False, id="unavailable"),
        # The run continues-as-new and the next one takes signals: the event must wait, not go.
        pytest.param(RPCStatusCode.INVALID_ARGUMENT, SIGNAL_LIMIT, False, id="signal-limit"),
    ],
)
async def test_only_errors_a_retry_cannot_fix_drop_a_signal(status, message, permanent) -> None:
    from workers.watcher import _permanent

    assert _permanent(RPCError(message, status, b"")) is permanent


@pytest.mark.parametrize(("up_to", "after_list"), [(2, True), (1, False), (0, False)])
async def test_local_cycles_are_decided_only_once_the_clusters_are_listed(
    hub: HubClient, lazy_client: Client, up_to: int, after_list: bool
) -> None:
    """Before the cluster list arrives the fleet's size is unknown: the watcher says nothing
    rather than call a large fleet small; after it, the fleet of 2 decides (0: never local)."""
    watcher = Watcher(hub, lazy_client, local_cycles_up_to=up_to)
    assert watcher.local_cycles() is None
    clusters = [
        MemberCluster.from_wire({"metadata": {"name": n, "resourceVersion": "1"}})
        for n in ("member-a", "member-b")
    ]
    watcher._views[MemberCluster].apply_resync(Resync(clusters, "1"))
    assert watcher.local_cycles() is after_list
