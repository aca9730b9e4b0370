"""Determinism guard: PlacementWorkflow histories replay against today's workflow code.

Two sources: histories produced just now (a cycle, a requeue, a coalesced burst, a
continue-as-new and a deletion), and histories recorded earlier and committed under
tests/integration/histories/, which fail here if a code change would break running workflows.
A third test proves the guard works: a workflow that leaves out one command of a turn (the
cleanup activity) fails to replay the recorded deletion.

Record with FLEET_RECORD_HISTORIES=1 (it rewrites `placement-<run>.json`). Once a release has
run, keep its recordings and add new ones next to them after a deliberate, patched change.
`pre-decomposition-*.json` were recorded by the workflow before it was split into its small
classes (inbox, waiters, run budget, execution, visibility): requeue_and_wait updates across a
continue-as-new, a requeue timer, a failed turn, coalesced signals, local turns, the priority
patch and a ResourcePlacement's deletion."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.integration.workflows.stand_ins import SCRIPTS, Script
from tests.integration.workflows.workflow_helpers import (
    delete_and_complete,
    idle,
    placement_name,
    requeued_turns,
    start,
    start_local,
    start_placement,
    status_when,
)
from workers.worker import PlacementWorkers, split_workers
from workflows import names
from workflows.execution import QUEUE_TURN_PATCH
from workflows.models import HubEvent, PlacementInput, PlacementStatus
from workflows.placement import PlacementWorkflow, ResourcePlacementWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
# How a local activity shows in a history: a marker of this name.
LOCAL_MARKER = "core_local_activity"
PATCH_MARKER = "core_patch"


def replayer() -> Replayer:
    return Replayer(
        workflows=[PlacementWorkflow, ResourcePlacementWorkflow],
        data_converter=pydantic_data_converter,
    )


async def test_fresh_histories_replay(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    name = placement_name()
    script = Script(requeues=[True, False, False])
    handle = await start(temporal_client, task_queue, name, script, turns_per_run=2)
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    for reason in ("a", "b", "c"):
        await handle.signal(PlacementWorkflow.cluster_changed, HubEvent(reason=reason))
    # Under load the three signals may take one or two more turns.
    await status_when(handle, lambda s: s.cycles >= 3 and idle(s))
    await delete_and_complete(handle, script)

    histories = await replay_runs(temporal_client, handle.id, "placement")
    assert len(histories) >= 2  # at least one continue-as-new (runs of two cycles)


async def test_fresh_local_cycle_histories_replay(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """Turns as local activities, moved to the activity queue and back by signals, across a
    continue-as-new, and a local cleanup."""
    name = placement_name()
    script = Script()
    handle = await start_local(temporal_client, task_queue, name, script, turns_per_run=2)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    for cycle, where in ((2, "queue"), (3, "local")):
        event = HubEvent(reason=f"turn {cycle}", turn_execution=where)
        await handle.signal(PlacementWorkflow.cluster_changed, event)
        await status_when(handle, lambda s, c=cycle: s.cycles == c and idle(s))
    await delete_and_complete(handle, script)
    histories = await replay_runs(temporal_client, handle.id, "placement-local")
    assert len(histories) == 2
    assert all(LOCAL_MARKER in h.to_json() for h in histories)


async def test_fresh_histories_of_a_worker_that_caches_nothing_replay(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """Turns the workers would run local (the stand-ins advise local), each sent to the queue
    by a worker that caches no workflow, its patch marker per turn, across a continue-as-new,
    and the cleanup."""
    name = placement_name()
    script = Script(advice=[True] * 4)
    handle = await start_placement(temporal_client, task_queue, name, script, turns_per_run=2)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await requeued_turns(handle, (2, 3))
    await delete_and_complete(handle, script)
    histories = await replay_runs(temporal_client, handle.id, "placement-queue-turns")
    assert len(histories) == 2
    for history in histories:
        asked = [p for p in patches(history) if p.startswith(QUEUE_TURN_PATCH)]
        assert asked == [f"{QUEUE_TURN_PATCH}-{n}" for n in range(1, len(asked) + 1)]
        assert asked and LOCAL_MARKER not in history.to_json()
    assert not any(script.ran_local)


def patches(history: WorkflowHistory) -> list[str]:
    """The ids of the patch markers of a history, in order."""
    found = []
    for event in history.events:
        marker = event.marker_recorded_event_attributes
        if marker.marker_name == PATCH_MARKER:
            found.append(json.loads(marker.details["patch-data"].payloads[0].data)["id"])
    return found


async def replay_runs(client: Client, workflow_id: str, record_as: str) -> list[WorkflowHistory]:
    """Every run of the workflow, each replayed against today's code; with
    FLEET_RECORD_HISTORIES set, recorded as `<record_as>-<run>.json`."""
    histories: list[WorkflowHistory] = []
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        run = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        histories.append(await run.fetch_history())
    for history in histories:
        result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
    if os.environ.get("FLEET_RECORD_HISTORIES"):
        HISTORIES.mkdir(exist_ok=True)
        for index, history in enumerate(histories):
            (HISTORIES / f"{record_as}-{index}.json").write_text(history.to_json())
    return histories


@pytest.mark.parametrize("path", sorted(HISTORIES.glob("*.json")), ids=lambda p: p.name)
async def test_recorded_histories_replay(path: Path) -> None:
    history = WorkflowHistory.from_json("recorded", path.read_text())
    await replayer().replay_workflow(history)


@workflow.defn(name=names.PLACEMENT_WORKFLOW, sandboxed=False)
class WithoutCleanup(PlacementWorkflow):
    """Today's workflow less one command: deletion skips the cleanup activity."""

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        return await super().run(input)

    async def _cleanup(self) -> bool:
        return True


