"""PlacementWorkflow's loop rules on a real Temporal dev server, with stand-in activities.

Each test uses its own placement name and task queue; workers run with max_cached_workflows=0
so every workflow task replays the history from the start (a determinism check for free)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from scheduler import Explanation, FilterGroup, ScoreGroup
from tests.integration.workflows.stand_ins import SCRIPTS, Script, transient, unexpected
from tests.integration.workflows.workflow_helpers import idle, placement_name, start, status_when
from tests.support.history import LOCAL_ACTIVITY_MARKER
from tests.support.waits import consistently_async, until_async
from workers.worker import PlacementWorkers
from workflows import names
from workflows.models import (
    CycleReport,
    HubEvent,
    PlacementExplanation,
    PlacementInput,
    RequeueRequest,
    RequeueResult,
    TurnPriority,
    TurnResult,
)
from workflows.placement import CLOSING_ERROR, PlacementWorkflow, ResourcePlacementWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_one_requeue_signal_runs_exactly_one_cycle(temporal_client, task_queue, worker):
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script())
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))

    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="by hand"))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))

    async def two_cycles() -> None:
        assert (await handle.query(PlacementWorkflow.status)).cycles == 2
        assert len(SCRIPTS[name].cycles) == 2

    await consistently_async(two_cycles, duration=1.0)
    assert "requeue: by hand" in SCRIPTS[name].cycles[1].reason


async def test_signals_during_a_cycle_coalesce_into_exactly_one_more(
    temporal_client, task_queue, worker
):
    name = placement_name()
    gate = asyncio.Event()
    handle = await start(temporal_client, task_queue, name, Script(gate=gate))
    await status_when(handle, lambda s: SCRIPTS[name].cycle_attempts == 1)

    await handle.signal(PlacementWorkflow.cluster_changed, HubEvent(reason="member-1 labels"))
    await handle.signal(PlacementWorkflow.cluster_changed, HubEvent(reason="member-2 labels"))
    await handle.signal(PlacementWorkflow.snapshot_changed, HubEvent(reason="N changed"))
    await handle.signal(PlacementWorkflow.requeue)
    await handle.signal(PlacementWorkflow.binding_deleting)
    gate.set()

    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    script = SCRIPTS[name]

    def one_more() -> None:
        assert [c.cycle for c in script.cycles] == [1, 2]

    await consistently_async(one_more, duration=1.0)
    assert "cluster_changed: member-1 labels" in script.cycles[1].reason
    assert script.cycles[1].reason.endswith("(+2)")  # five reasons, three listed


async def test_requeue_now_runs_the_next_batch_without_an_event(
    temporal_client, task_queue, worker
):
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script(requeues=[True, True]))
    status = await status_when(handle, lambda s: s.cycles == 3 and idle(s))
    assert status.last is not None and status.last.cycle == 3
    assert "asked to requeue now" in SCRIPTS[name].cycles[1].reason


async def test_requeue_after_is_a_durable_timer(temporal_client, task_queue, worker):
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script(requeue_after=1.0))
    # Between the first cycle and the timer firing, the workflow says it waits for the timer.
    first = await status_when(handle, lambda s: s.cycles == 1 and s.phase == "requeue_timer")
    assert first.waiting_for == "a 1s requeue timer, or an event"
    await status_when(handle, lambda s: s.cycles == 2 and idle(s), timeout=10)
    assert "requeue after 1s" in SCRIPTS[name].cycles[1].reason
    history = await handle.fetch_history()
    assert any(e.HasField("timer_started_event_attributes") for e in history.events)


async def test_without_a_latest_snapshot_it_waits_for_an_event_instead_of_retrying(
    temporal_client, task_queue, worker
):
    name = placement_name()
    handle = await start(
        temporal_client, task_queue, name, Script(phases=["no_latest_snapshot", "ready"])
    )
    await status_when(handle, lambda s: "scripted no_latest_snapshot" in s.waiting_for)

    async def waiting() -> None:
        status = await handle.query(PlacementWorkflow.status)
        assert SCRIPTS[name].prepares == 1 and status.cycles == 0

    await consistently_async(waiting, duration=1.0)

    await handle.signal(PlacementWorkflow.snapshot_changed, HubEvent(reason="web-0 created"))
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))


async def test_a_deleting_placement_is_cleaned_up_and_the_workflow_completes(
    temporal_client, task_queue, worker
):
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script(phases=["ready", "deleting"]))
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await handle.signal(PlacementWorkflow.placement_deleting)

    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert SCRIPTS[name].cleanups == 1
    assert "cleaned up (2 bindings deleted)" in result.waiting_for
    assert result.phase == "done"


async def test_a_gone_placement_completes_without_cleanup(temporal_client, task_queue, worker):
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script(phases=["gone"]))
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.cycles == 0 and SCRIPTS[name].cleanups == 0


async def test_an_unexpected_failure_is_recorded_and_the_next_event_runs_a_cycle(
    temporal_client, task_queue, worker
):
    name = placement_name()
    script = Script(failures=[unexpected("bad number-of-clusters annotation")])
    handle = await start(temporal_client, task_queue, name, script)
    status = await status_when(handle, lambda s: s.last_error is not None)
    assert "UnexpectedBehavior" in status.last_error
    assert "bad number-of-clusters annotation" in status.last_error

    def not_retried() -> None:
        assert script.cycle_attempts == 1

    await consistently_async(not_retried, duration=0.5)

    await handle.signal(PlacementWorkflow.requeue)
    status = await status_when(handle, lambda s: s.last is not None and idle(s))
    assert status.last_error is None


async def test_transient_failures_are_retried_by_the_activity_retry_policy(
    temporal_client, task_queue, worker
):
    name = placement_name()
    script = Script(failures=[transient("503"), transient("503")])
    handle = await start(temporal_client, task_queue, name, script)
    status = await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    assert script.cycle_attempts == 3 and status.last_error is None


async def test_fresh_requeue_applies_to_one_cycle_only(temporal_client, task_queue, worker):
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script())
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(fresh=True, reason="rebalance"))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    await handle.signal(PlacementWorkflow.requeue)
    await status_when(handle, lambda s: s.cycles == 3 and idle(s))
    assert [c.fresh for c in SCRIPTS[name].cycles] == [False, True, False]


async def test_continue_as_new_carries_the_state_across_runs(temporal_client, task_queue, worker):
    name = placement_name()
    handle = await start(
        temporal_client, task_queue, name, Script(requeues=[True] * 4), turns_per_run=2
    )
    status = await status_when(handle, lambda s: s.cycles == 5 and idle(s))
    assert status.cycles_this_run == 1  # runs of 2, 2, then the fifth cycle
    assert status.last is not None and status.last.cycle == 5
    description = await handle.describe()
    assert description.run_id != handle.result_run_id
    assert [c.cycle for c in SCRIPTS[name].cycles] == [1, 2, 3, 4, 5]


def fleet_explanation(clusters: int) -> Explanation:
    """A PickAll cycle over `clusters` clusters, a tenth of them filtered: packed when recorded."""
    names_ = [f"member-westeurope-prod-{i:05d}" for i in range(clusters)]
    return Explanation(
        placement_type="PickAll",
        snapshot="s-0",
        picked=[ScoreGroup(topology=0, affinity=0, obsolete=0, clusters=names_[clusters // 10 :])],
        filtered=[
            FilterGroup(
                plugin="ClusterAffinity",
                reason="cluster does not match with any of the required cluster affinity terms",
                clusters=names_[: clusters // 10],
            )
        ],
    )


async def schedule_once_results(client: Client, workflow_id: str, run_id: str) -> list[CycleReport]:
    """The cycle reports one run recorded, as the history holds them: an activity's result, or
    a local activity's marker."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    reports = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_completed_event_attributes"):
            payloads = event.activity_task_completed_event_attributes.result.payloads
        elif event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
            payloads = event.marker_recorded_event_attributes.details["result"].payloads
        else:
            continue
        (turn,) = await client.data_converter.decode(payloads, [TurnResult])
        assert turn.report is not None
        reports.append(turn.report)
    return reports


