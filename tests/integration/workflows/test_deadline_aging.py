"""Aging on the real dev server (docs/priority.md, "Aging"): each turn of a placement past its
deadline runs at the key its work asked for, lifted once, one key per miss, and never past what
the profile allows (by default the placement's own band's key), as its activity task records."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from tests.integration.workflows.stand_ins import Script
from tests.integration.workflows.workflow_helpers import (
    delete_and_complete,
    placement_name,
    start_placement,
)
from tests.support.waits import until_async
from workers.worker import PlacementWorkers
from workflows import names
from workflows.models import HubEvent, TurnPriority
from workflows.placement import PlacementWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

OWN = 3


@pytest.mark.parametrize(
    "aging_limit",
    [pytest.param(None, id="within-the-band"), pytest.param(1, id="profile-allows-key-1")],
)
async def test_a_missed_deadline_lifts_a_turn_one_key_per_miss_within_its_limit(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers, aging_limit: int | None
) -> None:
    """The miss's turn and the requeues of its work run at max(limit, 3 - misses). Before: the
    miss put an aged key in the inbox and the turn aged it again (two keys for one miss), a
    requeue asked the aged key and aged it once more, and nothing stopped short of key 1."""
    name = placement_name()
    # Turn 1 starts the clock; the miss's turn (2) asks to requeue now, and so does turn 3.
    # Within the band a miss lifts no key and is reported alone (workflows.deadline): a report
    # that cannot speak for the placement leaves it to the turn whose keys are asserted here.
    script = Script(
        deadline="3s,aging", fulfilled=False, requeues=[False, True, True], report_speaks=False
    )
    own = TurnPriority(priority_key=OWN, own_priority_key=OWN, aging_limit=aging_limit)
    handle = await start_placement(
        temporal_client,
        task_queue,
        name,
        script,
        turn_execution="queue",  # keys order queued tasks
        first=(names.SIGNAL_PLACEMENT_CHANGED, HubEvent(reason="created", priority=own)),
    )
    await until_async(
        lambda: len(script.misses) >= 4 and script.misses[1] >= 1, what="the miss and requeues"
    )
    await delete_and_complete(handle, script)

    best = aging_limit if aging_limit is not None else OWN
    turns = list(zip(script.misses, [p.priority_key for p in script.priorities], strict=True))
    assert turns[0] == (0, OWN)
    assert any(misses == 1 for misses, _ in turns[1:])  # one miss, whose key tells 1 from 2
    assert all(key == max(best, OWN - misses) for misses, key in turns[1:]), turns
    recorded = [
        e.activity_task_scheduled_event_attributes.priority.priority_key
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name
        == names.ACTIVITY_SCHEDULE_ONCE
    ]
    assert recorded == [key for _, key in turns]


async def test_a_short_deadline_runs_no_turn_per_period_once_its_miss_is_reported(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """A `1s` deadline on a placement that cannot be scheduled ran a turn (a whole cycle, and
    its history) every second, for ever: the Event was bounded, the turns were not. Once a miss
    has been reported (alone, the workflow idle: no turn at all), and aging can lift its key no
    further, the next miss reported is at least MISS_TURN_FLOOR later; the misses in between
    are still counted, by the next turn that runs for another reason."""
    name = placement_name()
    script = Script(deadline="1s", fulfilled=False)
    own = TurnPriority(priority_key=OWN, own_priority_key=OWN)
    handle = await start_placement(
        temporal_client,
        task_queue,
        name,
        script,
        turn_execution="queue",
        first=(names.SIGNAL_PLACEMENT_CHANGED, HubEvent(reason="created", priority=own)),
    )
    await until_async(lambda: script.reports == [1], what="the first miss's report")
    # Absence over a stretch of time is what is asserted: five deadline periods, in which the
    # old loop ran five more turns (fewer on a loaded machine, never none).
    await asyncio.sleep(5)
    turns = len(script.misses)
    await handle.signal(PlacementWorkflow.placement_changed, HubEvent(reason="updated"))
    await until_async(lambda: len(script.misses) > turns, what="the signalled turn")
    await delete_and_complete(handle, script)

    assert turns == 1 and script.reports == [1], script  # the first turn; the miss's report
    assert script.misses[1] >= 5, script.misses  # the signalled turn counts the periods passed
