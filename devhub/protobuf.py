"""Just enough Kubernetes protobuf to read the built-in kinds `kubectl create namespace` and
`kubectl create priorityclass` send.

kubectl's generator commands use client-go's typed clientsets, which send built-in kinds as
`application/vnd.kubernetes.protobuf` and never fall back to JSON; kube-apiserver accepts that for
built-in kinds (not for custom resources). So devhub reads such a protobuf body (a
`runtime.Unknown` envelope after the magic `k8s\\0`, holding the object's message) into the JSON
object kube-apiserver would have decoded, and everything after decoding is the JSON path.
Answers stay JSON, which those clients also accept. Only the fields these kinds can carry are
read; zero values are dropped, as Go's `omitempty` drops them from JSON, except where the Go
field has no `omitempty` (a PriorityClass's `value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

__all__ = ["MAGIC", "PROTOBUF", "ProtobufError", "decode"]

PROTOBUF: Final = "application/vnd.kubernetes.protobuf"
MAGIC: Final = b"k8s\x00"

VARINT: Final = 0
FIXED64: Final = 1
BYTES: Final = 2
FIXED32: Final = 5

# field number -> (JSON name, how to read it, the nested message's fields if any)
Fields = Mapping[int, tuple[str, str, Any]]

_TYPE_META: Final[Fields] = {1: ("apiVersion", "string", None), 2: ("kind", "string", None)}
_UNKNOWN: Final[Fields] = {
    1: ("typeMeta", "message", _TYPE_META),
    2: ("raw", "bytes", None),
    3: ("contentEncoding", "string", None),
    4: ("contentType", "string", None),
}
_OWNER_REFERENCE: Final[Fields] = {
    1: ("kind", "string", None),
    3: ("name", "string", None),
    4: ("uid", "string", None),
    5: ("apiVersion", "string", None),
    6: ("controller", "bool", None),
    7: ("blockOwnerDeletion", "bool", None),
}
_OBJECT_META: Final[Fields] = {
    1: ("name", "string", None),
    2: ("generateName", "string", None),
    3: ("namespace", "string", None),
    4: ("selfLink", "string", None),
    5: ("uid", "string", None),
    6: ("resourceVersion", "string", None),
    7: ("generation", "int", None),
    8: ("creationTimestamp", "time", None),
    9: ("deletionTimestamp", "time", None),
    10: ("deletionGracePeriodSeconds", "int", None),
    11: ("labels", "map", None),
    12: ("annotations", "map", None),
    13: ("ownerReferences", "messages", _OWNER_REFERENCE),
    14: ("finalizers", "strings", None),
}
_NAMESPACE_CONDITION: Final[Fields] = {
    1: ("type", "string", None),
    2: ("status", "string", None),
    4: ("lastTransitionTime", "time", None),
    5: ("reason", "string", None),
    6: ("message", "string", None),
}
_NAMESPACE: Final[Fields] = {
    1: ("metadata", "message", _OBJECT_META),
    2: ("spec", "message", {1: ("finalizers", "strings", None)}),
    3: ("status", "message", {
        1: ("phase", "string", None),
        2: ("conditions", "messages", _NAMESPACE_CONDITION),
    }),
}
_PRIORITY_CLASS: Final[Fields] = {
    1: ("metadata", "message", _OBJECT_META),
    2: ("value", "int32", None),
    3: ("globalDefault", "bool", None),
    4: ("description", "string", None),
    5: ("preemptionPolicy", "string", None),
}
KINDS: Final[Mapping[tuple[str, str], Fields]] = {
    ("v1", "Namespace"): _NAMESPACE,
    ("scheduling.k8s.io/v1", "PriorityClass"): _PRIORITY_CLASS,
}


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf message devhub can read; the message says why."""


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 64 bits")


def _fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(number, wire type, value) of each field in `data`, in order."""
    out: list[tuple[int, int, int | bytes]] = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, position = _varint(data, position)
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if position + size > len(data):
                raise ProtobufError(f"truncated field {number}")
            value = int.from_bytes(data[position:position + size], "little")
            position += size
        elif wire == BYTES:
            size, position = _varint(data, position)
            if position + size > len(data):
                raise ProtobufError(f"truncated field {number}")
            value = data[position:position + size]
            position += size
        else:
            raise ProtobufError(f"unsupported wire type {wire} for field {number}")
        out.append((number, wire, value))
    return out


def _text(value: int | bytes, number: int) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError(f"field {number} should be length-delimited")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtobufError(f"field {number} is not UTF-8") from None


def _int64(value: int | bytes, number: int) -> int:
    if not isinstance(value, int):
        raise ProtobufError(f"field {number} should be a varint")
    return value - (1 << 64) if value >= 1 << 63 else value


def _int32(value: int | bytes, number: int) -> int:
    """A negative int32 travels as its 64-bit two's complement, as every protobuf varint."""
    signed = _int64(value, number)
    if not -(1 << 31) <= signed < 1 << 31:
        raise ProtobufError(f"field {number}: {signed} does not fit an int32")
    return signed


def _time(value: int | bytes, number: int) -> str | None:
    if not isinstance(value, bytes):
        raise ProtobufError(f"field {number} should be a Time message")
    parts = {n: _int64(v, n) for n, _, v in _fields(value)}
    seconds = parts.get(1, 0)
    if not seconds and not parts.get(2, 0):
        return None  # the zero time: null in JSON
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"field {number}: time out of range") from None


def _message(data: bytes, fields: Fields) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _, value in _fields(data):
        known = fields.get(number)
        if known is None:
            continue  # a field devhub does not read, as an older server skips newer fields
        name, how, nested = known
        if how == "string":
            if text := _text(value, number):
                out[name] = text
        elif how == "bytes":
            if not isinstance(value, bytes):
                raise ProtobufError(f"field {number} should be length-delimited")
            out[name] = value
        elif how == "int":
            if number_value := _int64(value, number):
                out[name] = number_value
        elif how == "int32":  # kept when zero: a field JSON always carries
            out[name] = _int32(value, number)
        elif how == "bool":
            if _int64(value, number):
                out[name] = True
        elif how == "time":
            if (stamp := _time(value, number)) is not None:
                out[name] = stamp
        elif how == "strings":
            out.setdefault(name, []).append(_text(value, number))
        elif how == "map":
            if not isinstance(value, bytes):
                raise ProtobufError(f"field {number} should be a map entry")
            entry = {n: _text(v, n) for n, _, v in _fields(value) if n in (1, 2)}
            out.setdefault(name, {})[entry.get(1, "")] = entry.get(2, "")
        elif how in ("message", "messages"):
            if not isinstance(value, bytes):
                raise ProtobufError(f"field {number} should be a message")
            decoded = _message(value, nested)
            if how == "messages":
                out.setdefault(name, []).append(decoded)
            else:
                out[name] = decoded
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object a protobuf-encoded body stands for (apiVersion and kind included).

    Raises ProtobufError if `body` is not an envelope devhub reads, or holds a kind it cannot
    read (devhub reads Namespaces and PriorityClasses only; kube-apiserver takes no protobuf
    custom resources)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf prefix")
    envelope = _message(body[len(MAGIC):], _UNKNOWN)
    if envelope.get("contentEncoding"):
        raise ProtobufError(f"unsupported content encoding {envelope['contentEncoding']!r}")
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    fields = KINDS.get((api_version, kind))
    if fields is None:
        raise ProtobufError(f"devhub reads no {kind or 'unnamed kind'} ({api_version}) in "
                            "protobuf; send JSON")
    obj = _message(envelope.get("raw", b""), fields)
    return {"apiVersion": api_version, "kind": kind, **obj}
