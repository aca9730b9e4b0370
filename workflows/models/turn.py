"""Inputs and outputs of a placement's activities (its turn and its cleanup): small, stable,
readable in the Temporal UI.

They are recorded in every placement's event history, so they name placements and snapshots
rather than carry objects, and a cycle's report stays compact at 5,000 member clusters: its
explanation of every cluster's fate is packed (scheduler.explain.packing), or left out when the
workflow already holds the same one."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import Field, model_validator

from scheduler import Explanation, Outcome
from scheduler.explain.packing import pack_explanation, unpack_explanation
from scheduler.framework.queue_sort import DEFAULT_PRIORITY_KEY
from workflows.models.wire import CompactWire

__all__ = [
    "INLINE_EXPLANATION_BYTES",
    "CleanupReport",
    "CleanupRequest",
    "CycleReport",
    "DeadlineMiss",
    "MoveRequest",
    "PrepareResult",
    "TurnRequest",
    "TurnResult",
    "WriteCounts",
]


PreparePhase = Literal[
    "gone",  # the placement does not exist: nothing to do, ever
    "deleting",  # deletionTimestamp set: clean up, then finish
    "no_latest_snapshot",  # wait for the snapshot watcher (kubefleet-rules 3.2 step 4)
    "multiple_latest_snapshots",  # invariant broken: wait for an event
    "ready",  # schedule `snapshot`
]


class PrepareResult(CompactWire):
    phase: PreparePhase
    message: str = ""
    snapshot: str | None = None
    placement_type: str | None = None
    placement_generation: int | None = None
    snapshot_action: str | None = None  # what the snapshotter did, when it runs in this worker
    # The placement's schedule-deadline annotation, when it has one, and when its Scheduled
    # condition says it became not fully scheduled (the condition's lastTransitionTime while it
    # is not True, its creation while it has none; None when True): what a workflow that has
    # no clock yet starts it from (workflows.deadline). The annotation as carried, never raw
    # (scheduler.opt_in.deadline.carried_deadline): the deadline as written back, or a stand-in with
    # the problem beside it. Results recorded before issue 33 hold the raw value (and no
    # problem): the workflow reads those with carried_deadline too.
    schedule_deadline: str | None = None
    schedule_deadline_problem: str | None = None
    unscheduled_since: datetime | None = None


class WriteCounts(CompactWire):
    created: int = 0
    adopted: int = 0  # creates that found an earlier attempt's binding (not a write)
    patched: int = 0
    unscheduled: int = 0
    finalizers_removed: int = 0
    status_written: bool = False
    placement_condition_written: bool = False
    deadline_event: bool = False  # a ScheduleDeadlineExceeded Event was created
    decisions_written: int = 0  # PlacementDecision slices created, replaced or deleted
    nominated: int = 0  # clusters nominated for this placement's preemption (docs/priority.md)
    preempted: int = 0  # bindings of this placement unscheduled for a preemptor

    @property
    def bindings(self) -> int:
        return self.created + self.patched + self.unscheduled + self.finalizers_removed


# An explanation whose JSON is at most this long is recorded as it is, readable in the Temporal
# UI; a larger one (a fleet of more than a few dozen clusters) is recorded packed.
INLINE_EXPLANATION_BYTES: Final = 4096


class CycleReport(CompactWire):
    """What one scheduling cycle read, decided and wrote: the `status` query and `explain` show it.

    Every cluster's fate is in the scheduler's `Explanation`: recorded as it is when small
    (`explanation`), packed otherwise (`explanation_packed`, scheduler.explain.packing: about 11 KB
    at 5,000 clusters with patterned names instead of over 200 KB), and left out when it is the
    same as the one the workflow already holds (`explanation_digest` says which it is). The
    workflow's `status` query and continue-as-new input carry reports without it (`slim`)."""

    summary: str = ""
    cycle: int
    placement: str
    namespace: str | None = None  # a ResourcePlacement's
    snapshot: str
    outcome: Outcome
    evaluated: bool = False
    """The cycle judged clusters (filtered, scored or checked targets); a PickN cycle that only
    keeps its N bindings did not, and the reasons for its picks are in an earlier cycle."""
    explanation: Explanation | None = None
    explanation_packed: str | None = None
    explanation_digest: str | None = None
    writes: WriteCounts = Field(default_factory=WriteCounts)
    requeue: bool = False
    requeue_after_seconds: float | None = None
    error: str | None = None
    clusters_seen: int = 0
    clusters_version: int | None = None
    """The largest content version among the clusters the cycle read (a list's: the largest
    resourceVersion; scheduler.requeue.decided)."""
    bindings_seen: int = 0
    duration_ms: float = 0.0

    @property
    def placement_type(self) -> str:
        return self.outcome.placement_type

    @property
    def fulfilled(self) -> bool:
        return self.outcome.fulfilled

    @property
    def has_explanation(self) -> bool:
        return self.explanation is not None or self.explanation_packed is not None

    @property
    def held_digest(self) -> str | None:
        """The digest of the explanation this report holds (None: it holds none), which a
        turn sends as TurnRequest.known_explanation."""
        return self.explanation_digest if self.has_explanation else None

    def full_explanation(self) -> Explanation | None:
        """The explanation, unpacked if it was recorded packed (None if this report has none)."""
        if self.explanation is not None:
            return self.explanation
        if self.explanation_packed is not None:
            return unpack_explanation(self.explanation_packed)
        return None

    def slim(self) -> CycleReport:
        """This report without its explanation: what status answers and runs carry over."""
        if not self.has_explanation:
            return self
        return self.model_copy(update={"explanation": None, "explanation_packed": None})

    def recording(self, explanation: Explanation, known_digest: str | None) -> CycleReport:
        """This report with `explanation` recorded: as it is when small, packed otherwise, and
        only its digest when that is `known_digest` (the workflow holds the same fates)."""
        encoded = explanation.model_dump_json().encode()
        digest = hashlib.sha256(encoded).hexdigest()[:32]
        update: dict[str, object] = {
            "evaluated": explanation.evaluated,
            "explanation_digest": digest,
        }
        if digest != known_digest:
            if len(encoded) <= INLINE_EXPLANATION_BYTES:
                update["explanation"] = explanation
            else:
                update["explanation_packed"] = pack_explanation(explanation)
        return self.model_copy(update=update)

    def filled_from(self, other: CycleReport | None) -> CycleReport:
        """This report with `other`'s explanation when it recorded only the digest of the same
        fates (`other` holds them); else this report as it is."""
        same = (
            other is not None
            and not self.has_explanation
            and other.has_explanation
            and self.explanation_digest is not None
            and self.explanation_digest == other.explanation_digest
        )
        return self.with_explanation_of(other) if same and other is not None else self

    def with_explanation_of(self, other: CycleReport) -> CycleReport:
        """This report holding `other`'s explanation (the same fates, recorded earlier)."""
        return self.model_copy(
            update={
                "explanation": other.explanation,
                "explanation_packed": other.explanation_packed,
                "explanation_digest": other.explanation_digest,
            }
        )


