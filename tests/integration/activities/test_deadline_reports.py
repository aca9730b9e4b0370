"""A turn past its scheduling deadline, against a real devhub: one Event per placement however
often the activity runs, brought up to date with the count of misses at most every
EVENT_REFRESH, the standalone condition's reason and message, and nothing of it once the
placement is fully scheduled."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from temporalio.testing import ActivityEnvironment

from activities.deadline import EVENT_REFRESH, EVENT_REFRESH_SLACK, ReportDeadlineMiss
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, Event
from scheduler.opt_in.deadline import DEADLINE_EXCEEDED_REASON, REPORT_INTERVAL, format_duration
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    placement_condition,
)
from workflows.models import (
    DeadlineMiss,
    DeadlineReport,
    DeadlineReported,
    TurnRequest,
    TurnResult,
)

PICK_THREE = {"placementType": "PickN", "numberOfClusters": 3}
MISSING = (
    "not fully scheduled for 10m (deadline 10m): 2 of 3 clusters picked; missing 1: "
    "1 cluster filtered by TaintToleration (taint gpu=true:NoSchedule cannot be tolerated)"
)


class Clock:
    """The activities' clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


def turn(env: ActivityEnvironment, rig: Rig, miss: DeadlineMiss | None) -> TurnResult:
    request = TurnRequest(placement="late", cycle=1, reason="test", deadline=miss)
    result: TurnResult = env.run(rig.activities.schedule_once, request)
    return result


def deadline_events(hub: HubClient) -> list[Event]:
    return [
        e
        for e in hub.list(Event, namespace="default").items
        if e.reason == DEADLINE_EXCEEDED_REASON and e.involved_object.name == "late"
    ]


