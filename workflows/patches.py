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

__all__ = ["AT_START", "AT_START_PATCH", "CLUSTERS_VERSION_PATCH", "PRIORITY_PATCH", "RunPatches"]

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


class RunPatches:
    """`workflow.patched` for one run: `begin` asks AT_START_PATCH at the run's first task;
    then AT_START's patches are answered yes without a marker where the run recorded it."""

    def __init__(self) -> None:
        self.at_start = False

    def begin(self) -> None:
        self.at_start = workflow.patched(AT_START_PATCH)

    def __call__(self, patch_id: str) -> bool:
        return (self.at_start and patch_id in AT_START) or workflow.patched(patch_id)
