"""Reads the integer annotations of a policy snapshot the way KubeFleet does (Go strconv.Atoi:
optional sign, ASCII digits only) and rejects what KubeFleet rejects: missing, not an integer,
or negative (kubefleet-rules 1.3). Python's int() is more lenient (" 3", "3_0", non-ASCII digits),
so it is not used alone."""

from __future__ import annotations

import re

from hub import names
from hub.types import ClusterSchedulingPolicySnapshot
from scheduler.errors import InvalidSnapshotError

__all__ = ["crp_generation", "number_of_clusters"]

_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_MAX = 2**63 - 1


def _non_negative(snapshot: ClusterSchedulingPolicySnapshot, key: str) -> int:
    value = snapshot.metadata.annotations.get(key)
    where = f"policy snapshot {snapshot.metadata.name!r}"
    if value is None:
        raise InvalidSnapshotError(f"{where} has no {key} annotation")
    if not _GO_INT.fullmatch(value) or abs(int(value)) > _INT64_MAX:
        raise InvalidSnapshotError(f"{where}: annotation {key}={value!r} is not an integer")
    number = int(value)
    if number < 0:
        raise InvalidSnapshotError(f"{where}: annotation {key}={value!r} is negative")
    return number


def crp_generation(snapshot: ClusterSchedulingPolicySnapshot) -> int:
    """The placement generation the snapshot reflects (copied into observedCRPGeneration)."""
    return _non_negative(snapshot, names.CRP_GENERATION_ANNOTATION)


def number_of_clusters(snapshot: ClusterSchedulingPolicySnapshot) -> int:
    """N of a PickN snapshot: the annotation is authoritative, not spec.policy (10.21)."""
    return _non_negative(snapshot, names.NUMBER_OF_CLUSTERS_ANNOTATION)