async def test_an_explanation_is_recorded_once_packed_and_survives_continue_as_new(
    temporal_client, task_queue, worker
):
    """Cycle 1 decides over 300 clusters (recorded packed), cycle 2 decides the same (recorded
    as a digest only), cycles 3 and 4 keep two clusters (small: recorded as they are). Runs of
    three turns: `explain`'s query still has cycle 2's fates in the second run, and the status
    answer and continue-as-new input carry no copy of the last cycle's explanation."""
    name = placement_name()
    fleet = fleet_explanation(300)
    kept = Explanation(placement_type="PickN", snapshot="s-0", kept=["member-a", "member-b"])
    script = Script(requeues=[True, True, True, False], explanations=[fleet, fleet, kept, kept])
    handle = await start(temporal_client, task_queue, name, script, turns_per_run=3)
    status = await status_when(handle, lambda s: s.cycles == 4 and idle(s))

    assert status.last is not None and status.last.cycle == 4
    assert not status.last.has_explanation
    answer = await handle.query(names.QUERY_EXPLANATION, result_type=PlacementExplanation)
    assert answer.last is not None and answer.last.cycle == 4
    assert answer.last.full_explanation() == kept
    assert answer.deciding is not None and answer.deciding.cycle == 2
    assert answer.deciding.full_explanation() == fleet

    first_run = (await handle.describe()).raw_description.workflow_execution_info.first_run_id
    recorded = await schedule_once_results(temporal_client, handle.id, first_run)
    assert [r.cycle for r in recorded] == [1, 2, 3]
    assert recorded[0].explanation is None and recorded[0].explanation_packed is not None
    assert not recorded[1].has_explanation
    assert recorded[1].explanation_digest == recorded[0].explanation_digest
    assert recorded[2].explanation == kept
    # The second run was started with cycle 2 (and its fates) as the deciding one, and the last
    # cycle's report without its explanation.
    first = temporal_client.get_workflow_handle(handle.id, run_id=first_run)
    async for event in first.fetch_history_events():
        if event.HasField("workflow_execution_continued_as_new_event_attributes"):
            payloads = event.workflow_execution_continued_as_new_event_attributes.input.payloads
            (carried,) = await temporal_client.data_converter.decode(payloads, [PlacementInput])
    assert carried.carried is not None
    assert carried.carried.last is not None and not carried.carried.last.has_explanation
    assert carried.carried.deciding is not None
    assert carried.carried.deciding.explanation_packed == recorded[0].explanation_packed


