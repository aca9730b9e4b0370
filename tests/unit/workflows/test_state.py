"""The placement workflow's state as one object (workflows.models.PlacementState): the inbox, the
turn execution and the deadline keep their parts in it, continue-as-new carries it as it is,
`status` is built from it; and the deadline's patches, asked only where their branches are
(workflows.deadline.PlacementDeadline). No Temporal: `workflow.patched` is a recording stand-in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from scheduler import Outcome
from scheduler.opt_in.deadline import REPORT_INTERVAL
from workflows.deadline import (
    DEADLINE_BUSY_PATCH,
    DEADLINE_FLOOR_PATCH,
    DEADLINE_PATCH,
    PlacementDeadline,
)
from workflows.execution import TurnExecution
from workflows.inbox import STARTED, Inbox
from workflows.models import (
    CycleReport,
    DeadlineState,
    MoveRequest,
    MovesRequest,
    PlacementInput,
    PlacementState,
    PlacementStatus,
    PrepareResult,
    TurnPriority,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONVERTER = pydantic_data_converter.payload_converter

# A continue-as-new input as the workflow wrote it before its state was one object (its
# `carried` was CarriedState, rebuilt field by field at the end of the run).
OLD_CARRIED: dict[str, Any] = {
    "cycles": 7,
    "dirty": True,
    "fresh": True,
    "pendingReasons": ["cluster_changed: c1 joined"],
    "last": {
        "cycle": 7,
        "placement": "web",
        "snapshot": "web-1",
        "outcome": {"placementType": "PickN", "wanted": 2, "picked": 1},
        "summary": "cycle 7: PickN 1/2",
    },
    "deciding": None,
    "lastError": None,
    "waitingFor": "an event",
    "phase": "idle",
    "priority": {"priorityKey": 2, "placementKey": 3, "value": 100},
    "pendingKey": 2,
    "moves": [{"binding": "web-c1", "source": "c1", "target": "c2"}],
    "nextLocal": False,
    "queueTurns": 4,
    "deadline": {
        "annotation": "1m,aging",
        "seconds": 60,
        "aging": True,
        "since": "2026-01-01T00:00:00Z",
        "misses": 2,
        "missing": "1 of 2 clusters picked",
    },
    "lastMoves": {"cycle": 6, "lines": ["moved web-c1 to c2"]},
}
OLD_INPUT: dict[str, Any] = {
    "placement": "web",
    "namespace": "team-a",
    "carried": OLD_CARRIED,
    "turnsPerRun": 5,
    "turnExecution": "auto",
}


def _round_trip(value: PlacementInput) -> PlacementInput:
    (payload,) = CONVERTER.to_payloads([value])
    (decoded,) = CONVERTER.from_payloads([payload], [PlacementInput])
    assert isinstance(decoded, PlacementInput)
    return decoded


def _decoded(document: dict[str, object]) -> PlacementInput:
    (payload,) = CONVERTER.to_payloads([document])
    (decoded,) = CONVERTER.from_payloads([payload], [PlacementInput])
    assert isinstance(decoded, PlacementInput)
    return decoded


def test_an_old_continue_as_new_input_reads_into_the_state_and_is_written_back_the_same() -> None:
    state = _decoded(OLD_INPUT).carried
    assert state is not None
    assert (state.cycles, state.pending_priority_key, state.queue_turns) == (7, 2, 4)
    assert state.moves == [MoveRequest(binding="web-c1", source="c1", target="c2")]
    assert state.deadline is not None and state.deadline.misses == 2
    # Written again (a run of this version continuing as new), an older worker reads the same
    # names: the document is the old one, less the fields at their defaults (which it fills in
    # as it did: workflows.models.wire).
    (payload,) = CONVERTER.to_payloads([PlacementInput.model_validate(OLD_INPUT)])
    written = json.loads(payload.data)["carried"]
    assert set(OLD_CARRIED) - set(written) == {"dirty", "deciding", "lastError"}
    assert set(written) <= set(OLD_CARRIED)
    assert _decoded({**OLD_INPUT, "carried": written}).carried == state


def test_the_state_is_the_continue_as_new_input_with_the_last_report_slim() -> None:
    explained = _unscheduled(2).model_copy(
        update={"explanation_packed": "abc", "explanation_digest": "d"}
    )
    state = Inbox.first()
    state.last, state.deciding = explained, explained
    carried = _round_trip(PlacementInput(placement="web", carried=state)).carried
    assert carried is not None
    assert carried.last == explained.slim() and not carried.last.has_explanation
    assert carried.deciding == explained  # the deciding one keeps its explanation
    assert state.last is explained  # the run's own object is not changed by writing it


def test_the_inbox_and_the_execution_keep_their_parts_in_the_state() -> None:
    state = Inbox.first()
    inbox, execution = Inbox(state), TurnExecution.of("auto", None, None, state)
    assert state.pending_reasons == [STARTED]
    inbox.take()
    inbox.mark("requeue")
    inbox.ask(4)
    inbox.ask(2)
    inbox.ask(None)
    inbox.propose(MovesRequest(moves=[MoveRequest(binding="b", source="c1", target="c2")]))
    inbox.keep_fresh(True)
    execution.after_turn(False, fell_back=True)
    assert (state.dirty, state.fresh, state.pending_reasons) == (True, True, ["requeue"])
    assert (state.pending_priority_key, len(state.moves)) == (2, 1)
    assert (state.next_local, state.queue_turns) == (False, 20)
    work = inbox.take()
    assert (work.priority_key, work.fresh, len(work.moves)) == (2, True, 1)
    assert (state.dirty, state.pending_priority_key, state.moves) == (False, None, [])


def test_status_is_built_from_the_state() -> None:
    state = PlacementState.model_validate(OLD_CARRIED)
    status = PlacementStatus.of(
        "web",
        "team-a",
        state,
        cycles_this_run=1,
        turns_this_run=2,
        signals_this_run=3,
        local_cycles=False,
        turn_execution="auto",
        last_turn_key=1,
    )
    assert status.phase == "pending"  # work is queued: not idle whatever the loop said
    assert status.pending_reasons == state.pending_reasons and status.fresh_pending
    assert (status.cycles, status.deadline, status.last_moves) == (
        7,
        state.deadline,
        state.last_moves,
    )
    state.dirty = False
    idle = PlacementStatus.of(
        "web",
        None,
        state,
        cycles_this_run=0,
        turns_this_run=0,
        signals_this_run=0,
        local_cycles=False,
        turn_execution="auto",
        last_turn_key=None,
    )
    assert (idle.phase, idle.pending_reasons) == ("idle", [])


class Patches:
    """`workflow.patched` on a worker that is not replaying: every patch on, each ask kept."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, patch_id: str) -> bool:
        self.asked.append(patch_id)
        return True


