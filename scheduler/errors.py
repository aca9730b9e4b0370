"""Why a cycle could not act. Each is a permanent problem of the input: running the same cycle
again cannot help, so `schedule` reports it in `CycleResult.error` (and, when it can, in the
snapshot's Scheduled condition) instead of raising.

    SchedulerError                       (scheduler.framework.errors)
    ├── PluginError, ProfileError        (scheduler.framework.errors)
    └── CycleError
        ├── InvalidSnapshotError  bad annotation, unknown placement type, missing parent label
        ├── InvalidBindingError   an Unscheduled binding to revive has no usable previous state
        └── InvalidInputError     the input itself is inconsistent (duplicate cluster names)"""

from __future__ import annotations

from scheduler.framework.errors import SchedulerError

__all__ = ["CycleError", "InvalidBindingError", "InvalidInputError", "InvalidSnapshotError"]


class CycleError(SchedulerError):
    """The cycle cannot act on this input."""


class InvalidSnapshotError(CycleError):
    pass


class InvalidBindingError(CycleError):
    pass


class InvalidInputError(CycleError):
    pass