async def test_a_failed_cleanup_is_recorded_and_retried_on_the_next_event(
    temporal_client, task_queue, worker
):
    name = placement_name()
    script = Script(phases=["deleting"], cleanup_failures=[unexpected("placement is live")])
    handle = await start(temporal_client, task_queue, name, script)
    status = await status_when(handle, lambda s: s.last_error is not None)
    assert "cleanup failed (UnexpectedBehavior): placement is live" in status.last_error

    await handle.signal(PlacementWorkflow.placement_deleting)
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert script.cleanups == 2 and "cleaned up" in result.waiting_for


@pytest.mark.parametrize("last_turn", ["gone", "deleting"])
async def test_an_event_during_the_last_turn_is_not_lost_to_a_placement_created_again(
    temporal_client, task_queue, worker, last_turn
):
    # The placement is deleted and, while its workflow's last turn runs (prepare finding it gone,
    # or its cleanup), created again under the same name: the watcher's signal-with-start finds
    # the old workflow still running and signals it. Completing anyway would drop that signal,
    # and the new placement would wait with no workflow until some unrelated event.
    name = placement_name()
    gate = asyncio.Event()
    script = Script(phases=[last_turn, "ready"])
    if last_turn == "gone":
        script.prepare_gate = gate
    else:
        script.cleanup_gate = gate
    handle = await start(temporal_client, task_queue, name, script)
    await until_async(
        lambda: script.prepares if last_turn == "gone" else script.cleanups,
        what="the last turn started",
        timeout=30,
    )

    await handle.signal(PlacementWorkflow.placement_changed, HubEvent(reason=f"{name} created"))
    gate.set()

    status = await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    assert status.last is not None and script.prepares == 2
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def test_search_attributes_are_upserted_only_when_they_change(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """The watcher starts workflows with the name set, so the workflow does not upsert it
    again; cycles with the same outcome upsert type and fully-scheduled once (each upsert is a
    visibility write); the run's patch generation is set once, at its start."""
    name = placement_name()
    SCRIPTS[name] = Script(requeues=[False, False, False])
    handle = await temporal_client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(placement=name),
        id=names.workflow_id(name),
        task_queue=task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(names.SA_PLACEMENT_NAME, name)]
        ),
    )
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    for cycle in (2, 3):
        await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason=f"again {cycle}"))
        await status_when(handle, lambda s, c=cycle: s.cycles == c and idle(s))

    # workflow.patched adds Temporal's own TemporalChangeVersion upsert; ours are the Fleet ones.
    upserted: list[list[str]] = []
    async for event in handle.fetch_history_events():
        if event.HasField("upsert_workflow_search_attributes_event_attributes"):
            attributes = event.upsert_workflow_search_attributes_event_attributes
            ours = sorted(k for k in attributes.search_attributes.indexed_fields if "Fleet" in k)
            if ours:
                upserted.append(ours)
    # The run's patch generation at its start (workflows.renewal), then the first cycle's.
    assert upserted == [
        [names.SA_PATCH_GENERATION.name],
        sorted([names.SA_PLACEMENT_TYPE.name, names.SA_FULLY_SCHEDULED.name]),
    ]
    description = await handle.describe()
    assert description.typed_search_attributes.get(names.SA_PLACEMENT_NAME) == name
    assert description.typed_search_attributes.get(names.SA_FULLY_SCHEDULED) is True


