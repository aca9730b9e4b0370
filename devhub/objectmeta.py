"""ObjectMeta: the part of every object the API server validates itself, not the CRD schema.

A CRD's schema says only `metadata: {type: object}`; kube-apiserver decodes metadata into its
typed ObjectMeta, so unknown metadata fields vanish and names, labels, annotations and finalizers
are checked (apimachinery `validation/objectmeta.go`) with the project's one copy of the name and
label rules, `hub.validation`, which the selector parser and the scheduler use too."""

from __future__ import annotations

import json
from typing import Any, Final

from devhub.errors import Cause
from hub.validation import label_key_error, label_value_error

__all__ = ["KNOWN_FIELDS", "normalize_metadata"]

KNOWN_FIELDS: Final = frozenset({
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
})
MAX_ANNOTATIONS_BYTES: Final = 256 * 1024


def _string_map(
    meta: dict[str, Any], key: str, causes: list[Cause], *, labels: bool
) -> None:
    value = meta.get(key)
    if value is None:
        return
    path = f"metadata.{key}"
    if not isinstance(value, dict):
        causes.append(Cause("FieldValueTypeInvalid",
                            f"Invalid value: {type(value).__name__}: must be a map of strings",
                            path))
        del meta[key]
        return
    total = 0
    for name, item in value.items():
        if not isinstance(item, str):
            causes.append(Cause("FieldValueTypeInvalid",
                                f"Invalid value: {item!r}: must be a string", f"{path}[{name}]"))
            continue
        if err := label_key_error(name):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": {err}', path))
        if labels and (err := label_value_error(item)):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{item}": {err}',
                                f"{path}[{name}]"))
        total += len(name) + len(item)
    if not labels and total > MAX_ANNOTATIONS_BYTES:
        causes.append(Cause("FieldValueTooLong",
                            f"Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes", path))


def _finalizers(meta: dict[str, Any], causes: list[Cause]) -> None:
    value = meta.get("finalizers")
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        causes.append(Cause("FieldValueTypeInvalid",
                            "Invalid value: must be a list of strings", "metadata.finalizers"))
        del meta["finalizers"]
        return
    for index, item in enumerate(value):
        path = f"metadata.finalizers[{index}]"
        if err := label_key_error(item):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{item}": {err}', path))


def _owner_references(meta: dict[str, Any], causes: list[Cause]) -> None:
    value = meta.get("ownerReferences")
    if value is None:
        return
    if not isinstance(value, list):
        causes.append(Cause("FieldValueTypeInvalid", "Invalid value: must be a list",
                            "metadata.ownerReferences"))
        del meta["ownerReferences"]
        return
    for index, ref in enumerate(value):
        path = f"metadata.ownerReferences[{index}]"
        if not isinstance(ref, dict):
            causes.append(Cause("FieldValueTypeInvalid", "Invalid value: must be an object", path))
            continue
        for key in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref.get(key), str) or not ref.get(key):
                causes.append(Cause("FieldValueRequired", "Required value", f"{path}.{key}"))


_STRING_FIELDS: Final = (
    "name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp",
    "deletionTimestamp",
)
_INTEGER_FIELDS: Final = ("generation", "deletionGracePeriodSeconds")


def normalize_metadata(raw: Any, pruned: list[str]) -> tuple[dict[str, Any], list[Cause]]:
    """Known ObjectMeta fields of `raw` (unknown ones reported in `pruned`) and type errors.

    The name rules are applied by the caller, because generateName may still supply a name.
    Values of the wrong type are reported and dropped, so nothing downstream trips on them."""
    if raw is None:
        return {}, []
    if not isinstance(raw, dict):
        return {}, [Cause("FieldValueTypeInvalid", "Invalid value: must be an object", "metadata")]
    causes: list[Cause] = []
    meta: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in KNOWN_FIELDS:
            pruned.append(f"metadata.{key}")
        elif value is not None:
            meta[key] = value
    for keys, wanted, label in ((_STRING_FIELDS, str, "a string"),
                                (_INTEGER_FIELDS, int, "an integer")):
        for key in keys:
            value = meta.get(key)
            if key in meta and (not isinstance(value, wanted) or isinstance(value, bool)):
                causes.append(Cause("FieldValueTypeInvalid",
                                    f"Invalid value: {json.dumps(value)}: must be {label}",
                                    f"metadata.{key}"))
                del meta[key]
    _string_map(meta, "labels", causes, labels=True)
    _string_map(meta, "annotations", causes, labels=False)
    _finalizers(meta, causes)
    _owner_references(meta, causes)
    for key in ("labels", "annotations"):
        if meta.get(key) == {}:
            del meta[key]
    for key in ("finalizers", "ownerReferences"):
        if meta.get(key) == []:
            del meta[key]
    meta.pop("managedFields", None)  # devhub does not track field managers
    meta.pop("selfLink", None)
    return meta, causes
