"""The status-code table of hub.errors, and the translation of transport exceptions."""

from __future__ import annotations

import http.client
import json
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from hub.client import Bookmark, HubClient, WatchEvent, _parse_page, _translated
from hub.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    GoneError,
    HubAPIError,
    HubConfigError,
    HubError,
    HubUnavailableError,
    InvalidObjectError,
    MalformedObjectError,
    NotFoundError,
    StatusCause,
    UnauthorizedError,
    error_for_status,
    parse_retry_after,
)
from hub.types import MemberCluster


def status(code: int, reason: str = "", message: str = "", **details: Any) -> dict[str, Any]:
    """A metav1.Status failure as the API server sends it."""
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        doc["details"] = details
    return doc


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        pytest.param(400, "BadRequest", BadRequestError, id="400"),
        pytest.param(401, "Unauthorized", UnauthorizedError, id="401"),
        pytest.param(403, "Forbidden", UnauthorizedError, id="403"),
        pytest.param(404, "NotFound", NotFoundError, id="404"),
        pytest.param(409, "AlreadyExists", AlreadyExistsError, id="409-already-exists"),
        pytest.param(409, "Conflict", ConflictError, id="409-conflict"),
        pytest.param(409, "", ConflictError, id="409-no-reason"),
        pytest.param(410, "Expired", GoneError, id="410-expired"),
        pytest.param(410, "Gone", GoneError, id="410-gone"),
        pytest.param(422, "Invalid", InvalidObjectError, id="422"),
        pytest.param(405, "MethodNotAllowed", HubAPIError, id="405-unmapped"),
        pytest.param(415, "UnsupportedMediaType", HubAPIError, id="415-unmapped"),
        pytest.param(429, "TooManyRequests", HubUnavailableError, id="429"),
        pytest.param(500, "InternalError", HubUnavailableError, id="500"),
        pytest.param(502, "", HubUnavailableError, id="502"),
        pytest.param(503, "ServiceUnavailable", HubUnavailableError, id="503"),
        pytest.param(504, "Timeout", HubUnavailableError, id="504"),
    ],
)
def test_status_code_maps_to_one_error_class(
    code: int, reason: str, expected: type[HubError]
) -> None:
    error = error_for_status(code, status(code, reason, "boom"))
    assert type(error) is expected
    assert "boom" in str(error)


@pytest.mark.parametrize(
    ("code", "transient"),
    [(c, True) for c in (429, 500, 502, 503, 504)] + [(c, False) for c in (400, 404, 409, 422)],
)
def test_only_transient_codes_are_unavailable(code: int, transient: bool) -> None:
    assert isinstance(error_for_status(code), HubUnavailableError) is transient


def test_api_error_carries_status_reason_message_and_causes() -> None:
    body = status(
        422,
        "Invalid",
        'ClusterResourceBinding "b" is invalid: spec.state: Unsupported value: "Bogus"',
        causes=[{"reason": "FieldValueNotSupported", "message": "bad", "field": "spec.state"}],
    )
    error = error_for_status(422, body)
    assert isinstance(error, InvalidObjectError)
    assert (error.status, error.reason) == (422, "Invalid")
    assert error.causes == (StatusCause("FieldValueNotSupported", "bad", "spec.state"),)
    assert "spec.state" in str(error)


def test_causes_missing_from_the_message_are_shown() -> None:
    body = status(422, "Invalid", "object is invalid", causes=[{"field": "spec.x", "message": "m"}])
    assert "spec.x: m" in str(error_for_status(422, body))


def test_a_body_that_is_not_a_status_falls_back_to_the_given_message() -> None:
    error = error_for_status(404, None, fallback_message="<html>not here</html>")
    assert isinstance(error, NotFoundError)
    assert error.message == "<html>not here</html>"


@pytest.mark.parametrize(
    ("header", "details", "expected"),
    [
        pytest.param("7", {}, 7.0, id="header"),
        pytest.param(None, {"retryAfterSeconds": 3}, 3.0, id="details"),
        pytest.param("2", {"retryAfterSeconds": 9}, 2.0, id="header-wins"),
        pytest.param(None, {}, None, id="none"),
    ],
)
def test_unavailable_carries_retry_after(
    header: str | None, details: dict[str, Any], expected: float | None
) -> None:
    error = error_for_status(
        429, status(429, "TooManyRequests", **details), retry_after=parse_retry_after(header)
    )
    assert isinstance(error, HubUnavailableError)
    assert (error.status, error.retry_after) == (429, expected)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("120", 120.0, id="seconds"),
        pytest.param("1.5", 1.5, id="fraction"),
        pytest.param("-4", 0.0, id="negative"),
        pytest.param("Wed, 01 May 2024 10:00:30 GMT", 30.0, id="http-date"),
        pytest.param("Wed, 01 May 2024 09:00:00 GMT", 0.0, id="past-date"),
        pytest.param("soon", None, id="garbage"),
        pytest.param("nan", None, id="nan"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="absent"),
    ],
)
def test_retry_after_parses_seconds_and_dates(value: str | None, expected: float | None) -> None:
    now = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
    assert parse_retry_after(value, now=now) == expected


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(error_for_status(409, status(409, "Conflict", "stale")), id="api"),
        pytest.param(error_for_status(503, retry_after=2.0), id="unavailable"),
        pytest.param(HubConfigError("no kubeconfig"), id="config"),
    ],
)
def test_errors_survive_pickling(error: HubError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


# --- transport exceptions never leave hub/ ------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        pytest.param(
            urllib3.exceptions.NewConnectionError(None, "refused"),  # type: ignore[arg-type]
            HubUnavailableError,
            id="connection-refused",
        ),
        pytest.param(
            urllib3.exceptions.ReadTimeoutError(None, "/x", "read timed out"),  # type: ignore[arg-type]
            HubUnavailableError,
            id="read-timeout",
        ),
        pytest.param(
            urllib3.exceptions.MaxRetryError(None, "/x"),  # type: ignore[arg-type]
            HubUnavailableError,
            id="max-retry",
        ),
        pytest.param(
            urllib3.exceptions.ProtocolError("Connection broken"),
            HubUnavailableError,
            id="protocol",
        ),
        pytest.param(http.client.IncompleteRead(b"x"), HubUnavailableError, id="incomplete-read"),
        pytest.param(ConnectionResetError("reset"), HubUnavailableError, id="reset"),
        pytest.param(TimeoutError("timed out"), HubUnavailableError, id="socket-timeout"),
        pytest.param(ApiException(status=0, reason="SSLError"), HubUnavailableError, id="ssl"),
        pytest.param(
            ApiException(status=0, reason="SSLError CERTIFICATE_VERIFY_FAILED"),
            HubConfigError,
            id="untrusted-cert",
        ),
        pytest.param(ConfigException("exec plugin failed"), HubConfigError, id="auth-plugin"),
    ],
)
def test_transport_exceptions_become_hub_errors(
    raised: Exception, expected: type[HubError]
) -> None:
    with pytest.raises(HubError) as caught, _translated("testing"):
        raise raised
    assert type(caught.value) is expected
    assert caught.value.__cause__ is raised
    assert not isinstance(caught.value, (urllib3.exceptions.HTTPError, ApiException))


