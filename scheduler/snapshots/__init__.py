"""Policy snapshots from placements, decided the way KubeFleet's placement controller does.

fleet-scheduler can run without KubeFleet's hub agent, so something must turn each placement
into policy snapshots and report its Scheduled condition (kubefleet-rules section 2). This
package decides *what* to write; the snapshotter activity does the reads and writes. By job:
`hashing` (KubeFleet's policy hash, byte for byte), `naming` (names, labels, annotations),
`validation` (what KubeFleet's webhook refuses), `sync` (the plan), `conditions` (the
placement's Scheduled condition), `annotations` (a snapshot's integer labels and annotations,
read the way KubeFleet reads them, by the snapshotter and the cycle alike). Pure: no I/O, no
clock."""

from scheduler.errors import (
    InvalidPlacementError,
    MultipleLatestSnapshotsError,
    SnapshotError,
    SnapshotMetadataError,
)
from scheduler.snapshots.conditions import placement_scheduled_condition
from scheduler.snapshots.hashing import decode_policy_hash, encode_policy_hash, go_json, policy_hash
from scheduler.snapshots.naming import policy_index, revision_history_limit, snapshot_name
from scheduler.snapshots.sync import SnapshotSync, SnapshotUpdate, UpdatePurpose, plan_snapshot_sync
from scheduler.snapshots.validation import (
    PICK_N_WITHOUT_NUMBER,
    PREFERRED_TERM_PATH,
    REQUIRED_TERM_PATH,
)

__all__ = [
    "PICK_N_WITHOUT_NUMBER",
    "PREFERRED_TERM_PATH",
    "REQUIRED_TERM_PATH",
    "InvalidPlacementError",
    "MultipleLatestSnapshotsError",
    "SnapshotError",
    "SnapshotMetadataError",
    "SnapshotSync",
    "SnapshotUpdate",
    "UpdatePurpose",
    "decode_policy_hash",
    "encode_policy_hash",
    "go_json",
    "placement_scheduled_condition",
    "plan_snapshot_sync",
    "policy_hash",
    "policy_index",
    "revision_history_limit",
    "snapshot_name",
]
