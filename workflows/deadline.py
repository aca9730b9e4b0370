"""A placement's scheduling-deadline clock (docs/operations.md, "Scheduling deadlines"), kept by
its workflow.

The workflow owns the clock because it is the one thing that sees every cycle's outcome in order
and survives everything: its state is replayed from history after a worker restart and carried
across continue-as-new, and its timer is durable. The clock starts when a cycle finds the
placement not fully scheduled while it was fully scheduled (or had no clock yet); a turn that
leaves it not fully scheduled, a policy change among them, never restarts it. A workflow without
a clock (a placement older than the annotation, a workflow started again) starts it from what
the turn read on the placement: when its Scheduled condition last left True, or its creation.
Each deadline period that passes while it stays not fully scheduled is one miss: the turn after
a miss reports it (an Event; the condition's reason in standalone mode) and, for an aging
placement, runs one priority key higher per miss, within its band (docs/priority.md, "Aging").
Pure: the workflow feeds it what its turns read and the time (`workflow.now()`); tests drive it
without Temporal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from scheduler.opt_in.deadline import (
    REPORT_INTERVAL,
    DeadlineError,
    ScheduleDeadline,
    aged_key,
    carried_deadline,
    misses_at,
    missing_line,
    parse_deadline,
)
from workflows.models import (
    CycleReport,
    DeadlineMiss,
    DeadlineReport,
    DeadlineState,
    PlacementState,
    PrepareResult,
    TurnPriority,
)

__all__ = [
    "DEADLINE_ALONE_PATCH",
    "DEADLINE_BUSY_PATCH",
    "DEADLINE_FLOOR_PATCH",
    "DEADLINE_PATCH",
    "DeadlineClock",
    "DeadlineWait",
    "PlacementDeadline",
]

# The scheduling deadline's commands (its timer, its turns' aged priority): decided the first
# time a turn reads the annotation, so placements without it record no marker and replay as
# before.
DEADLINE_PATCH: Final = "schedule-deadline"
# A deadline that passed while the workflow was busy (a requeue-after timer, whose expiry leaves
# work waiting, or events arriving faster than turns) is counted before the next turn; before
# this, only an idle workflow counted misses, and a placement turned every 30 s (enforcement
# held back) was never reported. Decided when it first matters, as the deadline's own patch.
DEADLINE_BUSY_PATCH: Final = "schedule-deadline-busy"
# A miss runs a turn at most once per REPORT_INTERVAL once its stretch's first miss has (unless
# aging would lift its key): a `1s` deadline on a placement that cannot be scheduled ran a whole
# turn every second, for ever. Decided when it first puts a miss's timer off.
DEADLINE_FLOOR_PATCH: Final = "schedule-deadline-report-interval"
# A miss that falls while the workflow is idle is reported by the report activity alone (the
# Event and the condition, activities.deadline.ReportDeadlineMiss), not by a whole turn: nothing
# has changed since the last cycle, or an event would have brought a turn, so the decision
# stands. 200 misses in one second were 200 cycles. Decided at an idle miss, as the others.
DEADLINE_ALONE_PATCH: Final = "schedule-deadline-report-alone"


@dataclass
class DeadlineClock:
    annotation: str | None = None
    deadline: ScheduleDeadline | None = None
    problem: str | None = None
    since: datetime | None = None
    misses: int = 0
    missing: str = ""
    reported_at: datetime | None = None  # when a miss of this stretch was last counted

    @classmethod
    def of(cls, state: DeadlineState | None) -> DeadlineClock:
        """The clock a run carried over (an empty one without)."""
        if state is None:
            return cls()
        clock = cls(missing=state.missing)
        clock.read(state.annotation, state.problem if state.seconds is None else None)
        clock.since, clock.misses = state.since, state.misses
        clock.reported_at = state.reported_at if state.since is not None else None
        return clock

    def state(self) -> DeadlineState | None:
        if self.annotation is None:
            return None
        deadline = self.deadline
        return DeadlineState(
            annotation=self.annotation,
            seconds=deadline.seconds if deadline is not None else None,
            aging=deadline.aging if deadline is not None else False,
            problem=self.problem,
            since=self.since,
            misses=self.misses,
            missing=self.missing,
            reported_at=self.reported_at,
        )

    def read(self, annotation: str | None, problem: str | None = None) -> None:
        """The annotation as the last turn read it: removed, the clock stops; changed, the
        count of misses starts again from when the placement became not fully scheduled.

        `annotation` is what the turn carried (scheduler.opt_in.deadline.carried_deadline) with its
        `problem`; a result recorded before issue 33 carried the raw value, which is read into
        the same form here, so a value that once failed every workflow task (a zero-padded
        `000...01s`) now reads on replay, and what the clock keeps is bounded either way."""
        if annotation is not None and problem is None:
            annotation, problem = carried_deadline(annotation)
        if annotation == self.annotation:
            return
        self.annotation, self.misses, self.reported_at = annotation, 0, None
        self.deadline, self.problem = None, None
        if annotation is None:
            self.since, self.missing = None, ""
            return
        if problem is not None:
            self.problem = problem
            return
        try:
            self.deadline = parse_deadline(annotation)
        except DeadlineError as exc:  # not reached: carried_deadline has read it
            self.problem = str(exc)

    def after_cycle(
        self, fully: bool, seed: datetime | None, now: datetime, missing: str = ""
    ) -> None:
        """A cycle ended: fully scheduled stops the clock; not fully scheduled starts it if it
        is not running, from `seed` (what the placement's condition says) or `now`."""
        if fully:
            self.since, self.misses, self.missing, self.reported_at = None, 0, "", None
            return
        self.missing = missing
        if self.since is None:
            self.since = min(seed, now) if seed is not None else now
            self.misses, self.reported_at = 0, None

    def due(self) -> datetime | None:
        """When the next miss falls (None: no deadline is running)."""
        if self.deadline is None or self.since is None:
            return None
        return self.since + timedelta(seconds=self.deadline.seconds * (self.misses + 1))

    def reported_due(self, priority_key: int | None, best: int | None) -> datetime | None:
        """When the next miss should run a turn (None: no deadline is running): when it falls,
        if no miss of this stretch has been reported yet or, for an aging placement, if it
        would lift a turn at `priority_key` (the placement's own) one key further toward
        `best`; else not before REPORT_INTERVAL after the last report. The periods in between
        are counted by the turn that reports them, or by any turn that runs first (`miss`)."""
        due = self.due()
        if due is None or self.deadline is None or self.reported_at is None:
            return due
        aging = self.deadline.aging
        if aging and aged_key(priority_key, self.misses + 1, best=best) != aged_key(
            priority_key, self.misses, best=best
        ):
            return due
        return max(due, self.reported_at + REPORT_INTERVAL)

    def miss(self, now: datetime) -> int:
        """The deadline passed again at `now`: one more miss, or as many periods as have
        passed (a worker that was down for several periods reports once, with the count)."""
        if self.deadline is None or self.since is None:
            return self.misses  # no deadline running: nothing to miss
        self.misses = max(self.misses + 1, misses_at(self.deadline, self.since, now))
        self.reported_at = now
        return self.misses

    def request(self) -> DeadlineMiss | None:
        """What the next turn reports, while the placement is past its deadline."""
        if self.deadline is None or self.since is None or self.misses <= 0:
            return None
        return DeadlineMiss(
            deadline=self.annotation or "",
            seconds=self.deadline.seconds,
            since=self.since,
            misses=self.misses,
        )

    def aged(self, priority_key: int | None, best: int | None) -> int | None:
        """A turn's priority key: one key up per miss for an aging placement past its deadline,
        never past `best` (TurnPriority.best_aged_key: its own band's key by default).
        `priority_key` is what the turn's work asked for before aging: aged once, here, when
        the turn starts."""
        if self.deadline is None or not self.deadline.aging or self.since is None:
            return priority_key
        return aged_key(priority_key, self.misses, best=best)


@dataclass(frozen=True)
class DeadlineWait:
    """What the workflow does about the deadline while it waits for work
    (PlacementDeadline.wait)."""

    missed: bool = False
    """A miss to count before waiting: it fell while the workflow was busy."""
    due: datetime | None = None
    """When the next miss falls (None: no timer: no deadline runs, or work is waiting)."""
    wake: datetime | None = None
    """When the timer wakes the workflow: `due`, or later for a miss with nothing new to
    report (DeadlineClock.reported_due)."""

    def missed_by(self, now: datetime) -> bool:
        """Whether a wait that work ended at `now`, before a put-off timer, passed `due`: the
        turn that runs now counts that miss, which is not lost."""
        due, wake = self.due, self.wake
        return due is not None and wake is not None and wake > due and now >= due


@dataclass
class PlacementDeadline:
    """The scheduling deadline as the placement workflow keeps it: its clock, kept in the
    workflow's state (PlacementState.deadline, so continue-as-new carries it), and whether
    this run issues the deadline's commands, its patches asked where their branches are. The
    workflow calls it where it waits (`wait`, `missed`), when a turn starts (`aged`,
    `request`) and after a turn (`after_turn`). Pure: it is given the run's `workflow.patched`
    and `workflow.now()`."""

    state: PlacementState
    clock: DeadlineClock = field(default_factory=DeadlineClock)
    commands: bool | None = None
    """Whether this run issues the deadline's commands (its timer, its turns' aged priority):
    True from the start for a run that carried a clock over (the run before decided it, and
    this run's history has no marker to say so), else decided by DEADLINE_PATCH the first
    time a turn reads the annotation, so placements without it record no marker and replay
    as before. None: not decided yet, so no commands."""

    @classmethod
    def of(cls, state: PlacementState) -> PlacementDeadline:
        carried = state.deadline is not None
        deadline = cls(state, DeadlineClock.of(state.deadline), True if carried else None)
        deadline._keep()  # as the clock reads it (a value carried raw before issue 33, bounded)
        return deadline

    @property
    def summary(self) -> str:
        return f"schedule deadline {self.clock.annotation}"

    def wait(
        self,
        busy: bool,
        now: datetime,
        priority: TurnPriority | None,
        patched: Callable[[str], bool],
    ) -> DeadlineWait:
        """What to do about the deadline before waiting for work (`busy`: work is waiting
        already). A miss that fell while the workflow was busy counts before the next turn
        (DEADLINE_BUSY_PATCH); otherwise a timer wakes the workflow for the next miss."""
        due = self.clock.due() if self.commands else None
        if due is None:
            return DeadlineWait()
        if busy:
            return DeadlineWait(missed=due <= now and patched(DEADLINE_BUSY_PATCH))
        return DeadlineWait(due=due, wake=self._wake(due, priority, patched))

    def _wake(
        self, due: datetime, priority: TurnPriority | None, patched: Callable[[str], bool]
    ) -> datetime:
        own, best = _keys(priority)
        wake = self.clock.reported_due(own, best)
        if wake is None or wake <= due or not patched(DEADLINE_FLOOR_PATCH):
            return due
        return wake

    def missed(self, now: datetime) -> str:
        """The deadline passed at `now`: the miss is counted, and this is why the turn runs."""
        misses = self.clock.miss(now)
        self._keep()
        return f"schedule deadline {self.clock.annotation} exceeded ({misses})"

    def alone(
        self,
        placement: str,
        namespace: str | None,
        lifted: bool,
        patched: Callable[[str], bool],
    ) -> DeadlineReport | None:
        """After `missed`, for a miss that fell while the workflow was idle: the report that
        says it without a turn (DEADLINE_ALONE_PATCH), with what the last cycle found missing;
        None when a turn reports it, as before: an aging placement's miss that `lifted` its
        key (its turn runs at the new key), or a run begun before the patch."""
        miss = self.request()
        if miss is None or lifted or not patched(DEADLINE_ALONE_PATCH):
            return None
        return DeadlineReport(
            placement=placement, namespace=namespace, miss=miss, missing=self.clock.missing
        )

    def aged(self, priority_key: int | None, priority: TurnPriority | None) -> int | None:
        """The priority key a turn runs at whose work asked for `priority_key`
        (DeadlineClock.aged; work that asked nothing runs at the placement's own key)."""
        if not self.commands:
            return priority_key
        own, best = _keys(priority)
        return self.clock.aged(priority_key if priority_key is not None else own, best)

    def request(self) -> DeadlineMiss | None:
        """What the next turn reports (DeadlineClock.request)."""
        return self.clock.request() if self.commands else None

    def after_turn(
        self,
        prepared: PrepareResult,
        report: CycleReport | None,
        last: CycleReport | None,
        now: datetime,
        patched: Callable[[str], bool],
    ) -> None:
        """The clock after a turn that read the placement (`last`: the cycle report the
        workflow held before it); nothing, and no marker, for placements without the
        annotation, and nothing for a run begun before deadlines (DEADLINE_PATCH)."""
        annotation = prepared.schedule_deadline
        if prepared.phase != "ready" or (annotation is None and self.clock.annotation is None):
            return
        if self.commands is None:
            self.commands = patched(DEADLINE_PATCH)
        if not self.commands:
            return
        self.clock.read(annotation, prepared.schedule_deadline_problem)
        if report is not None:
            fully = report.fulfilled and not report.requeue
            # A cycle that decided the same fates recorded only their digest: `last` has them.
            explanation = report.filled_from(last).full_explanation()
            missing = missing_line(report.outcome, explanation) if not fully else ""
            self.clock.after_cycle(fully, prepared.unscheduled_since, now, missing)
        self._keep()

    def _keep(self) -> None:
        self.state.deadline = self.clock.state()


def _keys(priority: TurnPriority | None) -> tuple[int | None, int | None]:
    """The placement's own priority key, and how far aging may lift its turns."""
    if priority is None:
        return None, None
    return priority.own_priority_key, priority.best_aged_key()
