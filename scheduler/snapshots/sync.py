"""The snapshotter's plan: which policy snapshots to create, update or relabel for a placement,
decided as KubeFleet's placement controller decides (kubefleet-rules 2). The snapshotter
activity does the reads and writes. Objects that break the controller's invariants (an
unparsable `policy-index` label, a missing `CRP-generation` annotation, two snapshots labelled
latest) raise a `SnapshotError` subclass naming the object and the fix; KubeFleet treats the
same cases as "unexpected behaviour" and waits for the next event. Pure: `now` is passed in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from hub import names
from hub.kinds import kinds_for
from hub.types import (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    ObjectMeta,
    OwnerReference,
    SchedulingPolicySnapshotSpec,
)
from scheduler.errors import (
    InvalidPlacementError,
    MultipleLatestSnapshotsError,
)
from scheduler.snapshots.annotations import snapshot_number
from scheduler.snapshots.hashing import decode_policy_hash, encode_policy_hash, policy_hash
from scheduler.snapshots.naming import (
    FALSE_LABEL,
    TRUE_LABEL,
    placement_generation,
    policy_index,
    revision_history_limit,
    snapshot_name,
)
from scheduler.snapshots.validation import check_policy, wanted_number_of_clusters

# --- the plan --------------------------------------------------------------------------------


UpdatePurpose = Literal["refresh", "demote"]


@dataclass(frozen=True, slots=True)
class SnapshotUpdate:
    """Set `labels` and `annotations` (only the keys that change) on an existing snapshot.

    Send it as an Update or merge patch carrying `resource_version`, so a concurrent change is
    a Conflict to retry with a fresh read (KubeFleet: "update ignoring conflict")."""

    name: str
    resource_version: str | None
    purpose: UpdatePurpose
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def apply(self, snapshot: ClusterSchedulingPolicySnapshot) -> ClusterSchedulingPolicySnapshot:
        """The snapshot with this update applied (for a read-modify-PUT)."""
        if snapshot.name != self.name:
            raise ValueError(f"update for {self.name!r} applied to {snapshot.name!r}")
        meta = snapshot.metadata.model_copy(
            update={
                "labels": {**snapshot.metadata.labels, **self.labels},
                "annotations": {**snapshot.metadata.annotations, **self.annotations},
            }
        )
        return snapshot.model_copy(update={"metadata": meta})


@dataclass(frozen=True, slots=True)
class SnapshotSync:
    """What to write so the placement's latest snapshot matches its policy (kubefleet-rules
    2.2-2.5).

    Apply in order: `update` (refresh in place, or demote the old latest), then `delete`
    (oldest first; NotFound is fine), then `create` (AlreadyExists means an earlier attempt
    got there: re-plan). Nothing to write means `changed` is False."""

    placement: str
    policy_hash: str
    previous_name: str | None  # the latest snapshot found (labelled or highest index), if any
    previous_index: int  # its policy index; -1 when there was none
    update: SnapshotUpdate | None = None
    delete: tuple[str, ...] = ()
    create: ClusterSchedulingPolicySnapshot | None = None

    @property
    def changed(self) -> bool:
        return self.update is not None or bool(self.delete) or self.create is not None

    @property
    def latest_name(self) -> str:
        """The name of the placement's latest snapshot once the plan is applied."""
        if self.create is not None:
            return self.create.name
        if self.previous_name is None:  # only a hand-made SnapshotSync can get here
            raise ValueError(f"sync plan for {self.placement!r} leaves no latest snapshot")
        return self.previous_name


def _find_latest(
    placement: str, snapshots: Sequence[ClusterSchedulingPolicySnapshot]
) -> tuple[ClusterSchedulingPolicySnapshot | None, int]:
    """KubeFleet's lookupLatestSchedulingPolicySnapshot: the one labelled latest, else the one
    with the highest index (left unlabelled by a crash between demote and create)."""
    labelled = [s for s in snapshots if s.is_latest]
    if len(labelled) > 1:
        listed = ", ".join(sorted(s.name for s in labelled))
        raise MultipleLatestSnapshotsError(
            f"placement {placement!r} has {len(labelled)} policy snapshots labelled "
            f'{names.IS_LATEST_SNAPSHOT_LABEL}=true ({listed}); set the label to "false" on '
            "all but the newest"
        )
    if labelled:
        return labelled[0], policy_index(labelled[0])
    ordered = _sorted_by_index(snapshots)
    if not ordered:
        return None, -1
    latest = ordered[-1]
    return latest, policy_index(latest)


def _sorted_by_index(
    snapshots: Sequence[ClusterSchedulingPolicySnapshot],
) -> list[ClusterSchedulingPolicySnapshot]:
    keyed = [(policy_index(s), s.name, s) for s in snapshots]  # raises on any bad index
    return [s for _, _, s in sorted(keyed, key=lambda item: (item[0], item[1]))]


