"""What starters and signallers say about local cycles, and the slots a workflow worker gets
for them."""

from __future__ import annotations

import pytest

from workers.worker import WORKFLOW_WORKER_ACTIVITY_SLOTS, activity_threads
from workflows.starts import local_cycles_for


@pytest.mark.parametrize(
    ("clusters", "up_to", "expected"),
    [
        (0, 0, False),  # off: placements told otherwise go back to the activity queue
        (5000, 0, False),
        (0, 200, True),  # an empty fleet is small
        (200, 200, True),
        (201, 200, False),
    ],
)
def test_local_cycles_up_to_a_fleet_size(clusters: int, up_to: int, expected: bool) -> None:
    assert local_cycles_for(clusters, up_to) is expected


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        local_cycles_for(3, -1)


def test_local_cycles_give_the_workflow_worker_a_thread_per_slot() -> None:
    off = activity_threads(16, workflows=True, activities=False)
    on = activity_threads(16, workflows=True, activities=False, local_cycles=True)
    assert off == 2 * WORKFLOW_WORKER_ACTIVITY_SLOTS
    assert on == WORKFLOW_WORKER_ACTIVITY_SLOTS + 16
    # An activity-only process runs no local activities, whatever the setting.
    assert activity_threads(16, workflows=False, activities=True, local_cycles=True) == 16
