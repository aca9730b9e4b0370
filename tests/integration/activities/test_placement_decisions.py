"""KEP-5313 PlacementDecisions written by the turn, in step with its bindings, and deleted by the
cleanup (docs/decisions.md): against a real devhub, through the real activities."""

from __future__ import annotations

from collections.abc import Callable

from temporalio.testing import ActivityEnvironment

from activities.decisions import DecisionSettings
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    MemberCluster,
    Namespace,
    PlacementDecision,
    ResourcePlacement,
)
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    prepare_and_cycle,
    targets,
    writes,
)
from tests.integration.activities.decision_helpers import (
    ON,
    PICK_ALL,
    clusters_of,
    pick_n,
    scheduled,
    slices,
)
from workflows.models import CleanupRequest, TurnRequest, TurnResult


def test_the_turn_publishes_one_decision_per_active_binding(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster)
    add_placement(hub, "web", pick_n(2))

    _, report = prepare_and_cycle(env, rig.activities, "web")

    (only,) = slices(hub, "web")
    assert only.name == "crp-web-0"
    assert only.scheduler_name == "fleet-scheduler"
    assert only.metadata.labels == {
        names.DECISION_KEY_LABEL: "web",
        names.DECISION_PLACEMENT_KEY_LABEL: "web",
        names.DECISION_INDEX_LABEL: "0",
        names.DECISION_PLACEMENT_KIND_LABEL: "ClusterResourcePlacement",
    }
    assert clusters_of([only]) == targets(bindings_of(hub, "web")) == ["b", "c"]
    assert {d.cluster_profile_ref.namespace for d in only.decisions} == {"fleet-system"}
    assert all((d.reason or "").startswith("picked by scheduling policy") for d in only.decisions)
    # What Argo CD reads (docs/decisions.md): the same clusters, flat.
    assert only.status is not None
    assert [d.cluster_name for d in only.status.decisions] == ["b", "c"]
    assert report.writes.decisions_written == 1
    assert "1 decision slice(s) written" in report.summary


