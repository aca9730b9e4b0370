"""CycleState: what every plugin of one scheduling cycle sees, and where plugins keep notes.

One cycle reads one snapshot of the world (kubefleet-rules 4.3: plugins share a per-cycle store,
list the cycle's clusters, and ask about the placement's bindings). "now" is passed in, never read
from a clock, so a cycle is a pure function of its inputs. Per-cycle data lives under typed keys
(`StateKey`), not casts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from hub.types import MemberCluster
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.room.capacity import Demand

__all__ = ["CycleState", "StateKey"]

T = TypeVar("T")


@dataclass(frozen=True)
class StateKey(Generic[T]):
    """A typed slot in the cycle store. By convention named `<PluginName>/<what>`.

    Not slotted: `StateKey[X]("...")` sets `__orig_class__` on the instance, which a slotted
    frozen dataclass refuses on Python 3.11."""

    name: str


@dataclass(slots=True)
class CycleState:
    """Shared by the plugins of one cycle. Not thread-safe; the runner is sequential."""

    clusters: Sequence[MemberCluster]
    now: datetime
    scheduled_or_bound: frozenset[str] = frozenset()
    obsolete: frozenset[str] = frozenset()
    demand: Demand | None = None
    """Capacity-aware placements only (docs/capacity.md): what one binding asks for and what
    other placements hold per cluster; None for every other placement."""
    _store: dict[str, Any] = field(default_factory=dict)
    _by_name: Mapping[str, MemberCluster] | None = None
    _facts: Sequence[ClusterFacts] | None = None

    def cluster_facts(self) -> Sequence[ClusterFacts]:
        """The facts of `clusters`, in their order (scheduler.clusters.facts), listed once per
        cycle for the plugins that read every cluster."""
        if self._facts is None:
            self._facts = [facts_of(c) for c in self.clusters]
        return self._facts

    def read(self, key: StateKey[T]) -> T | None:
        return cast("T | None", self._store.get(key.name))

    def write(self, key: StateKey[T], value: T) -> None:
        self._store[key.name] = value

    def has_scheduled_or_bound_binding(self, cluster: str) -> bool:
        """Does the cluster hold a Scheduled or Bound binding of the current snapshot?"""
        return cluster in self.scheduled_or_bound

    def has_obsolete_binding(self, cluster: str) -> bool:
        """Does the cluster hold a binding of an older snapshot (not yet unscheduled)?"""
        return cluster in self.obsolete

    def cluster(self, name: str) -> MemberCluster | None:
        if self._by_name is None:
            self._by_name = {c.metadata.name: c for c in self.clusters}
        return self._by_name.get(name)