def test_hub_errors_pass_through_translation_unchanged() -> None:
    original = NotFoundError(status=404, reason="NotFound", message="gone")
    with pytest.raises(NotFoundError) as caught, _translated("testing"):
        raise original
    assert caught.value is original


# --- what the server sends cannot be read -----------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"<html>proxy error</html>", id="not-json"),
        pytest.param(b'{"items": [{"metadata": {"name": 5}}]}', id="item-breaks-model"),
        pytest.param(b'{"items": {"not": "a list"}}', id="items-not-a-list"),
    ],
)
def test_an_unreadable_list_page_is_a_malformed_object_error(data: bytes) -> None:
    with pytest.raises(MalformedObjectError):
        _parse_page(MemberCluster, data)


# A MemberCluster another CRD version allows and our model does not: a 64-character taint value.
SKEWED_CLUSTER: dict[str, Any] = {
    "metadata": {"name": "bad", "resourceVersion": "7"},
    "spec": {"taints": [{"key": "k", "value": "v" * 64, "effect": "NoSchedule"}]},
}
SKEWED_PAGE = json.dumps(
    {"metadata": {"resourceVersion": "8"}, "items": [{"metadata": {"name": "a"}}, SKEWED_CLUSTER]}
).encode()


def test_a_list_page_that_does_not_match_names_the_object() -> None:
    with pytest.raises(MalformedObjectError, match="MemberCluster 'bad' does not match our model"):
        _parse_page(MemberCluster, SKEWED_PAGE)


def test_a_list_page_can_leave_out_objects_that_do_not_match_and_report_them() -> None:
    reported: list[MalformedObjectError] = []
    page = _parse_page(MemberCluster, SKEWED_PAGE, reported.append)
    assert [item.name for item in page.items] == ["a"]
    assert page.metadata.resource_version == "8"
    assert len(reported) == 1 and "'bad'" in str(reported[0])


def test_a_watch_event_that_does_not_match_can_be_skipped_past() -> None:
    reported: list[MalformedObjectError] = []
    skipped = HubClient._event(MemberCluster, event("MODIFIED", SKEWED_CLUSTER), reported.append)
    assert skipped == Bookmark(resource_version="7")  # nothing yielded; the watch moves past it
    assert len(reported) == 1
    with pytest.raises(MalformedObjectError):
        HubClient._event(MemberCluster, event("MODIFIED", SKEWED_CLUSTER))


def event(type_: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_, "object": obj}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(event("ERROR", status(410, "Expired", "too old")), GoneError, id="410"),
        pytest.param(event("ERROR", status(500, "InternalError")), HubUnavailableError, id="500"),
        pytest.param(event("SURPRISE", {"metadata": {}}), MalformedObjectError, id="unknown-type"),
        pytest.param({"type": "ADDED"}, MalformedObjectError, id="no-object"),
        pytest.param(
            event("ADDED", {"metadata": {"name": ["not", "a", "name"]}}),
            MalformedObjectError,
            id="object-breaks-model",
        ),
    ],
)
def test_watch_error_and_garbage_events_raise_hub_errors(
    doc: dict[str, Any], expected: type[HubError]
) -> None:
    with pytest.raises(expected):
        HubClient._event(MemberCluster, doc)


def test_watch_events_carry_type_object_and_resource_version() -> None:
    added = HubClient._event(
        MemberCluster, event("ADDED", {"metadata": {"name": "a", "resourceVersion": "9"}})
    )
    assert isinstance(added, WatchEvent)
    assert (added.type, added.object.name, added.resource_version) == ("ADDED", "a", "9")
    bookmark = HubClient._event(
        MemberCluster,
        event("BOOKMARK", {"kind": "MemberCluster", "metadata": {"resourceVersion": "12"}}),
    )
    assert bookmark == Bookmark(resource_version="12")