class MoveRequest(CompactWire):
    """A rebalance move proposed for the placement (activities.moves): its binding from
    `source` to `target`, and why."""

    binding: str
    source: str
    target: str
    reason: str = ""


class DeadlineMiss(CompactWire):
    """The placement is past its scheduling deadline (docs/operations.md, "Scheduling
    deadlines"): a turn that still finds it not fully scheduled reports it, once per miss."""

    deadline: str  # the annotation as carried (scheduler.opt_in.deadline.carried_deadline)
    seconds: int
    since: datetime  # when it became not fully scheduled
    misses: int  # deadline periods passed since: the Event's identity with `since`


class DeadlineReport(CompactWire):
    """A miss reported alone, without a cycle (`report_deadline_miss`, workflows.deadline): the
    workflow was idle, so the last cycle's decision stands and `missing` is what it said."""

    placement: str
    miss: DeadlineMiss
    missing: str = ""
    namespace: str | None = None  # a ResourcePlacement's; None for a ClusterResourcePlacement


class DeadlineReported(CompactWire):
    """What a miss reported alone wrote. Not `reported`: the placement is gone, being deleted,
    fully scheduled or asks for another deadline, and a turn decides (as before the report)."""

    summary: str = ""
    reported: bool = False
    event_written: bool = False
    condition_written: bool = False


