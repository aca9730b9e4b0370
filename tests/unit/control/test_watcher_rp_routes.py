"""ResourcePlacements through the watcher's views and routes (kubefleet-rules 7, 9): keyed
`<namespace>/<name>`, snapshot and binding events reach the placement of their own namespace,
and member-cluster changes (namespace collection included) fan out over both kinds."""

from __future__ import annotations

from datetime import UTC, datetime

from control.routes import Route, route_change, startup_routes
from control.views import Change, View, routing_copy
from control.watcher import _Placements
from hub import names as hub_names
from hub.client import Resync, WatchEvent
from hub.types import (
    ClusterResourcePlacement,
    ClusterResourcePlacementSpec,
    ClusterResourcePlacementStatus,
    Condition,
    MemberCluster,
    ObjectMeta,
    PlacementPolicy,
    ResourcePlacement,
    SchedulingPolicySnapshot,
    SchedulingPolicySnapshotSpec,
)
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.testing import binding, member_cluster
from workflows import names

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
PICK_ALL = PlacementPolicy(placement_type="PickAll")
PICK_2 = PlacementPolicy(placement_type="PickN", number_of_clusters=2)


def rp(name: str, namespace: str, policy: PlacementPolicy = PICK_ALL, *, fulfilled: bool = False):
    conditions = []
    if fulfilled:
        conditions.append(
            Condition(type=hub_names.RP_SCHEDULED_CONDITION, status="True", observed_generation=1)
        )
    return ResourcePlacement(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            generation=1,
            resource_version="1",
            finalizers=[hub_names.SCHEDULER_CLEANUP_FINALIZER],
        ),
        spec=ClusterResourcePlacementSpec(policy=policy),
        status=ClusterResourcePlacementStatus(conditions=conditions),
    )


def crp(name: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement(
        metadata=ObjectMeta(name=name, generation=1, resource_version="1"),
        spec=ClusterResourcePlacementSpec(policy=PICK_ALL),
    )


def sps(placement: str, namespace: str) -> SchedulingPolicySnapshot:
    return SchedulingPolicySnapshot(
        metadata=ObjectMeta(
            name=f"{placement}-0",
            namespace=namespace,
            labels={
                hub_names.PARENT_PLACEMENT_LABEL: placement,
                hub_names.IS_LATEST_SNAPSHOT_LABEL: "true",
            },
            annotations={hub_names.CRP_GENERATION_ANNOTATION: "1"},
        ),
        spec=SchedulingPolicySnapshotSpec(policy_hash=""),
    )


def routes(change: Change, placements: dict, standalone: bool = False) -> list[Route]:
    return route_change(
        change,
        placements=placements,
        standalone=standalone,
        checker=EligibilityChecker(),
        now=NOW,
    )


def test_views_key_namespaced_objects_by_namespace_and_name() -> None:
    view: View[ResourcePlacement] = View(ResourcePlacement)
    view.apply_resync(Resync(objects=[rp("web", "a"), rp("web", "b")], resource_version="1"))
    assert sorted(view.objects) == ["a/web", "b/web"]
    gone = view.apply_event(WatchEvent(type="DELETED", object=rp("web", "a"), resource_version="2"))
    assert gone is not None and gone.key == "a/web"
    assert sorted(view.objects) == ["b/web"]


def test_routing_copies_keep_kind_namespace_and_the_rp_condition() -> None:
    copy = routing_copy(rp("web", "a", PICK_2, fulfilled=True))
    assert type(copy) is ResourcePlacement and copy.metadata.namespace == "a"
    assert copy.status.condition(hub_names.RP_SCHEDULED_CONDITION) is not None


def test_snapshot_and_binding_events_reach_the_placement_in_their_namespace() -> None:
    (route,) = routes(Change("ADDED", None, sps("web", "team-a")), {})
    assert route.placement == "team-a/web"
    assert route.signal == names.SIGNAL_SNAPSHOT_CHANGED
    live = binding("web", "c1", "web-0", namespace="team-a")
    meta = live.metadata.model_copy(update={"deletion_timestamp": NOW})
    deleting = live.model_copy(update={"metadata": meta})
    (route,) = routes(Change("MODIFIED", live, deleting), {})
    assert (route.placement, route.signal) == ("team-a/web", names.SIGNAL_BINDING_DELETING)


def test_rp_lifecycle_routes_use_the_key() -> None:
    created = routes(Change("ADDED", None, rp("web", "a")), {}, standalone=True)
    assert [(r.placement, r.signal) for r in created] == [("a/web", names.SIGNAL_PLACEMENT_CHANGED)]
    gone = routes(Change("DELETED", rp("web", "a"), rp("web", "a")), {})
    assert [(r.placement, r.may_start) for r in gone] == [("a/web", False)]
    started = startup_routes([rp("web", "b"), crp("web"), rp("web", "a")], standalone=False)
    assert [r.placement for r in started] == ["a/web", "b/web", "web"]


def test_a_namespace_change_on_a_cluster_reaches_both_kinds() -> None:
    old = member_cluster("c1", NOW)
    status = old.status.model_copy(update={"namespaces": {"app": "work-1"}})
    new = old.model_copy(update={"status": status})
    placements = {
        "web": crp("web"),
        "app/web": rp("web", "app"),
        "app/full": rp("full", "app", PICK_2, fulfilled=True),  # PickN fully scheduled: no
        "app/short": rp("short", "app", PICK_2),
    }
    reached = routes(Change("MODIFIED", old, new), placements)
    assert sorted(r.placement for r in reached) == ["app/short", "app/web", "web"]
    assert all("namespaces changed" in r.reason for r in reached)
    # A cluster that leaves reaches every placement, fully scheduled or not.
    left = routes(Change("DELETED", new, new), placements)
    assert sorted(r.placement for r in left) == sorted(placements)
    assert isinstance(new, MemberCluster) and new.status.namespaces == {"app": "work-1"}


def test_the_watchers_placement_cache_spans_both_kinds_and_follows_resyncs() -> None:
    crps: View[ClusterResourcePlacement] = View(ClusterResourcePlacement)
    rps: View[ResourcePlacement] = View(ResourcePlacement)
    cache = _Placements([crps, rps])
    crps.apply_resync(Resync(objects=[crp("web")], resource_version="1"))
    rps.apply_resync(Resync(objects=[rp("web", "a")], resource_version="1"))
    assert sorted(cache) == ["a/web", "web"] and len(cache) == 2
    assert type(cache["a/web"]) is ResourcePlacement and "web" in cache
    # A later Resync replaces a view's dict: the cache reads the new one.
    rps.apply_resync(Resync(objects=[rp("api", "b")], resource_version="2"))
    assert cache.get("a/web") is None and cache.get("b/api") is not None
    assert sorted(p.metadata.name for p in cache.values()) == ["api", "web"]
