"""The workflow worker's local slots (activities.local_slots): local turns run best key first,
then unsatisfied placements first within a key, then in arrival order; what cannot wait is shed
to the activity queue. Real threads, as the worker runs turns."""

from __future__ import annotations

import threading
from contextlib import ExitStack

import pytest

from activities.local_slots import LocalSlots, Shed, TurnOrder
from tests.support.waits import WAIT_S, until


class _Turns:
    """Turns in threads that record the order in which they got a slot (or were shed)."""

    def __init__(self, slots: LocalSlots) -> None:
        self.slots = slots
        self.ran: list[str] = []
        self.shed: list[str] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, name: str, order: TurnOrder) -> None:
        waiting = self.slots.waiting_now
        shed = len(self.shed)

        def turn() -> None:
            try:
                with self.slots.slot(order), self._lock:
                    self.ran.append(name)
            except Shed:
                with self._lock:
                    self.shed.append(name)

        thread = threading.Thread(target=turn, name=name)
        thread.start()
        self._threads.append(thread)
        # In the room, or shed (the room's size may stay the same when it sheds the worst).
        until(
            lambda: self.slots.waiting_now > waiting or len(self.shed) > shed,
            what=f"{name} waits or is shed",
        )

    def finish(self) -> None:
        """Every turn thread has ended (each join bounded by WAIT_S)."""
        for thread in self._threads:
            thread.join(WAIT_S)
            assert not thread.is_alive()


def test_a_freed_slot_goes_to_the_best_key_then_the_unsatisfied_then_the_first() -> None:
    slots = LocalSlots(slots=1, waiting=10, max_wait_s=WAIT_S)
    turns = _Turns(slots)
    with ExitStack() as held:
        held.enter_context(slots.slot((4, 1)))  # a resync's turn is running
        for index in range(3):
            turns.start(f"resync-{index}", (4, 1))
        turns.start("re-decision", (3, 1))
        turns.start("new", (3, 0))
        turns.start("short", (3, 0))
        turns.start("urgent", (2, 1))
    turns.finish()
    assert turns.ran == [
        "urgent",
        "new",
        "short",
        "re-decision",
        "resync-0",
        "resync-1",
        "resync-2",
    ]
    assert turns.shed == []


def test_arrival_order_without_keys_is_kept() -> None:
    slots = LocalSlots(slots=1, waiting=10, max_wait_s=WAIT_S)
    turns = _Turns(slots)
    with slots.slot((3, 0)):
        for index in range(5):
            turns.start(f"t{index}", (3, 0))
    turns.finish()
    assert turns.ran == [f"t{i}" for i in range(5)]


def test_a_full_room_sheds_the_worst_turn_to_the_activity_queue() -> None:
    slots = LocalSlots(slots=1, waiting=2, max_wait_s=WAIT_S)
    turns = _Turns(slots)
    with slots.slot((4, 1)):
        turns.start("resync-0", (4, 1))
        turns.start("resync-1", (4, 1))
        turns.start("resync-2", (4, 1))  # no better than the worst waiting: shed itself
        until(lambda: turns.shed == ["resync-2"], what="resync-2 shed")
        turns.start("new", (3, 0))  # better: the worst waiting (the last resync) makes room
        until(lambda: turns.shed == ["resync-2", "resync-1"], what="resync-1 shed")
    turns.finish()
    assert turns.ran == ["new", "resync-0"]
    assert slots.shed_count == 2


def test_a_turn_that_waits_too_long_runs_on_the_queue() -> None:
    slots = LocalSlots(slots=1, waiting=4, max_wait_s=0.01)
    with slots.slot((3, 0)), pytest.raises(Shed, match="waited"), slots.slot((3, 0)):
        pass
    assert slots.waiting_now == 0
    with slots.slot((3, 0)):  # the slot came back
        pass


def test_slots_run_side_by_side_up_to_their_number() -> None:
    slots = LocalSlots(slots=2, waiting=0)
    with (
        slots.slot((3, 0)),
        slots.slot((5, 1)),
        pytest.raises(Shed, match="local slots are taken"),
        slots.slot((1, 0)),
    ):
        pass


def test_nonsense_is_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        LocalSlots(slots=0, waiting=1)