class TurnRequest(CompactWire):
    """One loop turn (`schedule_once`): prepare, then the cycle numbered `cycle` if ready.

    `known_explanation` is the digest of the explanation the workflow holds: a cycle that
    decides the same fates leaves its explanation out of the result (and so out of history)."""

    placement: str
    cycle: int
    fresh: bool = False
    reason: str = ""
    known_explanation: str | None = None
    namespace: str | None = None  # a ResourcePlacement's; None for a ClusterResourcePlacement
    moves: list[MoveRequest] = Field(default_factory=list)
    """Rebalance moves to make before the cycle (docs/capacity.md); a worker from before them
    ignores the field, and the next rebalance proposes them again."""
    deadline: DeadlineMiss | None = None
    """Set while the placement is past its scheduling deadline (workflows.deadline)."""
    priority_key: int | None = None
    """The turn's priority key (None: Temporal's default, 3) and its order within the key
    (None: first): the order in which a worker's local slots take local turns
    (activities.local_slots). A worker from before them takes turns in arrival order."""
    within_key: int | None = None

    def order(self) -> tuple[int, int]:
        """Where the turn goes in a worker's local slots: by key, then within it."""
        key = DEFAULT_PRIORITY_KEY if self.priority_key is None else self.priority_key
        return (key, self.within_key or 0)


class TurnResult(CompactWire):
    """What one turn found and, when it ran one, what its cycle decided.

    It is recorded in the history every turn, so it says things once: with a cycle, `summary`
    is its report's and is written there only (`report` comes first, so the Temporal UI's view
    of the result starts with the line that says what the turn did); a reader puts it back. A
    turn without a cycle ("no cycle: ...") or with moves (the summary names them) writes its
    own. Workflows of every version read the report's summary, never this one."""

    summary: str = ""
    report: CycleReport | None = None  # set when prepared.phase == "ready"
    prepared: PrepareResult
    moves: list[str] = Field(default_factory=list)
    """What became of each rebalance move the turn carried: moved (with its reason) or refused
    (with why), one line each."""
    next_local: bool | None = None
    """The worker's advice for the placement's next turn (activities.advice): True to run it as
    a local activity, False on the activity queue, None from workers before the advice. Made
    where the turn ran, from what that process measures; recorded here, so a replay follows it."""

    @model_validator(mode="before")
    @classmethod
    def _summary_of_report(cls, data: Any) -> Any:
        """A result written without its summary has its report's."""
        if not isinstance(data, dict) or data.get("summary"):
            return data
        report = data.get("report")
        summary = report.summary if isinstance(report, CycleReport) else None
        if isinstance(report, dict):
            summary = report.get("summary")
        return {**data, "summary": summary} if summary else data

    def _said_once(self, data: dict[str, Any]) -> dict[str, Any]:
        if self.report is not None and self.summary == self.report.summary:
            data.pop("summary", None)
        return data

    @classmethod
    def of(
        cls,
        prepared: PrepareResult,
        report: CycleReport | None = None,
        moves: list[str] | None = None,
    ) -> TurnResult:
        summary = report.summary if report is not None else f"no cycle: {prepared.message}"
        if moves:
            summary = f"{summary}; {len(moves)} move(s): {'; '.join(moves)}"
        return cls(summary=summary, prepared=prepared, report=report, moves=moves or [])


class CleanupRequest(CompactWire):
    placement: str
    namespace: str | None = None  # a ResourcePlacement's; None for a ClusterResourcePlacement
    # The priority key of the placement's last turn (None: Temporal's default, 3): where a local
    # cleanup waits in the worker's local slots (activities.local_slots), first within the key.
    priority_key: int | None = None

    def order(self) -> tuple[int, int]:
        return (DEFAULT_PRIORITY_KEY if self.priority_key is None else self.priority_key, 0)


class CleanupReport(CompactWire):
    bindings_deleted: int = 0
    snapshots_deleted: int = 0
    finalizer_removed: bool = False
    summary: str = ""