def _ready(annotation: str | None) -> PrepareResult:
    return PrepareResult(phase="ready", schedule_deadline=annotation)


def _unscheduled(cycle: int) -> CycleReport:
    outcome = Outcome(placement_type="PickN", wanted=2, picked=1)
    return CycleReport(cycle=cycle, placement="web", snapshot="web-1", outcome=outcome)


def test_a_placement_without_the_annotation_asks_no_deadline_patch() -> None:
    patched, deadline = Patches(), PlacementDeadline.of(Inbox.first())
    deadline.after_turn(_ready(None), _unscheduled(1), None, T0, patched)
    assert deadline.wait(True, T0, None, patched).missed is False
    assert deadline.wait(False, T0, None, patched).wake is None
    assert deadline.aged(None, None) is None and deadline.request() is None
    assert patched.asked == [] and deadline.state.deadline is None


def test_a_carried_clock_runs_without_asking_and_a_new_one_asks_once() -> None:
    carried = PlacementState(
        deadline=DeadlineState(annotation="10s", seconds=10, since=T0, misses=0)
    )
    patched = Patches()
    deadline = PlacementDeadline.of(carried)
    assert deadline.wait(False, T0, None, patched).due == T0 + timedelta(seconds=10)
    deadline.after_turn(_ready("10s"), _unscheduled(2), None, T0, patched)
    assert patched.asked == []  # the run before decided it
    fresh = PlacementDeadline.of(Inbox.first())
    fresh.after_turn(_ready("10s"), _unscheduled(1), None, T0, patched)
    fresh.after_turn(_ready("10s"), _unscheduled(2), None, T0, patched)
    assert patched.asked == [DEADLINE_PATCH]
    assert fresh.state.deadline is not None and fresh.state.deadline.since == T0


def test_a_busy_miss_asks_its_patch_only_once_the_deadline_passed() -> None:
    patched, deadline = Patches(), PlacementDeadline.of(Inbox.first())
    deadline.after_turn(_ready("10s"), _unscheduled(1), None, T0, patched)
    assert not deadline.wait(True, T0 + timedelta(seconds=9), None, patched).missed
    assert patched.asked == [DEADLINE_PATCH]
    assert deadline.wait(True, T0 + timedelta(seconds=10), None, patched).missed
    assert patched.asked == [DEADLINE_PATCH, DEADLINE_BUSY_PATCH]


