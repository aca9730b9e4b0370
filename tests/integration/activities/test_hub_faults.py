"""Hub faults injected by devhub leave the activities as the failure types their RetryPolicy
expects, and a retry after a partial success converges without a duplicate binding."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.bindings import BindingNameTakenError
from activities.translate import failure_for, hub_failures, is_retryable
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.errors import HubError, MalformedObjectError
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler import InvalidSnapshotError
from scheduler.snapshots import SnapshotMetadataError
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    cycle,
    prepare,
    prepare_and_cycle,
    sync_snapshots,
    targets,
)
from workflows import failures

PICK_THREE = {"placementType": "PickN", "numberOfClusters": 3}
HANG_WAIT_S = 5.0


def ready_placement(hub: HubClient, env: ActivityEnvironment, rig: Rig, name: str) -> str:
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster)
    add_placement(hub, name, PICK_THREE)
    return sync_snapshots(hub, name)[0]


def test_a_cycle_retried_after_one_of_its_creates_failed_converges_without_duplicates(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    snapshot = ready_placement(hub, env, rig, "web")
    # The creates go out a few at a time: one fails; those already in flight land, the rest
    # are not sent. How many landed depends on timing, so the test reads it from the hub.
    devhub.faults.inject(verb="create", resource="clusterresourcebindings", status=503, count=1)

    with pytest.raises(ApplicationError) as failed:
        cycle(env, rig.activities, "web", snapshot, 1)

    assert failed.value.type == failures.HUB_UNAVAILABLE and is_retryable(failed.value)
    landed = len(bindings_of(hub, "web"))
    assert landed < 3
    status = hub.get(ClusterSchedulingPolicySnapshot, snapshot).status
    assert status.condition(names.SCHEDULED_CONDITION) is None  # not written by the failed try

    retried = cycle(env, rig.activities, "web", snapshot, 1)

    bindings = bindings_of(hub, "web")
    assert targets(bindings) == ["a", "b", "c"]
    assert len({b.name for b in bindings}) == 3
    assert (retried.writes.created, retried.bindings_seen, retried.outcome.fulfilled) == (
        3 - landed,
        landed,
        True,
    )
    sample = rig.metrics.registry.get_sample_value
    # Both attempts are metered, the failed one with the writes that landed before it failed.
    assert sample("fleet_scheduler_cycles_total", {"placement_type": "PickN", "outcome": "error"})
    assert sample("fleet_scheduler_binding_writes_total", {"operation": "create"}) == 3


def test_a_conflict_on_a_binding_patch_is_a_retryable_conflict_then_converges(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    ready_placement(hub, env, rig, "web")
    prepare_and_cycle(env, rig.activities, "web", 1)
    # A new policy makes every binding obsolete; the next cycle re-points them by patches.
    crp = hub.get(ClusterResourcePlacement, "web")
    hub.patch(
        ClusterResourcePlacement,
        "web",
        {"spec": {"policy": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}},
        resource_version=crp.metadata.resource_version,
    )
    assert sync_snapshots(hub, "web") == ("web-1", "demoted web-0, created web-1")
    devhub.faults.inject(verb="patch", resource="clusterresourcebindings", status=409, count=1)

    with pytest.raises(ApplicationError) as failed:
        cycle(env, rig.activities, "web", "web-1", 2)

    assert failed.value.type == failures.CONFLICT and not failed.value.non_retryable
    assert "re-reading" in failed.value.message
    # Patches in flight when the conflict came back landed; the rest were not sent.
    moved = [
        b for b in bindings_of(hub, "web") if b.spec.scheduling_policy_snapshot_name == "web-1"
    ]
    assert len(moved) < 3
    report = cycle(env, rig.activities, "web", "web-1", 2)
    assert report.writes.patched == 3 - len(moved)
    bindings = bindings_of(hub, "web")
    assert [b.spec.scheduling_policy_snapshot_name for b in bindings] == ["web-1"] * 3


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_transient_hub_error_fails_the_cycle_retryably_before_any_write(
    status: int,
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    snapshot = ready_placement(hub, env, rig, "web")
    devhub.faults.inject(verb="list", resource="memberclusters", status=status, count=1)

    with pytest.raises(ApplicationError) as failed:
        cycle(env, rig.activities, "web", snapshot, 1)

    assert failed.value.type == failures.HUB_UNAVAILABLE and is_retryable(failed.value)
    assert (
        str(status) in failed.value.message and "cycle 1 of placement 'web'" in failed.value.message
    )
    # devhub's 429 says Retry-After: 1; Temporal waits that long instead of its backoff.
    expected_delay = timedelta(seconds=1) if status == 429 else None
    assert failed.value.next_retry_delay == expected_delay
    assert bindings_of(hub, "web") == []
    assert cycle(env, rig.activities, "web", snapshot, 1).writes.created == 3


def test_a_transient_error_while_preparing_is_retryable(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    add_placement(hub, "web", PICK_THREE)
    devhub.faults.inject(verb="create", resource="clusterschedulingpolicysnapshots", status=500)

    with pytest.raises(ApplicationError) as failed:
        prepare(env, make_activities().activities, "web")

    assert failed.value.type == failures.HUB_UNAVAILABLE and is_retryable(failed.value)


def _invalid_label(hub: HubClient, devhub: DevHub) -> object:
    return hub.create(MemberCluster.from_wire({"metadata": {"name": "b", "labels": {"x": "no!"}}}))


def _stale_patch(hub: HubClient, devhub: DevHub) -> object:
    return hub.patch(MemberCluster, "a", {"metadata": {"labels": {"x": "y"}}}, resource_version="1")


def _taken_name(hub: HubClient, devhub: DevHub) -> object:
    return hub.create(MemberCluster.from_wire({"metadata": {"name": "a"}}))


def _bad_selector(hub: HubClient, devhub: DevHub) -> object:
    return hub.list(MemberCluster, label_selector="a in ((")


def _wrong_token(hub: HubClient, devhub: DevHub) -> object:
    with HubClient.from_url(devhub.url, token="wrong") as stranger:
        return stranger.get(MemberCluster, "a")


def _injected(status: int) -> Callable[[HubClient, DevHub], object]:
    def fail(hub: HubClient, devhub: DevHub) -> object:
        devhub.faults.inject(verb="get", resource="memberclusters", status=status, count=1)
        return hub.get(MemberCluster, "a")

    return fail


@pytest.mark.parametrize(
    ("provoke", "failure_type", "retryable"),
    [
        pytest.param(_invalid_label, failures.INVALID_OBJECT, False, id="422-invalid"),
        pytest.param(_bad_selector, failures.INVALID_OBJECT, False, id="400-bad-request"),
        pytest.param(lambda h, d: h.get(MemberCluster, "x"), failures.VANISHED, True, id="404"),
        pytest.param(_stale_patch, failures.CONFLICT, True, id="409-conflict"),
        pytest.param(_taken_name, failures.CONFLICT, True, id="409-already-exists"),
        pytest.param(_wrong_token, failures.HUB_ACCESS, True, id="401"),
        pytest.param(_injected(429), failures.HUB_UNAVAILABLE, True, id="429"),
        pytest.param(_injected(500), failures.HUB_UNAVAILABLE, True, id="500"),
        pytest.param(_injected(503), failures.HUB_UNAVAILABLE, True, id="503"),
    ],
)
def test_each_real_hub_error_maps_to_the_failure_type_its_retry_policy_expects(
    provoke: Callable[[HubClient, DevHub], object],
    failure_type: str,
    retryable: bool,
    hub: HubClient,
    devhub: DevHub,
) -> None:
    add_cluster(hub, "a")
    with pytest.raises(HubError) as caught:
        provoke(hub, devhub)

    failure = failure_for(caught.value, "reading cluster a")

    assert (failure.type, is_retryable(failure), failure.non_retryable) == (
        failure_type,
        retryable,
        not retryable,
    )
    assert failure.message.startswith("reading cluster a: ")
    assert failure_type in (failures.RETRYABLE if retryable else failures.NON_RETRYABLE)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(MalformedObjectError("MemberCluster 'a' does not match"), id="malformed"),
        pytest.param(InvalidSnapshotError("bad annotation"), id="scheduler-cycle-error"),
        pytest.param(SnapshotMetadataError("bad policy-index"), id="snapshot-error"),
        pytest.param(BindingNameTakenError("taken"), id="binding-name-taken"),
    ],
)
def test_broken_invariants_are_non_retryable_unexpected_behaviour(error: Exception) -> None:
    with pytest.raises(ApplicationError) as failed, hub_failures("cycle 1"):
        raise error
    assert failed.value.type == failures.UNEXPECTED and failed.value.non_retryable
    assert failed.value.message == f"cycle 1: {error}"
    assert failed.value.__cause__ is error
