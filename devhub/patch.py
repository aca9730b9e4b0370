"""The patch formats kube-apiserver accepts for custom resources.

- JSON merge patch (RFC 7386), `application/merge-patch+json`: what `kubectl apply` and
  HubClient's merge patches send.
- JSON patch (RFC 6902), `application/json-patch+json`.
- Server-side apply, `application/apply-patch+yaml`: devhub keeps no field managers, so applying
  merges the applied configuration into the live object (maps recursively, lists replaced). That
  is what apply does for a single manager, which is how our tools use it.
Strategic merge patch is refused with 415 for custom resources, as the API server refuses it;
built-in kinds take it (`kubectl apply` patches them that way), so `strategic_merge_patch`
serves the ones devhub has, Namespace and PriorityClass: a merge patch whose lists named in
`merge_lists` merge (by key, or as sets of primitives) and whose `$patch`, `$retainKeys`,
`$deleteFromPrimitiveList/` and `$setElementOrder/` directives are honoured (the last only
accepted: devhub keeps merged lists in their stored order).
"""

from __future__ import annotations

import copy
from typing import Any, Final

__all__ = ["PatchError", "apply_merge", "json_patch", "merge_patch", "strategic_merge_patch"]

_MISSING: Final = object()
_DELETE: Final = object()
PATCH_DIRECTIVE: Final = "$patch"
RETAIN_KEYS: Final = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList/"
SET_ELEMENT_ORDER: Final = "$setElementOrder/"


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


MergeLists = dict[tuple[str, ...], str | None]
"""Paths of the lists a strategic merge patch merges, each with its merge key (None: a list of
primitives, merged as a set)."""


def strategic_merge_patch(target: Any, patch: Any, merge_lists: MergeLists) -> Any:
    """A strategic merge patch of `target`: a merge patch, but the lists in `merge_lists`
    merge instead of being replaced, and the patch's directives apply."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object", malformed=True)
    result = _strategic_map(target, patch, merge_lists, ())
    return {} if result is _DELETE else result


def _strategic_map(
    target: Any, patch: dict[str, Any], merge_lists: MergeLists, path: tuple[str, ...]
) -> Any:
    directive = patch.get(PATCH_DIRECTIVE)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != PATCH_DIRECTIVE}
    if directive is not None:
        raise PatchError(f"unknown patch type: {directive!r} in map", malformed=True)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():  # deletions first, as apimachinery applies them
        if key.startswith(DELETE_FROM_PRIMITIVE_LIST):
            name = key[len(DELETE_FROM_PRIMITIVE_LIST):]
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list", malformed=True)
            if isinstance(result.get(name), list):
                result[name] = [item for item in result[name] if item not in value]
    for key, value in patch.items():
        if key in (PATCH_DIRECTIVE, RETAIN_KEYS) or key.startswith(
                (DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        inner = (*path, key)
        if value is None:
            result.pop(key, None)
        elif inner in merge_lists and isinstance(value, list):
            result[key] = _strategic_list(result.get(key), value, merge_lists[inner])
        elif isinstance(value, dict):
            merged = _strategic_map(result.get(key), value, merge_lists, inner)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    retain = patch.get(RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"{RETAIN_KEYS} must be a list", malformed=True)
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _strategic_list(current: Any, items: list[Any], merge_key: str | None) -> list[Any]:
    result = list(current) if isinstance(current, list) else []
    if merge_key is None:
        result.extend(item for item in items if item not in result)  # a set, in order
        return result
    for item in items:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {merge_key}",
                             malformed=False)
        at = next((i for i, old in enumerate(result)
                   if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None)
        if item.get(PATCH_DIRECTIVE) == "delete":
            if at is not None:
                del result[at]
            continue
        merged = _strategic_map(result[at] if at is not None else {}, item, {}, ())
        if at is None:
            result.append(merged)
        else:
            result[at] = merged
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
