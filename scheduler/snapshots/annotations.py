"""Reads a policy snapshot's integer labels and annotations the way KubeFleet does, in one place
for the cycle and the snapshotter alike.

Go's strconv.Atoi / ParseInt(s, 10, 64) accept an optional sign and ASCII digits only, within
int64; KubeFleet then rejects what is missing or negative (kubefleet-rules 1.3). Python's int()
is more lenient (" 3", "3_0", non-ASCII digits), so it is not used alone. A bad value raises
`SnapshotMetadataError`, with the same message whichever reads it."""

from __future__ import annotations

import re
from typing import Final

from hub import names
from hub.types import ClusterSchedulingPolicySnapshot
from scheduler.errors import SnapshotMetadataError

__all__ = ["crp_generation", "go_int", "number_of_clusters", "snapshot_number"]

_GO_INT: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_MAX: Final = 2**63 - 1


def go_int(value: str) -> int | None:
    """`value` as Go's strconv.ParseInt(value, 10, 64) reads it, or None where Go fails."""
    if not _GO_INT.fullmatch(value):
        return None
    number = int(value)
    return number if -_INT64_MAX - 1 <= number <= _INT64_MAX else None


def snapshot_number(
    snapshot: ClusterSchedulingPolicySnapshot, key: str, *, label: bool = False
) -> int:
    """The non-negative integer in one of the snapshot's annotations (or labels).

    Raises:
        SnapshotMetadataError: missing, not an integer, or negative; the message names the
            snapshot, the key and the value, and says how to fix it.
    """
    what = "label" if label else "annotation"
    raw = (snapshot.metadata.labels if label else snapshot.metadata.annotations).get(key)
    where = f"policy snapshot {snapshot.metadata.name!r}"
    fix = f"; fix the {what} or delete the snapshot"
    if raw is None:
        raise SnapshotMetadataError(f"{where} has no {key} {what}{fix}")
    number = go_int(raw)
    if number is None:
        raise SnapshotMetadataError(f"{where}: {what} {key}={raw!r} is not an integer{fix}")
    if number < 0:
        raise SnapshotMetadataError(f"{where}: {what} {key}={raw!r} is negative{fix}")
    return number


def crp_generation(snapshot: ClusterSchedulingPolicySnapshot) -> int:
    """The placement generation the snapshot reflects (copied into observedCRPGeneration)."""
    return snapshot_number(snapshot, names.CRP_GENERATION_ANNOTATION)


def number_of_clusters(snapshot: ClusterSchedulingPolicySnapshot) -> int:
    """N of a PickN snapshot: the annotation is authoritative, not spec.policy
    (kubefleet-rules 10.21)."""
    return snapshot_number(snapshot, names.NUMBER_OF_CLUSTERS_ANNOTATION)
