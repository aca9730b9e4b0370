"""Where turns run: a placement told so runs its turns as local activities in the workflow worker
(one workflow task per turn, no activity task), and goes back to the activity queue when a
signal says so; the choice survives continue-as-new. The real PlacementWorkflow on a real dev
server, with the stand-in activities; max_cached_workflows=0 replays every history from the
start on each task, markers included. Such a worker runs local only the turns it is told to:
the tests of the workers' own choice run on one that caches workflows, and replay after."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.workflows.stand_ins import (
    SCRIPTS,
    STAND_INS,
    Script,
    shed,
    transient,
    unexpected,
)
from tests.integration.workflows.workflow_helpers import (
    idle,
    placement_name,
    replays,
    requeued_turns,
    start_local,
    start_placement,
    status_when,
)
from tests.support.history import event_types, patch_ids, turn_places
from tests.support.waits import consistently_async, until_async
from workers.worker import split_workers
from workflows import names
from workflows.execution import LOCAL_ATTEMPTS, QUEUE_TURNS_AFTER_FALLBACK, SHED_TURN_PATCH
from workflows.models import HubEvent, PlacementInput, RequeueRequest
from workflows.patches import AT_START_GROUPS
from workflows.placement import PlacementWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


# One marker per at-start patch, in every run this code begins (workflows.patches).
AT_START_MARKERS = len(AT_START_GROUPS)


async def test_local_turns_run_in_the_workflow_task_and_a_signal_moves_them_back(
    temporal_client, task_queue, worker
):
    name = placement_name()
    handle = await start_local(temporal_client, task_queue, name, Script())
    status = await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    assert status.local_cycles
    events = await event_types(temporal_client, handle)
    assert events["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 0
    # The turn, recorded as a local activity, the run's patch generation (workflows.renewal)
    # and its patches at start (workflows.patches.AT_START_GROUPS).
    assert events["EVENT_TYPE_MARKER_RECORDED"] == 2 + AT_START_MARKERS

    # A signal without a word about it leaves the choice as it is; one with it changes it.
    await handle.signal(PlacementWorkflow.cluster_changed, HubEvent(reason="labels"))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    assert (await event_types(temporal_client, handle))["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 0
    await handle.signal(
        PlacementWorkflow.cluster_changed, HubEvent(reason="fleet grew", turn_execution="queue")
    )
    status = await status_when(handle, lambda s: s.cycles == 3 and idle(s))
    assert not status.local_cycles
    events = await event_types(temporal_client, handle)
    assert events["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 1
    assert events["EVENT_TYPE_MARKER_RECORDED"] == 3 + AT_START_MARKERS
    assert [c.cycle for c in SCRIPTS[name].cycles] == [1, 2, 3]


async def test_local_cycles_survive_continue_as_new(temporal_client, task_queue, worker):
    name = placement_name()
    handle = await start_local(
        temporal_client, task_queue, name, Script(requeues=[True] * 2), turns_per_run=2
    )
    status = await status_when(handle, lambda s: s.cycles == 3 and idle(s))
    assert status.local_cycles and status.cycles_this_run == 1
    latest = (await handle.describe()).run_id
    assert latest != handle.result_run_id
    events = await event_types(temporal_client, handle, latest)
    assert events["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 0
    # The turn; the run's patches at start.
    assert events["EVENT_TYPE_MARKER_RECORDED"] == 1 + AT_START_MARKERS


async def test_local_turns_are_retried_by_the_same_policy(temporal_client, task_queue, worker):
    name = placement_name()
    script = Script(failures=[transient("503"), transient("503")])
    handle = await start_local(temporal_client, task_queue, name, script)
    status = await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    assert script.cycle_attempts == 3 and status.last_error is None
    assert (await event_types(temporal_client, handle))["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 0


async def test_a_local_cleanup_completes_the_workflow(temporal_client, task_queue, worker):
    name = placement_name()
    handle = await start_local(
        temporal_client, task_queue, name, Script(phases=["ready", "deleting"])
    )
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="deleted"))
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.phase == "done" and SCRIPTS[name].cleanups == 1
    events = await event_types(temporal_client, handle)
    assert events["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 0
    # Two turns, the cleanup, generation, at start.
    assert events["EVENT_TYPE_MARKER_RECORDED"] == 4 + AT_START_MARKERS


async def test_a_local_turn_that_keeps_failing_runs_again_on_the_activity_queue(
    temporal_client, task_queue, worker
):
    """Local retries keep the workflow task open; after LOCAL_ATTEMPTS the turn moves to the
    activity queue, where it is retried as any other."""
    name = placement_name()
    script = Script(failures=[transient("503")] * (LOCAL_ATTEMPTS + 1))
    handle = await start_local(temporal_client, task_queue, name, script)
    status = await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    assert status.last_error is None and script.cycle_attempts == LOCAL_ATTEMPTS + 2
    events = await event_types(temporal_client, handle)
    assert events["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 1
    # Local attempts; generation; at start.
    assert events["EVENT_TYPE_MARKER_RECORDED"] == 2 + AT_START_MARKERS
    assert status.local_cycles  # the next turn tries locally again


async def test_a_local_turn_out_of_time_runs_again_on_the_activity_queue(
    temporal_client, task_queue, worker
):
    name = placement_name()
    gate = asyncio.Event()
    handle = await start_local(
        temporal_client, task_queue, name, Script(gate=gate), local_turn_seconds=1
    )

    async def moved() -> bool:
        events = await event_types(temporal_client, handle)
        return events["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 1

    await until_async(moved, what="the turn left the worker")
    gate.set()
    status = await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    assert status.last_error is None and status.local_cycles


async def test_a_local_turn_that_failed_for_good_is_not_run_again(
    temporal_client, task_queue, worker
):
    name = placement_name()
    script = Script(failures=[unexpected("bad number-of-clusters annotation")])
    handle = await start_local(temporal_client, task_queue, name, script)
    status = await status_when(handle, lambda s: s.last_error is not None)
    assert "bad number-of-clusters annotation" in status.last_error

    def not_retried() -> None:
        assert script.cycle_attempts == 1

    await consistently_async(not_retried, duration=0.5)
    assert (await event_types(temporal_client, handle))["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == 0


async def test_by_default_each_turn_runs_where_the_last_one_advised(
    temporal_client, task_queue, caching_worker
):
    """No word from anyone: the first turn runs local (nothing measured yet), then each turn
    follows the advice the previous one returned; a turn without advice keeps the last one.
    Continue-as-new carries the advice, and every run replays."""
    name = placement_name()
    script = Script(advice=[False, True, None, False])
    handle = await start_placement(temporal_client, task_queue, name, script, turns_per_run=4)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    status = await requeued_turns(handle, range(2, 6))
    # local (first), queue (advised False), local (True), local (no advice: keeps True), and,
    # in the next run, queue (the carried False).
    assert script.ran_local == [True, False, True, True, False]
    assert status.turn_execution == "auto" and not status.local_cycles
    assert await replays(temporal_client, handle.id) == 2


async def test_a_turn_that_fell_back_keeps_the_next_ones_on_the_queue(
    temporal_client, task_queue, caching_worker
):
    """A local turn that ran out of attempts runs again on the queue, and so do the next
    QUEUE_TURNS_AFTER_FALLBACK turns, whatever they advise, across continue-as-new (runs of two
    turns here): a lasting cause (a workflow worker that cannot reach the hub) does not cost
    every turn, or every run, its local attempts first."""
    name = placement_name()
    script = Script(
        failures=[transient("hub down")] * LOCAL_ATTEMPTS, advice=[True] * (LOCAL_ATTEMPTS + 3)
    )
    handle = await start_placement(temporal_client, task_queue, name, script, turns_per_run=2)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s), timeout=60)
    assert script.ran_local == [True] * LOCAL_ATTEMPTS + [False]
    await requeued_turns(handle, (2, 3))
    assert script.ran_local[-2:] == [False, False]
    assert QUEUE_TURNS_AFTER_FALLBACK > 2
    assert await replays(temporal_client, handle.id) == 2


async def test_a_worker_that_caches_no_workflow_runs_no_local_turn_of_its_own_choosing(
    temporal_client, task_queue, worker
):
    """Its first turn, and the turns another process advised local (the stand-ins advise local
    every time), run on the activity queue: such a worker evicts a run after each task, and a
    local turn in flight then is cancelled and run again, or holds the next task until it times
    out (issue 26). The history says so by a patch marker per turn, so it replays the same."""
    name = placement_name()
    script = Script(advice=[True] * 3)
    handle = await start_placement(temporal_client, task_queue, name, script)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    status = await requeued_turns(handle, (2, 3))
    assert script.ran_local == [False] * 3
    assert await turn_places(handle) == ["queue"] * 3  # no local activity's marker
    assert status.turn_execution == "auto"
    assert await replays(temporal_client, handle.id) == 1


async def test_a_run_that_moves_between_workers_runs_its_turns_where_each_one_lets_it(
    temporal_client, task_queue
):
    """One placement, its workflow served in turn by a worker that caches no workflow, one that
    caches, and the first again: queue, local, queue, whatever the advice (local). Each worker
    replays what the others chose: the one that caches nothing replays the whole history on
    every task, the local turn included."""
    name = placement_name()
    script = Script(advice=[True] * 3)
    SCRIPTS[name] = script
    handle = None
    for cycle, cached in ((1, False), (2, True), (3, False)):
        options = {} if cached else {"max_cached_workflows": 0}
        async with split_workers(
            temporal_client, task_queue, workflows=[PlacementWorkflow], activities=STAND_INS,
            **options,
        ):  # fmt: skip
            if handle is None:
                handle = await temporal_client.start_workflow(
                    PlacementWorkflow.run,
                    PlacementInput(placement=name),
                    id=names.workflow_id(name),
                    task_queue=task_queue,
                )
            else:
                reason = f"turn {cycle}"
                await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason=reason))
            await status_when(handle, lambda s, c=cycle: s.cycles == c and idle(s))
    assert handle is not None
    assert script.ran_local == [False, True, False]
    assert await turn_places(handle) == ["queue", "local", "queue"]
    assert await replays(temporal_client, handle.id) == 1


async def test_a_turn_the_local_slots_shed_runs_on_the_queue_alone(
    temporal_client, task_queue, caching_worker
):
    """A local turn shed for want of a local slot (a busy worker, nothing wrong with the hub)
    runs on the activity queue, and the next turns run where the advice says (local), not the
    QUEUE_TURNS_AFTER_FALLBACK turns of a fallback. The run says so by the patch marker
    SHED_TURN_PATCH, asked only for a shed turn, and replays."""
    name = placement_name()
    script = Script(failures=[shed()], advice=[True] * 4)
    handle = await start_placement(temporal_client, task_queue, name, script)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    status = await requeued_turns(handle, (2, 3))
    assert script.ran_local == [True, False, True, True]
    assert await turn_places(handle) == ["local", "queue", "local", "local"]
    assert status.local_cycles
    history = await handle.fetch_history()
    assert [p for p in patch_ids(history) if p == SHED_TURN_PATCH] == [SHED_TURN_PATCH]
    assert await replays(temporal_client, handle.id) == 1


async def test_a_turn_shed_right_after_a_local_turn_replays(
    temporal_client, task_queue, caching_worker
):
    """A local turn that asks to be requeued, then the next turn shed by the local slots: it
    runs on the queue, the patch is asked once it has, and the run replays."""
    name = placement_name()
    script = Script(requeues=[True], shed_turns={1}, advice=[True] * 3)
    handle = await start_placement(temporal_client, task_queue, name, script)
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    assert script.ran_local == [True, True, False]
    assert await turn_places(handle) == ["local", "local", "queue"]
    assert SHED_TURN_PATCH in patch_ids(await handle.fetch_history())
    assert await replays(temporal_client, handle.id) == 1


# A patch asked after a local activity has finished in the same workflow task records its marker
# after the local activity's; the SDK then meets that marker on replay before the local result
# has reached the workflow, and fails the task ("[TMPRL1100] ... no corresponding change
# command") on every replay after: a stuck run. Each case below asked such a patch after a
# placement's first turn, run local by default.
@pytest.mark.parametrize(
    "script",
    [
        pytest.param(lambda: Script(deadline="30s", advice=[True] * 3), id="schedule-deadline"),
        pytest.param(lambda: Script(clusters_version=7, advice=[True] * 3), id="clusters-version"),
        pytest.param(
            lambda: Script(deadline="30s", fulfilled=False, advice=[True] * 3),
            id="deadline-unfulfilled",
        ),
    ],
)
async def test_a_run_whose_first_turn_ran_local_replays(
    temporal_client, task_queue, caching_worker, script
):
    name = placement_name()
    handle = await start_placement(temporal_client, task_queue, name, script())
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    assert await turn_places(handle) == ["local"]
    assert await replays(temporal_client, handle.id) == 1