# --- requeue_and_wait ----------------------------------------------------------------------


async def test_requeue_and_wait_during_a_cycle_answers_with_the_next_cycle(
    temporal_client, task_queue, worker
):
    """The running cycle read the hub before the requeue was asked for: the answer is the
    cycle after it, not the one in flight."""
    name = placement_name()
    gate = asyncio.Event()
    handle = await start(temporal_client, task_queue, name, Script(gate=gate))
    await status_when(handle, lambda s: s.phase == "running" and s.cycles == 0)

    waiting = asyncio.create_task(
        handle.execute_update(
            PlacementWorkflow.requeue_and_wait, RequeueRequest(reason="during cycle 1")
        )
    )
    await status_when(handle, lambda s: s.pending_reasons == ["requeue: during cycle 1"])
    assert not waiting.done()
    gate.set()  # cycle 1 ends, cycle 2 (the one the requeue caused) runs
    result = await asyncio.wait_for(waiting, 30)

    assert (result.outcome, result.cycle) == ("scheduled", 2)
    assert result.summary == "cycle 2: scripted"
    assert SCRIPTS[name].cycles[1].reason == "requeue: during cycle 1"


async def test_requeue_and_wait_reports_a_turn_that_found_nothing_to_schedule(
    temporal_client, task_queue, worker
):
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script(phases=["no_latest_snapshot"]))
    await status_when(handle, idle)

    result = await handle.execute_update(PlacementWorkflow.requeue_and_wait, RequeueRequest())

    assert (result.outcome, result.cycle, result.summary) == (
        "not_ready",
        None,
        "scripted no_latest_snapshot",
    )


async def test_requeue_and_wait_is_answered_across_continue_as_new(
    temporal_client, task_queue, worker
):
    """Runs of one turn: every update lands in a run that must continue-as-new right after the
    turn it waits for, or is refused while the run ends and sent again to the next one. None
    is left waiting and every answer is a cycle."""
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script(), turns_per_run=1)
    await status_when(handle, lambda s: s.cycles >= 1 and idle(s))

    async def requeue_until_answered(i: int) -> int:
        for _ in range(100):
            try:
                latest = temporal_client.get_workflow_handle(names.workflow_id(name))
                result = await latest.execute_update(
                    names.UPDATE_REQUEUE_AND_WAIT,
                    RequeueRequest(reason=f"update {i}"),
                    result_type=RequeueResult,
                )
            except Exception as exc:  # refused while a run ends: the CLI sends it again
                cause = getattr(exc, "cause", None)
                assert getattr(cause, "type", None) == CLOSING_ERROR, exc
                await asyncio.sleep(0.1)
                continue
            assert result.outcome == "scheduled"
            return result.cycle
        raise AssertionError(f"update {i} was never answered")

    cycles = await asyncio.wait_for(
        asyncio.gather(*(requeue_until_answered(i) for i in range(5))), 60
    )
    assert all(cycle is not None and cycle >= 2 for cycle in cycles)


