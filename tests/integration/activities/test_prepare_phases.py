"""The phases of a turn's first half (schedule_once), with and without the standalone
snapshotter, and the bad inputs that must end as a clear condition and a finished turn instead
of a retry loop."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from temporalio.testing import ActivityEnvironment

from activities.conditions import INVALID_PLACEMENT_REASON, SNAPSHOT_SYNC_FAILED_REASON
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.errors import InvalidObjectError
from hub.types import (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Namespace,
    ResourcePlacement,
)
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    add_snapshot,
    bindings_of,
    placement_condition,
    prepare,
    prepare_and_cycle,
    targets,
    writes,
)
from workflows.models import TurnRequest, TurnResult

PICK_TWO = {"placementType": "PickN", "numberOfClusters": 2}
SNAPSHOTS = "clusterschedulingpolicysnapshots"


def test_a_placement_that_does_not_exist_is_gone(
    make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    prepared = prepare(env, make_activities().activities, "nowhere")
    assert (prepared.phase, prepared.message) == ("gone", "placement 'nowhere' does not exist")


def test_without_the_snapshotter_a_placement_waits_for_its_snapshot_untouched(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(hub, "web", PICK_TWO)
    devhub.stats.clear()

    prepared = prepare(env, make_activities(snapshotter=False).activities, "web")

    assert prepared.phase == "no_latest_snapshot"
    assert "has no policy snapshot labelled kubernetes-fleet.io/is-latest-snapshot=true" in (
        prepared.message
    )
    assert writes(devhub) == 0  # no snapshot, no finalizer, no condition
    assert hub.get(ClusterResourcePlacement, "web").metadata.finalizers == []


def test_two_latest_snapshots_are_reported_and_nothing_is_written(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(hub, "web", PICK_TWO)
    add_snapshot(hub, "web", PICK_TWO, index=0)
    add_snapshot(hub, "web", PICK_TWO, index=1)
    devhub.stats.clear()

    prepared = prepare(env, make_activities(snapshotter=False).activities, "web")

    assert prepared.phase == "multiple_latest_snapshots"
    assert "has 2 policy snapshots labelled" in prepared.message
    assert "(web-0, web-1)" in prepared.message
    assert writes(devhub) == 0


def test_without_the_snapshotter_a_cycle_uses_kubefleets_snapshot_and_leaves_the_placement(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster)
    add_placement(hub, "web", PICK_TWO)
    add_snapshot(hub, "web", PICK_TWO, index=4)
    devhub.stats.clear()

    prepared, report = prepare_and_cycle(env, make_activities(snapshotter=False).activities, "web")

    assert (prepared.snapshot, prepared.snapshot_action) == ("web-4", None)
    assert devhub.stats.count("create", SNAPSHOTS) == 0
    assert devhub.stats.count("*", "clusterresourceplacements/status") == 0
    crp = hub.get(ClusterResourcePlacement, "web")
    assert crp.metadata.finalizers == [names.SCHEDULER_CLEANUP_FINALIZER]
    assert crp.status.conditions == []
    assert targets(bindings_of(hub, "web")) == ["b", "c"]
    assert report.writes.status_written and not report.writes.placement_condition_written


def test_an_invalid_number_of_clusters_annotation_ends_the_cycle_with_a_false_condition(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_cluster(hub, "a")
    add_placement(hub, "web", PICK_TWO)
    add_snapshot(hub, "web", PICK_TWO, annotations={names.NUMBER_OF_CLUSTERS_ANNOTATION: "two"})
    rig = make_activities(snapshotter=False)

    _, report = prepare_and_cycle(env, rig.activities, "web")

    assert report.error is not None and names.NUMBER_OF_CLUSTERS_ANNOTATION in report.error
    assert (report.requeue, report.outcome.fulfilled, report.writes.bindings) == (False, False, 0)
    assert report.summary.startswith("cycle 1: PickN 0; error: ")
    condition = hub.get(ClusterSchedulingPolicySnapshot, "web-0").status.condition(
        names.SCHEDULED_CONDITION
    )
    assert condition is not None
    assert (condition.status, condition.reason) == (names.FALSE, names.POLICY_UNFULFILLED_REASON)
    assert condition.message == f"scheduling failed: {report.error}"
    assert bindings_of(hub, "web") == []
    unexpected = {"placement_type": "PickN", "outcome": "unexpected"}
    assert rig.metrics.registry.get_sample_value("fleet_scheduler_cycles_total", unexpected) == 1
    devhub.stats.clear()

    # Retrying without a change gives the same answer and writes nothing more.
    _, again = prepare_and_cycle(env, rig.activities, "web", 2)
    assert again.error == report.error and writes(devhub) == 0


def test_pick_fixed_with_an_unknown_cluster_finishes_with_a_clear_false_condition(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    add_cluster(hub, "a")
    add_placement(hub, "web", {"placementType": "PickFixed", "clusterNames": ["a", "nope"]})

    _, report = prepare_and_cycle(env, make_activities().activities, "web")

    assert (report.error, report.outcome.fulfilled, report.writes.created) == (None, False, 1)
    assert report.summary.startswith("cycle 1: PickFixed 1/2, picked a; 1 created")
    assert targets(bindings_of(hub, "web")) == ["a"]
    decisions = hub.get(ClusterSchedulingPolicySnapshot, "web-0").status.target_clusters
    assert [(d.cluster_name, d.selected) for d in decisions] == [("a", True), ("nope", False)]
    assert decisions[1].reason == 'Specified cluster "nope" is not found'
    condition = placement_condition(hub, "web")
    assert condition is not None
    assert (condition.status, condition.reason) == (names.FALSE, names.POLICY_UNFULFILLED_REASON)
    assert "found 1 cluster(s) instead" in condition.message


def _sync_failure(
    hub: HubClient,
    devhub: DevHub,
    rig: Rig,
    env: ActivityEnvironment,
    placement: str,
    *,
    invalid: bool = False,
) -> tuple[str, str]:
    """Prepare twice: the first says why on the placement, the second writes nothing more.
    `invalid`: the placement itself is at fault (what KubeFleet's webhook refuses)."""
    prepared = prepare(env, rig.activities, placement)
    condition = placement_condition(hub, placement)
    assert condition is not None
    reason = INVALID_PLACEMENT_REASON if invalid else SNAPSHOT_SYNC_FAILED_REASON
    assert (condition.status, condition.reason) == (names.FALSE, reason)
    assert condition.observed_generation == 1
    assert prepared.snapshot_action == "failed"
    prefix = "invalid placement: " if invalid else "policy snapshot sync failed: "
    assert prepared.message.startswith(prefix), prepared.message
    devhub.stats.clear()
    again = prepare(env, rig.activities, placement)
    assert again == prepared
    assert writes(devhub) == 0, devhub.stats.snapshot()
    return prepared.phase, condition.message


def test_a_snapshot_with_a_broken_index_label_is_shown_on_the_placement_not_retried(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(hub, "web", PICK_TWO)
    add_snapshot(hub, "web", PICK_TWO, latest=False, labels={names.POLICY_INDEX_LABEL: "first"})
    rig = make_activities()

    phase, message = _sync_failure(hub, devhub, rig, env, "web")

    assert phase == "no_latest_snapshot"
    assert "label kubernetes-fleet.io/policy-index='first' is not an integer" in message
    assert "fix the label or delete the snapshot" in message
    # Fixing it (here: deleting the snapshot) lets the next turn go ahead.
    hub.delete(ClusterSchedulingPolicySnapshot, "web-0")
    prepared = prepare(env, rig.activities, "web")
    assert (prepared.phase, prepared.snapshot_action) == ("ready", "created web-0")
    # The cycle ran and replaced the sync failure with the cycle's own condition (no cluster).
    condition = placement_condition(hub, "web")
    assert condition is not None
    assert condition.reason == names.POLICY_UNFULFILLED_REASON, condition


def test_two_latest_snapshots_in_standalone_mode_are_shown_on_the_placement(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(hub, "web", PICK_TWO)
    add_snapshot(hub, "web", PICK_TWO, index=0)
    add_snapshot(hub, "web", PICK_TWO, index=1)

    phase, message = _sync_failure(hub, devhub, make_activities(), env, "web")

    assert phase == "multiple_latest_snapshots"
    assert "2 policy snapshots labelled kubernetes-fleet.io/is-latest-snapshot=true" in message


def test_a_policy_the_snapshotter_cannot_encode_is_shown_on_the_placement(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    spread = [{"maxSkew": 2**31, "topologyKey": "zone"}]
    add_placement(hub, "web", {**PICK_TWO, "topologySpreadConstraints": spread})

    phase, message = _sync_failure(hub, devhub, make_activities(), env, "web", invalid=True)

    assert phase == "no_latest_snapshot"
    assert "maxSkew = 2147483648 does not fit in an int32" in message


LONG_NAME = "p" * 64


def test_a_placement_name_too_long_to_label_its_objects_is_refused_by_the_crd(
    hub: HubClient,
) -> None:
    with pytest.raises(InvalidObjectError) as refused:
        add_placement(hub, LONG_NAME, PICK_TWO)
    assert "the name field cannot have length exceeding 63" in str(refused.value)


def test_a_placement_name_too_long_to_label_its_objects_is_shown_on_the_placement(
    ruleless_hub: HubClient,
    ruleless_devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    # KubeFleet's webhook caps placement names at 63 characters, the most a label value (the
    # parent-CRP label of its snapshots and bindings) can hold; our CRD's CEL rule does too, but
    # a hub whose CRDs predate it stores the placement.
    hub, devhub = ruleless_hub, ruleless_devhub
    add_placement(hub, LONG_NAME, PICK_TWO)

    phase, message = _sync_failure(
        hub, devhub, make_activities(on=hub), env, LONG_NAME, invalid=True
    )

    assert phase == "no_latest_snapshot"
    assert f"placement name '{LONG_NAME}' is 64 characters long" in message
    assert "recreate the placement with a shorter name" in message


def test_a_placement_name_too_long_to_label_its_objects_waits_without_the_snapshotter(
    ruleless_hub: HubClient,
    ruleless_devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    hub, devhub = ruleless_hub, ruleless_devhub
    add_placement(hub, LONG_NAME, PICK_TWO)
    devhub.stats.clear()

    rig = make_activities(snapshotter=False, on=hub)
    prepared = prepare(env, rig.activities, LONG_NAME)

    assert prepared.phase == "no_latest_snapshot" and "64 characters long" in prepared.message
    assert writes(devhub) == 0


def test_a_resource_placement_the_snapshotter_refuses_says_so_in_its_own_condition(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    # The RP's condition is ResourcePlacementScheduled; a sync failure must not put the CRP's
    # condition type on it (review finding: it did, and the real condition went stale).
    hub.create(Namespace(metadata={"name": "shop"}))
    spread = [{"maxSkew": 2**31, "topologyKey": "zone"}]
    spec = {
        "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "c"}],
        "policy": {**PICK_TWO, "topologySpreadConstraints": spread},
    }
    hub.create(
        ResourcePlacement.from_wire(
            {"metadata": {"name": "web", "namespace": "shop"}, "spec": spec}
        )
    )
    request = TurnRequest(placement="web", namespace="shop", cycle=1, reason="test")
    result: TurnResult = env.run(make_activities().activities.schedule_once, request)

    assert result.prepared.snapshot_action == "failed"
    assert "maxSkew = 2147483648 does not fit in an int32" in result.prepared.message
    rp = hub.get(ResourcePlacement, "web", namespace="shop")
    assert [c.type for c in rp.status.conditions] == [names.RP_SCHEDULED_CONDITION]
    condition = rp.status.condition(names.RP_SCHEDULED_CONDITION)
    assert condition is not None
    assert (condition.status, condition.reason) == (names.FALSE, INVALID_PLACEMENT_REASON)
    assert names.SCHEDULER_CLEANUP_FINALIZER in rp.metadata.finalizers
