"""The reconcile safety net with a real worker, watcher, devhub and Temporal: a watcher restart
with nothing changed runs no cycle, and what changed while no watcher ran is acted on by the
one reconcile the restart triggers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest
from temporalio.client import Client

from activities.plumbing import ActivitySettings
from control.config import RunConfig
from control.schedules import ensure_reconcile_schedule
from control.watcher import Watcher
from devhub import DevHub
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster
from tests.support import policies
from tests.support.fleet import (
    add_cluster,
    add_placement,
    live_targets,
    settled,
    status,
    unique,
)
from tests.support.history import signal_names
from tests.support.waits import consistently_async, until_async, within
from workers.worker import build_worker
from workflows import names

pytestmark = pytest.mark.asyncio(loop_scope="session")

PLACEMENTS = 8
# The Schedule the tests make; the watcher is told of it, so its start triggers a reconcile run.
RECONCILE_EVERY = timedelta(hours=1)
PROD_ONLY = policies.prod_only(placementType="PickAll")


@asynccontextmanager
async def watching(client: Client, hub: HubClient, task_queue: str) -> AsyncIterator[Watcher]:
    watcher = Watcher(
        hub,
        client,
        # Turns on the activity queue: the worker caches no workflow, and a local turn of an
        # evicted workflow is cancelled and run again on replay (docs/operations.md, "Where
        # turns run"); this test is about the watcher and the reconcile, not where turns run.
        RunConfig(
            task_queue=task_queue,
            reconcile_every_s=RECONCILE_EVERY.total_seconds(),
            local_cycles_up_to=0,
        ),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    try:
        await watcher.wait_ready(timeout=30)
        yield watcher
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def reconciles(client: Client, task_queue: str) -> int:
    query = (
        f"WorkflowType = '{names.RECONCILE_WORKFLOW}' AND TaskQueue = '{task_queue}' "
        "AND ExecutionStatus = 'Completed'"
    )
    return len([e async for e in client.list_workflows(query)])


async def cycles(client: Client, placements: list[str]) -> dict[str, int]:
    found = {}
    for name in placements:
        current = await status(client, name)
        found[name] = current.cycles if current is not None else 0
    return found


async def test_a_watcher_restart_is_quiet_and_changes_made_meanwhile_are_reconciled(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    client = temporal_client
    # An hour apart: the runs here are the ones watcher starts trigger.
    await ensure_reconcile_schedule(client, task_queue, RECONCILE_EVERY, standalone=True)
    for name in ("member-a", "member-b"):
        add_cluster(hub, name, labels={"env": "prod"})
    add_cluster(hub, "member-c", labels={"env": "staging"})
    add_cluster(hub, "member-d", labels={"env": "dev"})
    placements = [unique("quiet") for _ in range(PLACEMENTS)]
    prod_only = unique("prod")
    worker = build_worker(
        client, hub, task_queue=task_queue, settings=ActivitySettings(), max_cached_workflows=0
    )
    async with worker:
        async with watching(client, hub, task_queue):
            for name in placements:
                add_placement(hub, name, {"placementType": "PickAll"})
            add_placement(hub, prod_only, PROD_ONLY)
            for name in placements:
                await until_async(
                    lambda name=name: len(live_targets(hub, name)) == 4, blocking=True
                )
                await settled(client, name)
            await until_async(lambda: len(live_targets(hub, prod_only)) == 2, blocking=True)
            await settled(client, prod_only)
        before = await cycles(client, [*placements, prod_only])
        runs = await reconciles(client, task_queue)

        # Restart with nothing changed: one reconcile, no cycle.
        async with watching(client, hub, task_queue) as watcher:
            await eventually_async(lambda: reconciles(client, task_queue), runs + 1)

            async def no_cycle() -> None:
                assert await cycles(client, [*placements, prod_only]) == before

            await consistently_async(no_cycle, duration=1.0)
            assert watcher.stats.sent == 0

        # Changes while no watcher runs: a policy edit, a cluster relabelled, a cluster gone, a
        # new placement.
        edited, created = placements[0], unique("created")
        current = hub.get(ClusterResourcePlacement, edited)
        policy = {
            "placementType": "PickAll",
            "affinity": {"clusterAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"team": "x"}}}]
            }}},
        }  # fmt: skip
        hub.update(
            ClusterResourcePlacement.from_wire(
                {**current.to_wire(), "spec": {**current.to_wire()["spec"], "policy": policy}}
            )
        )
        hub.patch(MemberCluster, "member-d", {"metadata": {"labels": {"env": "prod"}}})
        hub.delete(MemberCluster, "member-c")
        add_placement(hub, created, {"placementType": "PickAll"})
        runs = await reconciles(client, task_queue)
        async with watching(client, hub, task_queue):
            await eventually_async(lambda: reconciles(client, task_queue), runs + 1)
            await until_async(
                lambda: live_targets(hub, edited) == {}, blocking=True
            )  # no cluster has team=x
            remaining = {"member-a", "member-b", "member-d"}
            await until_async(lambda: set(live_targets(hub, created)) == remaining, blocking=True)
            # member-d now matches, and prod_only had no binding on the deleted member-c: only
            # the relabelling, seen by the reconcile, brings it a cycle.
            await until_async(lambda: set(live_targets(hub, prod_only)) == remaining, blocking=True)
            for name in placements[1:]:
                await until_async(
                    lambda name=name: set(live_targets(hub, name)) == remaining, blocking=True
                )


async def eventually_async(
    count: Callable[[], Awaitable[int]], at_least: int, timeout: float = 45.0
) -> int:
    async def reached() -> int | None:
        value = await count()
        return value if value >= at_least else None

    return await until_async(reached, what=f"at least {at_least}", timeout=timeout)


async def test_the_reconcile_checks_the_invariants_exports_them_and_sweeps(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    """One reconcile run finds what `check` finds: here a reservation that outlived its
    placement, and a placement without its workflow past the grace (the run's clock is set
    that far ahead). Its report counts them; it starts the workflow and sweeps, and
    fleet_scheduler_invariant_violations counts what is left."""
    from datetime import UTC, datetime

    from temporalio.testing import ActivityEnvironment

    from activities.reconcile import ReconcileFleet
    from hub.types import CapacityLedger
    from scheduler.invariants import WORKFLOW_GRACE
    from workers.metrics import SchedulerMetrics
    from workflows.models import ReconcileInput

    add_cluster(hub, "member-a")
    lonely = unique("lonely")
    add_placement(hub, lonely, {"placementType": "PickAll"})
    old = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    hub.create(
        CapacityLedger.from_wire(
            {
                "metadata": {"name": "member-a"},
                "spec": {"reservations": {"gone-member-a-1": {
                    "placement": "gone", "requests": {"cpu": "1"}, "reservedAt": old}}},
            }
        )
    )  # fmt: skip
    metrics = SchedulerMetrics(process_metrics=False)
    late = ActivitySettings(
        metrics=metrics, clock=lambda: datetime.now(UTC) + WORKFLOW_GRACE + timedelta(seconds=5)
    )
    activity = ReconcileFleet(hub, temporal_client, late)
    report = await ActivityEnvironment().run(
        activity.reconcile_fleet, ReconcileInput(task_queue=task_queue)
    )
    assert report.violations == {"stale_reservation": 1, "workflow": 1}
    assert any("has no running workflow" in m for m in report.violation_messages)
    assert report.started == [lonely] and report.reservations_released == 1
    # Both repaired on the spot (the workflow started, the reservation released): the metric,
    # what is left for someone to look at, says 0.
    exported = metrics.render().decode()
    assert 'fleet_scheduler_invariant_violations{invariant="stale_reservation"} 0.0' in exported
    assert 'fleet_scheduler_invariant_violations{invariant="workflow"} 0.0' in exported
    await temporal_client.get_workflow_handle(names.workflow_id(lonely)).terminate("test over")


async def test_the_first_reconcile_of_a_new_fleet_says_what_it_started_and_nothing_broken(
    hub: HubClient, temporal_client: Client, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`make run`'s first start: placements created a second ago, no workflow yet, and the
    reconcile the watcher's start triggers starts them. That is its job, not a broken invariant:
    one INFO line names what it started, and no WARNING (before: `invariants broken: workflow
    N` and a WARNING per placement, while `check`, seconds later, found nothing)."""
    import logging

    from temporalio.testing import ActivityEnvironment

    from activities.reconcile import ReconcileFleet
    from workflows.models import ReconcileInput

    add_cluster(hub, "member-a")
    new = sorted(unique(f"new-{i}") for i in range(5))
    for name in new:
        add_placement(hub, name, {"placementType": "PickAll"})
    activity = ReconcileFleet(hub, temporal_client, ActivitySettings())
    with caplog.at_level(logging.INFO, logger="fleet_scheduler.reconcile"):
        report = await ActivityEnvironment().run(
            activity.reconcile_fleet, ReconcileInput(task_queue=task_queue)
        )
    try:
        assert set(new) <= set(report.started)
        assert report.violations == {} and report.violation_messages == []
        records = [r for r in caplog.records if r.name == "fleet_scheduler.reconcile"]
        assert [r for r in records if r.levelno >= logging.WARNING] == []
        [line] = [r.getMessage() for r in records]
        assert "invariants broken" not in line
        assert f"started {len(report.started)} ({', '.join(report.started[:3])} +" in line
    finally:
        for name in report.started:
            handle = temporal_client.get_workflow_handle(names.workflow_id(name))
            await handle.terminate("test over")


