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

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.deadline import (
    REPORT_INTERVAL,
    DeadlineError,
    ScheduleDeadline,
    aged_key,
    carried_deadline,
    misses_at,
    parse_deadline,
)
from workflows.models import DeadlineMiss, DeadlineState

__all__ = ["DeadlineClock"]


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

        `annotation` is what the turn carried (scheduler.deadline.carried_deadline) with its
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

    def reported_due(self, key: int | None, best: int | None) -> datetime | None:
        """When the next miss should run a turn (None: no deadline is running): when it falls,
        if no miss of this stretch has been reported yet or, for an aging placement, if it
        would lift a turn at `key` (the placement's own) one key further toward `best`; else
        not before REPORT_INTERVAL after the last report. The periods in between are counted
        by the turn that reports them, or by any turn that runs first (`miss`)."""
        due = self.due()
        if due is None or self.deadline is None or self.reported_at is None:
            return due
        if self.deadline.aging and aged_key(key, self.misses + 1, best=best) != aged_key(
            key, self.misses, best=best
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

    def aged(self, key: int | None, best: int | None) -> int | None:
        """A turn's priority key: one key up per miss for an aging placement past its deadline,
        never past `best` (TurnPriority.best_aged_key: its own band's key by default). `key` is
        what the turn's work asked for before aging: aged once, here, when the turn starts."""
        if self.deadline is None or not self.deadline.aging or self.since is None:
            return key
        return aged_key(key, self.misses, best=best)
