"""What the PlacementDecision tests share (docs/decisions.md): the settings that turn them on,
the policies they schedule, and a placement's slices read back from the hub."""

from __future__ import annotations

from collections.abc import Iterable

from temporalio.testing import ActivityEnvironment

from activities.decisions import DecisionSettings
from hub import names
from hub.client import HubClient
from hub.types import PlacementDecision
from tests.integration.activities.activity_helpers import (
    Activities,
    add_cluster,
    add_placement,
    prepare_and_cycle,
)

ON = DecisionSettings()
PICK_ALL = {"placementType": "PickAll"}


def pick_n(count: int) -> dict[str, object]:
    """A PickN policy with no affinity: any `count` clusters."""
    return {"placementType": "PickN", "numberOfClusters": count}


def slices(
    hub: HubClient, placement: str, namespace: str = names.FLEET_SYSTEM_NAMESPACE
) -> list[PlacementDecision]:
    """The placement's slices in `namespace`, in index order."""
    listed = hub.list(
        PlacementDecision, {names.DECISION_KEY_LABEL: placement}, namespace=namespace
    )
    return sorted(listed, key=lambda s: int(s.metadata.labels[names.DECISION_INDEX_LABEL]))


def clusters_of(found: list[PlacementDecision]) -> list[str]:
    """The clusters the slices name, in order."""
    return [d.cluster_profile_ref.name for s in found for d in s.decisions]


def scheduled(
    hub: HubClient,
    env: ActivityEnvironment,
    activities: Activities,
    clusters: Iterable[str],
    **placements: int,
) -> None:
    """Member clusters, and PickN placements (name=N) each through its first turn."""
    for cluster in clusters:
        add_cluster(hub, cluster)
    for name, count in placements.items():
        add_placement(hub, name, pick_n(count))
    for name in placements:
        prepare_and_cycle(env, activities, name)
