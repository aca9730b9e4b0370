"""The CRDs' CEL rules (`x-kubernetes-validations`), evaluated as kube-apiserver evaluates them.

A rule is a CEL expression over `self`, the value at the schema node that carries it; a rule that
names `oldSelf` is a transition rule, evaluated only on an update whose old object had a value at
the same place (object properties and map entries correlate; list items do not). A rule that is
false answers with its `message` at the node's field path, in kube-apiserver's form:
`spec.policy: Invalid value: "object": placement type is immutable`. As kube-apiserver does with
validation ratcheting, a value an update leaves unchanged is not checked again, so a status or
finalizer update never fails on a rule the stored spec predates.

The evaluator is cel-python (`celpy`), a maintained implementation of the CEL specification, whose
tree-walking interpreter takes a few hundred microseconds per rule. A rule is a pure function of
`self` and `oldSelf`, so outcomes are memoised by (rule, the values' canonical JSON): objects
written in bulk (a bench's placements) share policies, and their rules are evaluated once. Only
the parts of an object a rule can read are its inputs (`_reads`): a rule that reads `self` only
through field selections (`self.metadata.name`, `has(self.a.b)`, `self.list.all(...)`) is
evaluated, and memoised, on an object holding just those fields. The root's name rule thus costs
nothing on a status update, where the whole object (its status too) would be a new input."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from devhub.errors import Cause
from devhub.schema import join
from hub.crds import VALIDATIONS

__all__ = ["VALIDATIONS", "check_rules"]

_OLD_SELF: Final = re.compile(r"\boldSelf\b")
# A use of `self` or `oldSelf` with the field selections that follow it, and whether the last
# selection is a call (a macro or method: `self.items.all(...)` reads `items` whole).
_USE: Final = re.compile(r"\b(self|oldSelf)\b((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)(\s*\()?")
_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENVIRONMENT: Final = celpy.Environment()


class _Absent:
    """No value at this place in the old object (a create, or a field the old object lacked)."""


ABSENT: Final = _Absent()


@functools.lru_cache(maxsize=256)
def _program(rule: str) -> Any:
    return _ENVIRONMENT.program(_ENVIRONMENT.compile(rule))


@functools.lru_cache(maxsize=4096)
def _outcome(rule: str, value: str, old: str | None) -> bool | str:
    """True if the rule holds, False if not, or the evaluation error's text."""
    activation = {"self": json_to_cel(json.loads(value))}
    if old is not None:
        activation["oldSelf"] = json_to_cel(json.loads(old))
    try:
        result = _program(rule).evaluate(activation)
    except CELEvalError as exc:
        return str(exc.args[0])
    if isinstance(result, celtypes.BoolType):
        return bool(result)
    return str(result)


# Field path tree: name -> the tree below it, or None when the field is read whole.
Reads = dict[str, "Reads | None"]


@functools.lru_cache(maxsize=256)
def _reads(rule: str, variable: str) -> Reads | None:
    """The fields of `variable` (self or oldSelf) that `rule` can read, or None when it may read
    the value whole (`self == ...`, `size(self)`, `self[...]`, `self.all(...)`, an escaped field
    name). Over-reading is harmless; a field left out must be one the rule cannot reach."""
    tree: Reads = {}
    for use in _USE.finditer(rule):
        if use[1] != variable:
            continue
        path = _IDENT.findall(use[2])
        if use[3] is not None:
            path = path[:-1]  # the last name is a call on what precedes it
        if not path or any("__" in name for name in path):
            return None  # CEL escapes names with "__": the JSON key is another
        node = tree
        for depth, name in enumerate(path):
            last = depth == len(path) - 1
            if name in node and node[name] is None:
                break  # already read whole
            if last:
                node[name] = None
            else:
                node = node.setdefault(name, {})  # type: ignore[assignment]
    return tree


def _project(value: Any, reads: Reads | None) -> Any:
    """`value` with only the fields in `reads` (all of it for None, or when it is no object)."""
    if reads is None or not isinstance(value, dict):
        return value
    return {name: _project(value[name], below) for name, below in reads.items() if name in value}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def check_rules(
    schema: Mapping[str, Any], value: Any, old: Any = ABSENT, path: str = ""
) -> list[Cause]:
    """Causes for every CEL rule under `schema` that `value` breaks (`old`: the stored value on
    an update)."""
    causes: list[Cause] = []
    _walk(schema, value, old, path, causes)
    return causes


# Schema node -> (the node, whether it or a node below carries a rule). The node is kept so its
# id cannot be reused by another schema while the entry exists.
_RULED: dict[int, tuple[Mapping[str, Any], bool]] = {}


def _ruled(schema: Mapping[str, Any]) -> bool:
    """Whether any rule lives at or below `schema`: a write to an object of a kind without rules
    (bindings, clusters) or to a part without them (status) is not walked at all."""
    known = _RULED.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    below: list[Mapping[str, Any]] = list((schema.get("properties") or {}).values())
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), Mapping):
            below.append(schema[key])
    found = VALIDATIONS in schema or any(_ruled(sub) for sub in below)
    _RULED[id(schema)] = (schema, found)
    return found


def _walk(schema: Mapping[str, Any], value: Any, old: Any, path: str, causes: list[Cause]) -> None:
    if not _ruled(schema):
        return
    if old is not ABSENT and value == old:
        return  # ratcheting: an unchanged value is not validated again
    for rule in schema.get(VALIDATIONS, ()):
        cause = _evaluate(rule, schema, value, old, path)
        if cause is not None:
            causes.append(cause)
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, additional if isinstance(additional, dict) else None)
            if sub is None:
                continue
            old_item = old.get(key, ABSENT) if isinstance(old, dict) else ABSENT
            child = join(path, key) if key in properties else f"{path}[{key}]"
            _walk(sub, item, old_item, child, causes)
    elif isinstance(value, list):
        items = schema.get("items") or {}
        for index, item in enumerate(value):
            _walk(items, item, ABSENT, f"{path}[{index}]", causes)


def _evaluate(
    rule: Mapping[str, Any], schema: Mapping[str, Any], value: Any, old: Any, path: str
) -> Cause | None:
    text = rule["rule"]
    transition = _OLD_SELF.search(text) is not None
    if transition and old is ABSENT:
        return None
    field = path or "<root>"
    shown = schema.get("type", "object")
    shown_value = _project(value, _reads(text, "self"))
    shown_old = _canonical(_project(old, _reads(text, "oldSelf"))) if transition else None
    outcome = _outcome(text, _canonical(shown_value), shown_old)
    if outcome is True:
        return None
    if outcome is False:
        message = rule.get("message") or f"failed rule: {text}"
        return Cause("FieldValueInvalid", f'Invalid value: "{shown}": {message}', field)
    return Cause(
        "FieldValueInvalid", f'Invalid value: "{shown}": rule evaluation error: {outcome}', field
    )
