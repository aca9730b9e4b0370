"""The core v1 Event kind, served as kube-apiserver serves it: namespaced, at
/api/v1/namespaces/NS/events, with create, get, list, watch, update, patch and delete.

fleet-scheduler reports a placement past its scheduling deadline with one (docs/operations.md,
"Scheduling deadlines"), so tests and `make run` can read them as `kubectl get events` would. The
store treats Event like any other kind, described the way a CRD would describe it; the schema
names the fields kubectl shows and keeps the rest. Events are not garbage-collected after an
hour, as kube-apiserver's TTL does: a devhub lives for a test or a session."""

from __future__ import annotations

from typing import Any, Final

from devhub.patch import MergeLists
from devhub.resources import Resource, resource_from_crd

__all__ = ["EVENTS"]

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "involvedObject": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "reason": {"type": "string"},
        "message": {"type": "string"},
        "type": {"type": "string"},
        "count": {"type": "integer"},
        "firstTimestamp": {"type": "string", "format": "date-time"},
        "lastTimestamp": {"type": "string", "format": "date-time"},
        "source": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "reportingComponent": {"type": "string"},
    },
}

# Shaped like a CRD so the one Resource constructor reads it; never served as a CRD.
_DEFINITION: Final[dict[str, Any]] = {
    "spec": {
        "group": "",
        "scope": "Namespaced",
        "names": {
            "kind": "Event",
            "listKind": "EventList",
            "plural": "events",
            "singular": "event",
            "shortNames": ["ev"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": _SCHEMA},
                # kubectl's columns for a real cluster's events, in its order.
                "additionalPrinterColumns": [
                    {"name": "Last Seen", "type": "date", "jsonPath": ".lastTimestamp"},
                    {"name": "Type", "type": "string", "jsonPath": ".type"},
                    {"name": "Reason", "type": "string", "jsonPath": ".reason"},
                    {"name": "Object", "type": "string", "jsonPath": ".involvedObject.name"},
                    {"name": "Message", "type": "string", "jsonPath": ".message"},
                ],
            }
        ],
    },
}

# An Event's only merged lists are ObjectMeta's.
MERGE_LISTS: Final[MergeLists] = {
    ("metadata", "finalizers"): None,
    ("metadata", "ownerReferences"): "uid",
}

EVENTS: Final[Resource] = resource_from_crd(_DEFINITION, merge_lists=MERGE_LISTS)
