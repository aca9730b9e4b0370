"""The requeue hint never skips a placement whose cycle would decide otherwise.

Each example: a fleet, a policy of any type and bindings in every state (the worlds of
tests/property/worlds.py), run to its fixpoint; then one cluster changes (a label read or not read
by the policy, a taint, a property, its health or namespaces). Where `may_change_decision` says
the placement's decision cannot change, running its cycles on the changed fleet must end where
it already is: bindings and policy-snapshot status alike. Where it says it may, nothing is
claimed (a requeue that decides the same is KubeFleet's behaviour)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from control.routes import Room, route_change
from control.views import Change
from hub import names
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import CapacityInput, CycleInput, Profile, default_profile, load_profile, schedule
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.requeue.reach import Bindings, ClusterEvent, reach
from scheduler.requeue.reconcile import plan_reconcile
from scheduler.requeue.requeue_hints import (
    ClusterChange,
    change_between_records,
    may_change_decision,
    record_of,
)
from scheduler.requeue.watch_rules import cluster_update_reasons, taint_added
from scheduler.testing import apply_plan, binding, member_cluster, policy_snapshot
from tests.property.worlds import NOW, PLACEMENT, POOL, bindings, policies
from workflows.names import SIGNAL_CLUSTER_CHANGED

SETTINGS = settings(
    max_examples=int(os.environ.get("HINT_PROPERTY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = default_profile()


@dataclass(frozen=True)
class Spec:
    """A member cluster as its fields: what a change edits, before it is built."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str], ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    stale: bool = False
    joined: bool = True
    healthy: bool = True

    def build(self) -> MemberCluster:
        return member_cluster(
            self.name,
            NOW,
            labels=self.labels,
            taints=self.taints,
            properties=self.properties,
            heartbeat_age=timedelta(minutes=10 if self.stale else 0),
            joined=self.joined,
            healthy=self.healthy,
        )


OPTIONAL_LABELS = st.fixed_dictionaries(
    {},
    optional={
        "zone": st.sampled_from(["x", "y", "z"]),
        "tier": st.just("gold"),
        "team": st.sampled_from(["a", "b"]),
    },
)


@st.composite
def specs(draw: st.DrawFn) -> list[Spec]:
    chosen = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=8, unique=True))
    out = []
    for name in chosen:
        labels = {"env": draw(st.sampled_from(["prod", "dev"]))} | draw(OPTIONAL_LABELS)
        out.append(
            Spec(
                name,
                labels=labels,
                taints=(("gpu", "true"),) if draw(st.integers(0, 4)) == 0 else (),
                properties={"cost": str(draw(st.integers(0, 50)))},
                stale=draw(st.integers(0, 5)) == 0,
                joined=draw(st.integers(0, 7)) != 0,
            )
        )
    return out


LABEL_VALUES = {
    "env": ["prod", "dev", None],
    "zone": ["x", "y", "z", None],
    "tier": ["gold", None],
    "team": ["a", "b", "c", None],
    "unread": ["1", "2", None],
}


@st.composite
def changed(draw: st.DrawFn, spec: Spec) -> Spec:
    """One update of `spec`, of the kinds the watcher routes (or ignores)."""
    kind = draw(st.sampled_from(["label", "label", "taint", "property", "health", "nothing"]))
    if kind == "label":
        key = draw(st.sampled_from(sorted(LABEL_VALUES)))
        value = draw(st.sampled_from(LABEL_VALUES[key]))
        labels = {k: v for k, v in spec.labels.items() if k != key}
        if value is not None:
            labels[key] = value
        return dataclasses.replace(spec, labels=labels)
    if kind == "taint":
        taints = draw(st.sampled_from([(), (("gpu", "true"),), (("other", "x"),)]))
        return dataclasses.replace(spec, taints=taints)
    if kind == "property":
        key = draw(st.sampled_from(["cost", "unread-property"]))
        return dataclasses.replace(
            spec, properties={**spec.properties, key: str(draw(st.integers(0, 50)))}
        )
    if kind == "health":
        return dataclasses.replace(
            spec, stale=draw(st.booleans()), joined=draw(st.booleans()), healthy=draw(st.booleans())
        )
    return spec


