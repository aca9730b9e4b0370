"""Binding names: KubeFleet's pattern, made deterministic.

KubeFleet names a binding `<placement[:26]>-<cluster[:27]>-<8 hex>` with the hex taken from a
random UUID (kubefleet-rules 4.11), so an activity retried after an unknown outcome could create a
second binding for the same cluster. We keep the pattern (63 characters at most, a DNS-1123
label) but take the 8 hex from SHA-256 of (placement, cluster, snapshot name, attempt), using
the first attempt whose name no listed binding (and no binding created earlier in the same
plan) uses. Replaying the same plan therefore produces the same names, so a retried create
meets AlreadyExists and adopts the binding instead of duplicating it.

A cluster (or placement) name that cannot form a DNS-1123 label, e.g. one containing `.`,
aborts KubeFleet's whole cycle. Here it is a per-cluster outcome with a clear reason instead
(see `name_problem`); such a cluster could never receive work anyway, since its member
namespace `fleet-member-<name>` would be invalid too."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container

from scheduler.errors import InvalidInputError

__all__ = [
    "BINDING_NAME_CHECK",
    "REASON_BAD_BINDING_NAME",
    "binding_name",
    "can_name_cluster_part",
    "name_problem",
]

PLACEMENT_SEGMENT = 26
CLUSTER_SEGMENT = 27
SUFFIX_LENGTH = 8
MAX_ATTEMPTS = 1000

BINDING_NAME_CHECK = "BindingName"
"""The plugin name shown for clusters filtered because no valid binding name exists."""

REASON_BAD_BINDING_NAME = (
    'cluster name "{cluster}" cannot be used in a binding name: "{name}" is not a valid '
    "DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or "
    "digit)"
)

_PLACEMENT_PART = re.compile(r"[a-z0-9][-a-z0-9]*", re.ASCII)
_CLUSTER_PART = re.compile(r"[-a-z0-9]*", re.ASCII)


def _prefix(placement: str, cluster: str) -> str:
    return f"{placement[:PLACEMENT_SEGMENT]}-{cluster[:CLUSTER_SEGMENT]}-"


def name_problem(placement: str, cluster: str) -> str | None:
    """None if bindings of `placement` on `cluster` can be named, else the reason why not."""
    # The suffix is hex and the parts are joined by '-', so only the two truncated parts matter.
    if _PLACEMENT_PART.fullmatch(placement[:PLACEMENT_SEGMENT]) and _CLUSTER_PART.fullmatch(
        cluster[:CLUSTER_SEGMENT]
    ):
        return None
    example = _prefix(placement, cluster) + "x" * SUFFIX_LENGTH
    return REASON_BAD_BINDING_NAME.format(cluster=cluster, name=example)


def can_name_cluster_part(cluster: str) -> bool:
    """Fast path of `name_problem` once the placement part is known to be fine."""
    return _CLUSTER_PART.fullmatch(cluster[:CLUSTER_SEGMENT]) is not None


def binding_name(placement: str, cluster: str, snapshot: str, used: Container[str]) -> str:
    """The name of a new binding; callers check `name_problem` first."""
    prefix = _prefix(placement, cluster)
    for attempt in range(MAX_ATTEMPTS):
        seed = f"{placement}\n{cluster}\n{snapshot}\n{attempt}".encode()
        name = prefix + hashlib.sha256(seed).hexdigest()[:SUFFIX_LENGTH]
        if name not in used:
            return name
    # Needs ~1000 bindings sharing one 54-character prefix: not a real fleet.
    raise InvalidInputError(
        f"no free binding name for placement {placement!r} on cluster {cluster!r}"
    )

