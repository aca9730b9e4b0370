"""Scheduling deadlines end to end (devhub, the dev server, the worker and the watcher, with
/metrics): a placement that cannot be fully scheduled within its deadline gets one Event, the
condition's reason (standalone), the gauge counts it, status and explain say it; a cluster
joining clears all of it; aging keeps its turns within its band; a bad value is a line, not a
crash; placements without the annotation record nothing new."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, Event
from scheduler.opt_in.deadline import DEADLINE_EXCEEDED_REASON
from tests.support.fleet import add_cluster, settled, status, unique
from tests.support.stacks import fleet_scheduler
from tests.support.waits import until_async
from workers.cli.render import deadline_text, render_explain
from workers.metrics import SchedulerMetrics
from workflows.deadline import DEADLINE_ALONE_PATCH, DEADLINE_PATCH
from workflows.models import PlacementStatus
from workflows.names import workflow_id
from workflows.patches import AT_START

pytestmark = pytest.mark.asyncio(loop_scope="session")

GAUGE = "fleet_scheduler_deadline_exceeded_placements"


@pytest_asyncio.fixture(loop_scope="session")
async def observed(
    temporal_client: Client, hub: HubClient, task_queue: str
) -> AsyncIterator[SchedulerMetrics]:
    metrics = SchedulerMetrics(CollectorRegistry(), process_metrics=False)
    async with fleet_scheduler(temporal_client, hub, task_queue, metrics=metrics):
        yield metrics


def gauge(metrics: SchedulerMetrics) -> float:
    value = metrics.registry.get_sample_value(GAUGE)
    assert value is not None
    return value


def fixed_placement(name: str, cluster: str, deadline: str | None) -> ClusterResourcePlacement:
    annotations = {names.SCHEDULE_DEADLINE_ANNOTATION: deadline} if deadline else {}
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {"placementType": "PickFixed", "clusterNames": [cluster]},
            },
        }
    )


def deadline_events(hub: HubClient, placement: str) -> list[Event]:
    return [
        e
        for e in hub.list(Event, namespace="default").items
        if e.involved_object.name == placement and e.reason == DEADLINE_EXCEEDED_REASON
    ]


def scheduled(hub: HubClient, placement: str) -> tuple[str, str]:
    crp = hub.get(ClusterResourcePlacement, placement)
    condition = crp.status.condition(names.PLACEMENT_SCHEDULED_CONDITION)
    return (condition.status, condition.reason) if condition is not None else ("", "")


async def test_a_placement_past_its_deadline_is_reported_until_a_cluster_joins(
    hub: HubClient, observed: SchedulerMetrics, temporal_client: Client
) -> None:
    prefix = unique("late")
    name, cluster = f"{prefix}-p", f"{prefix}-c"
    before = gauge(observed)
    hub.create(fixed_placement(name, cluster, "2s"))

    events = await until_async(lambda: deadline_events(hub, name) or None, blocking=True)
    event = events[0]
    assert event.type == "Warning"
    assert event.involved_object.kind == "ClusterResourcePlacement"
    assert event.message.startswith("not fully scheduled for 2s (deadline 2s): 0 of 1 clusters")
    assert "1 target(s) not in the fleet" in event.message
    await until_async(
        lambda: scheduled(hub, name) == ("False", DEADLINE_EXCEEDED_REASON), blocking=True
    )
    await until_async(lambda: gauge(observed) >= before + 1)

    current = await until_async(lambda: _exceeded(temporal_client, name), what="the status says it")
    assert current.deadline is not None
    text = deadline_text(current.deadline, datetime.now(UTC))
    assert text.startswith("2s, exceeded")
    explained = render_explain(current)
    assert "deadline: 2s, exceeded" in explained
    assert "0 of 1 clusters picked; missing 1: 1 target(s) not in the fleet" in explained

    add_cluster(hub, cluster)
    await until_async(lambda: scheduled(hub, name)[0] == "True", blocking=True)
    assert scheduled(hub, name)[1] == names.POLICY_FULFILLED_REASON  # KubeFleet's again
    await until_async(lambda: gauge(observed) == before)
    met = await settled(temporal_client, name)
    assert met.deadline is not None and met.deadline.since is None
    assert deadline_text(met.deadline, datetime.now(UTC)) == "2s, met"
    hub.delete(ClusterResourcePlacement, name)


async def _exceeded(client: Client, name: str) -> PlacementStatus | None:
    current = await status(client, name)
    ok = current is not None and current.deadline is not None and current.deadline.misses > 0
    return current if ok else None


async def test_a_one_second_aging_deadline_keeps_one_event_and_its_band(
    hub: HubClient, observed: SchedulerMetrics, temporal_client: Client
) -> None:
    """`1s,aging` misses every second: the placement still has one Event (later misses update
    it at most every EVENT_REFRESH, and run a turn no more often: REPORT_INTERVAL), and aging
    never lifts its turns past the key of its own turns, 3 for a placement without a
    PriorityClass (docs/priority.md, "Aging")."""
    prefix = unique("aging")
    name = f"{prefix}-p"
    hub.create(fixed_placement(name, f"{prefix}-nowhere", "1s,aging"))

    async def missed() -> PlacementStatus | None:
        current = await status(temporal_client, name)
        ok = current is not None and current.deadline is not None and current.deadline.misses >= 1
        return current if ok and current.last_turn_key is not None else None

    current = await until_async(missed, what="a miss")
    assert current.last_turn_key == 3  # its own key: aged no further than its band
    assert current.priority is not None and current.priority.own_priority_key == 3
    (event,) = deadline_events(hub, name)
    assert event.count is not None and 1 <= event.count <= current.deadline.misses
    history = await temporal_client.get_workflow_handle(workflow_id(name)).fetch_history()
    keys = [
        e.activity_task_scheduled_event_attributes.priority.priority_key
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert all(key >= 3 for key in keys), keys  # turns that ran on the activity queue
    hub.delete(ClusterResourcePlacement, name)


async def test_a_bad_deadline_is_explained_and_changes_no_decision(
    hub: HubClient, observed: SchedulerMetrics, temporal_client: Client
) -> None:
    prefix = unique("typo")
    name, cluster = f"{prefix}-p", f"{prefix}-c"
    add_cluster(hub, cluster)
    hub.create(fixed_placement(name, cluster, "10 minutes"))
    await until_async(lambda: scheduled(hub, name)[0] == "True", blocking=True)
    current = await settled(temporal_client, name)
    assert current.deadline is not None and current.deadline.problem is not None
    assert "is not a duration" in current.deadline.problem
    assert "deadline: invalid (schedule deadline '10 minutes' is not a duration" in (
        render_explain(current)
    )
    # The Scheduled condition says it too, after KubeFleet's words (issue 33).
    condition = hub.get(ClusterResourcePlacement, name).status.condition(
        names.PLACEMENT_SCHEDULED_CONDITION
    )
    assert condition is not None
    assert (
        f"; annotation {names.SCHEDULE_DEADLINE_ANNOTATION}: schedule deadline '10 minutes' is "
        "not a duration"
    ) in condition.message
    hub.delete(ClusterResourcePlacement, name)


async def test_a_zero_padded_deadline_is_its_value_and_the_gauge_keeps_counting(
    hub: HubClient, observed: SchedulerMetrics, temporal_client: Client
) -> None:
    """Issue 33, finding 1: `000...01s` (5,000 zeros, a legal 1s) raised a bare ValueError in
    the workflow task, on every retry, and in the watcher's gauge, so /metrics answered 500."""
    prefix = unique("padded")
    name = f"{prefix}-p"
    before = gauge(observed)
    hub.create(fixed_placement(name, f"{prefix}-nowhere", "0" * 5000 + "1s"))
    events = await until_async(lambda: deadline_events(hub, name) or None, blocking=True)
    assert "(deadline 1s)" in events[0].message
    await until_async(lambda: gauge(observed) >= before + 1)
    current = await until_async(lambda: _exceeded(temporal_client, name), what="the status says it")
    assert current.deadline is not None and current.deadline.annotation == "1s"
    hub.delete(ClusterResourcePlacement, name)


