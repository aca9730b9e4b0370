"""Determinism guard: PlacementWorkflow histories replay against today's workflow code.

Two sources: histories produced just now (a cycle, a requeue, a coalesced burst, a
continue-as-new and a deletion), and histories recorded earlier and committed under
tests/integration/histories/, which fail here if a code change would break running workflows.
A third test proves the guard works: a workflow that leaves out one command of a turn (the
cleanup activity) fails to replay the recorded deletion.

Record with FLEET_RECORD_HISTORIES=1 (it rewrites `placement-<run>.json`). Once a release has
run, keep its recordings and add new ones next to them after a deliberate, patched change.
`placement-deadline-*.json` and `placement-auto-local-fallback-0.json` were recorded by the
code that brought the deadline's patches (its timer, a busy miss, the report-interval floor,
aging) and the automatic choice of where turns run (a local turn that fell back to the queue);
each has a guard below that a workflow without one of those commands fails to replay it.
`placement-local-shed-0.json`: a local turn shed by the worker's local slots, run on the queue
alone (patch `turn-shed-alone`), the next turn local again.
`placement-renewal-*.json`: a run begun before patch generations, renewed by `renew_run`
(workflows.renewal), and the run that followed, which records its generation.
`pre-decomposition-*.json` were recorded by the workflow before it was split into its small
classes (inbox, waiters, run budget, execution, visibility): requeue_and_wait updates across a
continue-as-new, a requeue timer, a failed turn, coalesced signals, local turns, the priority
patch and a ResourcePlacement's deletion."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.integration.workflows.stand_ins import SCRIPTS, Script, shed, transient
from tests.integration.workflows.workflow_helpers import (
    delete_and_complete,
    idle,
    placement_name,
    requeued_turns,
    serving,
    start,
    start_local,
    start_placement,
    status_when,
)
from tests.support.history import patch_ids, turn_places
from tests.support.waits import until_async
from workers.worker import PlacementWorkers, split_workers
from workflows import names
from workflows.deadline import (
    DeadlineWait,
    PlacementDeadline,
)
from workflows.execution import (
    AUTO_LOCAL_PATCH,
    LOCAL_ATTEMPTS,
    QUEUE_TURN_PATCH,
    SHED_TURN_PATCH,
)
from workflows.models import (
    HubEvent,
    PlacementInput,
    PlacementStatus,
    RenewRequest,
    RequeueRequest,
    TurnPriority,
)
from workflows.patches import AT_START, AT_START_GROUPS, AT_START_PATCH, PRIORITY_PATCH
from workflows.placement import PlacementWorkflow, ResourcePlacementWorkflow
from workflows.renewal import GENERATION_PATCH

pytestmark = pytest.mark.asyncio(loop_scope="session")

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
# How a local activity shows in a history: a marker of this name.
LOCAL_MARKER = "core_local_activity"


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
        asked = [p for p in patch_ids(history) if p.startswith(QUEUE_TURN_PATCH)]
        assert asked == [f"{QUEUE_TURN_PATCH}-{n}" for n in range(1, len(asked) + 1)]
        assert asked and LOCAL_MARKER not in history.to_json()
    assert not any(script.ran_local)


def turn_patches(history: WorkflowHistory) -> list[str]:
    """The same less those every fresh run records at its start (GENERATION_PATCH, and the
    at-start patches, which answer the deadline's, the clusters version's and the moot
    requeue's)."""
    at_start = {GENERATION_PATCH, *(patch_id for patch_id, _ in AT_START_GROUPS)}
    return [p for p in patch_ids(history) if p not in at_start]


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


# --- the deadline's patches and the automatic local turn -----------------------------------------
# Each scenario below records one run (FLEET_RECORD_HISTORIES=1 rewrites its file) and replays
# it; its recording replays in test_recorded_histories_replay, and a guard further down shows a
# workflow without one of its commands fails to replay the recording.


def next_miss(status: PlacementStatus) -> datetime:
    """When the deadline the status shows falls next (DeadlineClock.due)."""
    clock = status.deadline
    assert clock is not None and clock.since is not None and clock.seconds is not None
    return clock.since + timedelta(seconds=clock.seconds * (clock.misses + 1))


async def test_fresh_deadline_timer_history_replays(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """A `1s` deadline on a placement that stays unscheduled: the first turn starts the clock,
    its timer fires and the miss, the workflow idle, is reported alone (no turn,
    DEADLINE_ALONE_PATCH); then the report-interval floor puts the next miss off (a long
    timer), a signal after the next period counts that miss on its own turn, and the floor
    holds again until the deletion. (`placement-deadline-timer-0.json`, recorded before the
    report alone, ran a turn for the first miss: it replays too.)"""
    name = placement_name()
    script = Script(deadline="1s", fulfilled=False)
    handle = await start(temporal_client, task_queue, name, script)
    await until_async(lambda: script.reports == [1], what="the miss reported alone")
    status = await status_when(handle, lambda s: idle(s) and s.deadline is not None)
    assert status.cycles == 1 and status.deadline is not None and status.deadline.misses == 1
    due = next_miss(status)
    await until_async(lambda: datetime.now(UTC) > due, what="the next deadline period")
    await handle.signal(PlacementWorkflow.placement_changed, HubEvent(reason="labels"))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    await delete_and_complete(handle, script)

    [history] = await replay_runs(temporal_client, handle.id, "placement-deadline-alone")
    assert len(script.misses) == 3, script.misses  # start, the signal, the deletion
    assert script.misses[0] == 0 and script.misses[1] >= 2 and script.reports == [1]
    # The deadline's patches are answered at the run's start (AT_START_PATCH), none after.
    assert AT_START_PATCH in patch_ids(history) and turn_patches(history) == []
    assert not AT_START & set(patch_ids(history))


async def test_a_miss_the_report_cannot_speak_for_runs_a_turn(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """The report finds the placement fully scheduled, gone or asking another deadline: the
    miss runs a turn, which decides and reports it, as before the report alone."""
    name = placement_name()
    script = Script(deadline="1s", fulfilled=False, report_speaks=False)
    handle = await start(temporal_client, task_queue, name, script)
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    assert script.reports == [1] and script.misses[:2] == [0, 1]
    await delete_and_complete(handle, script)
    await replay_runs(temporal_client, handle.id, "placement-deadline-alone-refused")


async def test_fresh_deadline_aging_history_replays(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """A `1s,aging` deadline at key 3, which the profile lets age to key 1: each miss runs a
    turn one key up until key 1, then the floor holds the next one off."""
    name = placement_name()
    script = Script(deadline="1s,aging", fulfilled=False)
    SCRIPTS[name] = script
    own = TurnPriority(priority_key=3, own_priority_key=3, aging_limit=1)
    handle = await temporal_client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(placement=name, turn_execution="queue"),
        id=names.workflow_id(name),
        task_queue=task_queue,
        start_signal=names.SIGNAL_PLACEMENT_CHANGED,
        start_signal_args=[HubEvent(reason="created", priority=own)],
    )
    await until_async(
        lambda: any(p.priority_key == 1 for p in script.priorities), what="a turn at key 1"
    )
    await status_when(handle, idle)
    await delete_and_complete(handle, script)

    [history] = await replay_runs(temporal_client, handle.id, "placement-deadline-aging")
    keys = [p.priority_key or 0 for p in script.priorities]
    assert keys[0] == 3 and 1 in keys and keys == sorted(keys, reverse=True), keys
    assert turn_patches(history) == [PRIORITY_PATCH]  # the deadline's: at start


@pytest.mark.parametrize(
    ("record_as", "script"),
    [
        ("placement-local-deadline", lambda: Script(deadline="30s", advice=[True] * 3)),
        ("placement-local-clusters-version", lambda: Script(clusters_version=7, advice=[True] * 3)),
    ],
)
async def test_fresh_histories_of_a_local_first_turn_replay(
    temporal_client: Client,
    task_queue: str,
    caching_worker: PlacementWorkers,
    record_as: str,
    script: Any,
) -> None:
    """Local turns whose results the run reads with a patch (the deadline's, clusters-version):
    answered at the run's start (AT_START_PATCH), so no patch marker follows a local one. Before
    that, such a marker could land in the workflow task the SDK starts, with no event of its
    own, right after the local activity's (a race), and that history never replayed."""
    name = placement_name()
    scripted: Script = script()
    handle = await start_placement(temporal_client, task_queue, name, scripted)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await handle.signal(PlacementWorkflow.cluster_changed, HubEvent(reason="labels"))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    await delete_and_complete(handle, scripted)

    [history] = await replay_runs(temporal_client, handle.id, record_as)
    # Two turns, the deletion's turn and the cleanup: all local.
    assert await turn_places(handle) == ["local"] * 4
    assert AT_START_PATCH in patch_ids(history) and not AT_START & set(patch_ids(history))


async def test_fresh_busy_miss_history_replays(
    temporal_client: Client, task_queue: str, worker: PlacementWorkers
) -> None:
    """A `1s` deadline that passes while the workflow waits on a 2 s requeue-after timer: the
    miss is counted before the requeue's turn, which reports it; then the floor holds."""
    name = placement_name()
    script = Script(deadline="1s", fulfilled=False, requeue_after=2)
    handle = await start(temporal_client, task_queue, name, script)
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    await delete_and_complete(handle, script)

    [history] = await replay_runs(temporal_client, handle.id, "placement-deadline-busy")
    assert len(script.misses) == 3 and script.misses[1] >= 1, script.misses
    assert turn_patches(history) == []  # the deadline's: answered at start (AT_START_PATCH)


async def test_fresh_auto_local_fallback_history_replays(
    temporal_client: Client, task_queue: str, caching_worker: PlacementWorkers
) -> None:
    """No word on where turns run (auto): the first turn runs local, fails LOCAL_ATTEMPTS times
    and runs again on the activity queue; the next turn stays on the queue although the advice
    says local, and so does the cleanup."""
    name = placement_name()
    script = Script(
        failures=[transient("hub down")] * LOCAL_ATTEMPTS, advice=[True] * (LOCAL_ATTEMPTS + 3)
    )
    SCRIPTS[name] = script
    handle = await temporal_client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(placement=name),
        id=names.workflow_id(name),
        task_queue=task_queue,
    )
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await handle.signal(PlacementWorkflow.requeue, RequeueRequest(reason="turn 2"))
    await status_when(handle, lambda s: s.cycles == 2 and idle(s))
    await delete_and_complete(handle, script)

    [history] = await replay_runs(temporal_client, handle.id, "placement-auto-local-fallback")
    # The first turn's local attempts, then it, the second and the deletion's turn on the queue.
    assert script.ran_local == [True] * LOCAL_ATTEMPTS + [False] * 3
    # The local attempts' one marker, the three turns and the cleanup.
    assert await turn_places(handle) == ["local"] + ["queue"] * 4
    assert turn_patches(history) == [AUTO_LOCAL_PATCH]


async def test_fresh_shed_turn_histories_replay(
    temporal_client: Client, task_queue: str, caching_worker: PlacementWorkers
) -> None:
    """The first turn runs local and is shed by the worker's local slots (no slot free): it
    runs on the activity queue alone, its patch marker in the history, and the next turn runs
    local again, as advised."""
    name = placement_name()
    script = Script(failures=[shed()], advice=[True] * 3)
    handle = await start_placement(temporal_client, task_queue, name, script)
    await status_when(handle, lambda s: s.cycles == 1 and idle(s))
    await requeued_turns(handle, (2,))
    [history] = await replay_runs(temporal_client, handle.id, "placement-local-shed")
    assert await turn_places(handle) == ["local", "queue", "local"]
    assert turn_patches(history) == [AUTO_LOCAL_PATCH, SHED_TURN_PATCH]


async def test_fresh_renewal_histories_replay(temporal_client: Client, task_queue: str) -> None:
    """A run begun by a worker from before patch generations (one that declines
    GENERATION_PATCH), asked to renew by today's worker: it continues as new, and its next run
    records its generation."""
    name = placement_name()
    script = Script()
    for old in (True, False):
        async with serving(temporal_client, task_queue, old=old):
            if old:
                handle = await start(temporal_client, task_queue, name, script)
                await status_when(handle, lambda s: s.cycles == 1 and idle(s))
                continue
            await handle.signal(names.SIGNAL_RENEW_RUN, RenewRequest(reason="recorded"))
            latest = temporal_client.get_workflow_handle(handle.id)
            await status_when(latest, lambda s: s.cycles_this_run == 0 and s.turns_this_run == 0)
            await latest.signal(PlacementWorkflow.requeue, RequeueRequest(reason="turn 2"))
            await status_when(latest, lambda s: s.cycles == 2 and idle(s))
            await delete_and_complete(latest, script)

    histories = await replay_runs(temporal_client, handle.id, "placement-renewal")
    # The old run has the signal and no generation; the next run its generation.
    signalled = [names.SIGNAL_RENEW_RUN in h.to_json() for h in histories]
    generations = [GENERATION_PATCH in patch_ids(h) for h in histories]
    assert sorted(zip(signalled, generations, strict=True)) == [
        (False, True),
        (True, False),
    ]


def recorded(name: str) -> WorkflowHistory:
    return WorkflowHistory.from_json(name, (HISTORIES / name).read_text())


class NoDeadlineCommands(PlacementDeadline):
    """The deadline less its commands: no turn starts its clock (no timer, no miss)."""

    def after_turn(self, *args: Any) -> None:
        return None


class NoBusyMisses(PlacementDeadline):
    """A miss counted only when idle (before DEADLINE_BUSY_PATCH)."""

    def wait(self, busy: bool, *args: Any) -> DeadlineWait:
        return DeadlineWait() if busy else super().wait(busy, *args)


class NoReportFloor(PlacementDeadline):
    """A turn for every miss (before DEADLINE_FLOOR_PATCH)."""

    def _wake(self, due: datetime, *args: Any) -> datetime:
        return due


class NoReportAlone(PlacementDeadline):
    """A turn for an idle miss (before DEADLINE_ALONE_PATCH)."""

    def alone(self, *args: Any) -> None:
        return None


class AgingWithinItsBand(PlacementDeadline):
    """Aging that ignores the profile's limit: key 3 ages no further, so the floor holds the
    second miss's turn off."""

    def wait(self, busy: bool, now: datetime, priority: TurnPriority | None, *args: Any) -> Any:
        return super().wait(busy, now, _no_limit(priority), *args)

    def aged(self, priority_key: int | None, priority: TurnPriority | None) -> int | None:
        return super().aged(priority_key, _no_limit(priority))


def _no_limit(priority: TurnPriority | None) -> TurnPriority | None:
    return priority.model_copy(update={"aging_limit": None}) if priority else None


@workflow.defn(name=names.PLACEMENT_WORKFLOW, sandboxed=False)
class WithBrokenDeadline(PlacementWorkflow):
    """Today's workflow with a broken deadline: `broken`, which the test that replays it sets."""

    broken: ClassVar[type[PlacementDeadline]] = PlacementDeadline

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        self._deadline = self.broken.of(self._state)
        return await super().run(input)


@workflow.defn(name=names.PLACEMENT_WORKFLOW, sandboxed=False)
class ForgetsFallbacks(PlacementWorkflow):
    """Today's workflow forgetting that a local turn fell back: the next turn runs local."""

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        return await super().run(input)

    async def _execute(self, *args: Any) -> Any:
        result = await super()._execute(*args)
        self._execution.fell_back = False
        return result


@workflow.defn(name=names.PLACEMENT_WORKFLOW, sandboxed=False)
class DeafToRenewal(PlacementWorkflow):
    """Today's workflow ignoring `renew_run`."""

    @workflow.run
    async def run(self, input: PlacementInput) -> PlacementStatus:
        return await super().run(input)

    @workflow.signal(name=names.SIGNAL_RENEW_RUN)
    def renew_run(self, request: RenewRequest | None = None) -> None:
        return None


@pytest.mark.parametrize(
    ("history", "broken"),
    [
        ("placement-deadline-timer-0.json", NoDeadlineCommands),
        ("placement-deadline-aging-0.json", NoDeadlineCommands),
        ("placement-deadline-aging-0.json", AgingWithinItsBand),
        ("placement-deadline-busy-0.json", NoDeadlineCommands),
        ("placement-deadline-busy-0.json", NoBusyMisses),
        ("placement-deadline-timer-0.json", NoReportFloor),
        ("placement-deadline-alone-0.json", NoReportAlone),
        ("placement-auto-local-fallback-0.json", ForgetsFallbacks),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
async def test_a_workflow_without_a_patched_command_fails_to_replay_its_history(
    history: str, broken: type[PlacementWorkflow] | type[PlacementDeadline]
) -> None:
    if issubclass(broken, PlacementDeadline):
        WithBrokenDeadline.broken = broken
        broken = WithBrokenDeadline
    replayer = Replayer(workflows=[broken], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(recorded(history), raise_on_replay_failure=False)
    assert result.replay_failure is not None
    assert "nondetermin" in str(result.replay_failure).lower()


async def test_a_workflow_deaf_to_renewal_fails_to_replay_a_renewed_run() -> None:
    renewals = sorted(HISTORIES.glob("placement-renewal-*.json"))
    signalled = [p for p in renewals if f'"{names.SIGNAL_RENEW_RUN}"' in p.read_text()]
    assert len(signalled) == 1, renewals
    history = WorkflowHistory.from_json("recorded", signalled[0].read_text())
    replayer = Replayer(workflows=[DeafToRenewal], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is not None
    assert "nondetermin" in str(result.replay_failure).lower()