@workflow.defn(name=names.PLACEMENT_WORKFLOW, sandboxed=False)
class AlwaysRemote(PlacementWorkflow):
    """Today's workflow with every turn forced on the activity queue."""

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        self._execution.mode = "queue"
        return await super().run(input)

    def _hub_signal(self, signal: str, event: HubEvent | None) -> None:
        super()._hub_signal(signal, event)
        self._execution.mode = "queue"


async def assert_nondeterministic(workflow: type, recorded: Path) -> None:
    """`workflow`, a broken copy of ours, fails to replay the `recorded` history as
    nondeterministic."""
    history = WorkflowHistory.from_json("recorded", recorded.read_text())
    broken = Replayer(workflows=[workflow], data_converter=pydantic_data_converter)
    result = await broken.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is not None
    assert "nondetermin" in str(result.replay_failure).lower()


async def test_a_local_history_fails_to_replay_with_remote_turns() -> None:
    recorded = [p for p in sorted(HISTORIES.glob("*.json")) if LOCAL_MARKER in p.read_text()]
    assert recorded, "no recorded history has a local activity"
    await assert_nondeterministic(AlwaysRemote, recorded[0])


async def test_a_workflow_missing_a_command_fails_to_replay() -> None:
    recorded = sorted(HISTORIES.glob("*.json"))
    with_cleanup = [p for p in recorded if f'"{names.ACTIVITY_CLEANUP_PLACEMENT}"' in p.read_text()]
    assert with_cleanup, "no recorded history runs the cleanup activity"
    await assert_nondeterministic(WithoutCleanup, with_cleanup[0])


async def test_a_run_begun_before_priorities_replays_with_the_watchers_priority_signals(
    temporal_client: Client, task_queue: str
) -> None:
    """A rolling upgrade: the new watcher sends priorities (and priority_changed) to a run a
    worker from before them is executing, which records no upsert for them. Stood in for by a
    worker that declines the priority patch, as a worker without the code would behave; today's
    code must replay that run as it is (no upsert it never made), and a fresh run makes them."""
    from temporalio.worker import PatchActivationInput

    from tests.integration.workflows.stand_ins import STAND_INS
    from workflows.models import TurnPriority
    from workflows.placement import PRIORITY_PATCH

    def before_priorities(found: PatchActivationInput) -> bool:
        return found.patch_id != PRIORITY_PATCH

    name = placement_name()
    SCRIPTS[name] = Script()
    urgent = TurnPriority(priority_key=2, own_priority_key=2, value=1000, priority_class="high")
    queue = f"{task_queue}-old"
    async with split_workers(
        temporal_client,
        queue,
        workflows=[PlacementWorkflow],
        activities=STAND_INS,
        max_cached_workflows=0,
        patch_activation_callback=before_priorities,
    ):
        handle = await temporal_client.start_workflow(
            PlacementWorkflow.run,
            PlacementInput(placement=name),
            id=names.workflow_id(name),
            task_queue=queue,
            start_signal=names.SIGNAL_PLACEMENT_CHANGED,
            start_signal_args=[HubEvent(reason="created", priority=urgent)],
        )
        await status_when(handle, lambda s: s.cycles == 1 and idle(s))
        await handle.signal(names.SIGNAL_PRIORITY_CHANGED, HubEvent(priority=urgent))
        await handle.signal(PlacementWorkflow.requeue)
        await status_when(handle, lambda s: s.cycles == 2 and idle(s))
        history = await handle.fetch_history()
    field = "upsert_workflow_search_attributes_event_attributes"
    upserts = [e for e in history.events if e.HasField(field)]
    assert not any(
        names.SA_PRIORITY.name in e.upsert_workflow_search_attributes_event_attributes
        .search_attributes.indexed_fields
        for e in upserts
    )  # fmt: skip
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