def fixpoint(
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: list[MemberCluster],
    found: list[ClusterResourceBinding],
    profile: Profile,
    capacity: CapacityInput | None,
    fresh: bool = False,
) -> tuple[list[ClusterResourceBinding], ClusterSchedulingPolicySnapshot] | None:
    """The fixpoint, or None when the cycle fails (an unparsable property: nothing to compare)."""
    for _ in range(20):
        result = schedule(
            CycleInput(
                snapshot=snapshot,
                clusters=clusters,
                bindings=found,
                now=NOW,
                fresh=fresh,
                capacity=capacity,
            ),
            profile,
        )
        if result.error is not None:
            return None
        before = (found, snapshot)
        found, snapshot = apply_plan(found, snapshot, result.plan)
        fresh = False
        if not result.requeue and (found, snapshot) == before:
            return found, snapshot
    raise AssertionError("no fixpoint after 20 cycles")


# The age an ineligibility reason quotes ("last received 10.00 minutes ago"): a figure, not a
# verdict. KubeFleet's watch rules run no cycle when only it changes (a cluster that stays
# ineligible), nor do the hints and the reconcile's records; so the status a skipped change
# leaves may quote an older age.
_AGE: Final = re.compile(r"[0-9]+\.[0-9]+ minutes")


def _state(
    state: tuple[list[ClusterResourceBinding], ClusterSchedulingPolicySnapshot],
) -> tuple[list[object], object]:
    found, snapshot = state
    status = json.loads(_AGE.sub("N minutes", json.dumps(snapshot.to_wire().get("status"))))
    return sorted((b.to_wire() for b in found), key=lambda w: w["metadata"]["name"]), status


@SETTINGS
@given(st.data())
def test_a_placement_the_hint_skips_would_decide_the_same(data: st.DataObject) -> None:
    fleet = data.draw(specs())
    policy = data.draw(policies())
    snapshot = policy_snapshot(PLACEMENT, policy, index=1)
    existing = data.draw(bindings([s.name for s in fleet]))
    fresh = policy["placementType"] == names.PICK_N and data.draw(st.booleans())
    clusters = [s.build() for s in fleet]
    steady = fixpoint(snapshot, clusters, existing, PROFILE, None, fresh)
    assert steady is not None

    index = data.draw(st.integers(0, len(fleet) - 1))
    after_spec = data.draw(changed(fleet[index]))
    after = [*clusters[:index], after_spec.build(), *clusters[index + 1 :]]
    change = ClusterChange.between(clusters[index], after[index], PROFILE.ineligibility, NOW)
    plugins = PROFILE.requeue_hints
    if may_change_decision(plugins, steady[1].spec.policy, change):
        event("requeued")
        return
    event("skipped")
    again = fixpoint(steady[1], after, steady[0], PROFILE, None)
    assert again is not None and _state(again) == _state(steady), change


# --- the wider search: resources, namespaces, selectors of every operator, capacity, profiles ---

NAMESPACE = "team-a"
RESOURCE = names.RESOURCE_PROPERTY_PREFIX
WIDE_POOL = [f"c{i}" for i in range(6)]
PROFILES = {
    "default": PROFILE,
    "eligibility-args": load_profile(
        "name: eligibility-args\n"
        "pluginConfig:\n"
        "  - {name: ClusterEligibility, args: {heartbeat_timeout_minutes: 2,"
        " health_timeout_minutes: 30}}\n"
    ),
    "without-resources-fit": load_profile(
        "name: without-resources-fit\n"
        "plugins: {multiPoint: {disabled: [{name: ClusterResourcesFit}]}}\n"
    ),
}
CAPACITY = (
    None,
    CapacityInput(requests="cpu=2", allocated={}),
    CapacityInput(requests="cpu=2", allocated={"c0": {"cpu": "6"}}),
)


