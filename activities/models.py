"""Inputs and outputs of the activities: small, stable, readable in the Temporal UI.

They are recorded in every placement's event history, so they name placements and snapshots
rather than carry objects, and a cycle's report stays compact at 5,000 member clusters: picked
clusters are listed with their scores, filtered clusters are grouped by (plugin, reason)."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from scheduler import Explanation, Outcome

__all__ = [
    "CLEANUP_PLACEMENT",
    "SCHEDULE_ONCE",
    "ActivityModel",
    "CleanupReport",
    "CleanupRequest",
    "CycleReport",
    "PrepareResult",
    "TurnRequest",
    "TurnResult",
    "WriteCounts",
]


# Registered activity type names: stored in every placement's history, so they are wire
# contracts, never derived from a Python method name (workflows.names re-exports them).
SCHEDULE_ONCE: Final = "schedule_once"
CLEANUP_PLACEMENT: Final = "cleanup_placement"


class ActivityModel(BaseModel):
    """Base of everything that crosses Temporal (activity inputs and results, workflow input,
    signals, query answers). Unknown fields are ignored: in a rolling upgrade an older worker
    reads what a newer one wrote, so fields are only ever added, with defaults."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )


PreparePhase = Literal[
    "gone",  # the placement does not exist: nothing to do, ever
    "deleting",  # deletionTimestamp set: clean up, then finish
    "no_latest_snapshot",  # wait for the snapshot watcher (kubefleet-rules 3.2 step 4)
    "multiple_latest_snapshots",  # invariant broken: wait for an event
    "ready",  # schedule `snapshot`
]


class PrepareResult(ActivityModel):
    phase: PreparePhase
    message: str = ""
    snapshot: str | None = None
    placement_type: str | None = None
    placement_generation: int | None = None
    snapshot_action: str | None = None  # what the snapshotter did, when it runs in this worker


class WriteCounts(ActivityModel):
    created: int = 0
    adopted: int = 0  # creates that found an earlier attempt's binding (not a write)
    patched: int = 0
    unscheduled: int = 0
    finalizers_removed: int = 0
    status_written: bool = False
    placement_condition_written: bool = False

    @property
    def bindings(self) -> int:
        return self.created + self.patched + self.unscheduled + self.finalizers_removed


class CycleReport(ActivityModel):
    """What one scheduling cycle read, decided and wrote: the `status` query and `explain` show it.

    `explanation` is the scheduler's own compact account of every cluster's fate (filtered
    clusters grouped by plugin and reason), about 80 KB at 5,000 clusters."""

    cycle: int
    placement: str
    snapshot: str
    outcome: Outcome
    explanation: Explanation | None = None
    writes: WriteCounts = Field(default_factory=WriteCounts)
    requeue: bool = False
    requeue_after_seconds: float | None = None
    error: str | None = None
    clusters_seen: int = 0
    bindings_seen: int = 0
    duration_ms: float = 0.0
    summary: str = ""

    @property
    def placement_type(self) -> str:
        return self.outcome.placement_type

    @property
    def fulfilled(self) -> bool:
        return self.outcome.fulfilled


class TurnRequest(ActivityModel):
    """One loop turn (`schedule_once`): prepare, then the cycle numbered `cycle` if ready."""

    placement: str
    cycle: int
    fresh: bool = False
    reason: str = ""


class TurnResult(ActivityModel):
    prepared: PrepareResult
    report: CycleReport | None = None  # set when prepared.phase == "ready"


class CleanupRequest(ActivityModel):
    placement: str


class CleanupReport(ActivityModel):
    bindings_deleted: int = 0
    snapshots_deleted: int = 0
    finalizer_removed: bool = False
    summary: str = ""