def test_a_shed_local_turn_tells_its_workflow_to_run_it_on_the_activity_queue() -> None:
    """ScheduleOnce as the SDK runs it as a local activity: a turn that gets no local slot
    fails with RUN_ON_QUEUE (not retried locally), so the workflow runs it on the queue at
    its key at once (workflows.placement._execute). The hub is never reached."""
    import dataclasses

    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    from activities.plumbing import ActivitySettings
    from activities.turn import ScheduleOnce
    from workflows import failures
    from workflows.execution import failed_for_good, no_local_slot
    from workflows.models import TurnRequest

    slots = LocalSlots(slots=1, waiting=0)
    turn = ScheduleOnce(None, ActivitySettings(local_slots=slots))  # type: ignore[arg-type]
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, is_local=True)
    request = TurnRequest(placement="web", cycle=1, priority_key=2)
    assert request.order() == (2, 0)
    with slots.slot((3, 0)), pytest.raises(ApplicationError) as raised:
        env.run(turn.schedule_once, request)
    assert raised.value.type == failures.RUN_ON_QUEUE
    assert raised.value.non_retryable
    assert "no local slot" in str(raised.value)
    # The workflow runs that one turn on the queue, and its next turns where advised: a busy
    # worker is no lasting cause (a hub outage is: QUEUE_TURNS_AFTER_FALLBACK).
    assert no_local_slot(raised.value) and not failed_for_good(raised.value)
    outage = ApplicationError("the hub is down", type=failures.RUN_ON_QUEUE, non_retryable=True)
    assert not no_local_slot(outage) and not failed_for_good(outage)


def test_a_local_cleanup_takes_a_local_slot_like_a_turn() -> None:
    """A placement's cleanup run as a local activity waits for a local slot at its turn's key,
    first within it, and is shed to the activity queue like a turn: it neither runs beside
    `slots` turns nor jumps the SDK's line ahead of them. The hub is never reached."""
    import dataclasses

    from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
    from temporalio.testing import ActivityEnvironment

    from activities.cleanup import CleanupPlacement
    from activities.plumbing import ActivitySettings
    from workflows import failures
    from workflows.execution import no_local_slot
    from workflows.models import CleanupRequest

    slots = LocalSlots(slots=1, waiting=0)
    cleanup = CleanupPlacement(None, ActivitySettings(local_slots=slots))  # type: ignore[arg-type]
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, is_local=True)
    request = CleanupRequest(placement="web", priority_key=2)
    assert request.order() == (2, 0) and CleanupRequest(placement="web").order() == (3, 0)
    with slots.slot((3, 0)), pytest.raises(ApplicationError) as raised:
        env.run(cleanup.cleanup_placement, request)
    assert raised.value.type == failures.RUN_ON_QUEUE and no_local_slot(raised.value)
    assert "the cleanup runs on the activity queue" in str(raised.value)
    # Expected under load, not a failure: the SDK logs it at DEBUG, without a traceback (a
    # burst sheds hundreds), and counts it in no failure metric.
    assert raised.value.category == ApplicationErrorCategory.BENIGN


def _beside_processes() -> LocalSlots:
    """The workflow worker's room beside activity processes (workers.worker.local_slots), with
    a bounded wait long enough that no turn is shed for time on a busy machine."""
    from workers.worker import local_slots

    shape = local_slots(16, activities=False)
    return LocalSlots(
        slots=shape.slots, waiting=shape.waiting, max_wait_s=WAIT_S, better_only=shape.better_only
    )


def test_beside_processes_a_new_placement_waits_for_a_slot_edits_hold() -> None:
    """Issue 35: under `run --processes N` the local slots are taken by edits (unsatisfied, but
    not new). An edit behind them runs on the activity queue at once; a new placement's first
    turn waits in the room and gets the next free slot, and takes the place of a worse waiting
    turn when the room is full: it waits about a turn, not behind every edit."""
    slots = _beside_processes()
    turns = _Turns(slots)
    with slots.slot((3, 1)):  # two edits run
        with slots.slot((3, 1)):
            for index in range(3):
                turns.start(f"edit-{index}", (3, 1))
            assert turns.shed == ["edit-0", "edit-1", "edit-2"]
            assert slots.waiting_now == 0
            turns.start("short", (3, 0))  # as good as new: better than the edits running
            turns.start("new", (3, 0))
            turns.start("urgent", (2, 0))  # the room is full: the worst waiting one goes
            until(lambda: turns.shed[3:] == ["new"], what="new made room for urgent")
        # One slot free: urgent runs in it, then hands it to short.
        until(lambda: len(turns.ran) == 2, what="both waiting turns ran in the one free slot")
        assert turns.ran == ["urgent", "short"]
    turns.finish()


def test_beside_processes_a_burst_of_equal_first_turns_spills_onto_the_queue() -> None:
    """What the room must not undo (issue 35, cause 3): a burst's equal first turns never wait
    for the workflow worker's slots; they all run on the activity queue."""
    slots = _beside_processes()
    turns = _Turns(slots)
    with slots.slot((3, 0)), slots.slot((3, 0)):
        for index in range(10):
            turns.start(f"first-{index}", (3, 0))
        assert slots.waiting_now == 0
        assert turns.shed == [f"first-{index}" for index in range(10)]
    turns.finish()
    assert turns.ran == []