def test_a_retried_turn_past_its_deadline_makes_one_event_and_says_why_on_the_condition(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    for name in ("a", "b"):
        add_cluster(hub, name)
    add_cluster(hub, "d", taints=[("gpu", "true")])
    add_placement(hub, "late", PICK_THREE, annotations={names.SCHEDULE_DEADLINE_ANNOTATION: "10m"})
    clock = Clock()
    rig = make_activities(clock=clock)

    first = turn(env, rig, None)  # before the deadline: KubeFleet's condition, no Event
    assert first.prepared.schedule_deadline == "10m"
    assert first.prepared.unscheduled_since is not None  # its creation: no condition yet
    condition = placement_condition(hub, "late")
    assert condition is not None and condition.reason == names.POLICY_UNFULFILLED_REASON
    assert deadline_events(hub) == []

    since = clock.now - timedelta(minutes=10)
    miss = DeadlineMiss(deadline="10m", seconds=600, since=since, misses=1)
    reported = turn(env, rig, miss)
    again = turn(env, rig, miss)  # a retry, or another turn within the same miss
    assert reported.report is not None and reported.report.writes.deadline_event
    assert again.report is not None and not again.report.writes.deadline_event
    assert not again.report.writes.placement_condition_written
    (event,) = deadline_events(hub)
    assert (event.type, event.message, event.count) == ("Warning", MISSING, 1)
    assert event.involved_object.kind == "ClusterResourcePlacement"
    condition = placement_condition(hub, "late")
    assert condition is not None
    assert (condition.status, condition.reason, condition.message) == (
        names.FALSE,
        DEADLINE_EXCEEDED_REASON,
        MISSING,
    )

    # The next miss, ten minutes on: the same Event, counting it.
    clock.now += timedelta(minutes=10)
    second = turn(env, rig, miss.model_copy(update={"misses": 2}))
    assert second.report is not None and second.report.writes.deadline_event
    (event,) = deadline_events(hub)
    assert event.count == 2 and event.message.startswith("not fully scheduled for 20m (deadline")
    assert event.last_timestamp == clock.now
    clock.now -= timedelta(minutes=10)  # back: ten minutes on, the clusters' heartbeats are old

    add_cluster(hub, "c")
    fulfilled = turn(env, rig, miss.model_copy(update={"misses": 3}))
    assert fulfilled.report is not None and fulfilled.report.fulfilled
    assert not fulfilled.report.writes.deadline_event
    condition = placement_condition(hub, "late")
    assert condition is not None and condition.reason == names.POLICY_FULFILLED_REASON
    assert len(deadline_events(hub)) == 1


def test_a_placement_without_the_annotation_reads_as_before(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    add_cluster(hub, "a")
    add_placement(hub, "late", PICK_THREE)
    result = turn(env, make_activities(), None)
    assert result.prepared.schedule_deadline is None
    assert result.prepared.unscheduled_since is None
    assert "scheduleDeadline" not in result.prepared.model_dump(exclude_none=True, by_alias=True)


def test_a_miss_is_not_reported_once_the_annotation_is_removed_or_changed(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Removing (or changing) the annotation signals the workflow, whose next turn still carries
    the miss its clock held when the turn began: that turn must not write the deadline's reason
    or an Event. Once it ran, the clock is gone and no other turn comes to clear the reason."""
    for name in ("a", "b"):
        add_cluster(hub, name)
    add_cluster(hub, "d", taints=[("gpu", "true")])
    add_placement(hub, "late", PICK_THREE, annotations={names.SCHEDULE_DEADLINE_ANNOTATION: "10m"})
    rig = make_activities()
    since = datetime.now(UTC) - timedelta(minutes=10)
    miss = DeadlineMiss(deadline="10m", seconds=600, since=since, misses=1)
    turn(env, rig, miss)
    condition = placement_condition(hub, "late")
    assert condition is not None and condition.reason == DEADLINE_EXCEEDED_REASON

    for marks in ({names.SCHEDULE_DEADLINE_ANNOTATION: "1h"}, {}):
        placement = hub.get(ClusterResourcePlacement, "late")
        meta = placement.metadata.model_copy(update={"annotations": marks})
        hub.update(placement.model_copy(update={"metadata": meta}))
        result = turn(env, rig, miss.model_copy(update={"misses": 2}))
        assert result.report is not None and not result.report.writes.deadline_event
        condition = placement_condition(hub, "late")
        assert condition is not None and condition.reason == names.POLICY_UNFULFILLED_REASON
    assert len(deadline_events(hub)) == 1


def test_a_one_second_deadline_keeps_one_event_written_at_most_every_refresh(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """`1s,aging` misses every second, for ever: the placement still has one Event, written at
    its first miss and then at most once per EVENT_REFRESH, counting every miss in between; a
    new stretch (fully scheduled, then not again) adds to the same Event."""
    add_cluster(hub, "a")
    add_placement(
        hub, "late", PICK_THREE, annotations={names.SCHEDULE_DEADLINE_ANNOTATION: "1s,aging"}
    )
    clock = Clock()
    rig = make_activities(clock=clock)
    since = clock.now
    writes = 0
    # The first write is at 1 s; the next once a refresh, less its slack, has passed.
    due = int((EVENT_REFRESH - EVENT_REFRESH_SLACK).total_seconds()) + 1
    # A turn a second, past one refresh (a sample of them: every turn in between is the same).
    for misses in [*range(1, 11), due // 2, due - 1, due, due + 1, due + 60]:
        clock.now = since + timedelta(seconds=misses)
        miss = DeadlineMiss(deadline="1s,aging", seconds=1, since=since, misses=misses)
        result = turn(env, rig, miss)
        assert result.report is not None
        writes += result.report.writes.deadline_event
        assert len(deadline_events(hub)) == 1
    assert writes == 2  # the first miss, and the first one a refresh after it
    (event,) = deadline_events(hub)
    assert event.count == due
    assert event.first_timestamp == since + timedelta(seconds=1)
    assert event.last_timestamp == since + timedelta(seconds=due)
    assert event.message.startswith(f"not fully scheduled for {format_duration(due)} (deadline 1s)")

    # A later stretch, after the placement was fully scheduled for a while: the same Event.
    later = clock.now + EVENT_REFRESH
    clock.now = later + timedelta(seconds=3)
    miss = DeadlineMiss(deadline="1s,aging", seconds=1, since=later, misses=3)
    assert turn(env, rig, miss).report.writes.deadline_event  # type: ignore[union-attr]
    assert not turn(env, rig, miss).report.writes.deadline_event  # type: ignore[union-attr]
    (event,) = deadline_events(hub)
    assert event.count == due + 3


def test_a_refresh_the_workflow_asks_for_is_written_though_the_last_write_ran_late(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """The workflow runs a miss's turn REPORT_INTERVAL after the last one it counted (workflow
    time); the Event's lastTimestamp is when that turn's activity ran, later by the turn's own
    delay. With no slack, a first write that ran 20 s late made the next refresh the workflow
    asked for write nothing, and the Event went 10 minutes without an update."""
    add_cluster(hub, "a")
    add_placement(hub, "late", PICK_THREE, annotations={names.SCHEDULE_DEADLINE_ANNOTATION: "1s"})
    clock = Clock()
    rig = make_activities(clock=clock)
    since = clock.now
    clock.now = since + timedelta(seconds=21)  # the miss at 1 s, its turn 20 s late
    first = DeadlineMiss(deadline="1s", seconds=1, since=since, misses=1)
    assert turn(env, rig, first).report.writes.deadline_event  # type: ignore[union-attr]
    clock.now = since + timedelta(seconds=1) + REPORT_INTERVAL  # the next turn, at once
    misses = int(REPORT_INTERVAL.total_seconds()) + 1
    later = DeadlineMiss(deadline="1s", seconds=1, since=since, misses=misses)
    assert turn(env, rig, later).report.writes.deadline_event  # type: ignore[union-attr]
    (event,) = deadline_events(hub)
    assert event.count == misses


def test_a_deadline_changed_within_a_stretch_is_reported_on_the_same_event(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """`1s` for five minutes counts some 300 misses on the Event; changed to `10m` (the
    workflow counts again from 1 in the same stretch), its misses were each at most the count
    the Event held for the 1s deadline, so none was written: the Event kept saying `deadline 1s`
    for 300 x 10 minutes. The count goes on adding the new deadline's misses."""
    add_cluster(hub, "a")
    add_placement(hub, "late", PICK_THREE, annotations={names.SCHEDULE_DEADLINE_ANNOTATION: "1s"})
    clock = Clock()
    rig = make_activities(clock=clock)
    since = clock.now
    fast = int(REPORT_INTERVAL.total_seconds())
    for misses in (1, fast):
        clock.now = since + timedelta(seconds=misses)
        miss = DeadlineMiss(deadline="1s", seconds=1, since=since, misses=misses)
        assert turn(env, rig, miss).report.writes.deadline_event  # type: ignore[union-attr]
    placement = hub.get(ClusterResourcePlacement, "late")
    marks = {names.SCHEDULE_DEADLINE_ANNOTATION: "10m"}
    hub.update(placement.model_copy(update={"metadata": placement.metadata.model_copy(
        update={"annotations": marks})}))  # fmt: skip
    clock.now = since + timedelta(minutes=20)
    slow = DeadlineMiss(deadline="10m", seconds=600, since=since, misses=2)
    assert turn(env, rig, slow).report.writes.deadline_event  # type: ignore[union-attr]
    (event,) = deadline_events(hub)
    assert "(deadline 10m)" in event.message, event.message
    assert event.count == fast + 2
    assert event.last_timestamp == clock.now


def test_a_miss_reported_alone_reads_once_and_writes_the_condition_and_event_once_each(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    """A miss while the workflow is idle (workflows.deadline, DEADLINE_ALONE_PATCH): no cycle,
    no list of bindings or snapshots; the placement read once, the condition patched once, the
    Event created in one request; a retry writes nothing."""
    for name in ("a", "b"):
        add_cluster(hub, name)
    add_cluster(hub, "d", taints=[("gpu", "true")])
    add_placement(hub, "late", PICK_THREE, annotations={names.SCHEDULE_DEADLINE_ANNOTATION: "10m"})
    clock = Clock()
    rig = make_activities(clock=clock)
    turn(env, rig, None)  # the cycle before the deadline: it says what is missing
    missing = MISSING.split(": ", 1)[1]
    since = clock.now - timedelta(minutes=10)
    miss = DeadlineMiss(deadline="10m", seconds=600, since=since, misses=1)
    request = DeadlineReport(placement="late", miss=miss, missing=missing)
    report = ReportDeadlineMiss(hub, rig.activities.settings).report_deadline_miss

    devhub.stats.clear()
    reported: DeadlineReported = env.run(report, request)
    assert (reported.reported, reported.event_written, reported.condition_written) == (
        True,
        True,
        True,
    )
    assert devhub.stats.snapshot() == {
        ("get", "clusterresourceplacements"): 1,
        ("patch", "clusterresourceplacements/status"): 1,
        ("create", "events"): 1,
    }
    (event,) = deadline_events(hub)
    assert (event.type, event.message, event.count) == ("Warning", MISSING, 1)
    condition = placement_condition(hub, "late")
    assert condition is not None
    assert (condition.status, condition.reason, condition.message) == (
        names.FALSE,
        DEADLINE_EXCEEDED_REASON,
        MISSING,
    )

    again: DeadlineReported = env.run(report, request)  # a retry: nothing new to write
    assert again.reported and not again.event_written and not again.condition_written
    assert len(deadline_events(hub)) == 1

    # A placement the report cannot speak for is left to a turn: fully scheduled meanwhile,
    # or its deadline changed.
    add_cluster(hub, "c")
    turn(env, rig, None)
    devhub.stats.clear()
    fulfilled: DeadlineReported = env.run(
        report, request.model_copy(update={"miss": miss.model_copy(update={"misses": 2})})
    )
    assert not fulfilled.reported
    assert devhub.stats.count("patch") == devhub.stats.count("create") == 0


def test_a_miss_reported_alone_beside_kubefleet_writes_only_the_event(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    add_placement(hub, "late", PICK_THREE, annotations={names.SCHEDULE_DEADLINE_ANNOTATION: "10m"})
    rig = make_activities(snapshotter=False)
    miss = DeadlineMiss(
        deadline="10m", seconds=600, since=datetime.now(UTC) - timedelta(minutes=10), misses=1
    )
    request = DeadlineReport(placement="late", miss=miss, missing="0 of 3 clusters picked")
    reported: DeadlineReported = env.run(
        ReportDeadlineMiss(hub, rig.activities.settings).report_deadline_miss, request
    )
    assert reported.reported and reported.event_written and not reported.condition_written
    assert placement_condition(hub, "late") is None  # KubeFleet's to write
    (event,) = deadline_events(hub)
    assert event.message == "not fully scheduled for 10m (deadline 10m): 0 of 3 clusters picked"
