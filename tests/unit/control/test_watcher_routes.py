"""Which placement workflows each hub change reaches, with which signal and reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from control.routes import (
    Route,
    may_start,
    orphan_snapshot_warning,
    route_change,
    startup_routes,
)
from control.views import Change, routing_copy
from hub import names as hub_names
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourceBindingSpec,
    ClusterResourcePlacement,
    ClusterResourcePlacementSpec,
    ClusterResourcePlacementStatus,
    ClusterSchedulingPolicySnapshot,
    Condition,
    MemberCluster,
    MemberClusterSpec,
    ObjectMeta,
    PlacementPolicy,
    SchedulingPolicySnapshotSpec,
    Taint,
)
from hub.types.meta import HubObject
from scheduler.clusters.eligibility import EligibilityChecker
from tests.support.policies import prod_only
from workflows import names

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GONE = NOW - timedelta(seconds=1)
PICK_ALL = PlacementPolicy(placement_type="PickAll")
PICK_2 = PlacementPolicy(placement_type="PickN", number_of_clusters=2)


def placement(
    name: str,
    policy: PlacementPolicy | None = PICK_ALL,
    *,
    generation: int = 1,
    deleting: bool = False,
    finalizer: bool = True,
    fulfilled: bool = False,
) -> ClusterResourcePlacement:
    conditions = []
    if fulfilled:
        conditions.append(
            Condition(
                type=hub_names.PLACEMENT_SCHEDULED_CONDITION,
                status="True",
                observed_generation=generation,
            )
        )
    return ClusterResourcePlacement(
        metadata=ObjectMeta(
            name=name,
            generation=generation,
            finalizers=[hub_names.SCHEDULER_CLEANUP_FINALIZER] if finalizer else [],
            deletion_timestamp=GONE if deleting else None,
        ),
        spec=ClusterResourcePlacementSpec(policy=policy),
        status=ClusterResourcePlacementStatus(conditions=conditions),
    )


def snapshot(latest: bool = True, **annotations: str) -> ClusterSchedulingPolicySnapshot:
    keys = {
        "n": hub_names.NUMBER_OF_CLUSTERS_ANNOTATION,
        "gen": hub_names.CRP_GENERATION_ANNOTATION,
    }
    return ClusterSchedulingPolicySnapshot(
        metadata=ObjectMeta(
            name="web-0",
            labels={
                hub_names.PARENT_PLACEMENT_LABEL: "web",
                hub_names.IS_LATEST_SNAPSHOT_LABEL: "true" if latest else "false",
            },
            annotations={keys[k]: v for k, v in annotations.items()},
        ),
        spec=SchedulingPolicySnapshotSpec(policy_hash="h"),
    )


def binding(deleting: bool) -> ClusterResourceBinding:
    return ClusterResourceBinding(
        metadata=ObjectMeta(
            name="web-m1-abc",
            labels={hub_names.PARENT_PLACEMENT_LABEL: "web"},
            finalizers=[hub_names.SCHEDULER_BINDING_CLEANUP_FINALIZER],
            deletion_timestamp=GONE if deleting else None,
        ),
        spec=ClusterResourceBindingSpec(
            state="Bound",
            scheduling_policy_snapshot_name="web-0",
            target_cluster="m1",
            cluster_decision=ClusterDecision(cluster_name="m1", selected=True, reason="r"),
        ),
    )


def cluster(taints: tuple[Taint, ...] = (), **labels: str) -> MemberCluster:
    return MemberCluster(
        metadata=ObjectMeta(name="m1", labels=labels), spec=MemberClusterSpec(taints=list(taints))
    )


FLEET = {
    p.metadata.name: p
    for p in (
        placement("all", PICK_ALL, fulfilled=True),
        placement("nil", None),
        placement("n-done", PICK_2, fulfilled=True),
        placement("n-short", PICK_2),
        placement("n-deleting", PICK_2, fulfilled=True, deleting=True),
        placement("n-finished", PICK_2, fulfilled=True, deleting=True, finalizer=False),
    )
}


def routes(kind: str, old: HubObject | None, new: HubObject, standalone: bool = True) -> list:
    """The routes of one change, checked to be the same over the watcher's routing copies of
    the objects (what its views keep) as over the full objects."""
    found = _routes(Change(kind, old, new), FLEET, standalone)  # type: ignore[arg-type]
    copies = {name: routing_copy(placement) for name, placement in FLEET.items()}
    slim = Change(kind, routing_copy(old) if old else None, routing_copy(new))  # type: ignore[arg-type]
    assert _routes(slim, copies, standalone) == found, "the routing copy lost a field routes read"
    return found


def _routes(
    change: Change[HubObject],
    placements: dict[str, ClusterResourcePlacement],
    standalone: bool,
) -> list:
    found = route_change(
        change, placements=placements, standalone=standalone, checker=EligibilityChecker(),
        now=NOW,
    )
    return [(r.placement, r.signal, r.reason, r.may_start) for r in found]


CHANGED = names.SIGNAL_PLACEMENT_CHANGED
DELETING = names.SIGNAL_PLACEMENT_DELETING
SNAPSHOT = names.SIGNAL_SNAPSHOT_CHANGED
CLUSTER = names.SIGNAL_CLUSTER_CHANGED


@pytest.mark.parametrize(
    ("kind", "old", "new", "standalone", "expected"),
    [
        pytest.param(
            "ADDED",
            None,
            placement("web"),
            True,
            [("web", CHANGED, "placement web created", True)],
            id="created-standalone",
        ),
        pytest.param("ADDED", None, placement("web"), False, [], id="created-beside-kubefleet"),
        pytest.param(
            "MODIFIED",
            placement("web"),
            placement("web", generation=2),
            True,
            [("web", CHANGED, "placement web: spec changed (generation 1 -> 2)", True)],
            id="spec-changed-standalone",
        ),
        pytest.param(
            "MODIFIED",
            placement("web"),
            placement("web", generation=2),
            False,
            [],
            id="spec-beside",
        ),
        pytest.param(
            "MODIFIED",
            placement("web"),
            placement("web", fulfilled=True),
            True,
            [],
            id="status-only",
        ),
        pytest.param(
            "MODIFIED",
            placement("web"),
            placement("web", deleting=True),
            False,
            [("web", DELETING, "placement web: deletion started", True)],
            id="deletion-started",
        ),
        pytest.param(
            "MODIFIED",
            placement("web", finalizer=False),
            placement("web", deleting=True, finalizer=False),
            True,
            [],
            id="deletion-without-our-finalizer",
        ),
        pytest.param(
            "DELETED",
            placement("web"),
            placement("web"),
            True,
            [("web", DELETING, "placement web was deleted", False)],
            id="gone-never-starts",
        ),
    ],
)
def test_placement_changes(kind, old, new, standalone, expected) -> None:
    assert routes(kind, old, new, standalone) == expected


@pytest.mark.parametrize(
    ("kind", "old", "new", "expected"),
    [
        pytest.param(
            "ADDED",
            None,
            snapshot(),
            [("web", SNAPSHOT, "policy snapshot web-0 created", True)],
            id="latest-created",
        ),
        pytest.param("ADDED", None, snapshot(latest=False), [], id="older-created"),
        pytest.param(
            "MODIFIED",
            snapshot(n="2", gen="1"),
            snapshot(n="3", gen="1"),
            [("web", SNAPSHOT, "policy snapshot web-0: number-of-clusters 2 -> 3", True)],
            id="annotation",
        ),
        pytest.param(
            "MODIFIED",
            snapshot(latest=False, gen="1"),
            snapshot(gen="2"),
            [
                (
                    "web",
                    SNAPSHOT,
                    "policy snapshot web-0: CRP-generation 1 -> 2, became the latest",
                    True,
                )
            ],
            id="promoted",
        ),
        pytest.param("MODIFIED", snapshot(n="2"), snapshot(n="2"), [], id="status-only"),
        pytest.param("DELETED", snapshot(), snapshot(), [], id="deleted"),
    ],
)
def test_snapshot_changes(kind, old, new, expected) -> None:
    assert routes(kind, old, new) == expected


@pytest.mark.parametrize(
    ("standalone", "cached_generation", "kind", "old", "new", "routed"),
    [
        pytest.param(True, 2, "ADDED", None, snapshot(gen="2"), False, id="own-creation"),
        pytest.param(
            True, 2, "MODIFIED", snapshot(gen="1"), snapshot(gen="2"), False, id="own-refresh"
        ),
        pytest.param(True, 1, "ADDED", None, snapshot(gen="2"), True, id="cache-behind"),
        pytest.param(True, None, "ADDED", None, snapshot(gen="2"), True, id="not-cached"),
        pytest.param(True, 2, "ADDED", None, snapshot(), True, id="no-generation-annotation"),
        pytest.param(False, 2, "ADDED", None, snapshot(gen="2"), True, id="beside-kubefleet"),
    ],
)
def test_standalone_snapshot_writes_at_the_signalled_generation_are_not_echoed(
    standalone: bool,
    cached_generation: int | None,
    kind: str,
    old: ClusterSchedulingPolicySnapshot | None,
    new: ClusterSchedulingPolicySnapshot,
    routed: bool,
) -> None:
    cache = dict(FLEET)
    if cached_generation is not None:
        cache["web"] = placement("web", PICK_2, generation=cached_generation)
    found = route_change(
        Change(kind, old, new),  # type: ignore[arg-type]
        placements=cache,
        standalone=standalone,
        checker=EligibilityChecker(),
        now=NOW,
    )
    assert [(r.placement, r.signal) for r in found] == ([("web", SNAPSHOT)] if routed else [])


def orphan(latest: bool = True) -> ClusterSchedulingPolicySnapshot:
    """web-0 as a broken placement controller would write it: no parent-CRP label."""
    labelled = snapshot(latest=latest)
    labels = dict(labelled.metadata.labels)
    del labels[hub_names.PARENT_PLACEMENT_LABEL]
    metadata = labelled.metadata.model_copy(update={"labels": labels})
    return labelled.model_copy(update={"metadata": metadata})


@pytest.mark.parametrize(
    ("kind", "old", "new", "warned"),
    [
        pytest.param("ADDED", None, orphan(), True, id="latest-without-parent"),
        pytest.param("MODIFIED", orphan(), orphan(), True, id="updated-without-parent"),
        pytest.param("ADDED", None, orphan(latest=False), False, id="older-without-parent"),
        pytest.param("DELETED", orphan(), orphan(), False, id="deleted"),
        pytest.param("ADDED", None, snapshot(), False, id="with-parent"),
    ],
)
def test_a_latest_snapshot_without_a_parent_label_reaches_nobody_but_a_warning(
    kind, old, new, warned
) -> None:
    warning = orphan_snapshot_warning(Change(kind, old, new))
    if not warned:
        assert warning is None
        return
    assert routes(kind, old, new) == []
    assert warning is not None
    assert "policy snapshot web-0" in warning and hub_names.PARENT_PLACEMENT_LABEL in warning


def test_binding_deletion_reaches_its_placement_and_nothing_else_does() -> None:
    reason = "binding web-m1-abc (cluster m1): deletion started"
    assert routes("MODIFIED", binding(False), binding(True)) == [
        ("web", names.SIGNAL_BINDING_DELETING, reason, True)
    ]
    assert routes("ADDED", None, binding(False)) == []
    assert routes("DELETED", binding(True), binding(True)) == []


@pytest.mark.parametrize(
    ("kind", "old", "new", "expected"),
    [
        pytest.param(
            "MODIFIED",
            cluster(env="a"),
            cluster(env="b"),
            ("cluster m1: labels changed", ["all", "n-short", "nil"]),
            id="label-change-reaches-pick-all-and-unfulfilled",
        ),
        pytest.param(
            "DELETED",
            cluster(),
            cluster(),
            ("cluster m1 was deleted", ["all", "n-deleting", "n-done", "n-short", "nil"]),
            id="deletion-reaches-all-that-want-the-scheduler",
        ),
        pytest.param(
            "MODIFIED",
            cluster(),
            cluster((Taint(key="gpu", effect="NoSchedule"),)),
            None,
            id="taint-addition-reaches-none",
        ),
        pytest.param("ADDED", None, cluster(env="a"), None, id="creation-reaches-none"),
    ],
)
def test_cluster_changes(kind, old, new, expected) -> None:
    found = routes(kind, old, new)
    if expected is None:
        assert found == []
        return
    reason, targets = expected
    assert sorted(p for p, *_ in found) == targets
    assert {(signal, why) for _, signal, why, _ in found} == {(CLUSTER, reason)}


def test_startup_signals_every_placement_that_wants_the_scheduler() -> None:
    standalone = startup_routes(FLEET.values(), standalone=True)
    beside = startup_routes(FLEET.values(), standalone=False)
    assert [r.placement for r in standalone] == ["all", "n-deleting", "n-done", "n-short", "nil"]
    assert {r.placement: r.signal for r in standalone}["n-deleting"] == DELETING
    assert {r.signal for r in standalone if r.placement != "n-deleting"} == {CHANGED}
    assert {r.signal for r in beside if r.placement != "n-deleting"} == {SNAPSHOT}
    started = Route("all", CHANGED, "watcher started: placement all exists", fan_out=True)
    assert standalone[0] == started


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(placement("p"), True, id="live"),
        pytest.param(placement("p", deleting=True), True, id="deleting-with-our-finalizer"),
        pytest.param(placement("p", deleting=True, finalizer=False), False, id="cleaned-up"),
    ],
)
def test_may_start(obj, expected) -> None:
    assert may_start(obj) is expected


# --- precise requeue: the profile's requeue hints (scheduler.requeue.requeue_hints) ---------------

ENV_PROD = PlacementPolicy.model_validate(prod_only(placementType="PickAll"))
HINTED = {
    p.metadata.name: p
    for p in (
        placement("by-env", ENV_PROD),
        placement("plain", PICK_ALL),
        placement("fixed", PlacementPolicy(placement_type="PickFixed", cluster_names=["m1"])),
        placement("short", PICK_2),
    )
}


def hinted(kind: str, old: MemberCluster | None, new: MemberCluster, profile: object) -> list:
    def run(change: Change[HubObject], placements: dict[str, ClusterResourcePlacement]) -> list:
        found = route_change(
            change, placements=placements, standalone=True, checker=EligibilityChecker(),
            now=NOW, profile=profile,  # type: ignore[arg-type]
        )
        return sorted(r.placement for r in found)

    found = run(Change(kind, old, new), HINTED)  # type: ignore[arg-type]
    copies = {name: routing_copy(p) for name, p in HINTED.items()}
    assert run(Change(kind, old, new), copies) == found, "the routing copy lost a field hints read"  # type: ignore[arg-type]
    return found


def test_a_label_no_policy_reads_requeues_nobody() -> None:
    from scheduler import default_profile

    assert hinted("MODIFIED", cluster(env="prod", team="a"), cluster(env="prod", team="b"),
                  default_profile()) == []


def test_a_label_a_policy_reads_requeues_that_placement_only() -> None:
    from scheduler import default_profile

    assert hinted("MODIFIED", cluster(env="dev"), cluster(env="prod"), default_profile()) == [
        "by-env"
    ]


def test_without_a_profile_kubefleets_rule_alone_decides() -> None:
    assert hinted("MODIFIED", cluster(env="prod", team="a"), cluster(env="prod", team="b"),
                  None) == ["by-env", "fixed", "plain", "short"]


def test_a_deleted_cluster_still_reaches_every_placement() -> None:
    from scheduler import default_profile

    assert hinted("DELETED", cluster(env="prod"), cluster(env="prod"), default_profile()) == [
        "by-env", "fixed", "plain", "short"
    ]


def test_a_plugin_without_a_hint_requeues_every_placement_kubefleet_would() -> None:
    """An out-of-tree plugin that knows nothing of hints is always asked again (PickFixed runs
    no plugin: only its named clusters' eligibility decides it)."""
    import dataclasses

    from scheduler import default_profile

    class Opaque:
        name = "Opaque"

        def filter(self, state, snapshot, cluster):  # type: ignore[no-untyped-def]
            raise AssertionError("not run here")

    base = default_profile()
    profile = dataclasses.replace(base, filter=(*base.filter, Opaque()))  # type: ignore[arg-type]
    assert hinted("MODIFIED", cluster(env="prod", team="a"), cluster(env="prod", team="b"),
                  profile) == ["by-env", "plain", "short"]


def test_a_capacity_aware_placement_hears_of_room_whatever_its_type() -> None:
    """Its cycle reads the clusters' resources itself (room for PickFixed targets, the
    "kept beyond the room" note): a resource change reaches it, though no plugin's hint of
    PickFixed would."""
    from scheduler import default_profile
    from scheduler.testing import member_cluster

    short = placement("fixed", PlacementPolicy(placement_type="PickFixed", cluster_names=["b"]))
    metadata = short.metadata.model_copy(
        update={"annotations": {hub_names.REQUESTS_ANNOTATION: "cpu=4"}}
    )
    aware = short.model_copy(update={"metadata": metadata})
    plain = placement("plain-fixed", PlacementPolicy(placement_type="PickFixed",
                                                     cluster_names=["b"]))
    old = member_cluster("b", NOW, allocatable={"cpu": "2"})
    new = member_cluster("b", NOW, allocatable={"cpu": "16"})
    found = route_change(
        Change("MODIFIED", old, new),
        placements={"fixed": routing_copy(aware), "plain-fixed": routing_copy(plain)},
        standalone=True, checker=EligibilityChecker(), now=NOW, profile=default_profile(),
    )
    assert [r.placement for r in found] == ["fixed"]


def test_a_taint_added_reaches_only_placements_that_enforce_their_affinity() -> None:
    """KubeFleet ignores an added taint; a placement that enforces its affinity during
    execution (docs/enforcement.md) may lose a binding to it, fully scheduled or not."""

    def enforcing(p: ClusterResourcePlacement) -> ClusterResourcePlacement:
        marks = {hub_names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"}
        meta = p.metadata.model_copy(update={"annotations": marks})
        return p.model_copy(update={"metadata": meta})

    fleet = {
        **FLEET,
        "n-enforced": enforcing(placement("n-enforced", PICK_2, fulfilled=True)),
        "all-enforced": enforcing(placement("all-enforced", PICK_ALL, fulfilled=True)),
    }
    tainted = cluster((Taint(key="gpu", effect="NoSchedule"),))
    found = _routes(Change("MODIFIED", cluster(), tainted), fleet, True)  # type: ignore[arg-type]
    assert sorted(p for p, *_ in found) == ["all-enforced", "n-enforced"]
    assert {why for _, _, why, _ in found} == {"cluster m1: a taint was added"}
    # A label change reaches them too, beside what KubeFleet's rule reaches.
    relabelled = _routes(Change("MODIFIED", cluster(env="a"), cluster(env="b")), fleet, True)  # type: ignore[arg-type]
    assert sorted(p for p, *_ in relabelled) == [
        "all", "all-enforced", "n-enforced", "n-short", "nil"
    ]


PROD_ONLY = PlacementPolicy.model_validate(prod_only(placementType="PickN", numberOfClusters=2))


def _member(name: str, env: str, *taints: Taint) -> MemberCluster:
    from scheduler.testing import member_cluster

    found = member_cluster(name, NOW, labels={"env": env})
    return found.model_copy(update={"spec": MemberClusterSpec(taints=list(taints))})


def _bound(placement_name: str, cluster_name: str) -> ClusterResourceBinding:
    return ClusterResourceBinding(
        metadata=ObjectMeta(
            name=f"{placement_name}-{cluster_name}",
            labels={hub_names.PARENT_PLACEMENT_LABEL: placement_name},
        ),
        spec=ClusterResourceBindingSpec(
            state="Bound",
            scheduling_policy_snapshot_name=f"{placement_name}-0",
            target_cluster=cluster_name,
            cluster_decision=ClusterDecision(cluster_name=cluster_name, selected=True, reason="r"),
        ),
    )


def test_a_change_that_gives_a_lost_binding_somewhere_to_go_reaches_its_enforcing_placement() -> (
    None
):
    """A fully scheduled enforcing PickN placement whose binding on `a` was kept for want of a
    target (a lost env=prod; no other cluster passed) hears of the cluster that now passes its
    filters, though it holds no binding there; KubeFleet's rule, and a placement without the
    annotation, do not (docs/enforcement.md)."""
    from control.routes import Room
    from scheduler import default_profile

    def with_policy(name: str, enforced: bool) -> ClusterResourcePlacement:
        found = placement(name, PROD_ONLY, fulfilled=True)
        marks = {hub_names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"} if enforced else {}
        meta = found.metadata.model_copy(update={"annotations": marks})
        return found.model_copy(update={"metadata": meta})

    fleet = {
        "web": with_policy("web", True),
        "plain": with_policy("plain", False),
        "settled": with_policy("settled", True),  # bound on b and d, both prod: nothing lost
    }
    members = {
        "a": _member("a", "retired"),
        "b": _member("b", "prod"),
        "c": _member("c", "dev"),
        "d": _member("d", "prod"),
    }
    bound = [
        _bound("web", "a"), _bound("web", "b"), _bound("plain", "a"), _bound("plain", "b"),
        _bound("settled", "b"), _bound("settled", "d"),
    ]  # fmt: skip

    def reached(old: MemberCluster, new: MemberCluster) -> list[str]:
        found = [
            sorted(
                r.placement
                for r in route_change(
                    Change("MODIFIED", old, new), placements=places, standalone=True,
                    checker=EligibilityChecker(), now=NOW, profile=default_profile(),
                    room=Room(clusters={**members, new.metadata.name: new}, ledgers={},
                              bindings=iter(kept)),
                )
            )
            for places, kept in (
                (fleet, bound),
                ({k: routing_copy(p) for k, p in fleet.items()}, [routing_copy(b) for b in bound]),
            )
        ]  # fmt: skip
        assert found[0] == found[1], "the routing copy lost a field routes read"
        return found[0]

    assert reached(members["c"], _member("c", "prod")) == ["web"]
    # Still no place: not prod, or prod but tainted.
    assert reached(members["c"], _member("c", "test")) == []
    gpu = Taint(key="gpu", effect="NoSchedule")
    assert reached(_member("c", "dev", gpu), _member("c", "prod", gpu)) == []
    # The taint that kept it off goes: now it passes.
    assert reached(_member("c", "prod", gpu), _member("c", "prod")) == ["web"]
