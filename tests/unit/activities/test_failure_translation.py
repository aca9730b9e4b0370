"""A 403 for a write into a namespace being deleted is not an RBAC problem (review finding):
it is retried as a vanished object, with the words that say so."""

from __future__ import annotations

from activities.translate import NAMESPACE_TERMINATING, failure_for
from hub.errors import StatusCause, UnauthorizedError
from workflows import failures


def test_a_terminating_namespace_is_not_reported_as_missing_rbac() -> None:
    terminating = UnauthorizedError(
        status=403,
        reason="Forbidden",
        message='resourcebindings "x" is forbidden: unable to create new content in namespace '
        "shop because it is being terminated",
        causes=(StatusCause(reason=NAMESPACE_TERMINATING, message="namespace shop"),),
    )
    error = failure_for(terminating, "cycle 2 of placement 'shop/web'")
    assert error.type == failures.VANISHED and not error.non_retryable
    assert "namespace is being deleted" in str(error)
    assert "RBAC" not in str(error)


def test_other_forbidden_answers_still_point_at_credentials() -> None:
    denied = UnauthorizedError(status=403, reason="Forbidden", message="no")
    error = failure_for(denied, "cycle 1 of placement 'web'")
    assert error.type == failures.HUB_ACCESS
    assert "RBAC" in str(error)
