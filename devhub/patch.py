"""The patch formats kube-apiserver accepts for custom resources.

- JSON merge patch (RFC 7386), `application/merge-patch+json`: what `kubectl apply` and
  HubClient's merge patches send.
- JSON patch (RFC 6902), `application/json-patch+json`.
- Server-side apply, `application/apply-patch+yaml`: devhub keeps no field managers, so applying
  merges the applied configuration into the live object (maps recursively, lists replaced). That
  is what apply does for a single manager, which is how our tools use it.
Strategic merge patch is refused with 415 for custom resources, as the API server refuses it.
"""

from __future__ import annotations

import copy
from typing import Any, Final

__all__ = ["PatchError", "apply_merge", "json_patch", "merge_patch"]

_MISSING: Final = object()


class PatchError(ValueError):
    """A patch that cannot be applied; `malformed` ones are 400, failed operations 422."""

    def __init__(self, message: str, *, malformed: bool) -> None:
        super().__init__(message)
        self.malformed = malformed


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_merge(live: Any, applied: Any) -> Any:
    """Merge an applied configuration into the live object: maps merge, everything else wins."""
    if isinstance(live, dict) and isinstance(applied, dict):
        result = dict(live)
        for key, value in applied.items():
            result[key] = apply_merge(live.get(key, _MISSING), value)
        return result
    return copy.deepcopy(applied)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"invalid JSON pointer {path!r}: must be a string", malformed=True)
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}: must start with '/'", malformed=True)
    return [_unescape(token) for token in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool, path: str) -> int:
    if for_add and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {path}", malformed=False)
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise PatchError(f"array index {index} out of bounds in {path}", malformed=False)
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path {path} does not exist: missing {token!r}", malformed=False)
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, for_add=False, path=path)]
        else:
            raise PatchError(f"path {path} does not exist", malformed=False)
    return node


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path} does not exist", malformed=False)
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False, path=path)]
    raise PatchError(f"path {path} does not exist", malformed=False)


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True, path=path), value)
    else:
        raise PatchError(f"cannot add at {path}: parent is not a container", malformed=False)
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document", malformed=False)
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"cannot remove {path}: it does not exist", malformed=False)
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, for_add=False, path=path))
    raise PatchError(f"cannot remove {path}: it does not exist", malformed=False)


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 on a copy of `doc`."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations", malformed=True)
    result = copy.deepcopy(doc)
    for number, operation in enumerate(operations):
        if not isinstance(operation, dict) or "op" not in operation:
            raise PatchError(f"operation {number} has no 'op'", malformed=True)
        op = operation["op"]
        if "path" not in operation:
            raise PatchError(f"operation {number} ({op}) has no 'path'", malformed=True)
        path = operation["path"]
        needs_value = op in ("add", "replace", "test")
        if needs_value and "value" not in operation:
            raise PatchError(f"operation {number} ({op}) has no 'value'", malformed=True)
        value = copy.deepcopy(operation.get("value"))
        if op == "add":
            result = _add(result, path, value)
        elif op == "remove":
            result, _ = _remove(result, path)
        elif op == "replace":
            _get(result, path)
            result, _ = _remove(result, path) if _pointer(path) else (result, None)
            result = _add(result, path, value)
        elif op in ("move", "copy"):
            source = operation.get("from")
            if source is None:
                raise PatchError(f"operation {number} ({op}) has no 'from'", malformed=True)
            if op == "move":
                result, moved = _remove(result, source)
            else:
                moved = copy.deepcopy(_get(result, source))
            result = _add(result, path, moved)
        elif op == "test":
            if _get(result, path) != value:
                raise PatchError(f"testing value {path} failed", malformed=False)
        else:
            raise PatchError(f"unknown operation {op!r} in operation {number}", malformed=True)
    return result