async def test_the_reconcile_tells_a_workflow_its_new_priority_without_a_turn(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    """A priority-class annotation changed while no watcher ran: the next reconcile sends
    priority_changed with the new priority (the watcher's signal, no turn)."""
    from temporalio.testing import ActivityEnvironment

    from activities.reconcile import ReconcileFleet
    from hub.names import PRIORITY_CLASS_ANNOTATION
    from hub.types import PriorityClass
    from workflows.models import ReconcileInput

    urgent = unique("urgent")
    hub.create(PriorityClass.from_wire({"metadata": {"name": urgent}, "value": 5000}))
    add_cluster(hub, "member-a")
    name = unique("prio")
    add_placement(hub, name, {"placementType": "PickAll"})
    activity = ReconcileFleet(hub, temporal_client, ActivitySettings())
    env = ActivityEnvironment()
    first = await env.run(activity.reconcile_fleet, ReconcileInput(task_queue=task_queue))
    assert first.started == [name] and list(first.priorities) == [""]  # only the default's
    hub.patch(
        ClusterResourcePlacement,
        name,
        {"metadata": {"annotations": {PRIORITY_CLASS_ANNOTATION: urgent}}},
    )
    second = await env.run(
        activity.reconcile_fleet,
        ReconcileInput(task_queue=task_queue, previous_priorities=first.priorities,
                       previous_annotations=first.annotations),
    )  # fmt: skip
    assert second.reprioritised == [name] and set(second.priorities) == {"", name}
    # Priority alone runs no turn (it is requeued only because, with no worker here, it has no
    # policy snapshot yet).
    assert second.reasons.get(name) == "reconcile: the placement has no latest policy snapshot"
    handle = temporal_client.get_workflow_handle(names.workflow_id(name))
    # No worker runs here: the signal waits in the workflow's history.
    assert names.SIGNAL_PRIORITY_CHANGED in await signal_names(handle)
    await handle.terminate("test over")


async def test_a_reconcile_whose_temporal_went_away_fails_benign_and_retryable(
    hub: HubClient,
) -> None:
    """Temporal answering UNAVAILABLE (a dev server that exited under `dev`, a restart) fails
    the run with one benign, retryable line: the SDK logs a failed activity's traceback at
    WARNING otherwise, which `dev` printed right after saying why its server was gone (seen
    once under load in the dev-server-exit test)."""
    from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
    from temporalio.testing import ActivityEnvironment

    from activities.plumbing import ActivitySettings
    from activities.reconcile import ReconcileFleet
    from tests.support.temporal import start_temporal
    from workflows import failures
    from workflows.models import ReconcileInput

    env = await start_temporal()
    client = env.client
    await env.shutdown()
    activity = ReconcileFleet(hub, client, ActivitySettings())
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(
            activity.reconcile_fleet, ReconcileInput(task_queue="gone")
        )
    assert raised.value.type == failures.TEMPORAL_UNAVAILABLE
    assert raised.value.type in failures.RETRYABLE and not raised.value.non_retryable
    assert raised.value.category == ApplicationErrorCategory.BENIGN
    assert "Temporal is unavailable" in str(raised.value)


async def test_a_reconcile_run_outlasts_a_hub_outage_longer_than_its_first_attempts(
    hub: HubClient, devhub: DevHub, temporal_client: Client, task_queue: str
) -> None:
    """The run a watcher start triggers stands in for signalling every placement, so a hub
    outage must not use it up: it keeps retrying and starts the workflow a placement lacks
    once the hub answers again. Before, it gave up after three attempts (about 6 s), and what
    the restarted watcher had missed waited for the next scheduled run, up to 5 minutes later
    (the chaos test under load: the run met the injected faults and devhub's restart, and the
    fleet had not converged 150 s later)."""
    from temporalio.client import WorkflowExecutionStatus

    from workflows.models import ReconcileInput, ReconcileReport

    add_cluster(hub, "member-a")
    missed = unique("missed")
    add_placement(hub, missed, {"placementType": "PickAll"})
    outage = devhub.faults.inject(verb="list", status=500)
    worker = build_worker(
        temporal_client, hub, task_queue=task_queue, settings=ActivitySettings(),
        max_cached_workflows=0,
    )  # fmt: skip
    async with worker:
        handle = await temporal_client.start_workflow(
            names.RECONCILE_WORKFLOW,
            ReconcileInput(task_queue=task_queue),
            id=unique("reconcile"),
            task_queue=task_queue,
            result_type=ReconcileReport,
        )

        async def past_three_attempts() -> str | None:
            described = await handle.describe()
            if described.status != WorkflowExecutionStatus.RUNNING:
                return f"gave up: {described.status.name}"
            pending = described.raw_description.pending_activities
            return "still trying" if any(p.attempt > 3 for p in pending) else None

        outcome = await until_async(past_three_attempts, what="a fourth attempt, or the end")
        assert outage.hits >= 3
        devhub.faults.clear()
        assert outcome == "still trying", f"the reconcile run {outcome} during the outage"
        report = await within(handle.result(), what="the reconcile run to finish", timeout=120)
    assert missed in report.started
    await temporal_client.get_workflow_handle(names.workflow_id(missed)).terminate("test over")


async def test_the_reconcile_asks_a_run_of_an_older_patch_generation_to_renew_once(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    """Retiring patches (docs/operations.md): a placement workflow begun by an older generation
    (FleetPatchGeneration 0 here; no worker runs, so nothing sets it anew) is asked by the
    reconcile pass to continue as new (`renew_run` in its history, `renewed` in the report and
    its summary), and not again by the pass right after."""
    from temporalio.common import SearchAttributePair, TypedSearchAttributes
    from temporalio.testing import ActivityEnvironment

    from activities.reconcile import ReconcileFleet
    from workflows.models import PlacementInput, ReconcileInput
    from workflows.placement import PlacementWorkflow

    add_cluster(hub, "member-a")
    old = names.SA_PATCH_GENERATION
    name = unique("old-run")
    add_placement(hub, name, {"placementType": "PickAll"})
    handle = await temporal_client.start_workflow(
        PlacementWorkflow.run,
        PlacementInput(placement=name),
        id=names.workflow_id(name),
        task_queue=task_queue,
        search_attributes=TypedSearchAttributes([SearchAttributePair(old, 0)]),
    )
    query = f"WorkflowId = '{handle.id}' AND {old.name} = 0"

    async def listed() -> bool:
        return [e.id async for e in temporal_client.list_workflows(query)] == [handle.id]

    await until_async(listed, what=f"{name}'s run in visibility at generation 0")
    activity = ReconcileFleet(hub, temporal_client, ActivitySettings())
    env = ActivityEnvironment()
    try:
        first = await env.run(activity.reconcile_fleet, ReconcileInput(task_queue=task_queue))
        assert first.renewed == [name], first.summary
        assert f"renewed 1 ({name})" in first.summary
        assert names.SIGNAL_RENEW_RUN in await signal_names(handle)
        second = await env.run(
            activity.reconcile_fleet,
            ReconcileInput(task_queue=task_queue, previous_renewed=first.renewed),
        )
        assert second.renewed == [], second.summary
    finally:
        await handle.terminate("test over")
