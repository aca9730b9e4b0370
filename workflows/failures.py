"""Failure types shared by the activities that raise them and the RetryPolicies that read them.

Temporal retries every activity failure unless its type is listed as non-retryable; these names
are the contract between the two sides, so they are declared once. `activities.translate` maps
hub and scheduler errors onto them, in one place."""

from typing import Final

# A hub object is malformed in a way that re-sending cannot fix (HTTP 422, bad annotation).
INVALID_OBJECT: Final = "InvalidObject"
# KubeFleet's ErrUnexpectedBehavior: an invariant is broken; retrying gives the same answer, so
# the workflow records it and waits for the next event (kubefleet-rules 3.3).
UNEXPECTED: Final = "UnexpectedBehavior"
# A write raced another controller (HTTP 409 Conflict): re-read and retry (retryable).
CONFLICT: Final = "Conflict"
# An object the activity read vanished before it could write it (HTTP 404 on a write): the
# world moved on, so re-read everything and decide again (retryable).
VANISHED: Final = "ObjectVanished"
# The hub could not be reached or answered 429/5xx (retryable).
HUB_UNAVAILABLE: Final = "HubUnavailable"
# The worker's credentials are missing, rejected or not allowed (401/403, unusable kubeconfig).
# Retryable: fixing RBAC or the secret should resume scheduling without touching workflows.
HUB_ACCESS: Final = "HubAccess"
# Temporal itself answered UNAVAILABLE to an activity that calls it (the reconcile): retryable,
# and benign, so the SDK logs one line at DEBUG rather than a traceback while a server restarts.
TEMPORAL_UNAVAILABLE: Final = "TemporalUnavailable"

# A local turn met a hub outage (or knows of one): it is not retried where it is, but run again
# on the activity queue at once, where the worker's gate waits the outage out with one probe
# every 2 s instead of every placement retrying (workflows.execution).
RUN_ON_QUEUE: Final = "RunOnActivityQueue"
# The details of a RUN_ON_QUEUE failure whose local turn got no local slot (the workflow
# worker's slots were busy with better turns: activities.local_slots). Only that turn runs on
# the queue: nothing is wrong with the hub, so the next turns need not follow it there. The
# type stays RUN_ON_QUEUE so that a worker of an earlier release still runs it on the queue.
NO_LOCAL_SLOT: Final = "NoLocalSlot"

NON_RETRYABLE: Final = (INVALID_OBJECT, UNEXPECTED)
RETRYABLE: Final = (CONFLICT, VANISHED, HUB_UNAVAILABLE, HUB_ACCESS, TEMPORAL_UNAVAILABLE)