def test_decisions_follow_the_bindings_and_a_quiet_turn_writes_none(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    scheduled(hub, env, rig.activities, ("a", "b", "c"), web=2)

    devhub.stats.clear()
    _, report = prepare_and_cycle(env, rig.activities, "web", 2)
    assert report.writes.decisions_written == 0
    assert writes(devhub, "placementdecisions") == 0

    hub.delete(MemberCluster, "c")  # its binding is unscheduled, "a" picked in its place
    _, report = prepare_and_cycle(env, rig.activities, "web", 3)
    active = targets(bindings_of(hub, "web"), names.STATE_SCHEDULED)
    assert active == ["a", "b"]
    assert clusters_of(slices(hub, "web")) == active
    assert report.writes.decisions_written == 1

    # A binding deleted by someone else (an eviction) is gone from the decisions next turn.
    doomed = next(b for b in bindings_of(hub, "web") if b.spec.target_cluster == "a")
    hub.delete(ClusterResourceBinding, doomed.name)
    prepare_and_cycle(env, rig.activities, "web", 4)
    assert clusters_of(slices(hub, "web")) == targets(
        [b for b in bindings_of(hub, "web") if not b.metadata.deleting], names.STATE_SCHEDULED
    )


def test_slices_of_a_hundred_grow_and_shrink_with_the_fleet(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    for i in range(230):
        add_cluster(hub, f"m-{i:03d}", labels={"tier": "big" if i < 120 else "small"})
    add_placement(hub, "all", PICK_ALL)
    prepare_and_cycle(env, rig.activities, "all")

    found = slices(hub, "all")
    assert [s.name for s in found] == ["crp-all-0", "crp-all-1", "crp-all-2"]
    assert [len(s.decisions) for s in found] == [100, 100, 30]
    assert clusters_of(found) == [f"m-{i:03d}" for i in range(230)]

    for i in range(120, 230):
        hub.delete(MemberCluster, f"m-{i:03d}")
    _, report = prepare_and_cycle(env, rig.activities, "all", 2)
    found = slices(hub, "all")
    assert [len(s.decisions) for s in found] == [100, 20]
    assert clusters_of(found) == [f"m-{i:03d}" for i in range(120)]
    assert report.writes.decisions_written == 2  # slice 1 replaced, slice 2 deleted


def test_a_resource_placements_decisions_live_in_its_namespace(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    for cluster in ("a", "b"):
        add_cluster(hub, cluster)
    hub.create(Namespace(metadata={"name": "app"}))
    spec = {
        "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "c"}],
        "policy": pick_n(1),
    }
    hub.create(
        ResourcePlacement.from_wire({"metadata": {"name": "web", "namespace": "app"}, "spec": spec})
    )
    add_placement(hub, "web", pick_n(2))  # a ClusterResourcePlacement of the same name
    request = TurnRequest(placement="web", namespace="app", cycle=1, reason="test")
    result: TurnResult = env.run(rig.activities.schedule_once, request)
    assert result.report is not None and result.report.writes.decisions_written == 1
    prepare_and_cycle(env, rig.activities, "web")

    (rp_slice,) = slices(hub, "web", namespace="app")
    assert rp_slice.name == "rp-web-0"
    assert rp_slice.metadata.labels[names.DECISION_PLACEMENT_KIND_LABEL] == "ResourcePlacement"
    assert len(rp_slice.decisions) == 1
    (crp_slice,) = slices(hub, "web")
    assert clusters_of([crp_slice]) == ["a", "b"]


def test_the_cleanup_deletes_the_decisions_with_the_bindings(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=ON)
    scheduled(hub, env, rig.activities, ("a", "b"), web=2, db=1)

    hub.delete(ClusterResourcePlacement, "web")
    report = env.run(rig.activities.cleanup_placement, CleanupRequest(placement="web"))
    assert slices(hub, "web") == []
    assert "1 decision slice(s) deleted" in report.summary
    assert len(slices(hub, "db")) == 1  # another placement's stay
    again = env.run(rig.activities.cleanup_placement, CleanupRequest(placement="web"))
    assert "decision" not in again.summary


def test_without_the_namespace_the_turn_still_writes_its_bindings(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities(decisions=DecisionSettings(namespace="nowhere"))
    add_cluster(hub, "a")
    add_placement(hub, "web", pick_n(1))
    _, report = prepare_and_cycle(env, rig.activities, "web")
    assert targets(bindings_of(hub, "web")) == ["a"]
    assert report.writes.decisions_written == 0
    assert report.error is None


def test_off_writes_none(
    hub: HubClient, devhub: DevHub, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()  # ActivitySettings' default: no decisions
    add_cluster(hub, "a")
    add_placement(hub, "web", pick_n(1))
    devhub.stats.clear()
    prepare_and_cycle(env, rig.activities, "web")
    assert devhub.stats.count("list", "placementdecisions") == 0
    assert slices(hub, "web") == []


async def test_check_reports_decisions_that_stay_wrong_and_only_those(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    from control.check import check_fleet
    from scheduler.invariants import PLACEMENT_DECISIONS

    rig = make_activities(decisions=ON)
    scheduled(hub, env, rig.activities, ("a", "b", "c"), web=2, db=1)

    async def found(**kwargs: object) -> list[str]:
        _, violations = await check_fleet(
            hub, None, "q", decisions=ON, confirm_after_s=0.05, **kwargs  # type: ignore[arg-type]
        )
        return [v.message for v in violations if v.invariant == PLACEMENT_DECISIONS]

    assert await found() == []
    (web,) = slices(hub, "web")
    hub.delete(PlacementDecision, web.name, namespace="fleet-system")
    (db,) = slices(hub, "db")
    stray = db.model_copy(
        update={"metadata": db.metadata.model_copy(update={"name": "crp-gone-0", "labels": {
            **db.metadata.labels, names.DECISION_KEY_LABEL: "gone"}, "resource_version": None,
            "uid": None, "creation_timestamp": None})}
    )
    hub.create(stray)
    assert await found() == [  # by placement: gone, web
        "PlacementDecision(s) crp-gone-0 in namespace fleet-system are left over from placement "
        "gone, which does not exist",
        "placement web: has active binding(s) on b, c and no PlacementDecision in namespace "
        "fleet-system",
    ]
    assert await found(decisions_checked=False) == []
    # The next turn repairs its own.
    prepare_and_cycle(env, rig.activities, "web", 2)
    assert len(await found()) == 1
