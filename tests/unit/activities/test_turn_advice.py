"""The worker's advice on where a placement's next turn runs (activities.advice), and how the
workflow follows it (workflows.execution.TurnExecution): pure, no Temporal."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from activities.advice import LOCAL_FLEET_LIMIT, LOCAL_TURN_BUDGET_S, TurnAdvisor
from tests.support.waits import WAIT_S
from workflows.execution import (
    AUTO_LOCAL_PATCH,
    QUEUE_TURN_PATCH,
    QUEUE_TURNS_AFTER_FALLBACK,
    TurnExecution,
    activates_patch,
)

FAST = LOCAL_TURN_BUDGET_S / 10
SLOW = LOCAL_TURN_BUDGET_S * 10


def test_short_turns_in_a_small_fleet_are_advised_local() -> None:
    advisor = TurnAdvisor(local_slots=4, fleet_size=lambda: 100)
    assert advisor.advise(FAST, local=True)
    assert advisor.advise(FAST, local=False)


def test_a_fleet_past_the_limit_is_advised_the_queue_however_short_its_turns() -> None:
    size = {"now": LOCAL_FLEET_LIMIT}
    advisor = TurnAdvisor(local_slots=4, fleet_size=lambda: size["now"])
    assert advisor.advise(FAST, local=True)
    size["now"] = LOCAL_FLEET_LIMIT + 1
    assert not advisor.advise(FAST, local=True)


def test_slow_turns_move_to_the_queue_and_come_back_as_they_speed_up() -> None:
    """A moving average: one slow turn among fast ones does not flip the advice; a run of slow
    ones does, and fast ones bring it back."""
    advisor = TurnAdvisor(local_slots=4)
    for _ in range(10):
        assert advisor.advise(FAST, local=True)
    assert advisor.advise(LOCAL_TURN_BUDGET_S * 2, local=True)  # one slow turn: still local
    advice = [advisor.advise(SLOW, local=True) for _ in range(5)]
    assert advice[-1] is False
    back = [advisor.advise(FAST, local=False) for _ in range(30)]
    assert back[-1] is True
    assert advisor.average_turn_s is not None and advisor.average_turn_s < LOCAL_TURN_BUDGET_S


def test_when_every_local_slot_is_taken_the_next_turn_goes_to_the_queue() -> None:
    advisor = TurnAdvisor(local_slots=2)
    with advisor.local_turn():
        assert advisor.advise(FAST, local=True)  # one of two taken (by the asking turn)
        with advisor.local_turn():
            assert not advisor.advise(FAST, local=True)  # both taken
            # A turn on the queue does not count the workflow worker's slots.
            assert advisor.advise(FAST, local=False)
    with advisor.local_turn():
        assert advisor.advise(FAST, local=True)


def test_a_single_slot_is_never_crowded_by_the_turn_holding_it() -> None:
    advisor = TurnAdvisor(local_slots=1)
    with advisor.local_turn():
        assert advisor.advise(FAST, local=True)


def test_slots_are_counted_across_threads() -> None:
    advisor = TurnAdvisor(local_slots=64)
    entered, release = threading.Barrier(9), threading.Event()

    def turn() -> None:
        with advisor.local_turn():
            entered.wait(timeout=WAIT_S)
            assert release.wait(timeout=WAIT_S), "the test never released the turns"

    threads = [threading.Thread(target=turn) for _ in range(8)]
    for t in threads:
        t.start()
    entered.wait(timeout=WAIT_S)  # BrokenBarrierError if the eight turns do not all enter
    assert advisor._local_now == 8
    release.set()
    for t in threads:
        t.join(timeout=WAIT_S)
    assert not any(t.is_alive() for t in threads), "a turn did not end once released"
    assert advisor._local_now == 0


# --- the workflow's side --------------------------------------------------------------------


def never(patch_id: str) -> bool:
    raise AssertionError("the patch is asked only for an automatic local choice")


def caching(patch_id: str) -> bool:
    """workflow.patched on a workflow worker that caches workflows (not replaying)."""
    return activates_patch(patch_id, local_turns=True) is not False


@pytest.mark.parametrize(
    ("mode", "legacy", "expected"),
    [
        (None, None, "auto"),
        ("queue", None, "queue"),
        ("local", False, "local"),  # the mode wins over the old word
        (None, True, "local"),  # a sender from before the mode: True was local
        (None, False, "auto"),  # ... and False its default, off: automatic now
    ],
)
def test_the_word_a_workflow_starts_with(mode, legacy, expected) -> None:
    assert TurnExecution.of(mode, legacy, None).mode == expected


def test_forced_choices_ignore_the_advice_and_ask_no_patch() -> None:
    local, queue = TurnExecution(mode="local"), TurnExecution(mode="queue")
    for execution in (local, queue):
        execution.after_turn(execution.mode != "local", fell_back=False)  # the opposite
    assert local.wants_local(never) and not queue.wants_local(never)


def test_auto_follows_the_latest_advice_through_the_runs_patch() -> None:
    execution = TurnExecution()
    assert execution.wants_local(caching)  # nothing measured: local
    assert not execution.wants_local(lambda _: False)  # a run from before the advice: queue
    execution.after_turn(False, fell_back=False)
    assert not execution.wants_local(never)  # advised the queue: no patch needed
    execution.after_turn(None, fell_back=False)  # no advice: the last one holds
    assert not execution.local
    execution.after_turn(True, fell_back=False)
    assert execution.wants_local(caching)


def test_a_fallback_holds_turns_on_the_queue_for_a_while() -> None:
    execution = TurnExecution()
    execution.after_turn(True, fell_back=True)
    for _ in range(QUEUE_TURNS_AFTER_FALLBACK):
        assert not execution.local
        execution.after_turn(True, fell_back=False)
    assert execution.local


def test_a_signal_without_a_word_keeps_the_choice() -> None:
    execution = TurnExecution(mode="queue")
    execution.heard(None, None)
    assert execution.mode == "queue"
    execution.heard("auto")
    assert execution.mode == "auto"


def test_a_worker_that_caches_no_workflow_advises_the_queue() -> None:
    assert not TurnAdvisor(local_slots=4, local_turns=False).advise(FAST, local=True)


def test_a_worker_that_runs_no_local_turns_sends_each_auto_one_to_the_queue() -> None:
    """The first turn (nothing measured) and a turn another process advised local: the workflow
    asks a patch of its own for each (QUEUE_TURN_PATCH), which only a workflow worker that runs
    no local turns activates; a caching worker leaves it off, and the turns run local."""
    asked: list[str] = []

    def on(local_turns: bool) -> Callable[[str], bool]:
        def patched(patch_id: str) -> bool:  # workflow.patched on a worker, not replaying
            asked.append(patch_id)
            return activates_patch(patch_id, local_turns=local_turns) is not False

        return patched

    execution = TurnExecution()
    assert not execution.wants_local(on(False))  # the first turn
    execution.after_turn(True, fell_back=False)  # another process advised local
    assert not execution.wants_local(on(False))
    assert execution.wants_local(on(True))  # the run moved to a worker that caches
    assert asked == [
        AUTO_LOCAL_PATCH, f"{QUEUE_TURN_PATCH}-1",
        AUTO_LOCAL_PATCH, f"{QUEUE_TURN_PATCH}-2",
        AUTO_LOCAL_PATCH, f"{QUEUE_TURN_PATCH}-3",
    ]  # fmt: skip
    # Forced choices and every other patch are the worker's business no more than before.
    assert TurnExecution(mode="local").wants_local(on(False))
    assert activates_patch(AUTO_LOCAL_PATCH, local_turns=False) is None
    assert activates_patch("priority", local_turns=True) is None
