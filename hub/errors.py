"""Typed errors of the hub API, sorted by what a caller can do about them.

    HubError
    ├── HubConfigError          no usable kubeconfig or in-cluster config: fix the setup
    ├── HubUnavailableError     unreachable, overloaded or too slow (429, 500, 502, 503, 504,
    │                           timeouts, connection errors): retry later (after retry_after)
    ├── MalformedObjectError    the server sent an object our models cannot read
    └── HubAPIError             the server answered with a Status failure
        │                       (status, reason, message, causes)
        ├── BadRequestError     400: malformed request (bad selector, bad patch)
        ├── UnauthorizedError   401/403: wrong or missing credentials, or not allowed
        ├── NotFoundError       404
        ├── AlreadyExistsError  409 AlreadyExists: the name is taken
        ├── ConflictError       409 stale resourceVersion: re-read, then retry
        ├── GoneError           410: a watch or list continuation is too old; re-list
        └── InvalidObjectError  422: sending the same object again will not help

Status codes map to classes in one place, `error_for_status`, used for HTTP responses and for
watch ERROR events alike. Temporal owns retries, so the split that matters most is transient
(`HubUnavailableError`, retry) versus everything else (retrying the same request gives the same
answer). This module knows nothing of HTTP libraries: `hub.client` turns their exceptions into
these, chained with `from exc`, so no `kubernetes` or urllib3 exception leaves `hub/`."""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

__all__ = [
    "TRANSIENT_STATUSES",
    "AlreadyExistsError",
    "BadRequestError",
    "ConflictError",
    "GoneError",
    "HubAPIError",
    "HubConfigError",
    "HubError",
    "HubUnavailableError",
    "InvalidObjectError",
    "MalformedObjectError",
    "NotFoundError",
    "StatusCause",
    "UnauthorizedError",
    "error_for_status",
    "parse_retry_after",
]

# The server is overloaded, restarting or broken for now; the same request may succeed later.
TRANSIENT_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
# metav1.StatusReason values that tell two 409s apart.
REASON_ALREADY_EXISTS: Final = "AlreadyExists"


class HubError(Exception):
    """Base of every error `hub.client` raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take keyword arguments, which the default exception pickling cannot replay.
        return (_restore, (type(self), self.args, self.__dict__))


def _restore(cls: type[HubError], args: tuple[Any, ...], state: dict[str, Any]) -> HubError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class HubConfigError(HubError):
    """No usable connection settings: missing or broken kubeconfig, unknown context, bad CA."""


class MalformedObjectError(HubError):
    """The server sent something that is not a readable object of the expected kind.

    Raised when a response is not JSON or an object fails validation against our models; the
    pydantic or JSON error is chained."""


class HubUnavailableError(HubError):
    """The API server could not be reached or could not serve the request now; retry later.

    `status` is the HTTP status when the server answered (429, 5xx) and None for connection
    errors and timeouts. `retry_after` is the server's Retry-After in seconds, when it sent one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class StatusCause:
    """One entry of a Status' details.causes: which field is wrong and why."""

    reason: str = ""
    message: str = ""
    field: str = ""

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> StatusCause:
        return cls(
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            field=str(data.get("field") or ""),
        )


class HubAPIError(HubError):
    """The server refused the request with a Status; the same request will be refused again."""

    def __init__(
        self,
        *,
        status: int,
        reason: str = "",
        message: str = "",
        causes: tuple[StatusCause, ...] = (),
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes
        super().__init__(self._describe())

    def _describe(self) -> str:
        text = f"{self.status} {self.reason or 'Error'}: {self.message or '(no message)'}"
        # Some servers put the causes only in details; show them when the message does not.
        missing = [c for c in self.causes if c.field and c.field not in self.message]
        if missing:
            text += " [" + "; ".join(f"{c.field}: {c.message}" for c in missing) + "]"
        return text


class BadRequestError(HubAPIError):
    """400: the request itself is malformed, e.g. a bad label selector or patch document."""


class UnauthorizedError(HubAPIError):
    """401 or 403: the credentials are missing, wrong, or not allowed to do this."""


class NotFoundError(HubAPIError):
    """404: the object (or its kind) does not exist."""


class AlreadyExistsError(HubAPIError):
    """409 AlreadyExists: an object with this name exists."""


class ConflictError(HubAPIError):
    """409: the resourceVersion sent is stale; re-read the object, then retry the write."""


class GoneError(HubAPIError):
    """410: the resourceVersion or continue token is too old for the server; list again."""


class InvalidObjectError(HubAPIError):
    """422: the object breaks the schema; `causes` name the offending fields."""


# The one place where status codes become classes; 409 is split by reason in error_for_status.
_API_ERRORS: Final[Mapping[int, type[HubAPIError]]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: UnauthorizedError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidObjectError,
}


def error_for_status(
    status: int,
    body: Mapping[str, Any] | None = None,
    *,
    retry_after: float | None = None,
    fallback_message: str = "",
) -> HubError:
    """The error for a failed response or a watch ERROR event.

    Args:
        status: the HTTP status, or the `code` of a watch ERROR event's Status.
        body: the decoded metav1.Status, when the server sent one.
        retry_after: seconds from the Retry-After header, if any; the Status'
            details.retryAfterSeconds is used when the header is absent.
        fallback_message: used when the body carries no message (e.g. a proxy's HTML page).
    """
    status_doc: Mapping[str, Any] = body if body is not None else {}
    reason = str(status_doc.get("reason") or "")
    message = str(status_doc.get("message") or fallback_message)
    details = status_doc.get("details")
    details = details if isinstance(details, Mapping) else {}
    if retry_after is None and details.get("retryAfterSeconds") is not None:
        retry_after = parse_retry_after(str(details["retryAfterSeconds"]))
    if status in TRANSIENT_STATUSES:
        return HubUnavailableError(
            f"hub answered {status} {reason or 'Unavailable'}: {message or '(no message)'}",
            status=status,
            reason=reason,
            retry_after=retry_after,
        )
    raw_causes = details.get("causes")
    causes = tuple(
        StatusCause.from_wire(c)
        for c in (raw_causes if isinstance(raw_causes, list) else ())
        if isinstance(c, Mapping)
    )
    cls = _API_ERRORS.get(status, HubAPIError)
    if status == 409 and reason == REASON_ALREADY_EXISTS:
        cls = AlreadyExistsError
    return cls(status=status, reason=reason, message=message, causes=causes)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), else None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)
