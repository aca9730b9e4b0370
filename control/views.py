"""The watcher's in-memory view of one kind, and the changes each watch item makes to it.

KubeFleet's watchers sit on informer caches: an update handler gets the old object beside the new
one, and every filter in kubefleet-rules section 7 compares the two. `View` is that cache for one
kind. It turns `HubClient.list_then_watch` items into `Change`s carrying the old object: a watch
event becomes one change; a `Resync` (the hub was listed again after a 410 or a broken watch)
replaces the whole view and yields the changes that would have been seen had nobody missed anything:
adds, updates (resourceVersion moved) and deletes (absent from the new list). The first Resync
only fills the view: it is the start-up list, which the watcher handles as a whole.

Pure and single-threaded: the watcher's asyncio loop owns every View.

`routing_copy` is what a View keeps of each object: only the fields the watcher's routes read
(kubefleet-rules section 7), so that 10,000 placements with their snapshots and bindings cost
tens of megabytes, not the gigabyte of their full models. The watch threads apply it to every
listed and watched object before it reaches the loop (`HubClient.list_then_watch(transform=)`),
so a full list of a kind never sits in memory whole."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from pydantic import BaseModel

from hub.client import Resync, WatchEvent
from hub.kinds import placement_key
from hub.names import OWN_PREFIX
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourceBindingSpec,
    ClusterResourcePlacement,
    ClusterResourcePlacementSpec,
    ClusterResourcePlacementStatus,
    ClusterSchedulingPolicySnapshot,
    SchedulingPolicySnapshotSpec,
)
from hub.types.meta import HubObject, ObjectMeta

__all__ = ["Change", "ChangeType", "View", "key_of", "routing_copy"]

T = TypeVar("T", bound=HubObject)

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """One object changed: `old` is the cached object (None for an add), `new` the object now
    (for DELETED, the last state seen). `resynced` marks changes synthesised from a Resync."""

    type: ChangeType
    old: T | None
    new: T
    resynced: bool = False

    @property
    def name(self) -> str:
        return self.new.metadata.name

    @property
    def key(self) -> str:
        """`name`, or `<namespace>/<name>` for a namespaced object."""
        return key_of(self.new)


def key_of(obj: HubObject) -> str:
    """How a View names an object: its name, `<namespace>/<name>` when namespaced (a
    placement's key, `hub.kinds.placement_key`)."""
    return placement_key(obj.metadata.namespace, obj.metadata.name)


def _same_version(old: HubObject, new: HubObject) -> bool:
    if old.metadata.resource_version and new.metadata.resource_version:
        return old.metadata.resource_version == new.metadata.resource_version
    return old == new


class View(Generic[T]):
    """The current objects of one kind by key (`key_of`: the name, `<namespace>/<name>` for
    namespaced kinds), as the watch last reported them."""

    def __init__(self, kind: type[T]) -> None:
        self.kind = kind
        self.objects: dict[str, T] = {}
        self.synced = False  # the first Resync (the start-up list) has been applied
        self.resyncs = 0

    def __len__(self) -> int:
        return len(self.objects)

    def get(self, key: str) -> T | None:
        return self.objects.get(key)

    def values(self) -> Iterable[T]:
        return self.objects.values()

    def apply_event(self, event: WatchEvent[T]) -> Change[T] | None:
        """Apply one watch event; None when it changes nothing (a replay of what we hold).

        An ADDED for an object we already hold is an update (informers treat it so), which
        keeps `Change.type == "ADDED"` meaning "no old object"."""
        obj = event.object
        name = key_of(obj)
        old = self.objects.get(name)
        if event.type == "DELETED":
            if old is None:
                return None
            del self.objects[name]
            return Change("DELETED", old, obj)
        self.objects[name] = obj
        if old is None:
            return Change("ADDED", None, obj)
        if _same_version(old, obj):
            return None
        return Change("MODIFIED", old, obj)

    def apply_resync(self, resync: Resync[T]) -> list[Change[T]]:
        """Replace the view with a full list; the changes since the previous view, by name.

        Empty for the first Resync: there is no previous view to compare with."""
        before = self.objects
        self.objects = {key_of(obj): obj for obj in resync.objects}
        self.resyncs += 1
        if not self.synced:
            self.synced = True
            return []
        changes: list[Change[T]] = []
        for name in sorted(before.keys() | self.objects.keys()):
            old, new = before.get(name), self.objects.get(name)
            if old is None:
                if new is not None:
                    changes.append(Change("ADDED", None, new, resynced=True))
            elif new is None:
                changes.append(Change("DELETED", old, old, resynced=True))
            elif not _same_version(old, new):
                changes.append(Change("MODIFIED", old, new, resynced=True))
        return changes


# --- what the watcher keeps of each object ---------------------------------------------------

# Routing copies are read, never changed, so they share what pydantic would give each its own:
# the set of fields "set" (kept for model_dump's exclude_unset, which nobody calls on them) and
# empty containers. About 1 KB per model, tens of megabytes over a big hub.
_FIELDS_SET: Final[set[str]] = set()
_EMPTY_DICT: Final[dict[str, str]] = {}
_EMPTY_LIST: Final[list[Any]] = []
M = TypeVar("M", bound=BaseModel)


_SHARED_DEFAULTS: dict[tuple[type[BaseModel], str], Any] = {}


def _default(cls: type[BaseModel], name: str) -> Any:
    """The default of a field, made once per class and field and shared by every copy."""
    key = (cls, name)
    if key not in _SHARED_DEFAULTS:
        info = cls.model_fields[name]
        if info.default_factory is list:
            _SHARED_DEFAULTS[key] = _EMPTY_LIST
        elif info.default_factory is dict:
            _SHARED_DEFAULTS[key] = _EMPTY_DICT
        else:
            _SHARED_DEFAULTS[key] = info.get_default(call_default_factory=True)
    return _SHARED_DEFAULTS[key]


def _lean(cls: type[M], **values: Any) -> M:
    """`cls` built from `values` without validation, its unset fields given their defaults,
    shared (empty containers, a default status)."""
    for name in cls.model_fields:
        if name not in values:
            values[name] = _default(cls, name)
    return cls.model_construct(_fields_set=_FIELDS_SET, **values)


def _meta(
    meta: ObjectMeta, *, labels: bool = False, annotations: bool | str = False
) -> ObjectMeta:
    """Name, namespace, version, generation, deletion and finalizers (and labels, annotations
    if asked: all, or those whose key starts with `annotations`): the metadata every route
    reads."""
    if isinstance(annotations, str):
        prefix = annotations
        kept = {k: v for k, v in meta.annotations.items() if k.startswith(prefix)} or _EMPTY_DICT
    else:
        kept = (meta.annotations or _EMPTY_DICT) if annotations else _EMPTY_DICT
    return _lean(
        ObjectMeta,
        name=meta.name,
        namespace=meta.namespace,
        resource_version=meta.resource_version,
        generation=meta.generation,
        deletion_timestamp=meta.deletion_timestamp,
        finalizers=meta.finalizers or _EMPTY_LIST,
        labels=(meta.labels or _EMPTY_DICT) if labels else _EMPTY_DICT,
        annotations=kept,
    )


def _placement(obj: ClusterResourcePlacement) -> ClusterResourcePlacement:
    # Routes read the generation, deletion and finalizers, the policy (its type for KubeFleet's
    # rule, scheduler.requeue.reach; all of it for the plugins' requeue hints,
    # scheduler.requeue.requeue_hints, kept whole and shared) and the Scheduled condition; the
    # QueueSort plugin the labels and our own annotations (fleet-scheduler.io/...: never
    # kubectl's last-applied copy of the whole object); the rest (resource selectors, the
    # per-cluster statuses KubeFleet writes) nothing reads.
    policy = obj.spec.policy
    scheduled = obj.status.condition(obj.SCHEDULED_CONDITION)
    return _lean(
        type(obj),
        api_version=obj.api_version,
        kind=obj.kind,
        metadata=_meta(obj.metadata, labels=True, annotations=OWN_PREFIX),
        spec=_lean(
            ClusterResourcePlacementSpec,
            policy=policy,
        ),
        status=_lean(
            ClusterResourcePlacementStatus,
            conditions=[scheduled] if scheduled is not None else _EMPTY_LIST,
        ),
    )


def _snapshot(obj: ClusterSchedulingPolicySnapshot) -> ClusterSchedulingPolicySnapshot:
    # Routes read labels (latest, parent) and annotations (CRP generation, number of clusters).
    return _lean(
        type(obj),
        api_version=obj.api_version,
        kind=obj.kind,
        metadata=_meta(obj.metadata, labels=True, annotations=True),
        spec=_NO_POLICY,
    )


def _binding(obj: ClusterResourceBinding) -> ClusterResourceBinding:
    # Routes read the parent label, our finalizer, the deletion and the target cluster.
    return _lean(
        type(obj),
        api_version=obj.api_version,
        kind=obj.kind,
        metadata=_meta(obj.metadata, labels=True),
        spec=_lean(
            ClusterResourceBindingSpec,
            state=obj.spec.state,
            scheduling_policy_snapshot_name="",
            target_cluster=obj.spec.target_cluster,
            cluster_decision=_NO_DECISION,
        ),
    )


_NO_POLICY: Final = _lean(SchedulingPolicySnapshotSpec, policy=None, policy_hash="")
_NO_DECISION: Final = _lean(ClusterDecision, cluster_name="", selected=False, reason="")


def routing_copy(obj: T) -> T:
    """What the watcher keeps of `obj`: a model of the same kind holding only what its routes
    read; never to be changed (parts are shared). MemberClusters are kept whole (every part of
    one can matter to a placement, and a fleet has thousands of them, not tens of thousands)."""
    if isinstance(obj, ClusterResourcePlacement):
        return _placement(obj)  # type: ignore[return-value]
    if isinstance(obj, ClusterSchedulingPolicySnapshot):
        return _snapshot(obj)  # type: ignore[return-value]
    if isinstance(obj, ClusterResourceBinding):
        return _binding(obj)  # type: ignore[return-value]
    return obj