@dataclass(frozen=True)
class WideSpec:
    """A member cluster with resources, namespaces and the namespace-collection condition."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[tuple[str, str | None], ...] = ()
    cost: str = "10"
    cpu: str = "8"
    available: str = "4"
    namespaces: tuple[str, ...] | None = None
    collected: bool = False
    heartbeat_minutes: float = 0
    joined: bool = True
    healthy: bool = True

    def build(self) -> MemberCluster:
        wire = member_cluster(
            self.name,
            NOW,
            labels=dict(self.labels),
            taints=self.taints,  # type: ignore[arg-type]
            properties={"cost": self.cost},
            allocatable={"cpu": self.cpu},
            capacity={"cpu": "16"},
            available={"cpu": self.available},
            heartbeat_age=timedelta(minutes=self.heartbeat_minutes),
            joined=self.joined,
            healthy=self.healthy,
        ).to_wire()
        if self.namespaces is not None:
            wire["status"]["namespaces"] = {n: "" for n in self.namespaces}
        if self.collected:
            wire["status"]["conditions"] = [
                {
                    "type": names.NAMESPACE_COLLECTION_CONDITION,
                    "status": "True",
                    "reason": "r",
                    "message": "",
                    "lastTransitionTime": NOW.isoformat(),
                }
            ]
        return MemberCluster.model_validate(wire)


LABELS = st.dictionaries(
    st.sampled_from(["env", "zone", "team", "tier"]),
    st.sampled_from(["a", "b", "prod"]),
    max_size=3,
).map(lambda d: tuple(sorted(d.items())))
TAINTS = st.sampled_from([(), (("gpu", "true"),), (("gpu", "false"),), (("gpu", None),)])
NAMESPACES = st.sampled_from([None, (), (NAMESPACE,), ("other",)])


def wide_spec(name: str) -> st.SearchStrategy[WideSpec]:
    return st.builds(
        WideSpec,
        st.just(name),
        labels=LABELS,
        taints=TAINTS,
        cost=st.sampled_from(["1", "10", "50"]),
        cpu=st.sampled_from(["1", "4", "8"]),
        available=st.sampled_from(["0", "2", "4"]),
        namespaces=NAMESPACES,
        collected=st.booleans(),
        heartbeat_minutes=st.sampled_from([0, 0, 1, 3, 10]),
        joined=st.booleans() | st.just(True),
        healthy=st.booleans() | st.just(True),
    )


@st.composite
def wide_change(draw: st.DrawFn, spec: WideSpec) -> WideSpec:
    kind = draw(
        st.sampled_from(
            [
                "labels",
                "taints",
                "cost",
                "cpu",
                "available",
                "namespaces",
                "collected",
                "heartbeat",
                "joined",
                "healthy",
            ]
        )
    )
    replace = dataclasses.replace
    if kind == "labels":
        labels = dict(spec.labels)
        key = draw(st.sampled_from(["env", "zone", "team", "tier", "unread"]))
        value = draw(st.sampled_from([None, "a", "b", "prod"]))
        labels.pop(key, None)
        if value:
            labels[key] = value
        return replace(spec, labels=tuple(sorted(labels.items())))
    if kind == "taints":
        return replace(spec, taints=draw(TAINTS | st.just((("x", "1"),))))
    if kind == "cost":
        return replace(spec, cost=draw(st.sampled_from(["1", "10", "50", "oops"])))
    if kind == "cpu":
        return replace(spec, cpu=draw(st.sampled_from(["1", "4", "8", "8000m"])))
    if kind == "available":
        return replace(spec, available=draw(st.sampled_from(["0", "2", "4"])))
    if kind == "namespaces":
        return replace(spec, namespaces=draw(NAMESPACES))
    if kind == "collected":
        return replace(spec, collected=not spec.collected)
    if kind == "heartbeat":
        return replace(spec, heartbeat_minutes=draw(st.sampled_from([0, 1, 3, 10])))
    if kind == "joined":
        return replace(spec, joined=not spec.joined)
    return replace(spec, healthy=not spec.healthy)


@st.composite
def wide_policy(draw: st.DrawFn) -> dict[str, object] | None:
    kind = draw(st.sampled_from([names.PICK_ALL, names.PICK_N, names.PICK_FIXED, None]))
    if kind is None:
        return None
    policy: dict[str, object] = {"placementType": kind}
    if kind == names.PICK_FIXED:
        policy["clusterNames"] = draw(st.lists(st.sampled_from(WIDE_POOL), max_size=4))
        return policy
    term: dict[str, object] = {}
    if draw(st.booleans()):
        operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        expression: dict[str, object] = {
            "key": draw(st.sampled_from(["env", "team"])),
            "operator": operator,
        }
        if operator in ("In", "NotIn"):
            expression["values"] = ["a", "prod"]
        term["labelSelector"] = {"matchExpressions": [expression]}
    if draw(st.booleans()):
        name = draw(
            st.sampled_from(
                [
                    "cost",
                    f"{RESOURCE}allocatable-cpu",
                    f"{RESOURCE}available-cpu",
                    f"{RESOURCE}total-cpu",
                ]
            )
        )
        term["propertySelector"] = {"matchExpressions": [
            {"name": name, "operator": draw(st.sampled_from(names.PROPERTY_OPERATORS)),
             "values": ["4"]}
        ]}  # fmt: skip
    affinity: dict[str, object] = {}
    if term and draw(st.booleans()):
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "clusterSelectorTerms": [term]
        }
    if kind == names.PICK_N:
        policy["numberOfClusters"] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            preference: dict[str, object] = {"propertySorter": {
                "name": draw(st.sampled_from(["cost", f"{RESOURCE}available-cpu",
                                              f"{RESOURCE}allocatable-cpu"])),
                "sortOrder": draw(st.sampled_from(["Ascending", "Descending"])),
            }}  # fmt: skip
            if "labelSelector" in term and draw(st.booleans()):
                preference["labelSelector"] = term["labelSelector"]
            affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": draw(st.sampled_from([0, 30, -20])), "preference": preference}
            ]
        if draw(st.booleans()):
            policy["topologySpreadConstraints"] = [
                {"maxSkew": 1, "topologyKey": "zone",
                 "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))}
            ]  # fmt: skip
    if affinity:
        policy["affinity"] = {"clusterAffinity": affinity}
    if draw(st.booleans()):
        policy["tolerations"] = [draw(st.sampled_from([
            {"key": "gpu", "operator": "Exists"},
            {"key": "gpu", "operator": "Equal", "value": "true"},
        ]))]  # fmt: skip
    return policy


@SETTINGS
@given(st.data())
def test_wider_changes_skipped_by_the_hint_decide_the_same(data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(WIDE_POOL), min_size=1, max_size=6, unique=True))
    fleet = [data.draw(wide_spec(name)) for name in chosen]
    policy = data.draw(wide_policy())
    namespace = data.draw(st.sampled_from([None, NAMESPACE]))
    capacity = data.draw(st.sampled_from(CAPACITY))
    profile = PROFILES[data.draw(st.sampled_from(sorted(PROFILES)))]
    snapshot = policy_snapshot(PLACEMENT, policy, index=1, namespace=namespace)
    targets = data.draw(st.lists(st.sampled_from(chosen), max_size=4, unique=True))
    existing = [
        binding(PLACEMENT, target, f"{PLACEMENT}-1", name=f"{PLACEMENT}-{target}-x",
                namespace=namespace,
                state=data.draw(st.sampled_from([names.STATE_SCHEDULED, names.STATE_BOUND])))
        for target in targets
    ]  # fmt: skip
    clusters = [spec.build() for spec in fleet]
    fresh = (
        policy is not None and policy["placementType"] == names.PICK_N and data.draw(st.booleans())
    )
    steady = fixpoint(snapshot, clusters, existing, profile, capacity, fresh)
    if steady is None:
        return
    index = data.draw(st.integers(0, len(fleet) - 1))
    after = [*clusters[:index], data.draw(wide_change(fleet[index])).build(),
             *clusters[index + 1 :]]  # fmt: skip
    change = ClusterChange.between(clusters[index], after[index], profile.ineligibility, NOW)
    if may_change_decision(
        profile.requeue_hints, steady[1].spec.policy, change, capacity_aware=capacity is not None
    ):
        event("requeued")
        return
    event("skipped")
    again = fixpoint(steady[1], after, steady[0], profile, capacity)
    assert again is not None and _state(again) == _state(steady), change


@SETTINGS
@given(st.data())
def test_the_reconciles_records_reach_every_placement_the_watcher_would(
    data: st.DataObject,
) -> None:
    """The reconcile knows a cluster's change only from two records (hashed parts, no facts):
    whenever the watcher's hint, which sees the cluster before and after, says a placement's
    decision may change, the records' change says so too. So the reconcile, repairing a missed
    cluster event, never skips a placement the watcher would have requeued."""
    fleet = [data.draw(wide_spec(name)) for name in WIDE_POOL[:2]]
    policy = data.draw(wide_policy())
    profile = PROFILES[data.draw(st.sampled_from(sorted(PROFILES)))]
    capacity_aware = data.draw(st.booleans())
    snapshot = policy_snapshot(PLACEMENT, policy, index=1)
    before = fleet[0].build()
    after = data.draw(wide_change(fleet[0])).build()
    precise = ClusterChange.between(before, after, profile.ineligibility, NOW)
    rough = change_between_records(
        before.metadata.name,
        record_of(before, profile.ineligibility(before, NOW)),
        record_of(after, profile.ineligibility(after, NOW)),
        NOW,
    )
    assert rough is not None
    plugins = profile.requeue_hints
    policy_ = snapshot.spec.policy
    if may_change_decision(plugins, policy_, precise, capacity_aware=capacity_aware):
        event("requeued by the watcher")
        assert may_change_decision(plugins, policy_, rough, capacity_aware=capacity_aware), (
            precise,
            rough,
        )
    else:
        event("skipped by the watcher")


@st.composite
def enforcing_policy(draw: st.DrawFn) -> dict[str, object]:
    """PickN with a required term the fleet's labels often fail (and sometimes tolerations)."""
    term = draw(st.sampled_from([
        {"labelSelector": {"matchLabels": {"env": "prod"}}},
        {"labelSelector": {"matchExpressions": [
            {"key": "env", "operator": "In", "values": ["a", "prod"]}]}},
        {"labelSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}},
    ]))  # fmt: skip
    policy: dict[str, object] = {
        "placementType": names.PICK_N,
        "numberOfClusters": draw(st.integers(1, 3)),
        "affinity": {"clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [term]}
        }},
    }  # fmt: skip
    if draw(st.booleans()):
        policy["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    return policy


@SETTINGS
@given(st.data())
def test_a_change_that_gives_a_lost_binding_a_target_reaches_it_by_watcher_and_reconcile(
    data: st.DataObject,
) -> None:
    """An enforcing PickN placement, fully scheduled, with bindings on some clusters of a fleet;
    one cluster it holds nothing on changes (docs/enforcement.md):

    - where the change makes that cluster a target a lost binding of the placement may move to
      (it passes the placement's filters after, and did not before), the watcher's routes
      reach the placement;
    - whatever the watcher reaches, the reconcile, from its records, requeues too."""
    from control.routes import Room, route_change
    from control.views import Change
    from hub.types import ClusterResourcePlacement
    from scheduler.clusters.eligibility import EligibilityChecker
    from scheduler.moves.enforcement import lost_bindings, replacement_order
    from scheduler.requeue.reconcile import plan_reconcile

    chosen = WIDE_POOL[:4]
    fleet = [data.draw(wide_spec(name)) for name in chosen]
    policy = data.draw(enforcing_policy())
    profile = PROFILES[data.draw(st.sampled_from(sorted(PROFILES)))]
    snapshot = policy_snapshot(PLACEMENT, policy, index=1)
    targets = data.draw(st.lists(st.sampled_from(chosen[1:]), min_size=1, max_size=3, unique=True))
    existing = [
        binding(PLACEMENT, target, snapshot.name, name=f"{PLACEMENT}-{target}-x",
                state=data.draw(st.sampled_from([names.STATE_SCHEDULED, names.STATE_BOUND])))
        for target in targets
    ]  # fmt: skip
    placement = ClusterResourcePlacement.from_wire(
        {
            "metadata": {
                "name": PLACEMENT, "generation": 1,
                "finalizers": [names.SCHEDULER_CLEANUP_FINALIZER],
                "annotations": {names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"},
            },
            "spec": {"resourceSelectors": [], "policy": policy},
            "status": {"conditions": [
                {"type": names.PLACEMENT_SCHEDULED_CONDITION, "status": names.TRUE,
                 "reason": "Scheduled", "message": "", "observedGeneration": 1,
                 "lastTransitionTime": NOW.isoformat()}
            ]},
        }
    )  # fmt: skip
    if data.draw(st.booleans()):  # often a bound cluster with no labels: lost
        fleet[1] = dataclasses.replace(fleet[1], labels=())
    before = [spec.build() for spec in fleet]
    passes = dataclasses.replace(fleet[0], labels=(("env", "prod"), ("team", "a")), taints=())
    after = [data.draw(wide_change(fleet[0]) | st.just(passes)).build(), *before[1:]]
    changed = after[0].metadata.name  # c0: the placement holds nothing there

    def targets_in(clusters: list[MemberCluster]) -> list[str]:
        lost, _ = lost_bindings(snapshot, clusters, existing, profile, NOW)
        if not lost:
            return []
        return replacement_order(snapshot, clusters, existing, lost, profile, NOW)

    room = Room(clusters={c.metadata.name: c for c in after}, ledgers={}, bindings=existing)
    reached = {
        r.placement
        for r in route_change(
            Change("MODIFIED", before[0], after[0]), placements={PLACEMENT: placement},
            standalone=True, checker=EligibilityChecker(), now=NOW, room=room, profile=profile,
        )
    }  # fmt: skip
    if changed in targets_in(after) and changed not in targets_in(before):
        event("a new target for a lost binding")
        assert reached == {PLACEMENT}
    read = {
        "placements": [placement],
        "latest_snapshots": [snapshot],
        "bindings": existing,
        "running": {PLACEMENT},
        "standalone": True,
        "now": NOW,
        "profile": profile,
    }
    records = plan_reconcile(clusters=before, previous_clusters=None, **read).clusters  # type: ignore[arg-type]
    requeued = plan_reconcile(clusters=after, previous_clusters=records, **read).requeue  # type: ignore[arg-type]
    event("reached" if reached else "not reached")
    assert reached <= set(requeued), (reached, requeued)


@st.composite
def watched_placement(draw: st.DrawFn, index: int) -> ClusterResourcePlacement:
    """A placement of any type, enforcing its affinity or not, capacity-aware or not (an
    unreadable annotation too), fully scheduled, short, stale or never scheduled."""
    annotations: dict[str, str] = {}
    if draw(st.booleans()):
        annotations[names.AFFINITY_ENFORCEMENT_ANNOTATION] = "DuringExecution"
    requests = draw(st.sampled_from([None, None, "cpu=2", "cpu=oops"]))
    if requests is not None:
        annotations[names.REQUESTS_ANNOTATION] = requests
    conditions = []
    scheduled = draw(st.sampled_from([names.TRUE, names.TRUE, "False", None]))
    if scheduled is not None:
        conditions.append(
            {"type": names.PLACEMENT_SCHEDULED_CONDITION, "status": scheduled,
             "reason": "Scheduled", "message": "", "lastTransitionTime": NOW.isoformat(),
             "observedGeneration": draw(st.sampled_from([1, 1, 0]))}
        )  # fmt: skip
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": f"p{index}", "generation": 1, "annotations": annotations,
                         "finalizers": [names.SCHEDULER_CLEANUP_FINALIZER]},
            "spec": {"resourceSelectors": [], "policy": draw(wide_policy())},
            "status": {"conditions": conditions},
        }
    )  # fmt: skip


