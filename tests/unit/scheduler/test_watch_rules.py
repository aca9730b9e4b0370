"""KubeFleet's watcher filters (kubefleet-rules section 7): which events reach which placements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hub import names
from hub.types import (
    AgentStatus,
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
    MemberClusterStatus,
    ObjectMeta,
    PlacementPolicy,
    PropertyValue,
    ResourceUsage,
    SchedulingPolicySnapshotSpec,
    Taint,
)
from scheduler import testing
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.requeue.reach import Bindings, ClusterEvent, Reached, Why, reach
from scheduler.requeue.watch_rules import (
    CLUSTER_CHANGE_ELIGIBLE,
    CLUSTER_CHANGE_LABELS,
    CLUSTER_CHANGE_NAMESPACES,
    CLUSTER_CHANGE_PROPERTIES,
    CLUSTER_CHANGE_RESOURCES,
    CLUSTER_CHANGE_TAINTS,
    binding_deletion_started,
    cluster_update_matters,
    cluster_update_reasons,
    parse_bool_label,
    placement_deletion_started,
    placement_spec_changed,
    snapshot_event_placement,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GONE = NOW - timedelta(seconds=1)


def snapshot(
    latest: str | None = "true",
    parent: str | None = "web",
    deleting: bool = False,
    **annotations: str,
) -> ClusterSchedulingPolicySnapshot:
    labels = {}
    if latest is not None:
        labels[names.IS_LATEST_SNAPSHOT_LABEL] = latest
    if parent is not None:
        labels[names.PARENT_PLACEMENT_LABEL] = parent
    ann = {
        {"n": names.NUMBER_OF_CLUSTERS_ANNOTATION, "gen": names.CRP_GENERATION_ANNOTATION}[k]: v
        for k, v in annotations.items()
    }
    meta = ObjectMeta(
        name="web-0", labels=labels, annotations=ann, deletion_timestamp=GONE if deleting else None
    )
    return ClusterSchedulingPolicySnapshot(
        metadata=meta, spec=SchedulingPolicySnapshotSpec(policy_hash="x")
    )


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(None, snapshot(), "web", id="create-latest"),
        pytest.param(None, snapshot(latest="false"), None, id="create-not-latest"),
        pytest.param(None, snapshot(parent=None), None, id="create-orphan"),
        pytest.param(None, snapshot(deleting=True), None, id="create-deleting"),
        pytest.param(snapshot(n="2"), snapshot(n="3"), "web", id="n-changed"),
        pytest.param(snapshot(gen="1"), snapshot(gen="2"), "web", id="generation-changed"),
        pytest.param(snapshot(n="2"), snapshot(n="2"), None, id="resync-identical"),
        pytest.param(snapshot(latest="false"), snapshot(latest="true"), "web", id="became-latest"),
        pytest.param(snapshot(latest="bogus"), snapshot(latest="true"), "web", id="old-unparsable"),
        pytest.param(snapshot(latest="false"), snapshot(latest="bogus"), None, id="new-unparsable"),
        pytest.param(snapshot(latest="true"), snapshot(latest="false", n="5"), None, id="demoted"),
    ],
)
def test_snapshot_events_follow_kubefleet_filter(old, new, expected) -> None:
    assert snapshot_event_placement(old, new) == expected


def test_go_bool_parsing_accepts_go_spellings_only() -> None:
    assert [parse_bool_label(v) for v in ("T", "1", "false", "yes", None)] == [
        True,
        True,
        False,
        None,
        None,
    ]


def placement(
    name: str = "web",
    policy: PlacementPolicy | None = None,
    *,
    generation: int = 1,
    deleting: bool = False,
    finalizer: bool = True,
    scheduled: tuple[str, int] | None = None,
) -> ClusterResourcePlacement:
    conditions = []
    if scheduled is not None:
        conditions.append(
            Condition(
                type=names.PLACEMENT_SCHEDULED_CONDITION,
                status=scheduled[0],
                observed_generation=scheduled[1],
            )
        )
    meta = ObjectMeta(
        name=name,
        generation=generation,
        finalizers=[names.SCHEDULER_CLEANUP_FINALIZER] if finalizer else [],
        deletion_timestamp=GONE if deleting else None,
    )
    return ClusterResourcePlacement(
        metadata=meta,
        spec=ClusterResourcePlacementSpec(policy=policy),
        status=ClusterResourcePlacementStatus(conditions=conditions),
    )


def test_placement_deletion_reaches_the_scheduler_only_with_its_finalizer() -> None:
    assert placement_deletion_started(placement(), placement(deleting=True))
    assert not placement_deletion_started(placement(deleting=True), placement(deleting=True))
    assert not placement_deletion_started(
        placement(finalizer=False), placement(deleting=True, finalizer=False)
    )


def test_placement_spec_changes_reach_the_standalone_snapshotter() -> None:
    assert placement_spec_changed(None, placement())
    assert placement_spec_changed(placement(generation=1), placement(generation=2))
    assert not placement_spec_changed(placement(generation=2), placement(generation=2))
    assert not placement_spec_changed(None, placement(deleting=True))


def binding(deleting: bool, finalizer: bool = True) -> ClusterResourceBinding:
    meta = ObjectMeta(
        name="web-a-1",
        labels={names.PARENT_PLACEMENT_LABEL: "web"},
        finalizers=[names.SCHEDULER_BINDING_CLEANUP_FINALIZER] if finalizer else [],
        deletion_timestamp=GONE if deleting else None,
    )
    decision = ClusterDecision(cluster_name="a", selected=True, reason="r")
    return ClusterResourceBinding(
        metadata=meta,
        spec=ClusterResourceBindingSpec(
            state="Bound",
            scheduling_policy_snapshot_name="web-0",
            target_cluster="a",
            cluster_decision=decision,
        ),
    )


def test_binding_deletion_reaches_its_placement() -> None:
    assert binding_deletion_started(binding(False), binding(True)) == "web"
    assert binding_deletion_started(binding(True), binding(True)) is None
    assert binding_deletion_started(binding(False, False), binding(True, False)) is None
    assert binding_deletion_started(None, binding(True)) is None  # creates are ignored


def cluster(
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    props: dict[str, str] | None = None,
    heartbeat: datetime = NOW,
    capacity: dict[str, str] | None = None,
    deleting: bool = False,
) -> MemberCluster:
    agent = AgentStatus(
        type=names.MEMBER_AGENT,
        last_received_heartbeat=heartbeat,
        conditions=[
            Condition(type=names.AGENT_JOINED_CONDITION, status="True"),
            Condition(type=names.AGENT_HEALTHY_CONDITION, status="True"),
        ],
    )
    return MemberCluster(
        metadata=ObjectMeta(
            name="a", labels=labels or {}, deletion_timestamp=GONE if deleting else None
        ),
        spec=MemberClusterSpec(taints=list(taints)),
        status=MemberClusterStatus(
            agent_status=[agent],
            properties={k: PropertyValue(value=v) for k, v in (props or {}).items()},
            resource_usage=ResourceUsage(capacity=capacity or {}),
        ),
    )


GPU = Taint(key="gpu", value="true", effect="NoSchedule")
OTHER = Taint(key="other", effect="NoSchedule")
STALE = NOW - timedelta(minutes=10)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(cluster(), cluster(), False, id="identical"),
        pytest.param(cluster({"a": "1"}), cluster({"a": "2"}), True, id="label-changed"),
        pytest.param(cluster(taints=(GPU,)), cluster(), True, id="taint-removed"),
        pytest.param(cluster(), cluster(taints=(GPU,)), False, id="taint-added"),
        pytest.param(cluster(props={"p": "1"}), cluster(props={"p": "2"}), True, id="property"),
        pytest.param(
            cluster(props={"p": "1"}),
            cluster(props={"p": "1", "q": "1"}),
            True,
            id="property-added",
        ),
        pytest.param(
            cluster(capacity={"cpu": "1"}),
            cluster(capacity={"cpu": "1000m"}),
            False,
            id="capacity-same-value",
        ),
        pytest.param(
            cluster(capacity={"cpu": "1"}),
            cluster(capacity={"cpu": "2"}),
            True,
            id="capacity-changed",
        ),
        pytest.param(cluster(heartbeat=STALE), cluster(), True, id="became-eligible"),
        pytest.param(cluster(), cluster(heartbeat=STALE), False, id="became-ineligible"),
        pytest.param(cluster({"a": "1"}), cluster({"a": "2"}, deleting=True), False, id="leaving"),
    ],
)
def test_cluster_updates_that_can_change_picks(old, new, expected) -> None:
    assert cluster_update_matters(old, new, EligibilityChecker(), NOW) is expected


def with_namespaces(obj: MemberCluster, namespaces: dict[str, str]) -> MemberCluster:
    status = obj.status.model_copy(update={"namespaces": namespaces})
    return obj.model_copy(update={"status": status})


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(cluster(), cluster(), [], id="identical"),
        pytest.param(
            cluster({"a": "1"}), cluster({"a": "2"}), [CLUSTER_CHANGE_LABELS], id="labels"
        ),
        pytest.param(
            cluster(taints=(GPU,)), cluster(), [CLUSTER_CHANGE_TAINTS], id="taint-removed"
        ),
        pytest.param(
            cluster(taints=(GPU,)),
            cluster(taints=(GPU.model_copy(update={"value": "false"}),)),
            [CLUSTER_CHANGE_TAINTS],
            id="taint-changed",
        ),
        pytest.param(cluster(), cluster(taints=(GPU, OTHER)), [], id="taints-added"),
        pytest.param(
            cluster(props={"p": "1"}), cluster(props={}), [CLUSTER_CHANGE_PROPERTIES], id="prop"
        ),
        pytest.param(
            cluster(),
            with_namespaces(cluster(), {"app": "ok"}),
            [CLUSTER_CHANGE_NAMESPACES],
            id="namespaces",
        ),
        pytest.param(
            cluster(capacity={"cpu": "1"}),
            cluster(capacity={"cpu": "3"}),
            [CLUSTER_CHANGE_RESOURCES],
            id="capacity",
        ),
        pytest.param(cluster(heartbeat=STALE), cluster(), [CLUSTER_CHANGE_ELIGIBLE], id="eligible"),
        pytest.param(
            cluster({"a": "1"}, taints=(GPU,), heartbeat=STALE),
            cluster({"a": "2"}),
            [CLUSTER_CHANGE_LABELS, CLUSTER_CHANGE_TAINTS, CLUSTER_CHANGE_ELIGIBLE],
            id="several-in-check-order",
        ),
        pytest.param(cluster({"a": "1"}), cluster({"a": "2"}, deleting=True), [], id="leaving"),
    ],
)
def test_cluster_update_reasons_name_every_rule_that_fired(old, new, expected) -> None:
    reasons = cluster_update_reasons(old, new, EligibilityChecker(), NOW)
    assert reasons == expected
    # The watcher relies on the two agreeing: a reason exactly when the update matters.
    assert bool(reasons) is cluster_update_matters(old, new, EligibilityChecker(), NOW)


UPDATED = ClusterEvent("member-1", NOW)
LEFT = ClusterEvent.gone("member-1", NOW)


def test_cluster_events_reach_unfulfilled_and_pick_all_placements() -> None:
    pick_n = PlacementPolicy(placement_type="PickN", number_of_clusters=2)
    fixed = PlacementPolicy(placement_type="PickFixed", cluster_names=["a"])
    fleet = [
        placement("all", PlacementPolicy(placement_type="PickAll"), scheduled=("True", 1)),
        placement("nil", None),
        placement("n-done", pick_n, scheduled=("True", 1)),
        placement("n-stale", pick_n, generation=2, scheduled=("True", 1)),
        placement("n-short", pick_n, scheduled=("False", 1)),
        placement("fixed-done", fixed, scheduled=("True", 1)),
    ]
    assert reach(UPDATED, fleet, None) == [
        Reached(key, Why.RULE) for key in ("all", "nil", "n-stale", "n-short")
    ]
    assert reach(LEFT, fleet, None) == [Reached(p.metadata.name, Why.GONE) for p in fleet]


class CountedScans(list[ClusterResourceBinding]):
    """Bindings that count how often they are read through."""

    scans = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.scans += 1
        return super().__iter__()


def test_cluster_events_reach_placements_that_enforce_affinity_even_when_fully_scheduled() -> None:
    """A fully scheduled PickN or PickFixed placement is left alone by a cluster update, as in
    KubeFleet, unless it enforces its affinity during execution: then the update may take one
    of its bindings away."""
    pick_n = PlacementPolicy(placement_type="PickN", number_of_clusters=2)
    fixed = PlacementPolicy(placement_type="PickFixed", cluster_names=["a"])
    enforcing = {names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"}
    ignoring = {names.AFFINITY_ENFORCEMENT_ANNOTATION: "IgnoredDuringExecution"}

    def annotated(p: ClusterResourcePlacement, marks: dict[str, str]) -> ClusterResourcePlacement:
        meta = p.metadata.model_copy(update={"annotations": marks})
        return p.model_copy(update={"metadata": meta})

    fleet = [
        annotated(placement("n-enforced", pick_n, scheduled=("True", 1)), enforcing),
        annotated(placement("fixed-enforced", fixed, scheduled=("True", 1)), enforcing),
        annotated(placement("n-ignored", pick_n, scheduled=("True", 1)), ignoring),
        placement("n-plain", pick_n, scheduled=("True", 1)),
    ]
    # Bindings not known: every enforcing placement may be bound there.
    assert reach(UPDATED, fleet, None) == [
        Reached("n-enforced", Why.BOUND_HERE),
        Reached("fixed-enforced", Why.BOUND_HERE),
    ]
    # With the watcher's bindings known: only those holding an active binding on the cluster.
    on = CountedScans(
        [
            testing.binding("fixed-enforced", "member-1", "fixed-enforced-1"),
            testing.binding("n-plain", "member-1", "n-plain-1"),
            testing.binding("n-enforced", "member-1", "n-enforced-1", deleting=NOW),
            testing.binding(
                "n-enforced", "member-1", "n-enforced-1", state=names.STATE_UNSCHEDULED
            ),
        ]
    )
    held = Bindings(on)
    assert reach(UPDATED, fleet, None, bindings=held) == [
        Reached("fixed-enforced", Why.BOUND_HERE)
    ]
    assert reach(UPDATED, fleet, None, bindings=held) == [
        Reached("fixed-enforced", Why.BOUND_HERE)
    ]
    assert on.scans == 1  # the scan of every binding runs once, kept for every later question
    on = CountedScans(on)
    assert reach(LEFT, fleet, None, bindings=Bindings(on)) == [
        Reached(p.metadata.name, Why.GONE) for p in fleet
    ]
    assert on.scans == 0  # a cluster that left reaches everyone: no scan at all
    plain = [p for p in fleet if not p.metadata.annotations]
    assert reach(UPDATED, plain, None, bindings=Bindings(on)) == []
    assert on.scans == 0  # no enforcing placement: no scan
    # A taint added reaches the enforcing placements alone (KubeFleet's rule ignores it).
    added = ClusterEvent("member-1", NOW, enforcing_only=True)
    everyone = [*fleet, placement("all", None)]
    assert [r.placement for r in reach(added, everyone, None)] == ["n-enforced", "fixed-enforced"]


def test_a_cluster_change_reaches_no_placement_that_wants_no_scheduler() -> None:
    """A placement being deleted without our finalizer needs nothing of the scheduler: no cluster
    change reaches it; one still waiting for our cleanup is reached like any other."""
    gone = placement("gone", None, deleting=True, finalizer=False)
    cleaning = placement("cleaning", None, deleting=True)
    assert reach(LEFT, [gone, cleaning], None) == [Reached("cleaning", Why.GONE)]
    assert reach(UPDATED, [gone, cleaning], None) == [Reached("cleaning", Why.RULE)]
