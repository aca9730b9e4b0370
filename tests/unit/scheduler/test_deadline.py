"""scheduler.opt_in.deadline, the annotation's reading, and workflows.deadline, the clock the
workflow keeps: tables, no Temporal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.opt_in.deadline import (
    REPORT_INTERVAL,
    DeadlineError,
    ScheduleDeadline,
    format_duration,
    parse_deadline,
)
from workflows.deadline import DeadlineClock

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("30s", ScheduleDeadline(30), id="seconds"),
        pytest.param("10m", ScheduleDeadline(600), id="minutes"),
        pytest.param("1h30m", ScheduleDeadline(5400), id="hours-and-minutes"),
        pytest.param(" 2s ", ScheduleDeadline(2), id="spaces"),
        pytest.param("10m,aging", ScheduleDeadline(600, aging=True), id="aging"),
        pytest.param("10m, aging", ScheduleDeadline(600, aging=True), id="aging-spaced"),
    ],
)
def test_a_deadline_reads_as_go_writes_durations(value: str, expected: ScheduleDeadline) -> None:
    assert parse_deadline(value) == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("10 minutes", "is not a duration", id="words"),
        pytest.param("", "is not a duration", id="empty"),
        pytest.param("1.5h", "is not a duration", id="fraction"),
        pytest.param("10", "is not a duration", id="no-unit"),
        pytest.param("-5m", "is not a duration", id="negative"),
        pytest.param("0s", "between 1s and", id="zero"),
        pytest.param("9000h", "between 1s and", id="over-a-year"),
        pytest.param("10m,fast", "unknown option", id="unknown-option"),
    ],
)
def test_a_bad_deadline_says_what_is_wrong(value: str, problem: str) -> None:
    with pytest.raises(DeadlineError, match=problem):
        parse_deadline(value)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (2, "2s"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m")]
)
def test_durations_are_written_as_the_annotation_writes_them(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text
    assert format_duration(timedelta(seconds=seconds)) == text


def test_the_clock_starts_when_not_fully_scheduled_and_a_policy_change_keeps_it() -> None:
    clock = DeadlineClock()
    clock.read("10s")
    clock.after_cycle(False, seed=T0 - timedelta(seconds=4), now=T0)
    assert clock.since == T0 - timedelta(seconds=4)  # the condition's time, not the turn's
    assert clock.due() == T0 + timedelta(seconds=6)
    clock.after_cycle(False, seed=T0 + timedelta(seconds=5), now=T0 + timedelta(seconds=5))
    assert clock.since == T0 - timedelta(seconds=4)  # still not fully scheduled: kept
    assert clock.request() is None  # nothing missed yet
    assert clock.miss(T0 + timedelta(seconds=6)) == 1
    request = clock.request()
    assert request is not None and (request.misses, request.seconds) == (1, 10)
    assert clock.due() == T0 + timedelta(seconds=16)
    assert clock.miss(T0 + timedelta(seconds=60)) == 6  # a worker down for several periods
    clock.after_cycle(True, seed=None, now=T0 + timedelta(seconds=61))
    assert (clock.since, clock.misses, clock.due()) == (None, 0, None)


def test_the_clock_crosses_continue_as_new_and_stops_when_the_annotation_goes() -> None:
    clock = DeadlineClock()
    clock.read("5s,aging")
    clock.after_cycle(False, seed=None, now=T0, missing="0 of 1 clusters picked")
    clock.miss(T0 + timedelta(seconds=5))
    carried = DeadlineClock.of(clock.state())
    assert carried == clock
    assert carried.aged(3, 1) == 2
    carried.read(None)
    assert carried.state() is None and carried.due() is None


def test_a_bad_annotation_runs_no_clock_and_says_why() -> None:
    clock = DeadlineClock()
    clock.read("soon")
    clock.after_cycle(False, seed=None, now=T0)
    state = clock.state()
    assert state is not None and state.seconds is None
    assert state.problem is not None and "not a duration" in state.problem
    assert clock.due() is None and clock.request() is None


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("9" * 5000 + "s", id="more-digits-than-int-reads"),
        pytest.param("1" * 30 + "h", id="thirty-digit-hours"),
    ],
)
def test_a_huge_deadline_is_a_deadline_error_not_a_crash(value: str) -> None:
    """An annotation may hold 256 KiB: Python's int() refuses more than 4300 digits with a bare
    ValueError, which the workflow's clock (it catches DeadlineError) would raise out of its
    workflow task, failing every task of the placement's workflow."""
    with pytest.raises(DeadlineError, match="between 1s and") as raised:
        parse_deadline(value)
    assert len(str(raised.value)) < 300  # the problem is carried in workflow state: kept short


ZERO_PADDED = "0" * 5000 + "1s"


def test_a_zero_padded_deadline_reads_as_its_value() -> None:
    """Issue 33, finding 1: leading zeros were stripped before counting digits but not before
    int(), which refuses more than 4300 digits with a bare ValueError that neither the workflow
    nor the watcher's gauge caught. `000...01s` is a legal way to write 1s."""
    assert parse_deadline(ZERO_PADDED) == ScheduleDeadline(1)
    assert parse_deadline("0" * 5000 + "1h" + "0" * 5000 + "30m,aging") == ScheduleDeadline(
        5400, aging=True
    )


def test_the_clock_reads_a_recorded_raw_value_and_keeps_it_bounded() -> None:
    """A turn result recorded before issue 33 holds the raw annotation: the workflow re-reads
    it on replay, and what it carries on (continue-as-new, details) is bounded."""
    clock = DeadlineClock()
    clock.read(ZERO_PADDED)
    assert clock.deadline == ScheduleDeadline(1)
    state = clock.state()
    assert state is not None and state.annotation == "1s"
    bad = "x" * 120_000
    clock.read(bad)
    state = clock.state()
    assert state is not None and state.seconds is None
    assert len(state.annotation) < 40 and state.problem is not None
    assert len(state.problem) < 300 and "x" * 41 not in state.problem
    again = DeadlineClock.of(state)  # carried across continue-as-new
    assert again.state() == state


def test_a_miss_runs_a_turn_once_per_report_interval_unless_aging_lifts_it() -> None:
    clock = DeadlineClock()
    clock.read("1s,aging")
    clock.after_cycle(False, seed=None, now=T0)
    assert clock.reported_due(3, 3) == T0 + timedelta(seconds=1)  # the first miss: when it falls
    clock.miss(T0 + timedelta(seconds=1))
    later = T0 + timedelta(seconds=1) + REPORT_INTERVAL
    assert clock.reported_due(3, 3) == later  # key 3 ages no further: put off
    assert clock.reported_due(3, 1) == T0 + timedelta(seconds=2)  # key 2 next: at once
    clock.miss(T0 + timedelta(seconds=2))
    assert clock.reported_due(3, 1) == T0 + timedelta(seconds=2) + REPORT_INTERVAL  # at key 1
    assert DeadlineClock.of(clock.state()) == clock  # carried across continue-as-new
    assert clock.miss(later) == 301  # the periods in between are counted, not lost
    clock.after_cycle(True, seed=None, now=later)
    clock.after_cycle(False, seed=None, now=later)
    assert clock.reported_due(3, 3) == later + timedelta(seconds=1)  # a new stretch: at once
