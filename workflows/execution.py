"""Where a placement's turn runs: on the activity task queue, or as a local activity in the
workflow worker (docs/operations.md, "Where turns run"). By default the worker decides turn by
turn (activities.advice) and the workflow follows its latest advice.

A turn on the activity queue costs Temporal two workflow tasks and an activity task; a local
one, one workflow task and a marker: about half the server's work per turn, at the price of
running the cycle in the workflow worker. A local turn keeps its workflow task open (the SDK
heartbeats it with a few history events every ~8 s), so one that has not succeeded within
LOCAL_TURN_LIMIT, or failed LOCAL_ATTEMPTS times in a row (a slow or unreachable hub: about 3 s
of backoff), runs again on the activity queue, whose retries add nothing to the history.
A workflow worker that caches no workflow runs no turn local by its own choice: it turns each
"auto" one down by a patch that only it activates (QUEUE_TURN_PATCH, `activates_patch`).
Pure: it says which options each call takes; the workflow makes the calls."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeout

from workflows import failures, names
from workflows.models import PlacementState, TurnExecutionMode

__all__ = [
    "AUTO_LOCAL_PATCH",
    "CYCLE_HEARTBEAT",
    "HUB_RETRY",
    "LOCAL_ATTEMPTS",
    "LOCAL_RETRY",
    "LOCAL_TURN_LIMIT",
    "QUEUE_TURNS_AFTER_FALLBACK",
    "QUEUE_TURN_PATCH",
    "SHED_TURN_PATCH",
    "TURN_FAILURES",
    "TurnExecution",
    "activates_patch",
    "failed_for_good",
    "failure_cause",
    "failure_message",
    "how_local_failed",
    "no_local_slot",
]

CYCLE_HEARTBEAT: Final = timedelta(seconds=30)
LOCAL_TURN_LIMIT: Final = timedelta(seconds=30)
LOCAL_ATTEMPTS: Final = 5
# Replaces KubeFleet's per-key rate limiter (5 ms x 2^n, capped at 1000 s; kubefleet-rules 1.11).
# We start at 200 ms because every retry here is a full activity round trip through the server,
# and cap at 60 s, not 1000 s, so a placement resumes within a minute of the hub coming back. No
# attempt limit: like KubeFleet, transient errors are retried until they stop. Errors that
# retrying cannot fix are non-retryable and end the turn instead (kubefleet-rules 3.3).
HUB_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    non_retryable_error_types=list(failures.NON_RETRYABLE),
)
# Local turns: the same backoff, LOCAL_ATTEMPTS attempts, then the activity queue.
LOCAL_RETRY: Final = dataclasses.replace(HUB_RETRY, maximum_attempts=LOCAL_ATTEMPTS)
# What awaiting a turn's activity raises when it fails: an ActivityError, or for a local
# activity its last failure itself.
TURN_FAILURES: Final = (ActivityError, ApplicationError, ActivityTimeout)


# After a local turn fell back to the queue (a slow hub, a worker without hub access), this many
# turns run on the queue whatever the advice, so a lasting cause does not cost every turn the
# local attempts first.
QUEUE_TURNS_AFTER_FALLBACK: Final = 20
# Whether a run lets the advice put turns in local activities (workflow.patched): a history
# recorded before the advice has none of its markers and replays on the queue.
AUTO_LOCAL_PATCH: Final = "turn-execution-auto"
# Whether the worker running a run's nth "auto" turn that would run local sends it to the
# activity queue instead (patch `turn-on-queue-<n>`): a worker that caches no workflow
# (`--max-cached-workflows 0`) evicts the run after every workflow task, and a local turn in
# flight then is cancelled and run again, or holds the run's next task until it times out.
# Only such a worker activates these patches (`activates_patch`, its patch activation
# callback), so the choice is its own, whatever another process advised, and its marker puts
# it in the history: a replay, on any worker, reads it from there. One id per turn, as a run's
# turns may be served by different workers; asked only for a turn that would run local, so a
# worker that caches workflows records nothing. (A worker that caches workflows must not
# activate them: a turn may follow a local one in the same workflow task, and a patch marker
# after a local activity's marker in one task does not replay; see SHED_TURN_PATCH.) A worker
# without the callback (built other than by workers.worker) activates every patch, so sends
# every such turn to the queue: the safe side.
QUEUE_TURN_PATCH: Final = "turn-on-queue"
# Whether a local turn that the workflow worker's local slots shed (failures.NO_LOCAL_SLOT) runs
# on the queue alone, the next turns where the advice says: asked only when a turn was shed, so
# a run that sheds none records nothing. A worker from before it reads every RUN_ON_QUEUE as a
# fallback (the next QUEUE_TURNS_AFTER_FALLBACK turns on the queue), so it cannot replay a run
# that recorded this marker and then ran a turn local (docs/operations.md, "Upgrades").
SHED_TURN_PATCH: Final = "turn-shed-alone"


def activates_patch(patch_id: str, *, local_turns: bool) -> bool | None:
    """A workflow worker's answer to a run's first ask of a QUEUE_TURN_PATCH (its patch
    activation callback's): on, unless the worker runs local turns (`local_turns`). None for
    any other patch: not this module's to answer (the SDK's default is on)."""
    if not patch_id.startswith(f"{QUEUE_TURN_PATCH}-"):
        return None
    return not local_turns


@dataclass
class TurnExecution:
    """Where the placement's turns run: `mode` "auto" follows the worker's advice from the last
    turn (activities.advice; the first turn of a run, with no advice yet, runs local), "local"
    and "queue" are forced by the watcher's word (`run --local-cycles-up-to`, for experiments).
    Carried across runs: the mode (PlacementInput.turn_execution), and in the workflow's state
    the advice and the turns left on the queue."""

    mode: TurnExecutionMode = "auto"
    state: PlacementState = field(default_factory=PlacementState)
    local_limit: timedelta = LOCAL_TURN_LIMIT
    asked: int = 0  # this run's turns that asked their worker (QUEUE_TURN_PATCH)
    fell_back: bool = False  # the last local call ran again on the activity queue
    shed: bool = False  # ... because the worker's local slots shed it (failures.NO_LOCAL_SLOT)

    @classmethod
    def of(
        cls,
        mode: TurnExecutionMode | None,
        legacy_local: bool | None,
        local_turn_seconds: float | None,
        state: PlacementState | None = None,
    ) -> TurnExecution:
        limit = timedelta(seconds=local_turn_seconds) if local_turn_seconds else LOCAL_TURN_LIMIT
        execution = cls(local_limit=limit, state=state or PlacementState())
        execution.heard(mode, legacy_local)
        return execution

    @property
    def advice(self) -> bool | None:
        """The worker's advice from the last turn that gave one (None: none yet)."""
        return self.state.next_local

    @property
    def queue_turns(self) -> int:
        """Turns left on the queue after a fallback."""
        return self.state.queue_turns

    def heard(self, mode: TurnExecutionMode | None, legacy_local: bool | None = None) -> None:
        """A signal's word (None: no word, keep the current choice). Senders before the mode
        said True for local and False when local cycles were off, their default: "auto" now."""
        if mode is None and legacy_local is not None:
            mode = "local" if legacy_local else "auto"
        if mode is not None:
            self.mode = mode

    @property
    def local(self) -> bool:
        """Whether the next turn would run as a local activity (before the run's patch check:
        see `wants_local`)."""
        if self.mode != "auto":
            return self.mode == "local"
        return self.queue_turns == 0 and self.advice is not False

    def wants_local(self, patched: Callable[[str], bool]) -> bool:
        """`local`, for the turn about to run. An "auto" choice asks `patched` (the run's
        `workflow.patched`, asked only here, so a run of forced or queue turns records no
        marker): whether the run follows the advice at all (AUTO_LOCAL_PATCH), and whether
        the worker turns this local turn down (QUEUE_TURN_PATCH). A forced "local" is the
        operator's word, for experiments, and no worker's to refuse."""
        if self.mode != "auto":
            return self.mode == "local"
        if not (self.local and patched(AUTO_LOCAL_PATCH)):
            return False
        self.asked += 1
        return not patched(f"{QUEUE_TURN_PATCH}-{self.asked}")

    def local_failed(self, err: FailureError) -> None:
        """The local call failed with `err` (not for good): it runs again on the queue."""
        self.fell_back = True
        self.shed = no_local_slot(err)

    def falls_back(self, patched: Callable[[str], bool]) -> bool:
        """Whether the last call's run on the queue is a fallback, which the next turns follow:
        yes after a local call that failed, unless the worker's local slots shed it (a busy
        worker, nothing wrong with the hub) and the run reads it so (SHED_TURN_PATCH, asked only
        then). Asked once the call has run on the queue, in a later workflow task than the local
        attempt: a patch marker after a local activity's marker in the same task does not replay
        (the SDK matches it before the local activity's result reaches the workflow)."""
        return self.fell_back and not (self.shed and patched(SHED_TURN_PATCH))

    def after_turn(self, advice: bool | None, *, fell_back: bool) -> None:
        """What a turn left: the worker's advice (None: none, keep the last), and whether a
        local turn had to run again on the queue."""
        state = self.state
        if advice is not None:
            state.next_local = advice
        if fell_back:
            state.queue_turns = QUEUE_TURNS_AFTER_FALLBACK
        elif state.queue_turns:
            state.queue_turns -= 1

    async def execute(
        self,
        activity: str,
        request: Any,
        result: type[Any],
        timeout: timedelta,
        summary: str,
        priority: Priority,
    ) -> Any:
        """One of the placement's activities, by name: as a local activity in this worker
        while the placement has local cycles, or on the activity queue at `priority`. A local
        one that has not succeeded within the local limit runs again on the queue (a turn is
        idempotent); one that failed for good fails the turn, as on the queue."""
        self.fell_back = self.shed = False
        if self.wants_local(workflow.patched):
            try:
                return await workflow.execute_local_activity(
                    activity, request, result_type=result, **self.local_options(timeout, summary)
                )
            except TURN_FAILURES as err:
                if failed_for_good(err):
                    raise
                summary = f"{summary}; on the activity queue: the local attempts "
                summary += how_local_failed(err)
                self.local_failed(err)
        # The activities' own task queue (workflows.names says why; histories replay the same).
        queue = names.activity_task_queue(workflow.info().task_queue)
        return await workflow.execute_activity(
            activity,
            request,
            result_type=result,
            **self.queue_options(queue, timeout, summary, priority),
        )

    def local_options(self, timeout: timedelta, summary: str) -> dict[str, Any]:
        return {
            "start_to_close_timeout": min(timeout, self.local_limit),
            "schedule_to_close_timeout": self.local_limit,
            "retry_policy": LOCAL_RETRY,
            "summary": summary,
        }

    @staticmethod
    def queue_options(
        task_queue: str, timeout: timedelta, summary: str, priority: Priority
    ) -> dict[str, Any]:
        return {
            "task_queue": task_queue,
            "start_to_close_timeout": timeout,
            "heartbeat_timeout": CYCLE_HEARTBEAT,
            "retry_policy": HUB_RETRY,
            "summary": summary,
            "priority": priority,
        }


