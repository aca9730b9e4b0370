"""The placement workflow's own patch ids, and how a run answers them (`RunPatches`): the
deadline's are in workflows.deadline, the turn execution's in workflows.execution, the
generation's in workflows.renewal (which lists every id by generation)."""

from __future__ import annotations

from typing import Final

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.deadline import (
        DEADLINE_ALONE_PATCH,
        DEADLINE_BUSY_PATCH,
        DEADLINE_FLOOR_PATCH,
        DEADLINE_PATCH,
    )

__all__ = [
    "AT_START",
    "AT_START_2_PATCH",
    "AT_START_GROUPS",
    "AT_START_PATCH",
    "CLUSTERS_VERSION_PATCH",
    "MOOT_REQUEUE_PATCH",
    "PRIORITY_PATCH",
    "RunPatches",
]

# The priority commands (search-attribute upserts, priority_changed counting toward
# continue-as-new) are new: a run begun by a worker from before them replays without them.
# Asked the first time a run would issue one (the SDK keeps the answer for the run), so runs
# that never need one record no marker.
PRIORITY_PATCH: Final = "priority"
# FleetClustersVersion after a cycle (the reconcile reads it, scheduler.requeue.decided): a new
# upsert, asked as the priority one is.
CLUSTERS_VERSION_PATCH: Final = "clusters-version"
# A run that records this marker at its first task answers the patches of AT_START yes without
# asking them again. Each of those is asked where the turn's result is read, which for a local
# turn is where the local activity ran. The SDK may complete that task with the local marker
# before the workflow has read the result, and start the next one with no event of its own (a
# race: seen in about three runs of four): a patch marker recorded in that next task does not
# replay ("[TMPRL1100] ... no corresponding change command"; in the local marker's own task, or
# in a task an event began, it does), so such a run failed every replay after, stuck. Asked at
# the first task, before any activity; a run begun before it answers no and asks each patch
# where it always did, as its history has them.
AT_START_PATCH: Final = "patches-at-start"
AT_START: frozenset[str] = frozenset(
    {
        CLUSTERS_VERSION_PATCH,
        DEADLINE_PATCH,
        DEADLINE_BUSY_PATCH,
        DEADLINE_FLOOR_PATCH,
        DEADLINE_ALONE_PATCH,
    }
)


# A requeue whose `unless_read` a completed cycle has met runs no turn (Inbox.moot). Only ever
# answered at the start, by the second at-start patch (`RunPatches.from_start`): a run begun
# before it runs a turn for every requeue, as its history has them, until it is renewed.
MOOT_REQUEUE_PATCH: Final = "requeue-moot"
AT_START_2_PATCH: Final = "patches-at-start-2"
# Each at-start patch, asked in this order at a run's first task, and the patches it answers.
AT_START_GROUPS: Final[tuple[tuple[str, frozenset[str]], ...]] = (
    (AT_START_PATCH, AT_START),
    (AT_START_2_PATCH, frozenset({MOOT_REQUEUE_PATCH})),
)


class RunPatches:
    """`workflow.patched` for one run: `begin` asks the at-start patches (AT_START_GROUPS) at
    the run's first task; then the patches of each one the run recorded are answered yes
    without a marker of their own."""

    def __init__(self) -> None:
        self.answered: frozenset[str] = frozenset()

    def begin(self) -> None:
        for patch_id, answers in AT_START_GROUPS:
            if workflow.patched(patch_id):
                self.answered |= answers

    def __call__(self, patch_id: str) -> bool:
        return patch_id in self.answered or workflow.patched(patch_id)

    def from_start(self, patch_id: str) -> bool:
        """Whether the run answered `patch_id` at its start, never asking it later: for a patch
        a run begun before it goes without (no marker can then land where it would not
        replay, whatever task handles it)."""
        return patch_id in self.answered