async def test_placements_without_the_annotation_record_nothing_new(
    hub: HubClient, observed: SchedulerMetrics, temporal_client: Client
) -> None:
    """Parity: no deadline patch marker, no timer, no deadline state, no Event."""
    prefix = unique("plain")
    name = f"{prefix}-p"
    hub.create(fixed_placement(name, f"{prefix}-nowhere", None))
    current = await settled(temporal_client, name)
    assert current.deadline is None
    handle = temporal_client.get_workflow_handle(workflow_id(name))
    history = await handle.fetch_history()
    kinds = {e.event_type for e in history.events}
    assert EventType.EVENT_TYPE_TIMER_STARTED not in kinds
    markers = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and DEADLINE_PATCH.encode() in e.marker_recorded_event_attributes.SerializeToString()
    ]
    assert markers == []
    assert deadline_events(hub, name) == []
    hub.delete(ClusterResourcePlacement, name)


async def test_a_miss_while_idle_is_reported_without_a_cycle(
    hub: HubClient, observed: SchedulerMetrics, temporal_client: Client
) -> None:
    """The miss of an idle workflow is reported by the report activity alone (patch
    DEADLINE_ALONE_PATCH): the Event and the condition, and no second cycle; the decision is
    the first cycle's."""
    prefix = unique("alone")
    name = f"{prefix}-p"
    hub.create(fixed_placement(name, f"{prefix}-c", "2s"))
    await until_async(lambda: deadline_events(hub, name) or None, blocking=True)
    await until_async(
        lambda: scheduled(hub, name) == ("False", DEADLINE_EXCEEDED_REASON), blocking=True
    )
    current = await until_async(lambda: _exceeded(temporal_client, name), what="the miss")
    assert current.cycles == 1
    history = await temporal_client.get_workflow_handle(workflow_id(name)).fetch_history()
    # The report ran (a local activity's marker or an activity task names it); its patch is
    # answered at the run's start (workflows.patches.AT_START_PATCH), so it has no marker.
    assert any(b"report_deadline_miss" in e.SerializeToString() for e in history.events)
    assert DEADLINE_ALONE_PATCH in AT_START
    hub.delete(ClusterResourcePlacement, name)