def failure_cause(err: FailureError) -> BaseException | None:
    """What failed: an activity's error, or a local activity's own (the SDK raises a local
    activity's last failure as it is, not wrapped in an ActivityError)."""
    return err.cause if isinstance(err, ActivityError) else err


def failed_for_good(err: FailureError) -> bool:
    """A failure retrying cannot fix (kubefleet-rules 3.3), as opposed to a local turn that ran
    out of time or attempts, or that met a hub outage (failures.RUN_ON_QUEUE)."""
    cause = failure_cause(err)
    return (
        isinstance(cause, ApplicationError)
        and cause.type != failures.RUN_ON_QUEUE
        and (cause.non_retryable or cause.type in failures.NON_RETRYABLE)
    )


def no_local_slot(err: FailureError) -> bool:
    """A local turn the workflow worker's local slots shed (failures.NO_LOCAL_SLOT): it runs on
    the queue, but it is no reason for the placement's next turns to."""
    cause = failure_cause(err)
    return (
        isinstance(cause, ApplicationError)
        and cause.type == failures.RUN_ON_QUEUE
        and failures.NO_LOCAL_SLOT in cause.details
    )


def how_local_failed(err: FailureError) -> str:
    """How a local turn's attempts ended, for the summary of its run on the queue."""
    cause = failure_cause(err)
    if isinstance(cause, ActivityTimeout):
        return "timed out"
    return f"failed ({cause})"


def failure_message(what: str, err: FailureError) -> str:
    """What a failed turn or cleanup (`what`) records as the placement's last error."""
    cause = failure_cause(err)
    if isinstance(cause, ApplicationError) and cause.type in failures.NON_RETRYABLE:
        return f"{what} failed ({cause.type}): {cause.message}"
    return f"{what} failed: {cause or err}"
