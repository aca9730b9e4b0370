"""devhub.protobuf: the built-in kinds typed clients (kubectl create namespace, kubectl create
priorityclass) send."""

from __future__ import annotations

import pytest

from devhub.protobuf import MAGIC, ProtobufError, decode

# What `kubectl create namespace team-a` (v1.32) sends, from its -v=9 log: every scalar of
# ObjectMeta, spec and status is written out, most of them empty.
KUBECTL_CREATE_NAMESPACE = bytes.fromhex(
    "6b387300"  # k8s\0
    "0a0f0a027631" "12094e616d657370616365"  # typeMeta {apiVersion: v1, kind: Namespace}
    "121e"  # raw: a Namespace of 30 bytes
    "0a16" "0a067465616d2d61" "1200" "1a00" "2200" "2a00" "3200" "3800" "4200"  # metadata
    "1200"  # spec {}
    "1a020a00"  # status {phase: ""}
    "1a00" "2200"  # contentEncoding, contentType
)


def varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value: bytes | int | str) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def envelope(raw: bytes, api_version: str = "v1", kind: str = "Namespace") -> bytes:
    type_meta = field(1, api_version) + field(2, kind)
    return MAGIC + field(1, type_meta) + field(2, raw)


def test_reads_what_kubectl_create_namespace_sends() -> None:
    assert decode(KUBECTL_CREATE_NAMESPACE) == {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-a"}, "spec": {}, "status": {},
    }


def test_reads_labels_finalizers_owners_and_times() -> None:
    metadata = b"".join([
        field(1, "team-a"),
        field(11, field(1, "team") + field(2, "a")),
        field(11, field(1, "tier") + field(2, "")),
        field(12, field(1, "note") + field(2, "hi")),
        field(14, "example.com/hold"),
        field(13, field(1, "Thing") + field(3, "owner") + field(4, "u-1") + field(5, "x/v1")
              + field(6, 1)),
        field(8, field(1, 1_700_000_000)),
        field(7, 3),
        field(10, -1),
        field(17, b"\x0a\x01x"),  # managedFields: not read
    ])
    raw = field(1, metadata) + field(2, field(1, "kubernetes")) + field(3, field(1, "Active"))
    assert decode(envelope(raw)) == {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {
            "name": "team-a",
            "labels": {"team": "a", "tier": ""},
            "annotations": {"note": "hi"},
            "finalizers": ["example.com/hold"],
            "ownerReferences": [{"kind": "Thing", "name": "owner", "uid": "u-1",
                                 "apiVersion": "x/v1", "controller": True}],
            "creationTimestamp": "2023-11-14T22:13:20Z",
            "generation": 3,
            "deletionGracePeriodSeconds": -1,
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


@pytest.mark.parametrize(("body", "problem"), [
    pytest.param(b'{"kind": "Namespace"}', "missing the k8s protobuf prefix", id="json"),
    pytest.param(MAGIC + b"\x0a\x05ab", "truncated field 1", id="truncated"),
    pytest.param(MAGIC + b"\x0b", "unsupported wire type 3", id="group-wire-type"),
    pytest.param(envelope(b"", kind="ConfigMap"), "devhub reads no ConfigMap", id="other-kind"),
    pytest.param(envelope(field(1, field(1, b"\xff"))), "field 1 is not UTF-8", id="bad-utf8"),
])
def test_refuses_what_it_cannot_read(body: bytes, problem: str) -> None:
    with pytest.raises(ProtobufError, match=problem):
        decode(body)


def test_reads_a_priority_class_keeping_a_zero_value() -> None:
    def priority_class(value: int, *rest: bytes) -> bytes:
        raw = field(1, field(1, "high")) + field(2, value) + b"".join(rest)
        return envelope(raw, "scheduling.k8s.io/v1", "PriorityClass")

    assert decode(priority_class(0, field(3, 0), field(4, ""), field(5, "Never"))) == {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 0, "preemptionPolicy": "Never",
    }
    negative = decode(priority_class(-5, field(3, 1), field(4, "low")))
    assert (negative["value"], negative["globalDefault"], negative["description"]) == (
        -5, True, "low")
    with pytest.raises(ProtobufError, match="does not fit an int32"):
        decode(priority_class(1 << 40))
