"""Why a cycle could not act. Each is a permanent problem of the input: running the same cycle
again cannot help, so `schedule` reports it in `CycleResult.error` (and, when it can, in the
snapshot's Scheduled condition) instead of raising.

    SchedulerError                       (scheduler.framework.errors)
    ├── PluginError, ProfileError        (scheduler.framework.errors)
    ├── CycleError
    │   ├── InvalidSnapshotError  bad annotation, unknown placement type, missing parent label
    │   │   └── SnapshotMetadataError   (also a SnapshotError) a bad integer label/annotation
    │   ├── InvalidBindingError   an Unscheduled binding to revive has no usable previous state
    │   └── InvalidInputError     the input itself is inconsistent (duplicate cluster names)
    └── SnapshotError             what the snapshotter cannot work with (also a ValueError)
        ├── InvalidPlacementError, MultipleLatestSnapshotsError
        └── SnapshotMetadataError

SnapshotError and its subclasses are raised by `scheduler.snapshots` to its caller, the
snapshotter activity, which shows them on the placement; the others end a cycle."""

from __future__ import annotations

from scheduler.framework.errors import SchedulerError

__all__ = [
    "CycleError",
    "InvalidBindingError",
    "InvalidInputError",
    "InvalidPlacementError",
    "InvalidSnapshotError",
    "MultipleLatestSnapshotsError",
    "SnapshotError",
    "SnapshotMetadataError",
]


class CycleError(SchedulerError):
    """The cycle cannot act on this input."""


class InvalidSnapshotError(CycleError):
    pass


class InvalidBindingError(CycleError):
    pass


class InvalidInputError(CycleError):
    pass


class SnapshotError(SchedulerError, ValueError):
    """A placement or snapshot the snapshotter (KubeFleet's placement controller) cannot work
    with. Retrying will not help; fixing (or deleting) the named object will. Subclasses say
    which invariant broke."""


class InvalidPlacementError(SnapshotError):
    """The placement lacks what a snapshot needs (uid, generation) or holds an out-of-range
    int32; it was not read from an API server, or the server did not validate it."""


class SnapshotMetadataError(SnapshotError, InvalidSnapshotError):
    """A snapshot's `policy-index` label or one of its integer annotations is missing or not a
    non-negative integer. The same error whether the snapshotter or a cycle reads it."""


class MultipleLatestSnapshotsError(SnapshotError):
    """More than one snapshot of the placement is labelled `is-latest-snapshot=true`."""
