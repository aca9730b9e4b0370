"""BindingPlan: every write one cycle wants, in the order KubeFleet makes them.

Activities apply a plan step by step, each step all-or-nothing before the next starts
(kubefleet-rules 4.1 steps 5-6, then 4.9):

1. `remove_finalizers`  - deleting bindings lose the scheduler's cleanup finalizer;
2. `unschedule_dangling` - bindings whose cluster left the fleet are marked Unscheduled;
3. `create`   - new bindings, complete objects (AlreadyExists means an earlier attempt of the
                same plan created it: the name is deterministic, so adopt it);
4. `patch`    - obsolete bindings re-pointed at the latest snapshot, unscheduled ones revived;
5. `unschedule` - bindings de-selected by this cycle (last, to avoid deselect-then-reselect);
6. `snapshot_status` - the policy snapshot's new status, or None when nothing changed.

Every existing-binding write is a JSON merge patch in wire (camelCase) form that already
carries `metadata.resourceVersion` = the version the cycle read (also in `resource_version`),
so a binding changed by someone else meanwhile (the rollout controller moving Scheduled to
Bound) fails with Conflict instead of being overwritten. The status write carries the
snapshot's resourceVersion the same way."""

from __future__ import annotations

from pydantic import Field, JsonValue

from hub.types import ClusterResourceBinding, SchedulingPolicySnapshotStatus
from scheduler.wire import WireModel

__all__ = ["BindingPatch", "BindingPlan", "SnapshotStatusWrite"]


class BindingPatch(WireModel):
    """One JSON merge patch of one binding."""

    name: str
    resource_version: str | None
    merge_patch: dict[str, JsonValue]
    """Wire form; includes metadata.resourceVersion when `resource_version` is known."""
    why: str
    """Short human text, e.g. "obsolete: cluster not picked"."""
    namespace: str | None = None
    """A ResourceBinding's namespace; None for a ClusterResourceBinding."""


class SnapshotStatusWrite(WireModel):
    """Replace the policy snapshot's status (status subresource update) with `status`."""

    name: str
    resource_version: str | None
    status: SchedulingPolicySnapshotStatus


class BindingPlan(WireModel):
    remove_finalizers: list[BindingPatch] = Field(default_factory=list)
    unschedule_dangling: list[BindingPatch] = Field(default_factory=list)
    create: list[ClusterResourceBinding] = Field(default_factory=list)
    patch: list[BindingPatch] = Field(default_factory=list)
    unschedule: list[BindingPatch] = Field(default_factory=list)
    snapshot_status: SnapshotStatusWrite | None = None

    @property
    def binding_writes(self) -> int:
        return (
            len(self.remove_finalizers)
            + len(self.unschedule_dangling)
            + len(self.create)
            + len(self.patch)
            + len(self.unschedule)
        )

    @property
    def is_empty(self) -> bool:
        return self.binding_writes == 0 and self.snapshot_status is None
