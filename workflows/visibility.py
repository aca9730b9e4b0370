"""A placement workflow's search attributes: what the Temporal UI lists and filters by.

The name (and, for a ResourcePlacement, its kind and namespace) is set once per run if the
start did not set it; FleetPlacementType and FleetFullyScheduled follow each cycle;
FleetPriority and FleetTenant follow the priority the watcher last sent; FleetClustersVersion
the clusters a cycle that did not fail read, unset when it read them at no known version
(scheduler.requeue.decided). An upsert that would
change nothing is skipped: each one is a visibility write. Pure: it says what to upsert."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio.common import SearchAttributeUpdate, TypedSearchAttributes

from workflows import names
from workflows.models import CycleReport, TurnPriority
from workflows.patches import CLUSTERS_VERSION_PATCH

__all__ = ["Visibility"]


@dataclass
class Visibility:
    placed: tuple[str, bool] | None = None
    """(type, fully scheduled) as this run last upserted them."""
    priority: tuple[int | None, str | None] = (None, None)
    """(FleetPriority, FleetTenant) as this run last set them, or found them at its start."""
    clusters_version: int | None = None
    """FleetClustersVersion as this run last set it, or found it at its start."""

    @classmethod
    def of(cls, found: TypedSearchAttributes) -> Visibility:
        return cls(
            priority=(found.get(names.SA_PRIORITY), found.get(names.SA_TENANT)),
            clusters_version=found.get(names.SA_CLUSTERS_VERSION),
        )

    @staticmethod
    def identity(
        found: TypedSearchAttributes, placement: str, namespace: str | None
    ) -> list[SearchAttributeUpdate[Any]]:
        """What a run sets at its start when its start did not (the watcher's does)."""
        if found.get(names.SA_PLACEMENT_NAME) == placement:
            return []
        attributes: list[SearchAttributeUpdate[Any]] = [
            names.SA_PLACEMENT_NAME.value_set(placement)
        ]
        if namespace:
            attributes += [
                names.SA_PLACEMENT_KIND.value_set(names.KIND_RESOURCE_PLACEMENT),
                names.SA_PLACEMENT_NAMESPACE.value_set(namespace),
            ]
        return attributes

    def after_cycle(self, placement_type: str, fully: bool) -> list[SearchAttributeUpdate[Any]]:
        placed = (placement_type, fully)
        if placed == self.placed:
            return []
        self.placed = placed
        return [
            names.SA_PLACEMENT_TYPE.value_set(placement_type),
            names.SA_FULLY_SCHEDULED.value_set(fully),
        ]

    def version_changed(self, version: int | None) -> bool:
        """Whether a cycle that read the clusters at `version` (None: at no known version)
        moves FleetClustersVersion."""
        return version != self.clusters_version

    def after_decision(self, report: CycleReport, patched: Callable[[str], bool]) -> bool:
        """Whether a cycle that did not fail moves FleetClustersVersion to its version (one at
        no known version unsets what an earlier one recorded: its decision, not theirs, stands;
        scheduler.requeue.decided), behind CLUSTERS_VERSION_PATCH."""
        return (
            report.error is None
            and self.version_changed(report.clusters_version)
            and patched(CLUSTERS_VERSION_PATCH)
        )

    def for_version(self, version: int | None) -> list[SearchAttributeUpdate[Any]]:
        """FleetClustersVersion for `version`, unset for None (the caller checked
        `version_changed`)."""
        self.clusters_version = version
        if version is None:
            return [names.SA_CLUSTERS_VERSION.value_unset()]
        return [names.SA_CLUSTERS_VERSION.value_set(version)]

    def priority_changed(self, priority: TurnPriority) -> bool:
        return (priority.value, priority.tenant) != self.priority

    def for_priority(self, priority: TurnPriority) -> list[SearchAttributeUpdate[Any]]:
        """FleetPriority and FleetTenant for `priority` (the caller checked that they changed)."""
        self.priority = (priority.value, priority.tenant)
        return [
            names.SA_PRIORITY.value_set(priority.value),
            names.SA_TENANT.value_set(priority.tenant)
            if priority.tenant
            else names.SA_TENANT.value_unset(),
        ]
