"""Hub and scheduler errors in, Temporal failure types out: the one place they are mapped.

An activity's failure type decides what Temporal does next (`workflows.failures`): retryable
types are retried with the workflow's backoff, non-retryable ones end the turn and the workflow
waits for the next event, as KubeFleet does for "unexpected behaviour" (kubefleet-rules 3.3). Every
expected failure leaves as an `ApplicationError` with a message that names what was being done,
so the Temporal UI shows a sentence, not a traceback. Errors that are not hub or scheduler
errors are bugs: they are left to propagate unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Final

from temporalio.exceptions import ApplicationError

from activities.bindings import BindingNameTakenError
from activities.capacity import NoRoomError
from hub.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    GoneError,
    HubConfigError,
    HubError,
    HubUnavailableError,
    InvalidObjectError,
    MalformedObjectError,
    NotFoundError,
    UnauthorizedError,
)
from scheduler import SchedulerError
from scheduler.snapshots import SnapshotError
from workflows import failures

__all__ = ["EXPECTED", "NAMESPACE_TERMINATING", "failure_for", "hub_failures", "is_retryable"]

# The cause kube-apiserver gives a 403 for a create in a namespace being deleted.
NAMESPACE_TERMINATING: Final = "NamespaceTerminating"

# What activities expect to go wrong; anything else is a bug and propagates as it is.
Expected = HubError | SchedulerError | SnapshotError | BindingNameTakenError | NoRoomError
EXPECTED: Final = (HubError, SchedulerError, SnapshotError, BindingNameTakenError, NoRoomError)


def failure_for(exc: Expected, doing: str) -> ApplicationError:
    """The ApplicationError that tells Temporal what to do about `exc`, raised while `doing`."""
    message = f"{doing}: {exc}"
    match exc:
        case HubUnavailableError(retry_after=retry_after):
            # The server's Retry-After sets the next attempt's delay instead of the backoff.
            delay = timedelta(seconds=retry_after) if retry_after else None
            return ApplicationError(message, type=failures.HUB_UNAVAILABLE, next_retry_delay=delay)
        case GoneError():
            # A list continuation expired twice in a row: the hub is churning; list again later.
            return ApplicationError(message, type=failures.HUB_UNAVAILABLE)
        case ConflictError() | AlreadyExistsError():
            return ApplicationError(
                f"{message} (someone else changed it; re-reading)", type=failures.CONFLICT
            )
        case NoRoomError():
            # A concurrent placement took the room: the next attempt reads the ledgers again.
            return ApplicationError(
                f"{message} (another placement took it; deciding again)", type=failures.CONFLICT
            )
        case NotFoundError():
            return ApplicationError(
                f"{message} (it vanished since it was read; re-reading)", type=failures.VANISHED
            )
        case UnauthorizedError(causes=causes) if any(
            c.reason == NAMESPACE_TERMINATING for c in causes
        ):
            # kube-apiserver's 403 for a write into a namespace being deleted: not an RBAC
            # problem; the ResourcePlacement goes with its namespace, and its cleanup follows.
            return ApplicationError(
                f"{message} (its namespace is being deleted; re-reading)", type=failures.VANISHED
            )
        case UnauthorizedError() | HubConfigError():
            return ApplicationError(
                f"{message} (fix the worker's hub credentials or RBAC; retrying meanwhile)",
                type=failures.HUB_ACCESS,
            )
        case InvalidObjectError() | BadRequestError():
            return ApplicationError(message, type=failures.INVALID_OBJECT, non_retryable=True)
        case MalformedObjectError() | SchedulerError() | SnapshotError() | BindingNameTakenError():
            return ApplicationError(message, type=failures.UNEXPECTED, non_retryable=True)
        case _:  # any other status the hub answered with (405, 415, ...): same answer next time
            return ApplicationError(message, type=failures.UNEXPECTED, non_retryable=True)


@contextmanager
def hub_failures(doing: str) -> Iterator[None]:
    """Raise hub and scheduler errors from the block as the matching ApplicationError.

    ApplicationErrors raised inside pass through untouched."""
    try:
        yield
    except EXPECTED as exc:
        raise failure_for(exc, doing) from exc


def is_retryable(error: ApplicationError) -> bool:
    return not error.non_retryable and error.type not in failures.NON_RETRYABLE
