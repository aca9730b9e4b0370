"""Where a placement's turn runs: on the activity task queue, or as a local activity in the
workflow worker (docs/operations.md, "Local cycles").

A turn on the activity queue costs Temporal two workflow tasks and an activity task; a local
one, one workflow task and a marker: about half the server's work per turn, at the price of
running the cycle in the workflow worker. A local turn keeps its workflow task open (the SDK
heartbeats it with a few history events every ~8 s), so one that has not succeeded within
LOCAL_TURN_LIMIT, or failed LOCAL_ATTEMPTS times in a row (a slow or unreachable hub: about 3 s
of backoff), runs again on the activity queue, whose retries add nothing to the history.
Pure: it says which options each call takes; the workflow makes the calls."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from temporalio.common import Priority, RetryPolicy

from workflows import failures

__all__ = [
    "CYCLE_HEARTBEAT",
    "HUB_RETRY",
    "LOCAL_ATTEMPTS",
    "LOCAL_RETRY",
    "LOCAL_TURN_LIMIT",
    "TurnExecution",
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


@dataclass
class TurnExecution:
    """The placement's current choice (the watcher's latest word, carried across runs)."""

    local: bool = False
    local_limit: timedelta = LOCAL_TURN_LIMIT

    @classmethod
    def of(cls, local: bool | None, local_turn_seconds: float | None) -> TurnExecution:
        limit = timedelta(seconds=local_turn_seconds) if local_turn_seconds else LOCAL_TURN_LIMIT
        return cls(local=bool(local), local_limit=limit)

    def heard(self, local: bool | None) -> None:
        """A signal's word on local cycles (None: no word, keep the current choice)."""
        if local is not None:
            self.local = local

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