def test_a_miss_with_nothing_new_puts_its_timer_off_through_the_floor_patch() -> None:
    patched, state = Patches(), Inbox.first()
    deadline = PlacementDeadline.of(state)
    own = TurnPriority(own_priority_key=3)
    deadline.after_turn(_ready("1s,aging"), _unscheduled(1), None, T0, patched)
    first = deadline.wait(False, T0, own, patched)
    assert first.wake == first.due == T0 + timedelta(seconds=1)  # the first miss: at once
    assert deadline.missed(T0 + timedelta(seconds=1)) == "schedule deadline 1s,aging exceeded (1)"
    assert state.deadline is not None and state.deadline.misses == 1  # kept in the state
    assert deadline.aged(None, own) == 3  # key 3 ages no further
    assert patched.asked == [DEADLINE_PATCH]
    later = deadline.wait(False, T0 + timedelta(seconds=1), own, patched)
    assert later.wake == T0 + timedelta(seconds=1) + REPORT_INTERVAL
    assert patched.asked == [DEADLINE_PATCH, DEADLINE_FLOOR_PATCH]
    assert later.due is not None and later.missed_by(later.due)  # work came after it fell
    assert not later.missed_by(later.due - timedelta(seconds=1))


def _read(version: int | None, *, error: str | None = None) -> CycleReport:
    return _unscheduled(3).model_copy(update={"clusters_version": version, "error": error})


def test_a_requeue_is_moot_only_while_every_queued_reason_is_and_a_cycle_read_its_version() -> None:
    """The reconcile's requeue for a cluster change carries the version it saw; a cycle that
    completed since, having read the hub at or past it, makes the queued turn moot. Any other
    reason queued beside it (an event, a person's requeue), a cycle that read less, failed, or
    knew no version, and the turn runs."""
    inbox = Inbox(Inbox.first())
    inbox.take()
    inbox.mark("reconcile: cluster c0 changed", 30)
    inbox.mark("reconcile: cluster c1 changed", 25)
    assert inbox.state.pending_unless_read == 30
    assert inbox.moot(_read(29)) is None and inbox.moot(None) is None
    assert inbox.moot(_read(None)) is None and inbox.moot(_read(40, error="boom")) is None
    assert inbox.state.dirty
    why = inbox.moot(_read(30))
    assert why is not None and "c0 changed" in why and "version 30 >= 30" in why
    assert not inbox.state.dirty and inbox.state.pending_reasons == []
    assert inbox.moot(_read(30)) is None  # nothing queued: nothing to drop

    for first, then in (
        (("cluster_changed", None), ("reconcile", 30)),
        (("reconcile", 30), ("cluster_changed", None)),
    ):
        inbox.mark(*first)
        inbox.mark(*then)
        assert inbox.state.pending_unless_read is None
        assert inbox.moot(_read(1000)) is None
        inbox.take()
    # Taken by a turn: the next requeue starts afresh.
    inbox.mark("reconcile", 50)
    assert inbox.state.pending_unless_read == 50
    assert inbox.take().reasons == ["reconcile"] and inbox.state.pending_unless_read is None


def _report(fulfilled: bool) -> CycleReport:
    outcome = Outcome(placement_type="PickN", wanted=2, picked=1, fulfilled=fulfilled)
    return CycleReport(cycle=1, placement="web", snapshot="web-1", outcome=outcome)


@pytest.mark.parametrize(
    ("said", "last", "expected"),
    [
        (None, None, None),  # a sender that said nothing: first
        (0, None, None),  # the watcher's new placement: first
        (0, False, None),
        (1, True, 1),  # wants more or changed, as the watcher saw it
        (2, True, 2),  # a satisfied re-decision
        (2, False, 1),  # the watcher saw it satisfied; its last cycle says it wants more
        (2, None, 1),  # never ran a cycle here, but the watcher saw it scheduled
        (1, False, 1),  # a watcher before newFirst: 1 was satisfied; still after new ones
    ],
)
def test_a_turn_s_order_within_its_key_puts_new_placements_first(
    said: int | None, last: bool | None, expected: int | None
) -> None:
    """PrioritySort's new first (issue 35) in the workflow's local turns: the watcher's word,
    never after 'wants more' when the last cycle did not get all it asked for; values a watcher
    before newFirst sent (0 unsatisfied, 1 satisfied) keep new placements first."""
    state = PlacementState(
        priority=TurnPriority(within_key=said),
        last=None if last is None else _report(last),
    )
    assert state.turn_within_key() == expected
