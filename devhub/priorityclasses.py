"""The `scheduling.k8s.io/v1` PriorityClass kind, served as kube-apiserver serves it.

Placements name priority classes, so a hub has them, and tests and `make run` create them with
kubectl or HubClient as they would on a real hub. The store treats PriorityClass like any other
kind, described the way a CRD would describe it (schema, printer columns); this module holds what
kube-apiserver does beyond a schema:

- decoding into typed Go fields: a field of the wrong type, or a value outside int32, is a 400
  decode error, not a 422; zero values are left out as Go's `omitempty` leaves them out (a false
  `globalDefault`, an empty `description`), and `preemptionPolicy` defaults to
  PreemptLowerPriority;
- the scheduling API's validation: names starting `system-` are reserved for the system classes,
  other classes' values are at most 1,000,000,000, `preemptionPolicy` is PreemptLowerPriority or
  Never; `value` and `preemptionPolicy` never change once created;
- the Priority admission plugin: one global default at most (403 for a second one);
- the system classes, created at start as kube-apiserver's bootstrap hook creates them, and
  refused to a DELETE (a deletecollection deletes them, as kube-apiserver's generic one does).

One difference, on purpose: `value` is required (`value: Required value`). kube-apiserver reads
an absent value as 0; a class without one is a test-setup mistake far more often than a wish for
priority 0, so devhub says so instead."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from devhub import errors
from devhub.errors import ApiError, Cause
from devhub.patch import MergeLists
from devhub.resources import Resource, resource_from_crd
from hub.types.scheduling_v1 import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    PriorityClass,
)

__all__ = [
    "MERGE_LISTS",
    "PRIORITY_CLASSES",
    "SYSTEM_PRIORITY_CLASSES",
    "decode_error",
    "manifest",
    "prepare",
    "refuse_second_default",
    "undeletable",
    "validate_create",
    "validate_update",
]

SYSTEM_PREFIX: Final = "system-"
# The classes kube-apiserver creates at start: name -> (value, description). Their values sit
# above HIGHEST_USER_DEFINABLE_PRIORITY, where no other class may go.
SYSTEM_PRIORITY_CLASSES: Final[Mapping[str, tuple[int, str]]] = {
    "system-node-critical": (
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    "system-cluster-critical": (
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to "
        "another node if necessary.",
    ),
}
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
PREEMPTION_POLICIES: Final = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)
# The Go types of the fields, as a decode error names them.
_GO_TYPES: Final[Mapping[str, str]] = {
    "value": "int32",
    "globalDefault": "bool",
    "description": "string",
    "preemptionPolicy": "v1.PreemptionPolicy",
}

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "description": "A name for a priority: the value pods (and placements) that name it get.",
    "required": ["value"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "value": {
            "type": "integer",
            "format": "int32",
            "description": "The priority; immutable. At most 1000000000 unless the class is one "
            "of the system classes.",
        },
        "globalDefault": {
            "type": "boolean",
            "description": "The priority of what names no class; one class at most sets it.",
        },
        "description": {"type": "string", "description": "When to use this class."},
        "preemptionPolicy": {
            "type": "string",
            "description": "PreemptLowerPriority (the default) or Never; immutable.",
        },
    },
}

# Shaped like a CRD so the one Resource constructor reads it; never served as a CRD.
_DEFINITION: Final[dict[str, Any]] = {
    "spec": {
        "group": PriorityClass.GROUP,
        "scope": "Cluster",
        "names": {
            "kind": PriorityClass.KIND,
            "listKind": f"{PriorityClass.KIND}List",
            "plural": PriorityClass.PLURAL,
            "singular": PriorityClass.SINGULAR,
            "shortNames": list(PriorityClass.SHORT_NAMES),
        },
        "versions": [
            {
                "name": PriorityClass.VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": _SCHEMA},
                # kubectl's columns for a real cluster's classes, in its order.
                "additionalPrinterColumns": [
                    {
                        "name": "Value",
                        "type": "integer",
                        "jsonPath": ".value",
                        "description": "The priority of this class",
                    },
                    {
                        "name": "Global-Default",
                        "type": "boolean",
                        "jsonPath": ".globalDefault",
                        "description": "Whether this class is the default priority",
                    },
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    {
                        "name": "PreemptionPolicy",
                        "type": "string",
                        "jsonPath": ".preemptionPolicy",
                        "description": "Whether pods of this class may preempt lower-priority pods",
                    },
                ],
            }
        ],
    },
}

# A PriorityClass has no lists of its own: a strategic merge patch merges only ObjectMeta's.
MERGE_LISTS: Final[MergeLists] = {
    ("metadata", "finalizers"): None,
    ("metadata", "ownerReferences"): "uid",
}
# kube-apiserver prints the Go fields, so a false or absent globalDefault reads `false`.
_ZERO_CELLS: Final[Mapping[str, Any]] = {"Global-Default": False, "PreemptionPolicy": ""}

_DESCRIBED: Final = resource_from_crd(_DEFINITION, merge_lists=MERGE_LISTS)
PRIORITY_CLASSES: Final[Resource] = dataclasses.replace(
    _DESCRIBED,
    columns=tuple(
        dataclasses.replace(column, missing=_ZERO_CELLS.get(column.name))
        for column in _DESCRIBED.columns
    ),
)


def manifest(name: str) -> dict[str, Any]:
    """The body that creates system class `name`."""
    value, description = SYSTEM_PRIORITY_CLASSES[name]
    return {
        "apiVersion": PRIORITY_CLASSES.api_version,
        "kind": PRIORITY_CLASSES.kind,
        "metadata": {"name": name},
        "value": value,
        "description": description,
    }


def _json_kind(value: Any) -> str:
    """How Go's JSON decoder names a value it could not store (`UnmarshalTypeError.Value`)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return f"number {value}"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _fits(go_type: str, value: Any) -> bool:
    if go_type == "int32":
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and INT32_MIN <= value <= INT32_MAX
        )
    if go_type == "bool":
        return isinstance(value, bool)
    return isinstance(value, str)


