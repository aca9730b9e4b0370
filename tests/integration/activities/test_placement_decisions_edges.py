"""PlacementDecisions where things go wrong: a turn failing between its binding writes and its
decision writes, slices edited or deleted by hand, a PickAll placement shrinking from over a
hundred clusters to none, a cleanup repeated or on a hub without the CRD. A real devhub, the
real activities, faults from devhub's fault injection."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.decisions import DecisionSettings
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterProfileReference,
    ClusterResourcePlacement,
    MemberCluster,
    PlacementDecision,
    ProfileDecision,
)
from tests.crd_files import write_crds
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    prepare_and_cycle,
    targets,
    turn,
)
from tests.integration.activities.decision_helpers import (
    ON,
    PICK_ALL,
    clusters_of,
    pick_n,
    scheduled,
    slices,
)
from workflows.models import CleanupRequest


@pytest.mark.parametrize("verb", ["create", "list"])
def test_a_turn_that_fails_after_its_bindings_publishes_on_its_retry(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
    verb: str,
) -> None:
    rig = make_activities(decisions=ON)
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster)
    add_placement(hub, "web", pick_n(2))
    devhub.faults.inject(verb=verb, resource="placementdecisions", status=500, count=1)
    with pytest.raises(ApplicationError) as failed:
        turn(env, rig.activities, "web")
    assert not failed.value.non_retryable
    assert len(bindings_of(hub, "web")) == 2  # written before the decisions failed
    assert slices(hub, "web") == []

    prepare_and_cycle(env, rig.activities, "web")  # the retry: same cycle
    assert clusters_of(slices(hub, "web")) == targets(bindings_of(hub, "web"))


def test_a_conflict_on_a_slice_fails_the_turn_for_a_retry(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities(decisions=ON)
    scheduled(hub, env, rig.activities, ("a", "b", "c"), web=2)
    hub.delete(MemberCluster, "c")
    devhub.faults.inject(verb="update", resource="placementdecisions", status=409, count=1)
    with pytest.raises(ApplicationError) as failed:
        turn(env, rig.activities, "web", 2)
    assert not failed.value.non_retryable
    prepare_and_cycle(env, rig.activities, "web", 2)
    assert clusters_of(slices(hub, "web")) == targets(
        bindings_of(hub, "web"), names.STATE_SCHEDULED
    )


def test_slices_edited_or_deleted_by_hand_are_put_right_by_the_next_turn(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    scheduled(hub, env, rig.activities, ("a", "b"), web=1)
    (only,) = slices(hub, "web")
    extra = ProfileDecision(
        cluster_profile_ref=ClusterProfileReference(name="z", namespace="fleet-system")
    )
    hub.update(only.model_copy(update={"decisions": [*only.decisions, extra]}))
    _, report = prepare_and_cycle(env, rig.activities, "web", 2)
    assert report.writes.decisions_written == 1
    assert clusters_of(slices(hub, "web")) == targets(bindings_of(hub, "web"))

    hub.delete(PlacementDecision, only.name, namespace="fleet-system")
    _, report = prepare_and_cycle(env, rig.activities, "web", 3)
    assert report.writes.decisions_written == 1
    assert clusters_of(slices(hub, "web")) == targets(bindings_of(hub, "web"))


def test_pick_all_shrinking_from_over_a_hundred_to_none_leaves_one_empty_slice(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    for i in range(130):
        add_cluster(hub, f"m-{i:03d}")
    add_placement(hub, "all", PICK_ALL)
    prepare_and_cycle(env, rig.activities, "all")
    assert [len(s.decisions) for s in slices(hub, "all")] == [100, 30]

    for i in range(130):
        hub.delete(MemberCluster, f"m-{i:03d}")
    prepare_and_cycle(env, rig.activities, "all", 2)
    (empty,) = slices(hub, "all")
    assert empty.name == "crp-all-0"
    assert empty.decisions == []
    assert empty.status is not None and empty.status.decisions == []


def test_a_long_placement_name_publishes(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    add_cluster(hub, "a")
    name = "p" * names.MAX_PLACEMENT_NAME_LENGTH
    add_placement(hub, name, pick_n(1))
    prepare_and_cycle(env, rig.activities, name)
    (only,) = slices(hub, name)
    assert only.name == f"crp-{name}-0"
    assert clusters_of([only]) == ["a"]


def test_a_cleanup_run_twice_and_one_on_a_hub_without_the_crd(
    hub: HubClient,
    devhub_factory: Callable[..., DevHub],
    tmp_path: Path,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities(decisions=ON)
    add_cluster(hub, "a")
    add_placement(hub, "web", pick_n(1))
    prepare_and_cycle(env, rig.activities, "web")
    hub.delete(ClusterResourcePlacement, "web")
    first = env.run(rig.activities.cleanup_placement, CleanupRequest(placement="web"))
    second = env.run(rig.activities.cleanup_placement, CleanupRequest(placement="web"))
    assert "1 decision slice(s) deleted" in first.summary
    assert "decision" not in second.summary
    assert slices(hub, "web") == []

    crds = write_crds(
        tmp_path / "crds", leave_out={"multicluster.x-k8s.io_placementdecisions.yaml"}
    )
    bare = devhub_factory(crd_dir=crds)
    client = HubClient.from_kubeconfig(bare.write_kubeconfig(tmp_path / "kubeconfig"))
    try:
        other = make_activities(decisions=ON, on=client).activities
        add_cluster(client, "a")
        add_placement(client, "web", pick_n(1))
        _, report = prepare_and_cycle(env, other, "web")
        assert report.error is None and targets(bindings_of(client, "web")) == ["a"]
        client.delete(ClusterResourcePlacement, "web")
        done = env.run(other.cleanup_placement, CleanupRequest(placement="web"))
        assert "finalizer removed" in done.summary
        assert bindings_of(client, "web") == []
    finally:
        client.close()


def test_decisions_on_then_off(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Turned off, the scheduler writes no more decisions, and a placement deleted meanwhile
    must not leave slices behind that still send its workloads somewhere."""
    on = make_activities(decisions=ON)
    add_cluster(hub, "a")
    add_placement(hub, "web", pick_n(1))
    prepare_and_cycle(env, on.activities, "web")
    assert len(slices(hub, "web")) == 1

    off = make_activities(decisions=DecisionSettings(publish=False))
    _, report = prepare_and_cycle(env, off.activities, "web", 2)
    assert report.writes.decisions_written == 0
    hub.delete(ClusterResourcePlacement, "web")
    env.run(off.activities.cleanup_placement, CleanupRequest(placement="web"))
    assert slices(hub, "web") == []


