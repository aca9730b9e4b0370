"""A worker SIGKILLed in the middle of a cycle is replaced by another that finishes it.

Everything is a real process (devhub, Temporal, `fleet-scheduler run` workers and watcher).
The cycle is made slow deterministically: devhub holds every second binding create (a seeded
`hang` fault), so the first worker's `schedule_once` has written some bindings and is stuck on the
rest when it is killed. A second worker starts, the fault is cleared, and once `schedule_once`'s
heartbeat timeout (30 s, workflows.execution.CYCLE_HEARTBEAT) declares the first attempt dead,
the second worker runs it again from fresh reads: the placement ends fully scheduled, with one
binding per cluster and no duplicate, and the history shows who finished it and why."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.history.v1 import ActivityTaskStartedEventAttributes
from temporalio.client import Client

from hub import names
from hub.types import ClusterResourceBinding
from tests.reliability.fleet import Fleet, PlacementModel
from tests.reliability.invariants import converge
from tests.reliability.system import SchedulerProcess, System
from tests.support.waits import until_async
from workflows.execution import CYCLE_HEARTBEAT
from workflows.names import workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

CLUSTERS = 12
# Half the binding creates hang (seeded): with 4 writes in flight, some land before all four
# slots hold a hanging create.
HANG_SHARE = 0.5
RUN_CYCLE = "schedule_once"
# Heartbeat timeout, then a cold workflow task on the new worker, then the rest of the writes.
CONVERGE_AFTER_KILL_S = CYCLE_HEARTBEAT.total_seconds() + 25.0


async def test_a_worker_killed_mid_cycle_is_replaced_by_another_that_finishes(
    system_factory: Callable[..., System],
) -> None:
    # Turns on the activity queue, whose heartbeat timeout this test is about (a workflow worker
    # killed in a local turn is a workflow task timing out instead).
    system = system_factory(workers=1, watchers=1, watcher_args=["--local-cycles-up-to", "0"])
    await system.start()
    hub = system.hub_client
    fleet = Fleet(hub, seed=1)
    fleet.add_clusters(CLUSTERS)

    hang = system.hub.inject(
        verb="create", resource="clusterresourcebindings", hang=True, share=HANG_SHARE
    )
    name = fleet.add_placement(PlacementModel("everywhere", names.PICK_ALL))

    # Four creates held at once: the cycle's apply can go no further.
    await until_async(
        lambda: system.hub.hits()[hang] >= 4, what="four hanging binding creates", blocking=True
    )
    landed = len(hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: name}))
    assert landed < CLUSTERS, "the cycle finished before the kill; nothing was in flight"

    first = system.workers[0]
    killed_identities = first.identities()
    first.kill()
    killed_at = time.monotonic()

    second = SchedulerProcess(
        system.procs, "worker", 1, system.hub, system.temporal, system.task_queue
    )
    system.workers.append(second)
    await second.start()
    system.hub.clear_faults()

    client = await system.client()
    result = await converge(
        hub, client, fleet.expectations(), fleet.deleted, timeout_s=CONVERGE_AFTER_KILL_S
    )
    after_kill = time.monotonic() - killed_at
    print(
        f"\nworker killed with {landed}/{CLUSTERS} bindings written; converged "
        f"{after_kill:.1f}s after the kill ({result.polls} polls)"
    )

    creates = system.hub.count("create", "clusterresourcebindings")
    bindings = hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: name}).items
    assert sorted(b.spec.target_cluster for b in bindings) == sorted(fleet.clusters)
    assert creates >= CLUSTERS  # the hung ones were sent and refused, then sent again

    # The history says who finished the cycle, on which attempt, after which failure.
    finished = await _finished_cycle(client, name)
    assert finished.identity in second.identities(), (finished.identity, killed_identities)
    assert finished.attempt >= 2
    assert finished.last_failure.timeout_failure_info.timeout_type == (
        TimeoutType.TIMEOUT_TYPE_HEARTBEAT
    )
    assert not system.dead(), system.dead()


async def _finished_cycle(client: Client, placement: str) -> ActivityTaskStartedEventAttributes:
    """The ActivityTaskStarted event of the first cycle activity that completed."""
    scheduled: dict[int, str] = {}
    started: dict[int, ActivityTaskStartedEventAttributes] = {}
    async for event in client.get_workflow_handle(workflow_id(placement)).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started[event.event_id] = event.activity_task_started_event_attributes
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            if scheduled.get(completed.scheduled_event_id) == RUN_CYCLE:
                return started[completed.started_event_id]
    raise AssertionError(f"no completed {RUN_CYCLE} in the history of {placement}")
