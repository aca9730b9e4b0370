"""Failure types shared by the activities that raise them and the RetryPolicies that read them.

Temporal retries every activity failure unless its type is listed as non-retryable; these names
are the contract between the two sides, so they are declared once."""

from typing import Final

# A hub object is malformed in a way that re-sending cannot fix (HTTP 422, bad annotation).
INVALID_OBJECT: Final = "InvalidObject"
# KubeFleet's ErrUnexpectedBehavior: an invariant is broken; retrying gives the same answer, so
# the workflow records it and waits for the next event (reference 3.3).
UNEXPECTED: Final = "UnexpectedBehavior"
# A write raced another controller (HTTP 409 Conflict): re-read and retry (retryable).
CONFLICT: Final = "Conflict"
# The hub could not be reached or answered 429/5xx (retryable).
HUB_UNAVAILABLE: Final = "HubUnavailable"

NON_RETRYABLE: Final = (INVALID_OBJECT, UNEXPECTED)
