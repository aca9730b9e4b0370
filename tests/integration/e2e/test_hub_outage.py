"""A hub outage is waited out inside the worker, not through Temporal's retries.

Every placement is requeued while the hub answers 503 to everything. The activities that get a
slot wait at the worker's HubGate and the others wait queued on the server: no activity is
retried through Temporal and the hub sees a probe every couple of seconds, not a retry storm.
When the hub is back, every placement converges at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from control.watcher import Watcher
from hub.client import HubClient
from tests.support.fleet import add_cluster, add_placement, live_targets, settled, unique
from tests.support.waits import until_async
from workflows.names import workflow_id
from workflows.placement import PlacementWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

PLACEMENTS = 12
OUTAGE_S = 6.0


async def test_an_outage_is_waited_out_without_retries_and_converges_when_it_ends(
    hub: HubClient, temporal_client: Client, system: Watcher, devhub: Any
) -> None:
    add_cluster(hub, "member-a")
    placements = [unique("outage") for _ in range(PLACEMENTS)]
    for name in placements:
        add_placement(hub, name, {"placementType": "PickAll"})
    for name in placements:
        await until_async(
            lambda name=name: set(live_targets(hub, name)) == {"member-a"}, blocking=True
        )
    cycles = {name: (await settled(temporal_client, name)).cycles for name in placements}

    outage = devhub.faults.inject(status=503)
    requests_before = devhub.stats.count()
    started = time.monotonic()
    for name in placements:
        await temporal_client.get_workflow_handle(workflow_id(name)).signal(
            PlacementWorkflow.requeue
        )
    await asyncio.sleep(OUTAGE_S)
    during = devhub.stats.count() - requests_before
    outage.remove()
    ended = time.monotonic()

    for name in placements:
        status = await settled(temporal_client, name)
        assert status.cycles > cycles[name] and status.last_error is None, status
    converged_s = time.monotonic() - ended

    # No activity went back through Temporal: every attempt is a first attempt.
    for name in placements:
        history = await temporal_client.get_workflow_handle(workflow_id(name)).fetch_history()
        attempts = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        ]
        assert attempts and max(attempts) == 1, (name, attempts)
    # The hub saw the first failures of the activities in slots, the watcher's reconnects and
    # one probe every 2 s; 12 placements retrying on Temporal's backoff would send ~6 each.
    elapsed = ended - started
    assert during < PLACEMENTS + 10 + elapsed, during
    assert converged_s < 15, converged_s
