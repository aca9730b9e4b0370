"""Apply a cycle's BindingPlan to the hub, step by step, in the plan's order (kubefleet-rules 4.9).

Steps run strictly one after another, each step's writes a few at a time (as KubeFleet writes
them in parallel); the first failure aborts the rest and the activity is retried from fresh
reads, which is safe because:

- every existing-binding write is a merge patch carrying the resourceVersion the cycle read, so
  a binding that moved on meanwhile (the rollout controller Bound it) is a Conflict, never a
  lost update, and a re-run plans against what is really there;
- new bindings have deterministic names (`scheduler.bindings.naming`), so a create that meets
  AlreadyExists found what an earlier attempt of the same decision made and adopts it, provided
  it is the same placement's binding to the same cluster; anything else holding the name is an
  invariant broken, reported as such rather than retried forever;
- a finalizer removal whose binding is already gone has nothing left to do.

`Tally` counts writes as they land, so a failed attempt still reports (and meters) what it did."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Final, TypeVar

from activities.capacity import CapacityWrites
from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, NotFoundError
from hub.kinds import kinds_for
from hub.types import ClusterResourceBinding
from scheduler import BindingPatch, BindingPlan

__all__ = [
    "BindingNameTakenError",
    "Pacer",
    "Tally",
    "apply_binding_plan",
    "apply_patch",
    "create_or_adopt",
]

# Heartbeats are cheap but not free; one per second keeps a long apply visibly alive.
HEARTBEAT_EVERY_S: Final = 1.0
# Writes of one step in flight at once. KubeFleet writes a step's items in parallel (4.9); a
# first PickAll cycle at 5,000 clusters is 5,000 creates, which one at a time take minutes
# against a real API server. Kept below the kubernetes client's connection pool (5 per CPU),
# which the worker's concurrent activities share.
WRITE_PARALLELISM: Final = 4

Heartbeat = Callable[[str], None]
T = TypeVar("T")
R = TypeVar("R")


class BindingNameTakenError(Exception):
    """A binding we meant to create exists but is not ours to adopt (KubeFleet: unexpected)."""


@dataclass
class Tally:
    """Binding writes that landed, by kind (the activity's WriteCounts and metrics)."""

    created: int = 0
    adopted: int = 0
    patched: int = 0
    unscheduled: int = 0
    finalizers_removed: int = 0


class Pacer:
    """Calls `heartbeat` with a progress note at most every HEARTBEAT_EVERY_S seconds."""

    def __init__(self, heartbeat: Heartbeat | None) -> None:
        self._heartbeat = heartbeat
        self._last = -math.inf  # the first write beats at once: progress shows from the start

    def tick(self, progress: str) -> None:
        now = time.monotonic()
        if self._heartbeat is not None and now - self._last >= HEARTBEAT_EVERY_S:
            self._heartbeat(progress)
            self._last = now


def apply_binding_plan(
    client: HubClient,
    plan: BindingPlan,
    tally: Tally,
    heartbeat: Heartbeat | None = None,
    capacity: CapacityWrites | None = None,
) -> None:
    """Make the plan's binding writes (not its snapshot status), counting them in `tally`.

    With `capacity` (a capacity-aware placement, docs/capacity.md), every active binding the plan
    keeps is made sure of its reservation, each create and revived binding first reserves room
    on its cluster's ledger, and each binding unscheduled or losing its finalizer releases its
    room after the write landed: the ledgers hold at least what the bindings consume at every
    moment.

    Raises:
        BindingNameTakenError: a binding to create exists for another placement or cluster.
        NoRoomError: another placement took room this plan counted on (decide again).
        HubError: the first write that failed (ConflictError, NotFoundError of a vanished
            binding, HubUnavailableError, ...); writes of later steps were not attempted.
    """
    pacer = Pacer(heartbeat)
    hooks = capacity if capacity is not None else _NO_CAPACITY

    def remove_finalizer(patch: BindingPatch) -> bool:
        removed = _remove_finalizer(client, patch)
        hooks.after_unschedule(patch.name)
        return removed

    def unschedule(patch: BindingPatch) -> None:
        apply_patch(client, patch)
        hooks.after_unschedule(patch.name)

    def create(binding: ClusterResourceBinding) -> bool:
        hooks.before_create(binding)
        return create_or_adopt(client, binding)[1]

    def repoint(patch: BindingPatch) -> None:
        hooks.before_patch(patch.name)
        apply_patch(client, patch)

    for removed in _each(plan.remove_finalizers, remove_finalizer):
        tally.finalizers_removed += removed
        pacer.tick(f"removed {tally.finalizers_removed} finalizer(s)")
    for _ in _each(plan.unschedule_dangling, unschedule):
        tally.unscheduled += 1
        pacer.tick(f"unscheduled {tally.unscheduled} dangling binding(s)")
    hooks.keep(plan)
    for created in _each(plan.create, create):
        if created:
            tally.created += 1
        else:
            tally.adopted += 1
        pacer.tick(f"created {tally.created + tally.adopted}/{len(plan.create)}")
    for _ in _each(plan.patch, repoint):
        tally.patched += 1
        pacer.tick(f"patched {tally.patched}/{len(plan.patch)}")
    for _ in _each(plan.unschedule, unschedule):
        tally.unscheduled += 1
        pacer.tick(f"unscheduled {tally.unscheduled}")


class _NoCapacity:
    """A placement that is not capacity-aware: no ledger writes."""

    def keep(self, plan: BindingPlan) -> None:
        pass

    def before_create(self, binding: ClusterResourceBinding) -> None:
        pass

    def before_patch(self, name: str) -> None:
        pass

    def after_unschedule(self, name: str) -> None:
        pass


_NO_CAPACITY: Final = _NoCapacity()


def _each(items: Sequence[T], write: Callable[[T], R]) -> Iterator[R]:
    """`write` every item, WRITE_PARALLELISM at a time; yield each result as it lands.

    The first failure stops the writes not yet started; those in flight finish and their
    results are still yielded (they landed: the tally must say so), then the failure is raised.
    Results are yielded in the caller's thread, which holds the activity context."""
    if len(items) <= 1:
        yield from (write(item) for item in items)
        return
    with ThreadPoolExecutor(
        max_workers=min(WRITE_PARALLELISM, len(items)), thread_name_prefix="binding-write"
    ) as pool:
        futures = [pool.submit(write, item) for item in items]
        failure: BaseException | None = None
        try:
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                error = future.exception()
                if error is None:
                    yield future.result()
                elif failure is None:
                    failure = error
                    for pending in futures:
                        pending.cancel()
        finally:
            for pending in futures:
                pending.cancel()
        if failure is not None:
            raise failure


def apply_patch(client: HubClient, patch: BindingPatch) -> None:
    """One binding's merge patch (carrying the resourceVersion it was planned on)."""
    # The merge patch already carries metadata.resourceVersion (scheduler.cycles.plan); the
    # patched binding is not read back (nothing here uses it).
    kind = kinds_for(patch.namespace).binding
    client.patch_unread(kind, patch.name, patch.merge_patch, namespace=patch.namespace)


def _remove_finalizer(client: HubClient, patch: BindingPatch) -> bool:
    try:
        apply_patch(client, patch)
    except NotFoundError:
        return False  # deleted already: the finalizer went with it
    return True


def create_or_adopt(
    client: HubClient, binding: ClusterResourceBinding
) -> tuple[ClusterResourceBinding, bool]:
    """Create the binding; `(binding, True)` if created, `(existing, False)` if an earlier
    attempt of the same decision made it already and it is adopted. The one path by which
    cycles and rebalance moves create bindings.

    Only a binding of the same placement on the same cluster, not being deleted, is adopted:
    anything else holding the name is an invariant broken (a deleting one would vanish under
    the decision that adopted it).

    Raises:
        BindingNameTakenError: the name is held by a binding that is not this decision's.
    """
    try:
        return client.create(binding), True
    except AlreadyExistsError:
        # NotFound: it just vanished
        existing = client.get(type(binding), binding.name, namespace=binding.metadata.namespace)
    placement = binding.metadata.labels.get(names.PARENT_PLACEMENT_LABEL)
    owner = existing.metadata.labels.get(names.PARENT_PLACEMENT_LABEL)
    if owner != placement or existing.spec.target_cluster != binding.spec.target_cluster:
        raise BindingNameTakenError(
            f"binding {binding.name!r} already exists for placement {owner!r} and cluster "
            f"{existing.spec.target_cluster!r}, so it cannot be created for placement "
            f"{placement!r} and cluster {binding.spec.target_cluster!r}; delete or relabel it"
        )
    if existing.metadata.deleting:
        raise BindingNameTakenError(
            f"binding {binding.name!r} of placement {placement!r} on cluster "
            f"{binding.spec.target_cluster!r} is being deleted, so it cannot be adopted; the "
            "placement decides again once it is gone"
        )
    return existing, False