@SETTINGS
@given(st.data())
def test_the_watcher_and_the_reconcile_reach_placements_by_one_answer(data: st.DataObject) -> None:
    """Whom a member cluster's change reaches has one home (scheduler.requeue.reach), which the
    watcher's routes and the reconcile both ask, over fleets of placements of every kind
    (KubeFleet's rule, enforcement's additions, capacity-aware ones) and bindings in every state:

    - the watcher's routes name exactly the placements `reach` answers for the change seen
      before and after, in its order;
    - the reconcile, which knows the change only from two records, requeues every one of them
      (it may requeue more: a record cannot tell an added taint from a removed one)."""
    chosen = WIDE_POOL[:3]
    fleet = [data.draw(wide_spec(name)) for name in chosen]
    profile = PROFILES[data.draw(st.sampled_from(sorted(PROFILES)))]
    placements = [data.draw(watched_placement(i)) for i in range(data.draw(st.integers(1, 4)))]
    existing = [
        binding(p.metadata.name, target, f"{p.metadata.name}-1", name=f"{p.metadata.name}-{target}",
                state=data.draw(st.sampled_from(
                    [names.STATE_SCHEDULED, names.STATE_BOUND, names.STATE_UNSCHEDULED])))
        for p in placements
        for target in data.draw(st.lists(st.sampled_from(chosen), max_size=3, unique=True))
    ]  # fmt: skip
    before = [spec.build() for spec in fleet]
    deleted = data.draw(st.integers(0, 9)) == 0
    after = before[1:] if deleted else [data.draw(wide_change(fleet[0])).build(), *before[1:]]
    changed = (
        Change("DELETED", before[0], before[0])
        if deleted
        else Change("MODIFIED", before[0], after[0])
    )
    room = Room(clusters={c.metadata.name: c for c in after}, ledgers={}, bindings=existing)
    routed = [
        r.placement
        for r in route_change(
            changed, placements={p.metadata.name: p for p in placements}, standalone=True,
            checker=EligibilityChecker(), now=NOW, room=room, profile=profile,
        )
        if r.signal == SIGNAL_CLUSTER_CHANGED
    ]  # fmt: skip
    if routed:
        # KubeFleet's rules ignore a taint added alone: such a change reaches the placements
        # that enforce their affinity during execution only (control.routes says when).
        enforcing_only = (
            not deleted
            and not cluster_update_reasons(before[0], after[0], EligibilityChecker(), NOW)
            and taint_added(before[0], after[0])
        )
        seen = (
            ClusterEvent.gone("c0", NOW)
            if deleted
            else ClusterEvent.updated(
                before[0], after[0], profile, NOW, enforcing_only=enforcing_only
            )
        )
        answer = reach(seen, placements, profile, bindings=Bindings(existing),
                       clusters=room.clusters)  # fmt: skip
        assert routed == [r.placement for r in answer]
    read = {
        "placements": placements, "latest_snapshots": [], "bindings": existing,
        "running": {p.metadata.name for p in placements}, "standalone": False, "now": NOW,
        "profile": profile,
    }  # fmt: skip
    records = plan_reconcile(clusters=before, previous_clusters=None, **read).clusters  # type: ignore[arg-type]
    requeued = plan_reconcile(clusters=after, previous_clusters=records, **read).requeue  # type: ignore[arg-type]
    event("reached" if routed else "not reached")
    assert set(routed) <= set(requeued), (routed, requeued)
