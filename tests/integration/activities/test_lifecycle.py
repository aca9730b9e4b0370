"""The world moving between and during activities: placements, snapshots, clusters and
bindings deleted mid-cycle, and the cleanup that follows a placement's deletion."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.errors import NotFoundError
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    prepare,
    prepare_and_cycle,
    targets,
    writes,
)
from workflows import failures
from workflows.models import CleanupReport, CleanupRequest

PICK_TWO = {"placementType": "PickN", "numberOfClusters": 2}
BINDINGS = "clusterresourcebindings"


def scheduled(hub: HubClient, env: ActivityEnvironment, rig: Rig, name: str = "web") -> None:
    """Clusters a, b, c and a PickN-2 placement on b and c after one cycle."""
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster)
    add_placement(hub, name, PICK_TWO)
    prepare_and_cycle(env, rig.activities, name)
    assert targets(bindings_of(hub, name)) == ["b", "c"]


def cleanup(env: ActivityEnvironment, rig: Rig, name: str = "web") -> CleanupReport:
    return env.run(rig.activities.cleanup_placement, CleanupRequest(placement=name))


def test_a_cluster_deleted_between_cycles_has_its_dangling_binding_unscheduled(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    scheduled(hub, env, rig)
    hub.delete(MemberCluster, "c")

    _, report = prepare_and_cycle(env, rig.activities, "web", 2)

    bindings = {b.spec.target_cluster: b for b in bindings_of(hub, "web")}
    assert bindings["c"].spec.state == names.STATE_UNSCHEDULED
    assert bindings["c"].metadata.annotations[names.PREVIOUS_BINDING_STATE_ANNOTATION] == (
        names.STATE_SCHEDULED
    )
    assert bindings["a"].spec.state == names.STATE_SCHEDULED  # picked in c's place
    assert (report.writes.unscheduled, report.writes.created) == (1, 1)
    assert report.summary.startswith("cycle 2: PickN 2/2, picked a,b; 1 created, 1 unscheduled")


def test_a_binding_being_deleted_loses_our_finalizer_in_the_next_cycle(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    scheduled(hub, env, rig)
    doomed = next(b for b in bindings_of(hub, "web") if b.spec.target_cluster == "c")
    held = hub.delete(ClusterResourceBinding, doomed.name)
    assert held is not None  # our finalizer keeps it

    _, report = prepare_and_cycle(env, rig.activities, "web", 2)

    assert report.writes.finalizers_removed == 1
    with pytest.raises(NotFoundError):
        hub.get(ClusterResourceBinding, doomed.name)
    assert len(bindings_of(hub, "web")) == 2  # the gap is filled by a new binding


def test_cleanup_deletes_bindings_and_snapshots_then_releases_the_placement(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    scheduled(hub, env, rig)
    # Another controller's finalizer on one binding: that binding stays, deleting, without ours.
    kept = bindings_of(hub, "web")[0]
    hub.patch(
        ClusterResourceBinding,
        kept.name,
        {"metadata": {"finalizers": [*kept.metadata.finalizers, names.WORK_FINALIZER]}},
    )
    hub.delete(ClusterResourcePlacement, "web")
    assert prepare(env, rig.activities, "web").phase == "deleting"

    report = cleanup(env, rig)

    assert (report.bindings_deleted, report.snapshots_deleted, report.finalizer_removed) == (
        2,
        1,
        True,
    )
    assert report.summary == (
        "placement web: 2 binding(s) deleted, 1 policy snapshot(s) deleted, finalizer removed"
    )
    remaining = bindings_of(hub, "web")
    assert [b.name for b in remaining] == [kept.name]
    assert remaining[0].metadata.deleting
    assert remaining[0].metadata.finalizers == [names.WORK_FINALIZER]
    assert list(hub.list(ClusterSchedulingPolicySnapshot)) == []
    with pytest.raises(NotFoundError):
        hub.get(ClusterResourcePlacement, "web")  # our finalizer was its last
    assert prepare(env, rig.activities, "web").phase == "gone"

    # Idempotent: a retried cleanup finds nothing left to do and writes nothing.
    devhub.stats.clear()
    again = cleanup(env, rig)
    assert (again.bindings_deleted, again.snapshots_deleted, again.finalizer_removed) == (
        0,
        0,
        False,
    )
    assert writes(devhub) == 0


def test_cleanup_without_the_snapshotter_leaves_snapshots_to_kubefleet(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    scheduled(hub, env, make_activities())
    hub.delete(ClusterResourcePlacement, "web")

    report = cleanup(env, make_activities(snapshotter=False))

    assert (report.bindings_deleted, report.snapshots_deleted) == (2, 0)
    assert bindings_of(hub, "web") == []
    assert [s.name for s in hub.list(ClusterSchedulingPolicySnapshot)] == ["web-0"]


def test_cleanup_retried_after_a_failure_mid_way_converges(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    scheduled(hub, env, rig)
    hub.delete(ClusterResourcePlacement, "web")
    devhub.faults.inject(verb="delete", resource=BINDINGS, status=503, count=1)

    with pytest.raises(ApplicationError) as failed:
        cleanup(env, rig)
    assert failed.value.type == failures.HUB_UNAVAILABLE and not failed.value.non_retryable

    report = cleanup(env, rig)
    assert report.finalizer_removed and bindings_of(hub, "web") == []


def test_cleanup_refuses_a_placement_that_is_not_being_deleted(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    scheduled(hub, env, rig)

    with pytest.raises(ApplicationError) as failed:
        cleanup(env, rig)

    assert failed.value.type == failures.UNEXPECTED and failed.value.non_retryable
    assert "it is not being deleted" in failed.value.message
    assert len(bindings_of(hub, "web")) == 2


def test_a_placement_deleted_after_a_failed_first_prepare_leaves_no_policy_snapshot(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    # Standalone, prepare creates the placement's policy snapshots, and only our finalizer makes
    # a deletion wait for the cleanup that removes them. The first prepare's finalizer write
    # fails (a conflict here; a worker killed at that moment does the same); the user deletes
    # the placement, which nothing holds, so it is gone at once and the next prepare finds it
    # gone: no cleanup will ever run, so no snapshot may have been made before the finalizer.
    rig = make_activities()
    add_placement(hub, "web", PICK_TWO)
    devhub.faults.inject(verb="patch", resource="clusterresourceplacements", status=409, count=1)

    with pytest.raises(ApplicationError) as failed:
        prepare(env, rig.activities, "web")

    assert failed.value.type == failures.CONFLICT
    hub.delete(ClusterResourcePlacement, "web")
    assert prepare(env, rig.activities, "web").phase == "gone"
    left = hub.list(ClusterSchedulingPolicySnapshot, {names.PARENT_PLACEMENT_LABEL: "web"})
    assert [s.name for s in left] == []
