"""Server-side printing: the meta.k8s.io/v1 Table that `kubectl get` asks for.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever columns
the server returns. For custom resources those are Name, the CRD's additionalPrinterColumns (a
small JSONPath dialect) and Age, rendered the way apiextensions-apiserver's table convertor does:
string columns print the first JSONPath result, other types keep typed JSON values (or empty when
the value has another type), dates become a human-readable age. A built-in kind's table
(PriorityClass) is described the same way; where its Go printer prints a zero value that the
stored JSON leaves out (`globalDefault: false`), the column's `missing` cell stands in."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from devhub.resources import Column, Resource

__all__ = ["JSONPathError", "human_duration", "jsonpath", "table"]

NAME_COLUMN: Final = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "priority": 0,
}
_STEP: Final = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-]+)
      | \[(?P<star>\*)\]
      | \[(?P<index>-?\d+)\]
      | \[\?\(@(?P<fpath>(?:\.[A-Za-z0-9_\-]+)+)\s*(?P<fop>==|!=)\s*
          (?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<num>-?\d+(?:\.\d+)?))\s*\)\]""",
    re.VERBOSE,
)


class JSONPathError(ValueError):
    pass


def _compile(path: str) -> list[re.Match[str]]:
    expression = path.strip()
    if expression.startswith("{") and expression.endswith("}"):
        expression = expression[1:-1]
    steps = []
    position = 0
    while position < len(expression):
        step = _STEP.match(expression, position)
        if step is None:
            raise JSONPathError(f"unsupported JSONPath {path!r} at {expression[position:]!r}")
        steps.append(step)
        position = step.end()
    return steps


def _follow(node: Any, fields: Sequence[str]) -> Any:
    for name in fields:
        if not isinstance(node, dict) or name not in node:
            return None
        node = node[name]
    return node


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Every value `path` selects in `obj`, in document order."""
    nodes = [obj]
    for step in _compile(path):
        selected: list[Any] = []
        for node in nodes:
            if step.group("field") is not None:
                if isinstance(node, dict) and step.group("field") in node:
                    selected.append(node[step.group("field")])
            elif step.group("star") is not None:
                if isinstance(node, list):
                    selected.extend(node)
                elif isinstance(node, dict):
                    selected.extend(node.values())
            elif step.group("index") is not None:
                index = int(step.group("index"))
                if isinstance(node, list) and -len(node) <= index < len(node):
                    selected.append(node[index])
            else:
                if not isinstance(node, list):
                    continue
                fields = step.group("fpath").split(".")[1:]
                literal: Any = step.group("dq")
                if literal is None:
                    literal = step.group("sq")
                if literal is None:
                    literal = json.loads(step.group("num"))
                equal = step.group("fop") == "=="
                selected.extend(
                    item for item in node if (_follow(item, fields) == literal) == equal
                )
        nodes = selected
    return nodes


def human_duration(seconds: float) -> str:
    """apimachinery `duration.HumanDuration`: 45s, 5m10s, 3h20m, 4d, 2y30d."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _cell(column: Column, obj: Mapping[str, Any], now: datetime) -> Any:
    try:
        results = jsonpath(obj, column.json_path)
    except JSONPathError:
        return None
    if not results or results[0] is None:
        return column.missing
    value = results[0]
    if column.type == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, separators=(",", ":"))
    if column.type == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float):
            return int(value)
        return None
    if column.type == "number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    if column.type == "date":
        if not isinstance(value, str):
            return None
        stamp = _parse_time(value)
        if stamp is None:
            return "<invalid>"
        return human_duration((now - stamp).total_seconds())
    return None


def column_definitions(resource: Resource) -> list[dict[str, Any]]:
    definitions = [dict(NAME_COLUMN)]
    for column in resource.columns:
        definition: dict[str, Any] = {
            "name": column.name,
            "type": column.type,
            "format": column.format,
            "description": column.description or f"Custom resource definition column "
            f"(in JSONPath format): {column.json_path}",
            "priority": column.priority,
        }
        definitions.append(definition)
    return definitions


def _row_object(obj: Mapping[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return dict(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def table(
    resource: Resource,
    objects: Iterable[Mapping[str, Any]],
    *,
    resource_version: str,
    include_object: str = "Metadata",
    with_columns: bool = True,
    continue_token: str | None = None,
    remaining: int | None = None,
) -> dict[str, Any]:
    now = datetime.now(UTC)
    rows = []
    for obj in objects:
        cells: list[Any] = [(obj.get("metadata") or {}).get("name", "")]
        cells.extend(_cell(column, obj, now) for column in resource.columns)
        row: dict[str, Any] = {"cells": cells}
        row_object = _row_object(obj, include_object)
        if row_object is not None:
            row["object"] = row_object
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    if remaining is not None:
        metadata["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": column_definitions(resource) if with_columns else [],
        "rows": rows,
    }
