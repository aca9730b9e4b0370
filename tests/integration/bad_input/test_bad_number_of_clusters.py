"""numberOfClusters going down and up while some bindings are Bound.

The rollout controller turns Scheduled bindings into Bound ones as it applies resources. When a
user then shrinks a PickN placement, KubeFleet trims Scheduled bindings before Bound ones
(kubefleet-rules 4.6 branch A: obsolete first, then the lowest-scored Scheduled, then the
lowest-scored Bound), so work already running stays where it is even when a Scheduled cluster
scores higher. Growing again revives the Unscheduled bindings of the clusters picked, each to
the state it had (its `previous-binding-state`)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourceBinding, ClusterResourcePlacement
from tests.integration.bad_input.outcome import (
    MAX_CYCLES,
    assert_no_retries,
    finished,
    placement_condition,
    policy_condition,
)
from tests.support.fleet import add_cluster, add_placement, bindings, live_targets, unique
from tests.support.waits import until_async

pytestmark = pytest.mark.asyncio(loop_scope="session")

BOUND, SCHEDULED, UNSCHEDULED = names.STATE_BOUND, names.STATE_SCHEDULED, names.STATE_UNSCHEDULED
TIERS = {"member-1": "gold", "member-2": "silver", "member-3": "bronze", "member-4": "none"}
WEIGHTS = {"gold": 50, "silver": 40, "bronze": 30}


def by_tier() -> dict[str, Any]:
    return {
        "clusterAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "preference": {"labelSelector": {"matchLabels": {"tier": tier}}}}
                for tier, weight in WEIGHTS.items()
            ]
        }
    }


def bind(hub: HubClient, placement: str, *clusters: str) -> None:
    """What the rollout controller does once a cluster's resources are applied."""
    for binding in bindings(hub, placement):
        if binding.spec.target_cluster in clusters:
            hub.patch(ClusterResourceBinding, binding.name, {"spec": {"state": BOUND}})


def scale(hub: HubClient, placement: str, n: int) -> None:
    hub.patch(ClusterResourcePlacement, placement, {"spec": {"policy": {"numberOfClusters": n}}})


async def reaches(hub: HubClient, placement: str, wanted: dict[str, str], n: int) -> None:
    await until_async(lambda: live_targets(hub, placement) == wanted, blocking=True)
    await until_async(
        lambda: (
            (c := policy_condition(hub, placement))
            and c.message == names.POLICY_FULFILLED_MESSAGE.format(count=n)
        ),
        blocking=True,
    )


async def test_scaling_down_keeps_bound_bindings_and_scaling_up_revives_their_state(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    for cluster, tier in TIERS.items():
        add_cluster(hub, cluster, labels={"tier": tier})
    web = unique("web")
    add_placement(
        hub, web, {"placementType": "PickN", "numberOfClusters": 3, "affinity": by_tier()}
    )
    await reaches(
        hub, web, {"member-1": SCHEDULED, "member-2": SCHEDULED, "member-3": SCHEDULED}, 3
    )
    bind(hub, web, "member-2", "member-3")

    # 3 -> 2: member-1 scores highest, but it is the only Scheduled one, so it goes first.
    scale(hub, web, 2)
    await reaches(hub, web, {"member-2": BOUND, "member-3": BOUND}, 2)
    # 2 -> 1: only Bound bindings left; the lower-scored one goes.
    scale(hub, web, 1)
    await reaches(hub, web, {"member-2": BOUND}, 1)
    trimmed = {b.spec.target_cluster: b for b in bindings(hub, web)}
    assert trimmed["member-1"].spec.state == UNSCHEDULED
    assert trimmed["member-3"].spec.state == UNSCHEDULED
    assert trimmed["member-3"].metadata.annotations[names.PREVIOUS_BINDING_STATE_ANNOTATION] == (
        BOUND
    )

    # 1 -> 3: the two best clusters come back, each in the state it left in.
    scale(hub, web, 3)
    await reaches(hub, web, {"member-1": SCHEDULED, "member-2": BOUND, "member-3": BOUND}, 3)
    revived = {b.spec.target_cluster: b for b in bindings(hub, web)}
    assert len(revived) == 3  # no new binding: the Unscheduled ones were reused
    assert all(
        names.PREVIOUS_BINDING_STATE_ANNOTATION not in b.metadata.annotations
        for b in revived.values()
    )
    assert "member-4" not in revived

    done = await finished(temporal_client, web, at_most=4 * MAX_CYCLES)  # four policy changes
    assert_no_retries(done)
    assert done.error is None
    shown = placement_condition(hub, web)
    assert shown is not None and shown.status == names.TRUE
    assert shown.message == names.POLICY_FULFILLED_MESSAGE.format(count=3)