def test_an_unwritable_decisions_namespace_is_not_a_violation_a_turn_should_repair(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    from activities.fleet_state import read_fleet_state
    from scheduler.invariants import PLACEMENT_DECISIONS, find_violations
    from scheduler.requeue.reconcile import plan_reconcile

    nowhere = DecisionSettings(namespace="nowhere")
    rig = make_activities(decisions=nowhere)
    add_cluster(hub, "a")
    add_placement(hub, "web", pick_n(1))
    prepare_and_cycle(env, rig.activities, "web")
    prepare_and_cycle(env, rig.activities, "web", 2)  # what the reconcile's requeue runs

    state = read_fleet_state(hub, resource_placements=False, decisions=nowhere)
    found = find_violations(state, datetime.now(UTC))
    # One violation, about the namespace, for a person: no placement to requeue.
    (only,) = [v for v in found if v.invariant == PLACEMENT_DECISIONS]
    assert only.placement is None
    assert only.message.startswith("namespace nowhere holds no PlacementDecision of ours, yet 1")
    plan = plan_reconcile(
        state.placements, state.snapshots, state.clusters, state.bindings,
        {p.name for p in state.placements}, None, standalone=True, now=datetime.now(UTC),
        resource_placements=False, violations=found,
    )  # fmt: skip
    assert "web" not in plan.requeue
