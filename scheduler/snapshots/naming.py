"""A policy snapshot's name, index label and history limit, as KubeFleet's placement controller
spells them (kubefleet-rules 2). Pure."""

from __future__ import annotations

from typing import Final

from hub import names
from hub.types import (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
)
from scheduler.errors import (
    InvalidPlacementError,
)
from scheduler.snapshots.annotations import snapshot_number

SNAPSHOT_NAME_FORMAT: Final = "{placement}-{index}"  # KubeFleet's PolicySnapshotNameFmt "%s-%d"
TRUE_LABEL: Final = "true"  # strconv.FormatBool
FALSE_LABEL: Final = "false"


# --- labels and annotations ------------------------------------------------------------------


def policy_index(snapshot: ClusterSchedulingPolicySnapshot) -> int:
    """The snapshot's `policy-index` label as an integer.

    Raises:
        SnapshotMetadataError: the label is missing, not an integer, or negative.
    """
    return snapshot_number(snapshot, names.POLICY_INDEX_LABEL, label=True)


def snapshot_name(placement_name: str, index: int) -> str:
    """`<placement>-<index>`, KubeFleet's snapshot name."""
    return SNAPSHOT_NAME_FORMAT.format(placement=placement_name, index=index)


def revision_history_limit(placement: ClusterResourcePlacement) -> int:
    """How many snapshots to keep: the spec value, else KubeFleet's default of 10."""
    limit = placement.spec.revision_history_limit
    if limit is None:
        return names.DEFAULT_REVISION_HISTORY_LIMIT
    return max(limit, 1)  # the API enforces >= 1; never plan to delete everything


def placement_generation(placement: ClusterResourcePlacement) -> int:
    generation = placement.metadata.generation
    if generation is None:
        raise InvalidPlacementError(
            f"placement {placement.name!r} has no metadata.generation; "
            "read it from the API server before planning its snapshots"
        )
    return generation