async def test_a_resource_placement_workflow_keeps_its_namespace_to_the_end(
    temporal_client, task_queue, worker
):
    # Started without search attributes (as a bare `temporal workflow start` would), across a
    # continue-as-new, to its cleanup: every activity is told the namespace.
    name = placement_name()
    SCRIPTS[name] = Script(requeues=[True] * 2, phases=["ready", "ready", "ready", "deleting"])
    handle = await temporal_client.start_workflow(
        ResourcePlacementWorkflow.run,
        # On the activity queue, where the activity types show in the history.
        PlacementInput(placement=name, namespace="team-a", turns_per_run=2, turn_execution="queue"),
        id=names.workflow_id(name, "team-a"),
        task_queue=task_queue,
    )
    assert handle.id == f"rp/team-a/{name}"
    status = await status_when(handle, lambda s: s.cycles == 3 and idle(s))
    assert status.namespace == "team-a"
    assert [c.namespace for c in SCRIPTS[name].cycles] == ["team-a"] * 3
    description = await handle.describe()
    assert description.run_id != handle.result_run_id  # continued as new on the way
    attributes = description.typed_search_attributes
    assert attributes.get(names.SA_PLACEMENT_NAME) == name
    assert attributes.get(names.SA_PLACEMENT_KIND) == names.KIND_RESOURCE_PLACEMENT
    assert attributes.get(names.SA_PLACEMENT_NAMESPACE) == "team-a"
    await handle.signal(PlacementWorkflow.placement_deleting)
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.phase == "done" and result.namespace == "team-a"
    assert [r.namespace for r in SCRIPTS[name].cleanup_requests] == ["team-a"]
    assert description.workflow_type == names.RP_PLACEMENT_WORKFLOW
    # Its activities run under the RP's own types, which a worker from before RPs lacks (the
    # last run turned once, then cleaned up).
    history = await temporal_client.get_workflow_handle(handle.id).fetch_history()
    scheduled = {
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    assert scheduled == {names.ACTIVITY_SCHEDULE_ONCE_RP, names.ACTIVITY_CLEANUP_PLACEMENT_RP}


# --- priority (docs/priority.md) -----------------------------------------------------------


async def test_each_turn_runs_at_the_priority_its_signals_asked_for(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """The watcher's signal sets the turn's key and the placement's fairness; a person's
    requeue runs at the placement's own key, or at the one asked for; the best key of the
    signals queued for one turn wins; FleetPriority and FleetTenant follow, upserted only when
    they change; status carries it all."""
    name = placement_name()
    gate = asyncio.Event()
    SCRIPTS[name] = Script(gate=gate)
    fan_out = TurnPriority(
        priority_key=4, own_priority_key=3, fairness_key="team-a", fairness_weight=2.0,
        value=5, priority_class="batch", tenant="team-a",
    )  # fmt: skip
    handle = await temporal_client.start_workflow(
        PlacementWorkflow.run,
        # On the activity queue, where a turn's activity task carries its key.
        PlacementInput(placement=name, turn_execution="queue"),
        id=names.workflow_id(name),
        task_queue=task_queue,
        start_signal=names.SIGNAL_CLUSTER_CHANGED,
        start_signal_args=[HubEvent(reason="cluster x: labels changed", priority=fan_out)],
    )
    await status_when(handle, lambda s: s.phase == "running")
    # Queued during turn 1: a fan-out at key 4 and a person's requeue at key 2: turn 2 takes 2.
    await handle.signal(names.SIGNAL_CLUSTER_CHANGED, HubEvent(reason="again", priority=fan_out))
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="now", priority=2))
    gate.set()
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="plain"))
    await status_when(handle, lambda s: s.cycles == 3 and idle(s))
    moved = fan_out.model_copy(
        update={
            "value": 1000,
            "priority_class": "high",
            "tenant": None,
            "fairness_key": None,
            "fairness_weight": None,
            "priority_key": 2,
            "own_priority_key": 2,
        }
    )
    await handle.signal(names.SIGNAL_PLACEMENT_CHANGED, HubEvent(reason="spec", priority=moved))
    status = await status_when(handle, lambda s: s.cycles == 4 and idle(s))

    got = [(p.priority_key, p.fairness_key, p.fairness_weight) for p in SCRIPTS[name].priorities]
    assert got == [
        (4, "team-a", 2.0),  # the starting fan-out
        (2, "team-a", 2.0),  # the requeue's override beats the queued fan-out
        (3, "team-a", 2.0),  # a plain requeue: the placement's own key
        (2, None, None),  # the new priority, no tenant
    ]
    assert status.priority == moved and status.last_turn_key == 2

    upserts: list[dict[str, object]] = []
    async for event in handle.fetch_history_events():
        if event.HasField("upsert_workflow_search_attributes_event_attributes"):
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
            ours = {
                k: v.data.decode() for k, v in fields.indexed_fields.items()
                if k in (names.SA_PRIORITY.name, names.SA_TENANT.name)
            }  # fmt: skip
            if ours:
                upserts.append(ours)
    assert upserts == [
        {names.SA_PRIORITY.name: "5", names.SA_TENANT.name: '"team-a"'},
        {names.SA_PRIORITY.name: "1000", names.SA_TENANT.name: ""},
    ]
    description = await handle.describe()
    assert description.typed_search_attributes.get(names.SA_PRIORITY) == 1000
    assert description.typed_search_attributes.get(names.SA_TENANT) is None


async def test_turns_without_priorities_run_as_before(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """Signals without a priority (every history before it, and senders that do not order
    turns) leave the activity's Priority unset, the workflow's own, and upsert nothing."""
    name = placement_name()
    handle = await start(temporal_client, task_queue, name, Script())
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await handle.signal(names.SIGNAL_CLUSTER_CHANGED, HubEvent(reason="x"))
    status = await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    assert [p.priority_key for p in SCRIPTS[name].priorities] == [None, None]
    assert status.priority is None and status.last_turn_key is None
