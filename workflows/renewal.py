"""Retiring the workflow's patches (docs/operations.md, "Retiring patches").

A `workflow.patched` branch keeps the code of before the patch for runs whose history was
written without it; it can go only once no such run is left. Placement workflows run for as long
as their placements exist, and a quiet one may never reach its run budget's continue-as-new, so
"no such run is left" has to be made true, not waited for:

- Each run says which patch generation the code that began it had: at its first workflow task
  it sets the search attribute FleetPatchGeneration to PATCH_GENERATION (`generation_update`;
  behind GENERATION_PATCH, so histories written before it replay as they were). A run begun by a
  worker from before generations has none; a continue-as-new carries its run's attributes, and
  the next run sets its own if they differ.
- The reconcile asks at most RENEWALS_PER_PASS running placement workflows of an older
  generation per pass (`stale_runs_query`) to renew: the signal `renew_run`. The run notes it
  (`Renewal`) and continues as new at its next idle point, carrying its state exactly as its run
  budget's continue-as-new does; a turn in flight, or a requeue-after timer, ends first.

PATCH_GENERATION goes up by one with every patch id added to the workflow, and PATCHES says
which generation brought each id. A patch of generation G may be deprecated
(`workflow.deprecate_patch`) once no running placement workflow has a generation below G; the
deprecating release bumps the generation too (to D, an entry that brings no id), and the id
goes once none is below D (docs/operations.md says why). Pure: the workflow makes the calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from temporalio.common import SearchAttributeUpdate, TypedSearchAttributes

from workflows import names
from workflows.models import RenewRequest

__all__ = [
    "GENERATION_PATCH",
    "PATCHES",
    "PATCH_GENERATION",
    "RENEWALS_PER_PASS",
    "RENEWAL_MIN_AGE",
    "Renewal",
    "generation_update",
    "record_generation",
    "stale_runs_query",
]

# Whether a run records its generation (the search-attribute upsert at its first task).
GENERATION_PATCH: Final = "patch-generation"
# The patch generation of this code: bump it, and add the new id to PATCHES, with every
# `workflow.patched` id the placement workflow gains (tests/unit check that every one is here).
PATCH_GENERATION: Final = 3
# The patch ids each generation brought (none for one that only deprecates). Generation 1 is
# every id there was when generations began: a run without FleetPatchGeneration may have been
# begun before any of them.
PATCHES: Final[dict[int, tuple[str, ...]]] = {
    1: (
        "priority",
        "turn-execution-auto",
        "turn-on-queue",  # one id per turn: turn-on-queue-<n>
        "schedule-deadline",
        "schedule-deadline-busy",
        "schedule-deadline-report-interval",
        GENERATION_PATCH,
    ),
    2: (
        "clusters-version",
        "schedule-deadline-report-alone",
        "turn-shed-alone",
        "patches-at-start",
    ),
    3: ("requeue-moot", "patches-at-start-2"),
}
# How many runs one reconcile pass asks to renew: renewals are never urgent, and each is a
# continue-as-new (a new run, its first workflow task). At the reconcile's 5 minutes, 10,000
# runs of an older generation are renewed within about 9 hours.
RENEWALS_PER_PASS: Final = 100
# A run without a generation is one begun before generations, unless it is so young that its
# first workflow task may not have run yet: only runs older than this are asked.
RENEWAL_MIN_AGE: Final = timedelta(minutes=10)


def generation_update(found: TypedSearchAttributes) -> list[SearchAttributeUpdate[Any]]:
    """What a run sets at its start: FleetPatchGeneration, unless its attributes (carried by a
    continue-as-new) already say this code's generation."""
    if found.get(names.SA_PATCH_GENERATION) == PATCH_GENERATION:
        return []
    return [names.SA_PATCH_GENERATION.value_set(PATCH_GENERATION)]


def record_generation(
    found: TypedSearchAttributes,
    patched: Callable[[str], bool],
    upsert: Callable[[list[SearchAttributeUpdate[Any]]], None],
) -> None:
    """A run's start: FleetPatchGeneration set (`generation_update`) where it must be, behind
    GENERATION_PATCH, asked only then (`patched`, `upsert`: the workflow's own calls)."""
    generation = generation_update(found)
    if generation and patched(GENERATION_PATCH):
        upsert(generation)


def stale_runs_query(task_queue: str, now: datetime) -> str:
    """The visibility query of the running placement workflows on `task_queue` that an older
    generation began (`temporal workflow count --query ...` says how many are left)."""
    cutoff = (now - RENEWAL_MIN_AGE).strftime("%Y-%m-%dT%H:%M:%SZ")
    generation = names.SA_PATCH_GENERATION.name
    return (
        f"{names.PLACEMENT_WORKFLOWS_QUERY} AND ExecutionStatus = 'Running' "
        f"AND TaskQueue = '{task_queue}' AND ({generation} < {PATCH_GENERATION} "
        f"OR ({generation} IS NULL AND StartTime < '{cutoff}'))"
    )


@dataclass
class Renewal:
    """Whether this run was asked to renew (`renew_run`), and why: the loop continues as new
    at its next idle point, as when its budget is spent."""

    reason: str | None = None

    def ask(self, request: RenewRequest | None) -> None:
        reason = request.reason if request is not None and request.reason else "asked"
        self.reason = self.reason or reason

    @property
    def asked(self) -> bool:
        return self.reason is not None