def plan_snapshot_sync(
    placement: ClusterResourcePlacement,
    snapshots: Sequence[ClusterSchedulingPolicySnapshot],
) -> SnapshotSync:
    """Decide the snapshot writes for one reconcile of a live placement.

    `snapshots` are the placement's policy snapshots (listed by the `parent-CRP` label; any
    others are ignored). Same hash as the latest: refresh its `is-latest-snapshot` label,
    `CRP-generation` and (PickN) `number-of-clusters` annotations in place. Otherwise: demote the
    latest if labelled, delete the oldest beyond `revisionHistoryLimit - 1`, create
    `<name>-<index+1>`.

    Raises:
        SnapshotError: see the subclasses; nothing should be written.
    """
    name = placement.name
    generation = placement_generation(placement)
    check_policy(placement)
    ours = [s for s in snapshots if s.placement_name == name]
    digest = policy_hash(placement.spec.policy)
    latest, latest_index = _find_latest(name, ours)

    if latest is not None and decode_policy_hash(latest.spec.policy_hash) == digest:
        return SnapshotSync(
            placement=name,
            policy_hash=digest,
            previous_name=latest.name,
            previous_index=latest_index,
            update=_refresh(placement, latest, generation),
        )

    update = None
    if latest is not None and latest.is_latest:
        update = SnapshotUpdate(
            name=latest.name,
            resource_version=latest.metadata.resource_version,
            purpose="demote",
            labels={names.IS_LATEST_SNAPSHOT_LABEL: FALSE_LABEL},
        )
    ordered = _sorted_by_index(ours)
    limit = revision_history_limit(placement)
    excess = len(ordered) - limit + 1  # keep a slot for the new snapshot
    delete = tuple(s.name for s in ordered[:excess]) if excess > 0 else ()
    return SnapshotSync(
        placement=name,
        policy_hash=digest,
        previous_name=latest.name if latest is not None else None,
        previous_index=latest_index,
        update=update,
        delete=delete,
        create=_new_snapshot(placement, latest_index + 1, digest, generation),
    )


def _refresh(
    placement: ClusterResourcePlacement,
    latest: ClusterSchedulingPolicySnapshot,
    generation: int,
) -> SnapshotUpdate | None:
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if not latest.is_latest:
        # The old latest was demoted, the new one never created, and the policy was reverted.
        labels[names.IS_LATEST_SNAPSHOT_LABEL] = TRUE_LABEL
    if snapshot_number(latest, names.CRP_GENERATION_ANNOTATION) != generation:
        annotations[names.CRP_GENERATION_ANNOTATION] = str(generation)
    wanted = wanted_number_of_clusters(placement)
    if (
        wanted is not None
        and snapshot_number(latest, names.NUMBER_OF_CLUSTERS_ANNOTATION) != wanted
    ):
        annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(wanted)
    if not labels and not annotations:
        return None
    return SnapshotUpdate(
        name=latest.name,
        resource_version=latest.metadata.resource_version,
        purpose="refresh",
        labels=labels,
        annotations=annotations,
    )


def _new_snapshot(
    placement: ClusterResourcePlacement, index: int, digest: str, generation: int
) -> ClusterSchedulingPolicySnapshot:
    uid = placement.metadata.uid
    if not uid:
        raise InvalidPlacementError(
            f"placement {placement.name!r} has no metadata.uid, so a snapshot cannot name it as "
            "owner; read it from the API server before planning its snapshots"
        )
    annotations = {names.CRP_GENERATION_ANNOTATION: str(generation)}
    wanted = wanted_number_of_clusters(placement)
    if wanted is not None:
        annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(wanted)
    return kinds_for(placement.metadata.namespace).snapshot(
        metadata=ObjectMeta(
            name=snapshot_name(placement.name, index),
            namespace=placement.metadata.namespace or None,
            labels={
                names.PARENT_PLACEMENT_LABEL: placement.name,
                names.IS_LATEST_SNAPSHOT_LABEL: TRUE_LABEL,
                names.POLICY_INDEX_LABEL: str(index),
            },
            annotations=annotations,
            owner_references=[
                OwnerReference(
                    api_version=names.PLACEMENT_API_VERSION,
                    kind=placement.KIND,
                    name=placement.name,
                    uid=uid,
                    controller=True,
                    block_owner_deletion=True,
                )
            ],
        ),
        # Verbatim, numberOfClusters included: the scheduler reads N from the annotation.
        spec=SchedulingPolicySnapshotSpec(
            policy=placement.spec.policy, policy_hash=encode_policy_hash(digest)
        ),
    )
