"""metav1.Status failures, worded as kube-apiserver words them.

Clients decide what to do from `code` and `reason` (the kubernetes client raises ApiException with
the status; `hub/errors.py` maps it to a typed error), and people read `message`. So every failure
devhub returns is one of these, built here, never a bare aiohttp error page or a traceback."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ApiError",
    "Cause",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "forbidden_object",
    "internal",
    "invalid",
    "method_not_allowed",
    "not_acceptable",
    "not_found",
    "status_body",
    "too_many_requests",
    "unauthorized",
    "unavailable",
    "unsupported_media_type",
]

MODIFIED_MESSAGE: Final = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
EXPIRED_CONTINUE_MESSAGE: Final = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)


@dataclass(frozen=True)
class Cause:
    """One entry of `details.causes`: which field is wrong, and how."""

    reason: str
    message: str
    field: str

    def to_wire(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ApiError(Exception):
    """A failure answered as a metav1.Status with `code` as the HTTP status."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details) if details else None
        self.headers = dict(headers) if headers else {}

    def status(self) -> dict[str, Any]:
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return body


def _details(group: str, kind: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def _qualified(resource: str, group: str) -> str:
    """`plural.group` (or `Kind.group`), or the bare name in the core group, as schema.GroupResource
    prints itself: `namespaces`, not `namespaces.`."""
    return f"{resource}.{group}" if group else resource


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(plural, group)} "{name}" not found',
        details=_details(group, plural, name),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        details=_details(group, plural, name),
    )


def conflict(plural: str, group: str, name: str, message: str | None = None) -> ApiError:
    detail = message or MODIFIED_MESSAGE
    text = f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {detail}'
    return ApiError(409, "Conflict", text, details=_details(group, plural, name))


def invalid(kind: str, group: str, name: str, causes: Sequence[Cause]) -> ApiError:
    listed = [str(cause) for cause in causes]
    summary = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    details = _details(group, kind, name)
    details["causes"] = [cause.to_wire() for cause in causes]
    return ApiError(
        422, "Invalid", f'{_qualified(kind, group)} "{name}" is invalid: {summary}',
        details=details,
    )


def forbidden_object(
    plural: str, group: str, name: str, why: str, causes: Sequence[Cause] = ()
) -> ApiError:
    """403 about one object (apimachinery `NewForbidden`), e.g. refused by an admission check:
    `<plural.group> "<name>" is forbidden: <why>` (no name part when the name is not known yet,
    as for a create with only generateName)."""
    subject = f'{_qualified(plural, group)} "{name}"' if name else _qualified(plural, group)
    details = _details(group, plural, name)
    if causes:
        details["causes"] = [cause.to_wire() for cause in causes]
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def expired(message: str = EXPIRED_CONTINUE_MESSAGE) -> ApiError:
    return ApiError(410, "Expired", message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(method: str, path: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the "
                    f"requested resource ({method} {path})")


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format ({content_type or 'none'}) - "
        f"accepted media types include: {', '.join(accepted)}",
    )


def not_acceptable(accept: str) -> ApiError:
    return ApiError(
        406, "NotAcceptable", f"only the following media types are accepted: application/json "
        f"(asked for {accept!r})"
    )


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later (devhub fault injection).",
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")
