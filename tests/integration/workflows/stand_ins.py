"""Same-named stand-ins for the placement activities, scripted per placement.

The workflow under test is the real PlacementWorkflow; only its activities are replaced, by
functions registered under the same activity type names (STYLE section 9), so these tests pin
the loop's rules (coalescing, requeue, waiting, cleanup, continue-as-new) without a hub."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.common import Priority
from temporalio.exceptions import ApplicationError

from scheduler import Explanation, Outcome
from tests.support.waits import within
from workflows import failures
from workflows.models import (
    CleanupReport,
    CleanupRequest,
    CycleReport,
    DeadlineReport,
    DeadlineReported,
    PrepareResult,
    TurnRequest,
    TurnResult,
)
from workflows.names import (
    ACTIVITY_CLEANUP_PLACEMENT,
    ACTIVITY_CLEANUP_PLACEMENT_RP,
    ACTIVITY_REPORT_DEADLINE_MISS,
    ACTIVITY_SCHEDULE_ONCE,
    ACTIVITY_SCHEDULE_ONCE_RP,
)


@dataclass
class Script:
    """What the stand-ins answer for one placement, and what they were asked."""

    phases: list[str] = field(default_factory=lambda: ["ready"])  # last one repeats
    deleted: bool = False  # once set, prepare answers "deleting" whatever the phases say
    requeues: list[bool] = field(default_factory=list)  # per cycle; then False
    requeue_after: float | None = None  # for the first cycle only
    failures: list[ApplicationError] = field(default_factory=list)  # raised by cycles, in turn
    gate: asyncio.Event | None = None  # a ready turn's cycle waits on it when set
    prepare_gate: asyncio.Event | None = None  # every turn waits on it first when set
    cleanup_gate: asyncio.Event | None = None  # cleanup_placement waits on it when set
    prepares: int = 0
    cycles: list[TurnRequest] = field(default_factory=list)
    cycle_attempts: int = 0
    cleanups: int = 0
    cleanup_requests: list[CleanupRequest] = field(default_factory=list)
    cleanup_failures: list[ApplicationError] = field(default_factory=list)
    # Per cycle, the explanation the cycle decides (recorded as the real activity records it:
    # inline, packed, or only its digest when the workflow already holds it); then the last.
    explanations: list[Explanation] = field(default_factory=list)
    # The Temporal Priority each turn's activity task carried, in order.
    priorities: list[Priority] = field(default_factory=list)
    # Per turn, the advice the turn returns on where the next one runs (TurnResult.next_local);
    # then None (no advice). Whether each turn ran as a local activity, in order.
    advice: list[bool | None] = field(default_factory=list)
    ran_local: list[bool] = field(default_factory=list)
    # Turns (0 first) whose local attempt the worker's local slots shed (`shed`).
    shed_turns: set[int] = field(default_factory=set)
    # The placement's schedule-deadline annotation as prepare reads it, and whether its cycles
    # fulfil it; per turn, the misses its request reported (0: none).
    deadline: str | None = None
    fulfilled: bool = True
    misses: list[int] = field(default_factory=list)
    # The misses reported alone, without a turn (report_deadline_miss), and whether the
    # report speaks for the placement (False: a turn decides).
    reports: list[int] = field(default_factory=list)
    report_speaks: bool = True
    # The content version of the clusters each cycle read (CycleReport.clusters_version).
    clusters_version: int | None = None


SCRIPTS: dict[str, Script] = defaultdict(Script)


@activity.defn(name=ACTIVITY_SCHEDULE_ONCE)
async def schedule_once(request: TurnRequest) -> TurnResult:
    """The scripted phase, then, when ready, a scripted cycle: as the real turn composes them."""
    script = SCRIPTS[request.placement]
    turn = len(script.ran_local)
    script.ran_local.append(activity.info().is_local)
    advice = script.advice[turn] if turn < len(script.advice) else None
    if activity.info().is_local and turn in script.shed_turns:
        raise shed()
    prepared = await _prepare(request)
    if prepared.phase != "ready" or prepared.snapshot is None:
        return TurnResult(prepared=prepared, next_local=advice)
    report = await _cycle(request, prepared.snapshot)
    return TurnResult(prepared=prepared, report=report, next_local=advice)


async def _prepare(request: TurnRequest) -> PrepareResult:
    script = SCRIPTS[request.placement]
    script.priorities.append(activity.info().priority)
    script.misses.append(request.deadline.misses if request.deadline is not None else 0)
    phase = script.phases[min(script.prepares, len(script.phases) - 1)]
    if script.deleted:
        phase = "deleting"
    script.prepares += 1
    if script.prepare_gate is not None:
        opened = f"the test to open {request.placement}'s prepare gate"
        await within(script.prepare_gate.wait(), what=opened)
    return PrepareResult(
        phase=phase,  # type: ignore[arg-type]
        message=f"scripted {phase}",
        snapshot=f"{request.placement}-0" if phase == "ready" else None,
        placement_type="PickN",
        schedule_deadline=script.deadline,
    )


async def _cycle(request: TurnRequest, snapshot: str) -> CycleReport:
    script = SCRIPTS[request.placement]
    script.cycle_attempts += 1
    if script.gate is not None:
        opened = f"the test to open {request.placement}'s cycle gate"
        await within(script.gate.wait(), what=opened)
    if script.failures:
        raise script.failures.pop(0)
    index = len(script.cycles)
    script.cycles.append(request)
    requeue = script.requeues[index] if index < len(script.requeues) else False
    report = CycleReport(
        cycle=request.cycle,
        placement=request.placement,
        snapshot=snapshot,
        outcome=Outcome(
            placement_type="PickN",
            wanted=1,
            picked=1 if script.fulfilled else 0,
            fulfilled=script.fulfilled,
        ),
        requeue=requeue,
        requeue_after_seconds=script.requeue_after if index == 0 else None,
        summary=f"cycle {request.cycle}: scripted",
        clusters_version=script.clusters_version,
    )
    if not script.explanations:
        return report
    explanation = script.explanations[min(index, len(script.explanations) - 1)]
    return report.recording(explanation, request.known_explanation)


@activity.defn(name=ACTIVITY_CLEANUP_PLACEMENT)
async def cleanup_placement(request: CleanupRequest) -> CleanupReport:
    script = SCRIPTS[request.placement]
    script.cleanups += 1
    script.cleanup_requests.append(request)
    if script.cleanup_gate is not None:
        opened = f"the test to open {request.placement}'s cleanup gate"
        await within(script.cleanup_gate.wait(), what=opened)
    if script.cleanup_failures:
        raise script.cleanup_failures.pop(0)
    return CleanupReport(bindings_deleted=2, finalizer_removed=True, summary="2 bindings deleted")


def unexpected(message: str) -> ApplicationError:
    return ApplicationError(message, type=failures.UNEXPECTED, non_retryable=True)


def transient(message: str) -> ApplicationError:
    return ApplicationError(message, type=failures.HUB_UNAVAILABLE)


def shed(message: str = "the local slots are taken") -> ApplicationError:
    """What the worker's local slots raise for a local turn they shed (activities.turn)."""
    return ApplicationError(
        message, failures.NO_LOCAL_SLOT, type=failures.RUN_ON_QUEUE, non_retryable=True
    )


@activity.defn(name=ACTIVITY_SCHEDULE_ONCE_RP)
async def schedule_once_rp(request: TurnRequest) -> TurnResult:
    """A ResourcePlacement's turn: scripted by its name, like the others."""
    return await schedule_once(request)


@activity.defn(name=ACTIVITY_CLEANUP_PLACEMENT_RP)
async def cleanup_placement_rp(request: CleanupRequest) -> CleanupReport:
    return await cleanup_placement(request)


@activity.defn(name=ACTIVITY_REPORT_DEADLINE_MISS)
async def report_deadline_miss(request: DeadlineReport) -> DeadlineReported:
    script = SCRIPTS[request.placement]
    script.reports.append(request.miss.misses)
    return DeadlineReported(reported=script.report_speaks, event_written=script.report_speaks)


STAND_INS = [
    schedule_once,
    cleanup_placement,
    schedule_once_rp,
    cleanup_placement_rp,
    report_deadline_miss,
]
