"""What starters and signallers say about where turns run, and the slots a workflow worker
gets for local ones."""

from __future__ import annotations

from typing import Any, cast

import pytest
from temporalio import workflow
from temporalio.worker import PatchActivationInput

from workers.worker import (
    LOCAL_SLOTS_BESIDE_PROCESSES,
    WORKFLOW_WORKER_ACTIVITY_SLOTS,
    activity_threads,
    local_activity_slots,
    local_slots,
    turn_patches,
)
from workflows.execution import QUEUE_TURN_PATCH
from workflows.starts import turn_execution_for


@pytest.mark.parametrize(
    ("clusters", "up_to", "expected"),
    [
        (0, None, "auto"),  # the default: the workers choose, whatever the fleet
        (5000, None, "auto"),
        (None, None, "auto"),  # ... even before the fleet's size is known
        (0, 0, "queue"),  # forced: 0 keeps every turn on the activity queue
        (5000, 0, "queue"),
        (0, 200, "local"),  # an empty fleet is small
        (200, 200, "local"),
        (201, 200, "queue"),
        (None, 200, None),  # forced by size, size unknown: no word
    ],
)
def test_the_word_on_where_turns_run(
    clusters: int | None, up_to: int | None, expected: str | None
) -> None:
    assert turn_execution_for(clusters, up_to) == expected


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        turn_execution_for(3, -1)


def test_beside_activity_processes_the_workflow_worker_keeps_few_turns_and_two_wait() -> None:
    """Where turns run (docs/operations.md): with the activity worker in the same process every
    slot is local and as many turns wait; beside other processes two turns run local, two more
    wait a short while, and the next equal turn is shed to the activity queue at once (a burst
    spreads)."""
    alone = local_slots(16, activities=True)
    assert (alone.slots, alone.waiting) == (16, 16)
    beside = local_slots(16, activities=False)
    assert (beside.slots, beside.waiting) == (LOCAL_SLOTS_BESIDE_PROCESSES, 2) == (2, 2)
    assert beside.max_wait_s <= 1.0 and beside.better_only and not alone.better_only
    assert (local_slots(1, activities=False).slots, local_slots(1, activities=False).waiting) == (
        1,
        1,
    )


def test_a_workflow_worker_has_a_thread_per_local_slot() -> None:
    """16 turns run local at once; 16 more wait for them, best key first, and 16 more may
    arrive to be shed to the activity queue (activities.local_slots): each holds a thread."""
    assert local_activity_slots(16) == 48
    assert activity_threads(16, workflows=True, activities=False) == (
        WORKFLOW_WORKER_ACTIVITY_SLOTS + 48
    )
    assert activity_threads(16, workflows=True, activities=True) == (
        WORKFLOW_WORKER_ACTIVITY_SLOTS + 48 + 16
    )
    # An activity-only process runs no local activities.
    assert activity_threads(16, workflows=False, activities=True) == 16


def test_a_workflow_worker_that_caches_nothing_activates_the_queue_turn_patches() -> None:
    """The patch activation callback build_worker and split_workers give their workflow worker:
    the queue-turn patches on only with `max_cached_workflows=0`; any other patch as the
    caller's own callback says (taken out of the options), else on."""
    info = cast(workflow.Info, None)  # the callback reads only the patch's id

    def ask(options: dict[str, Any], patch_id: str) -> bool:
        return turn_patches(options)(PatchActivationInput(workflow_info=info, patch_id=patch_id))

    queue_turn = f"{QUEUE_TURN_PATCH}-1"
    assert ask({"max_cached_workflows": 0}, queue_turn)
    assert not ask({}, queue_turn) and not ask({"max_cached_workflows": 10}, queue_turn)
    assert ask({}, "priority") and ask({"max_cached_workflows": 0}, "priority")
    older = {"patch_activation_callback": lambda found: found.patch_id != "priority"}
    assert not ask(dict(older), "priority") and not ask(dict(older), queue_turn)
    options = {"max_cached_workflows": 0, **older}
    assert ask(options, queue_turn) and "patch_activation_callback" not in options
