"""Where turns run, end to end: by default the workers choose, and in a small fleet with short
turns they choose local activities in the workflow worker; forced with `--local-cycles-up-to 2`
a placement in a fleet of two is scheduled by local activities, exactly as on the activity
queue, and a third cluster moves its turns back to the activity queue (the watcher's signal
says so)."""

from __future__ import annotations

from collections import Counter

import pytest
from temporalio.client import Client

from hub.client import HubClient
from tests.support.fleet import (
    add_cluster,
    add_placement,
    live_targets,
    settled,
    status,
    unique,
)
from tests.support.history import event_types
from tests.support.stacks import fleet_scheduler
from tests.support.waits import until_async
from workflows.models import PlacementStatus
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

SCHEDULED = "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
MARKER = "EVENT_TYPE_MARKER_RECORDED"


async def history(client: Client, placement: str) -> Counter[str]:
    return await event_types(client, client.get_workflow_handle(workflow_id(placement)))


async def test_by_default_a_small_fleets_turns_run_local_on_the_workers_advice(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    add_cluster(hub, "member-a", labels={"env": "prod"})
    add_cluster(hub, "member-b", labels={"env": "dev"})
    everywhere = unique("auto")
    async with fleet_scheduler(temporal_client, hub, task_queue):
        add_placement(hub, everywhere, {"placementType": "PickAll"})
        await until_async(
            lambda: (
                live_targets(hub, everywhere) == {"member-a": "Scheduled", "member-b": "Scheduled"}
            ),
            blocking=True,
        )
        first = await settled(temporal_client, everywhere)
        assert first.turn_execution == "auto" and first.local_cycles
        events = await history(temporal_client, everywhere)
        assert events[SCHEDULED] == 0 and events[MARKER] >= 2  # the patch, then the turn(s)


async def test_local_cycles_decide_the_same_and_end_when_the_fleet_outgrows_them(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    add_cluster(hub, "member-a", labels={"env": "prod"})
    add_cluster(hub, "member-b", labels={"env": "dev"})
    everywhere, prod = unique("all"), unique("prod")
    async with fleet_scheduler(temporal_client, hub, task_queue, local_cycles_up_to=2):
        add_placement(hub, everywhere, {"placementType": "PickAll"})
        add_placement(
            hub,
            prod,
            {
                "placementType": "PickAll",
                "affinity": {
                    "clusterAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "clusterSelectorTerms": [
                                {"labelSelector": {"matchLabels": {"env": "prod"}}}
                            ]
                        }
                    }
                },
            },
        )
        await until_async(
            lambda: (
                live_targets(hub, everywhere) == {"member-a": "Scheduled", "member-b": "Scheduled"}
                and live_targets(hub, prod) == {"member-a": "Scheduled"}
            ),
            blocking=True,
        )
        first = await settled(temporal_client, everywhere)
        assert first.local_cycles and first.last is not None and first.last.outcome.fulfilled
        events = await history(temporal_client, everywhere)
        assert events[SCHEDULED] == 0 and events[MARKER] >= 1

        # A third cluster: more than 2, so the watcher's cluster signal moves turns back.
        add_cluster(hub, "member-c", labels={"env": "prod"})
        await until_async(
            lambda: (
                set(live_targets(hub, everywhere)) == {"member-a", "member-b", "member-c"}
                and set(live_targets(hub, prod)) == {"member-a", "member-c"}
            ),
            blocking=True,
        )
        final = await until_async(
            lambda: _remote_and_idle(temporal_client, everywhere, after=first.cycles)
        )
        assert final.last is not None and final.last.outcome.fulfilled
        assert (await history(temporal_client, everywhere))[SCHEDULED] >= 1


async def _remote_and_idle(client: Client, placement: str, after: int) -> PlacementStatus | None:
    current = await status(client, placement)
    if current and current.cycles > after and current.phase == "idle" and not current.local_cycles:
        return current
    return None