def decode_error(body: Mapping[str, Any]) -> str | None:
    """Why kube-apiserver could not decode `body` into its PriorityClass (a 400), or None.

    A null is not an error: Go leaves the field at its zero value."""
    for name, go_type in _GO_TYPES.items():
        value = body.get(name)
        if value is None or _fits(go_type, value):
            continue
        return (
            f'{PRIORITY_CLASSES.kind} in version "{PRIORITY_CLASSES.version}" cannot be '
            f"handled as a {PRIORITY_CLASSES.kind}: json: cannot unmarshal "
            f"{_json_kind(value)} into Go struct field {PRIORITY_CLASSES.kind}.{name} of "
            f"type {go_type}"
        )
    return None


def prepare(obj: dict[str, Any]) -> None:
    """`obj` as decoding into the Go struct and encoding it again leaves it, on create and on
    update: preemptionPolicy defaulted, a false globalDefault and an empty description gone."""
    obj.setdefault("preemptionPolicy", PREEMPT_LOWER_PRIORITY)
    if obj.get("globalDefault") is False:
        del obj["globalDefault"]
    if obj.get("description") == "":
        del obj["description"]


def _system_class_problem(name: str, value: Any, global_default: bool) -> str:
    known = SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def validate_create(obj: Mapping[str, Any]) -> list[Cause]:
    """The scheduling API's checks of a new class (its schema checks types and `value`)."""
    causes = []
    name = obj["metadata"].get("name", "")
    value = obj.get("value")
    if name.startswith(SYSTEM_PREFIX):
        problem = _system_class_problem(name, value, bool(obj.get("globalDefault")))
        if problem:
            causes.append(
                Cause(
                    "FieldValueForbidden",
                    f"Forbidden: priority class names with '{SYSTEM_PREFIX}' prefix are reserved "
                    f"for system use only. error: {problem}",
                    "metadata.name",
                )
            )
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        causes.append(
            Cause(
                "FieldValueForbidden",
                "Forbidden: maximum allowed value of a user defined priority is "
                f"{HIGHEST_USER_DEFINABLE_PRIORITY}",
                "value",
            )
        )
    policy = obj.get("preemptionPolicy")
    if policy == "":
        causes.append(Cause("FieldValueRequired", "Required value", "preemptionPolicy"))
    elif policy not in PREEMPTION_POLICIES:
        supported = ", ".join(json.dumps(p) for p in PREEMPTION_POLICIES)
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f"Unsupported value: {json.dumps(policy)}: supported values: {supported}",
                "preemptionPolicy",
            )
        )
    return causes


def validate_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """The scheduling API's checks of an update: only metadata, globalDefault and description
    may change. (The create checks do not run again, as on kube-apiserver.)"""
    causes = []
    if new.get("value") != old.get("value"):
        causes.append(
            Cause("FieldValueForbidden", "Forbidden: may not be changed in an update.", "value")
        )
    policy = new.get("preemptionPolicy")
    if policy != old.get("preemptionPolicy"):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {json.dumps(policy)}: field is immutable",
                "preemptionPolicy",
            )
        )
    return causes


def refuse_second_default(
    obj: Mapping[str, Any], stored: Iterable[Mapping[str, Any]], *, create: bool
) -> None:
    """The Priority admission plugin: a class may become the global default only while no
    other class is. Raises its 403 naming the class that is the default.

    Should several be (kube-apiserver lets a race make two), the lowest value is the default,
    as the plugin picks it; an update of that class itself is let through."""
    if not obj.get("globalDefault"):
        return
    defaults = [o for o in stored if o.get("globalDefault")]
    if not defaults:
        return
    current = min(defaults, key=lambda o: (o.get("value", 0), o["metadata"]["name"]))
    name = obj["metadata"].get("name", "")
    current_name = current["metadata"]["name"]
    if create or current_name != name:
        raise errors.forbidden_object(
            PRIORITY_CLASSES.plural,
            PRIORITY_CLASSES.group,
            name,
            f"PriorityClass {current_name} is already marked as default. Only one default can "
            "exist",
        )


def undeletable(name: str) -> ApiError | None:
    """The 403 a DELETE of a system class gets (whether or not it exists), or None."""
    if name not in SYSTEM_PRIORITY_CLASSES:
        return None
    return errors.forbidden_object(
        PRIORITY_CLASSES.plural,
        PRIORITY_CLASSES.group,
        name,
        "this is a system priority class and cannot be deleted",
    )
