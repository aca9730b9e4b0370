"""The watcher keeps delivering through 410 Gone, a hub restart, a Temporal outage, and a second
watcher beside it; each test uses its own devhub (devhub_factory) or Temporal where it must
break one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from control.outbox import Backoff
from control.watcher import WATCHED_KINDS
from hub.client import HubClient
from hub.types import ClusterResourcePlacement
from tests.integration.control.watcher_helpers import (
    Signalled,
    cluster,
    placement,
    placement_worker,
    quiet,
    relabel,
    run_status,
    running_watcher,
    signals,
    signals_matching,
    unique,
)
from tests.support.hub import TEST_TIMEOUT
from tests.support.waits import until_async
from workers.devserver import DevServer, free_port
from workflows import names

pytestmark = pytest.mark.asyncio(loop_scope="session")

CHANGED = names.SIGNAL_PLACEMENT_CHANGED
CLUSTER = names.SIGNAL_CLUSTER_CHANGED
FAST_RETRY = Backoff(initial=0.1, maximum=0.5)


async def test_after_410_gone_the_watcher_lists_again_and_still_delivers_the_change(
    devhub_factory: Any, temporal_client: Client, task_queue: str
) -> None:
    # A two-event window and no bookmarks: a watch that resumes after changes elsewhere finds
    # its position expired (410) and must list again; the change it missed comes from the diff.
    server = devhub_factory(watch_window=2, bookmark_interval=3600)
    name = unique("all")
    with HubClient.from_url(server.url, token=server.token, timeout=TEST_TIMEOUT) as hub:
        hub.create(cluster("member-1", env="dev"))
        hub.create(placement(name, "PickAll"))
        async with (
            placement_worker(temporal_client, task_queue, hub),
            running_watcher(hub, temporal_client, task_queue, watch_seconds=1) as watcher,
        ):
            await signals_matching(temporal_client, name, CHANGED)
            await quiet(watcher)
            lists_before = server.stats.count("list", "memberclusters")
            # Hold the cluster watch's next reconnection while the cluster changes and the
            # window moves on.
            held = server.faults.inject(verb="watch", resource="memberclusters", hang=True, count=1)
            await until_async(lambda: held.hits == 1)
            relabel(hub, "member-1", env="prod")
            for index in range(3):
                hub.patch(
                    ClusterResourcePlacement, name, {"metadata": {"annotations": {"n": str(index)}}}
                )
            held.remove()

            (received,) = await signals_matching(temporal_client, name, CLUSTER)
            assert received.reason == "cluster member-1: labels changed"
            assert server.stats.count("list", "memberclusters") > lists_before
            assert watcher.stats.watch_failures == 0  # re-listed inside the watch, not restarted


async def test_after_a_hub_restart_the_watcher_resumes_and_delivers(
    devhub_factory: Any, temporal_client: Client, task_queue: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "hub"
    first = devhub_factory(data_dir=data_dir)
    name = unique("all")
    with HubClient.from_url(first.url, token=first.token, timeout=TEST_TIMEOUT) as hub:
        hub.create(cluster("member-1", env="dev"))
        hub.create(placement(name, "PickAll"))
        async with (
            placement_worker(temporal_client, task_queue, hub),
            running_watcher(
                hub, temporal_client, task_queue, watch_seconds=5, watch_retry=FAST_RETRY
            ) as watcher,
        ):
            await signals_matching(temporal_client, name, CHANGED)
            await quiet(watcher)
            resyncs = watcher.stats.resyncs
            first.stop()
            await until_async(lambda: watcher.stats.watch_failures >= 1)

            second = devhub_factory(data_dir=data_dir, port=first.port)
            assert second.token == first.token  # kept in data_dir, so the client still works
            await until_async(lambda: watcher.stats.resyncs >= resyncs + len(WATCHED_KINDS))
            relabel(hub, "member-1", env="prod")
            (received,) = await signals_matching(temporal_client, name, CLUSTER)
            assert received.reason == "cluster member-1: labels changed"
            assert watcher.ready


async def test_two_watchers_at_once_keep_one_workflow_per_placement(
    hub: HubClient, temporal_client: Client, task_queue: str, worker: object
) -> None:
    placements = [unique("all"), unique("all")]
    hub.create(cluster("member-1", env="dev"))
    for name in placements:
        hub.create(placement(name, "PickAll"))
    async with (
        running_watcher(hub, temporal_client, task_queue) as one,
        running_watcher(hub, temporal_client, task_queue) as two,
    ):
        for name in placements:
            await signals_matching(temporal_client, name, CHANGED)
        await quiet(one)
        await quiet(two)
        seen = (one.stats.events, two.stats.events)
        relabel(hub, "member-1", env="prod")
        await until_async(lambda: one.stats.events > seen[0] and two.stats.events > seen[1])
        await quiet(one)
        await quiet(two)
        for watcher in (one, two):
            stats = watcher.stats
            assert stats.dropped == 0 and stats.retries == 0
            assert stats.signal_with_start == 2 * len(placements)  # start-up + label change
        for name in placements:
            runs = [
                wf
                async for wf in temporal_client.list_workflows(
                    f'WorkflowId = "{names.workflow_id(name)}"'
                )
            ]
            assert len(runs) == 1, runs
            assert runs[0].status == WorkflowExecutionStatus.RUNNING
            received = sorted(s.signal for s in await signals(temporal_client, name))
            assert received == [CLUSTER, CLUSTER, CHANGED, CHANGED]  # one of each per watcher


async def test_signals_wait_out_a_temporal_outage_and_arrive_when_it_is_back(
    hub: HubClient, task_queue: str
) -> None:
    # A client of a Temporal that is not there yet: every call fails (UNAVAILABLE) and is
    # retried with backoff while the watch goes on; once the server starts, the signals land.
    port = free_port()
    client = await Client.connect(
        f"127.0.0.1:{port}", data_converter=pydantic_data_converter, lazy=True
    )
    name = unique("all")
    hub.create(placement(name, "PickAll"))
    async with running_watcher(hub, client, task_queue, send_retry=FAST_RETRY) as watcher:
        await until_async(lambda: watcher.stats.retries >= 2)
        routes = watcher.stats.routes
        hub.create(cluster("member-1"))
        relabel(hub, "member-1", env="prod")
        await until_async(lambda: watcher.stats.routes == routes + 1)
        async with DevServer(port=port, ui=False) as server:
            # Workers need a connected client; the watcher keeps its lazy one.
            worker_client = await Client.connect(
                server.target, data_converter=pydantic_data_converter
            )
            async with placement_worker(worker_client, task_queue, hub):
                await signals_matching(worker_client, name, CHANGED)
                await quiet(watcher)
                # The retried start-up signal took the label change along: one signal.
                assert await signals(worker_client, name) == [
                    Signalled(
                        CHANGED,
                        f"watcher started: placement {name} exists; "
                        "cluster member-1: labels changed",
                    )
                ]
                assert watcher.stats.dropped == 0
                status = await run_status(worker_client, name)
                assert status is not None and status[1] == WorkflowExecutionStatus.RUNNING
