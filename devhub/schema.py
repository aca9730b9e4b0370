"""Pruning, defaulting and validation against a CRD's structural schema, as kube-apiserver does it.

The order matters and is the API server's: decode, drop nulls, prune unknown fields (unless a node
preserves them), apply defaults, then validate. Pruning is silent unless the client asked for
strict field validation, so `normalize` reports the pruned paths and the caller decides.
Messages follow kube-openapi's wording so that a failure looks the same against devhub and a
real hub; field paths use Kubernetes' notation (`spec.taints[0].key`, `status.properties[name]`).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from devhub.errors import Cause
from hub.crds import INT_OR_STRING

__all__ = ["PRESERVE", "join", "normalize", "validate"]

PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
_DATE_TIME: Final = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_VALUE_PREVIEW: Final = 80


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object" or "properties" in schema


def normalize(
    schema: Mapping[str, Any], value: Any, path: str, pruned: list[str], *, skip: frozenset[str]
) -> Any:
    """`value` with nulls dropped, unknown fields pruned and defaults applied (a new object).

    Keys in `skip` are left alone at this level (the root's `metadata`, handled elsewhere)."""
    if isinstance(value, dict) and _is_object_schema(schema):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get(PRESERVE))
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in skip:
                out[key] = item
                continue
            sub = properties.get(key)
            if sub is None and isinstance(additional, dict):
                sub = additional
            if item is None and not (sub or {}).get("nullable"):
                continue  # the API server prunes nulls of non-nullable fields
            if sub is not None:
                out[key] = normalize(sub, item, join(path, key) if key in properties
                                     else f"{path}[{key}]", pruned, skip=frozenset())
            elif preserve:
                out[key] = item
            else:
                pruned.append(join(path, key))
        for key, sub in properties.items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
        return out
    if isinstance(value, list) and schema.get("type") == "array":
        items = schema.get("items") or {}
        return [
            normalize(items, item, f"{path}[{index}]", pruned, skip=frozenset())
            for index, item in enumerate(value)
        ]
    return value


def validate(
    schema: Mapping[str, Any], value: Any, path: str, *, skip: frozenset[str]
) -> list[Cause]:
    causes: list[Cause] = []
    _validate(schema, value, path, causes, skip)
    return causes


def _preview(value: Any) -> str:
    if isinstance(value, str):
        text = json.dumps(value)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= _VALUE_PREVIEW else text[: _VALUE_PREVIEW - 3] + "..."


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_matches(expected: str, value: Any) -> bool:
    actual = _json_type(value)
    if expected == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    if expected == "number":
        return actual in ("integer", "number")
    return actual == expected


def _format_ok(fmt: str, value: str) -> bool:
    if fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
        return True
    if fmt == "date-time":
        return bool(_DATE_TIME.match(value))
    return True  # formats the CRDs do not use are not checked


def _validate(
    schema: Mapping[str, Any], value: Any, path: str, causes: list[Cause], skip: frozenset[str]
) -> None:
    expected = schema.get("type")
    field = path or "<root>"
    if schema.get(INT_OR_STRING) and (
        isinstance(value, bool) or not isinstance(value, (int, str))
    ):
        causes.append(Cause(
            "FieldValueTypeInvalid",
            f"Invalid value: {_preview(value)}: {field} in body must be of type "
            f'integer or string: "{_json_type(value)}"',
            field,
        ))
        return
    if expected and not _type_matches(expected, value):
        causes.append(Cause(
            "FieldValueTypeInvalid",
            f"Invalid value: {_preview(value)}: {field} in body must be of type {expected}: "
            f'"{_json_type(value)}"',
            field,
        ))
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(json.dumps(item) for item in enum)
        causes.append(Cause(
            "FieldValueNotSupported",
            f"Unsupported value: {_preview(value)}: supported values: {supported}",
            field,
        ))
    if isinstance(value, dict):
        _validate_object(schema, value, path, causes, skip)
    elif isinstance(value, list):
        _validate_array(schema, value, path, causes)
    elif isinstance(value, str):
        _validate_string(schema, value, field, causes)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(schema, value, field, causes)


def _validate_object(
    schema: Mapping[str, Any],
    value: dict[str, Any],
    path: str,
    causes: list[Cause],
    skip: frozenset[str],
) -> None:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for required in schema.get("required", ()):
        if required not in value:
            causes.append(Cause("FieldValueRequired", "Required value", join(path, required)))
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if key in skip:
            continue
        if key in properties:
            _validate(properties[key], item, join(path, key), causes, frozenset())
        elif isinstance(additional, dict):
            _validate(additional, item, f"{path}[{key}]", causes, frozenset())


def _validate_array(
    schema: Mapping[str, Any], value: list[Any], path: str, causes: list[Cause]
) -> None:
    field = path or "<root>"
    max_items = schema.get("maxItems")
    if max_items is not None and len(value) > max_items:
        causes.append(Cause(
            "FieldValueTooMany", f"Too many: {len(value)}: must have at most {max_items} items",
            field,
        ))
    min_items = schema.get("minItems")
    if min_items is not None and len(value) < min_items:
        causes.append(Cause(
            "FieldValueInvalid",
            f"Invalid value: {len(value)}: {field} in body should have at least {min_items} items",
            field,
        ))
    items = schema.get("items") or {}
    for index, item in enumerate(value):
        _validate(items, item, f"{path}[{index}]", causes, frozenset())
    keys = schema.get("x-kubernetes-list-map-keys")
    if schema.get("x-kubernetes-list-type") == "map" and keys:
        seen: set[str] = set()
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            identity = json.dumps({key: item.get(key) for key in keys}, sort_keys=True)
            if identity in seen:
                causes.append(Cause(
                    "FieldValueDuplicate", f"Duplicate value: {identity}", f"{path}[{index}]"
                ))
            seen.add(identity)


def _validate_string(
    schema: Mapping[str, Any], value: str, field: str, causes: list[Cause]
) -> None:
    max_length = schema.get("maxLength")
    if max_length is not None and len(value) > max_length:
        causes.append(Cause(
            "FieldValueTooLong", f"Too long: may not be more than {max_length} bytes", field
        ))
    min_length = schema.get("minLength")
    if min_length is not None and len(value) < min_length:
        causes.append(Cause(
            "FieldValueInvalid",
            f"Invalid value: {_preview(value)}: {field} in body should be at least "
            f"{min_length} chars long",
            field,
        ))
    pattern = schema.get("pattern")
    if pattern is not None and not re.search(pattern, value):
        causes.append(Cause(
            "FieldValueInvalid",
            f"Invalid value: {_preview(value)}: {field} in body should match '{pattern}'",
            field,
        ))
    fmt = schema.get("format")
    if fmt and not _format_ok(fmt, value):
        causes.append(Cause(
            "FieldValueInvalid",
            f"Invalid value: {_preview(value)}: {field} in body must be of type {fmt}: "
            f"{_preview(value)}",
            field,
        ))


def _validate_number(
    schema: Mapping[str, Any], value: float, field: str, causes: list[Cause]
) -> None:
    minimum = schema.get("minimum")
    if minimum is not None and value < minimum:
        causes.append(Cause(
            "FieldValueInvalid",
            f"Invalid value: {_preview(value)}: {field} in body should be greater than or equal "
            f"to {minimum}",
            field,
        ))
    maximum = schema.get("maximum")
    if maximum is not None and value > maximum:
        causes.append(Cause(
            "FieldValueInvalid",
            f"Invalid value: {_preview(value)}: {field} in body should be less than or equal "
            f"to {maximum}",
            field,
        ))
