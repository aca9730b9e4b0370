"""The reconcile safety net with a real worker, watcher, devhub and Temporal: a watcher restart
with nothing changed runs no cycle, and what changed while no watcher ran is acted on by the
one reconcile the restart triggers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.clusters import ClusterCache
from activities.plumbing import ActivitySettings
from activities.reconcile import decided_versions
from control.config import RunConfig
from control.schedules import ensure_reconcile_schedule
from control.watcher import Watcher
from devhub import DevHub, sample
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster
from scheduler.testing import member_cluster
from tests.support import policies
from tests.support.fleet import (
    add_cluster,
    add_placement,
    live_targets,
    settled,
    status,
    unique,
)
from tests.support.history import event_types, signal_names
from tests.support.hub import TEST_TIMEOUT
from tests.support.waits import consistently_async, until_async, within
from workers.worker import build_worker
from workflows import names
from workflows.models import RequeueRequest

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


async def a_watcher_start_cycles_none(
    client: Client, hub: HubClient, task_queue: str, placements: list[str]
) -> dict[str, int]:
    """A watcher started now: its start-up reconcile runs, and none of `placements` cycles;
    their cycles, as they stayed."""
    before = await cycles(client, placements)
    runs = await reconciles(client, task_queue)
    async with watching(client, hub, task_queue):
        await eventually_async(lambda: reconciles(client, task_queue), runs + 1)

        async def no_cycle() -> None:
            assert await cycles(client, placements) == before

        await consistently_async(no_cycle, duration=1.0)
    return before


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
        await ActivityEnvironment().run(activity.reconcile_fleet, ReconcileInput(task_queue="gone"))
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


async def test_a_restart_reruns_no_placement_the_watcher_ran_and_every_one_it_did_not(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    """A cluster change the watcher delivered (its placements ran a turn on it) brings no
    second cycle from the reconcile a watcher restart triggers, though that reconcile sees the
    change since its previous run; a change made while no watcher ran still requeues everyone
    it reaches."""
    client = temporal_client
    await ensure_reconcile_schedule(client, task_queue, RECONCILE_EVERY, standalone=True)
    add_cluster(hub, "member-a", labels={"env": "prod"})
    add_cluster(hub, "member-b", labels={"env": "dev"})
    add_cluster(hub, "member-d", labels={"env": "dev"})
    everywhere = [unique("all") for _ in range(3)]
    prod_only = unique("prod")
    placements = [*everywhere, prod_only]
    worker = build_worker(
        client, hub, task_queue=task_queue, settings=ActivitySettings(), max_cached_workflows=0
    )
    async with worker:
        runs = await reconciles(client, task_queue)
        async with watching(client, hub, task_queue):
            # The reconcile this start triggers records the fleet before the change below.
            await eventually_async(lambda: reconciles(client, task_queue), runs + 1)
            for name in everywhere:
                add_placement(hub, name, {"placementType": "PickAll"})
            add_placement(hub, prod_only, PROD_ONLY)
            await until_async(lambda: len(live_targets(hub, prod_only)) == 1, blocking=True)
            for name in placements:
                await settled(client, name)
            # Delivered: the watcher sends it, and prod_only gains member-b.
            hub.patch(MemberCluster, "member-b", {"metadata": {"labels": {"env": "prod"}}})
            await until_async(
                lambda: set(live_targets(hub, prod_only)) == {"member-a", "member-b"},
                blocking=True,
            )
            for name in placements:
                await settled(client, name)
            changed = int(hub.get(MemberCluster, "member-b").metadata.resource_version or 0)

            async def recorded() -> bool:
                versions = await decided_versions(client, task_queue)
                return (versions.get(prod_only) or 0) >= changed

            await until_async(recorded, what="prod_only's version after the change")
        before = await a_watcher_start_cycles_none(client, hub, task_queue, placements)

        # Not delivered: member-d joins prod while no watcher runs.
        hub.patch(MemberCluster, "member-d", {"metadata": {"labels": {"env": "prod"}}})
        runs = await reconciles(client, task_queue)
        async with watching(client, hub, task_queue):
            await eventually_async(lambda: reconciles(client, task_queue), runs + 1)
            await until_async(
                lambda: set(live_targets(hub, prod_only)) == {"member-a", "member-b", "member-d"},
                blocking=True,
            )
        after = await cycles(client, placements)
        # Only prod_only reads `env`: the requeue hints leave the others alone, as the watcher.
        assert after == {**before, prod_only: after[prod_only]}
        assert after[prod_only] > before[prod_only]


async def test_a_cycle_whose_read_has_no_version_leaves_no_older_version_standing(
    hub: HubClient, temporal_client: Client, task_queue: str
) -> None:
    """A cycle that read the clusters at no known version (here another process's cache that
    lagged behind a cluster's join: an empty view) decides, and its decision stands: the
    version an earlier cycle recorded must not stay behind it, or the reconcile takes the
    joined cluster as read and leaves the placement without it."""
    client = temporal_client
    await ensure_reconcile_schedule(client, task_queue, RECONCILE_EVERY, standalone=True)
    cache = ClusterCache(hub, watch_seconds=5).start()
    lagging = False

    def clusters() -> list[MemberCluster] | None:
        return [] if lagging else cache.clusters()

    try:
        assert cache.wait_synced(30)
        settings = ActivitySettings(clusters=clusters, fleet_size=cache.size)
        worker = build_worker(
            client, hub, task_queue=task_queue, settings=settings, max_cached_workflows=0
        )
        member, name = unique("joins"), unique("prod")
        async with worker:
            runs = await reconciles(client, task_queue)
            async with watching(client, hub, task_queue):
                # The reconcile this start triggers records the fleet before `member` joins.
                await eventually_async(lambda: reconciles(client, task_queue), runs + 1)
                add_placement(hub, name, PROD_ONLY)
                await settled(client, name)
                add_cluster(hub, member, labels={"env": "prod"})
                await until_async(lambda: set(live_targets(hub, name)) == {member}, blocking=True)
                joined = int(hub.get(MemberCluster, member).metadata.resource_version or 0)

                async def recorded() -> bool:
                    return ((await decided_versions(client, task_queue)).get(name) or 0) >= joined

                await until_async(recorded, what="the version of the cycle that read the join")
                lagging = True
                handle = client.get_workflow_handle(names.workflow_id(name))
                await handle.signal(names.SIGNAL_REQUEUE, RequeueRequest(reason="test: lagging"))
                await until_async(lambda: not live_targets(hub, name), blocking=True)
                await settled(client, name)
                lagging = False
            runs = await reconciles(client, task_queue)
            async with watching(client, hub, task_queue):
                await eventually_async(lambda: reconciles(client, task_queue), runs + 1)
                await until_async(lambda: set(live_targets(hub, name)) == {member}, blocking=True)
    finally:
        cache.stop()


def beat_every_cluster(devhub: DevHub, names_: list[str]) -> None:
    """Each member agent's heartbeat: a status write that changes nothing scheduling reads."""
    devhub.call(lambda store: [sample.refresh_heartbeat(store, name) for name in names_])


def cache_holds(cache: ClusterCache, hub: HubClient) -> bool:
    """The cache has applied every MemberCluster write the hub has now."""
    view = cache.clusters()
    listed = hub.list(MemberCluster).items
    held = {c.metadata.name: c.metadata.resource_version for c in view or ()}
    return view is not None and all(
        held.get(c.metadata.name) == c.metadata.resource_version for c in listed
    )


async def test_heartbeats_after_a_delivered_change_requeue_none_of_the_placements_that_read_it(
    hub: HubClient, devhub: DevHub, temporal_client: Client, task_queue: str
) -> None:
    """Cycles read clusters from the worker's cache, which follows content versions: after the
    watcher delivered a relabel, every cluster's heartbeat moves its resourceVersion past what
    the placements recorded, and still the restart's reconcile runs no cycle; a relabel made
    while no watcher ran still requeues the placement it reaches."""
    client = temporal_client
    await ensure_reconcile_schedule(client, task_queue, RECONCILE_EVERY, standalone=True)
    fleet = [unique("hb-a"), unique("hb-b"), unique("hb-d")]
    add_cluster(hub, fleet[0], labels={"env": "prod"})
    add_cluster(hub, fleet[1], labels={"env": "dev"})
    add_cluster(hub, fleet[2], labels={"env": "dev"})
    everywhere = [unique("all") for _ in range(3)]
    prod_only = unique("prod")
    placements = [*everywhere, prod_only]
    cache = ClusterCache(hub, watch_seconds=5).start()
    try:
        assert cache.wait_synced(30)
        settings = ActivitySettings(clusters=cache.clusters, fleet_size=cache.size)
        worker = build_worker(
            client, hub, task_queue=task_queue, settings=settings, max_cached_workflows=0
        )
        async with worker:
            runs = await reconciles(client, task_queue)
            async with watching(client, hub, task_queue):
                await eventually_async(lambda: reconciles(client, task_queue), runs + 1)
                for name in everywhere:
                    add_placement(hub, name, {"placementType": "PickAll"})
                add_placement(hub, prod_only, PROD_ONLY)
                await until_async(lambda: set(live_targets(hub, prod_only)) >= {fleet[0]})
                for name in placements:
                    await settled(client, name)
                hub.patch(MemberCluster, fleet[1], {"metadata": {"labels": {"env": "prod"}}})
                await until_async(
                    lambda: set(live_targets(hub, prod_only)) >= {fleet[0], fleet[1]},
                    blocking=True,
                )
                for name in placements:
                    await settled(client, name)
                changed = int(hub.get(MemberCluster, fleet[1]).metadata.resource_version or 0)

                async def recorded() -> bool:
                    versions = await decided_versions(client, task_queue)
                    return (versions.get(prod_only) or 0) >= changed

                await until_async(recorded, what="prod_only's version after the change")
            # Every member agent beats: each cluster's resourceVersion moves past the record.
            beat_every_cluster(devhub, fleet)
            beaten = int(hub.get(MemberCluster, fleet[1]).metadata.resource_version or 0)
            assert ((await decided_versions(client, task_queue))[prod_only] or 0) < beaten
            await until_async(lambda: cache_holds(cache, hub), what="the cache's heartbeats")
            before = await a_watcher_start_cycles_none(client, hub, task_queue, placements)

            # Not delivered: the third cluster joins prod while no watcher runs.
            hub.patch(MemberCluster, fleet[2], {"metadata": {"labels": {"env": "prod"}}})
            beat_every_cluster(devhub, fleet)
            await until_async(lambda: cache_holds(cache, hub), what="the cache's change")
            runs = await reconciles(client, task_queue)
            async with watching(client, hub, task_queue):
                await eventually_async(lambda: reconciles(client, task_queue), runs + 1)
                await until_async(
                    lambda: set(live_targets(hub, prod_only)) >= set(fleet), blocking=True
                )
            after = await cycles(client, placements)
            assert after == {**before, prod_only: after[prod_only]}
            assert after[prod_only] > before[prod_only]
    finally:
        cache.stop()


async def test_a_turn_after_heartbeats_alone_at_1000_clusters_upserts_no_search_attribute(
    devhub_factory: Callable[..., DevHub], tmp_path: Path, temporal_client: Client, task_queue: str
) -> None:
    """FleetClustersVersion moves only when what scheduling reads of some cluster changed: a
    turn after every one of 1,000 member agents beat records what the turn before recorded,
    so its workflow task upserts nothing (each upsert is a command, an event and a visibility
    write)."""
    devhub = devhub_factory()
    now = datetime.now(UTC)
    fleet = [f"member-{i:04d}" for i in range(1000)]
    documents = [
        member_cluster(name, now, heartbeat_age=timedelta(0)).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        for name in fleet
    ]
    devhub.call(lambda store: sample.apply_fleet(store, documents), timeout=120)
    client = temporal_client
    with HubClient.from_kubeconfig(
        devhub.write_kubeconfig(tmp_path / "kubeconfig"), timeout=TEST_TIMEOUT
    ) as hub:
        cache = ClusterCache(hub, watch_seconds=5).start()
        try:
            assert cache.wait_synced(60)
            settings = ActivitySettings(clusters=cache.clusters, fleet_size=cache.size)
            worker = build_worker(client, hub, task_queue=task_queue, settings=settings)
            name = unique("one")
            async with worker, watching(client, hub, task_queue):
                add_placement(hub, name, {"placementType": "PickN", "numberOfClusters": 1})
                await until_async(lambda: len(live_targets(hub, name)) == 1, blocking=True)
                first = await settled(client, name)
                handle = client.get_workflow_handle(names.workflow_id(name))
                upserts = (await event_types(client, handle))[
                    "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES"
                ]
                beat_every_cluster(devhub, fleet)
                await until_async(lambda: cache_holds(cache, hub), what="the heartbeats")
                await handle.signal(names.SIGNAL_REQUEUE, RequeueRequest(reason="test: a turn"))

                async def turned() -> bool:
                    current = await status(client, name)
                    return current is not None and current.cycles > first.cycles

                await until_async(turned, what="the turn after the heartbeats")
                await settled(client, name)
                after = await event_types(client, handle)
            assert after["EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES"] == upserts
        finally:
            cache.stop()
