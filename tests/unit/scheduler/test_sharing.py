"""Shared filter and score answers (scheduler.framework.sharing) decide exactly as without them.

The property: random fleets, placements whose policies come from a few selectors (so many share
one), random cluster changes between cycles (labels, taints, properties, heartbeat, join,
leave, a re-listed copy), cycles in turn. Every cycle's result (plan, outcome, explanation with
its reasons and scores, error) with the shared store equals the one without it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hub import names
from hub.types import ClusterResourceBinding, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler import CycleInput, default_profile, schedule
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.sharing import FILTER, FLEET, SCORE, SharedResults, sharing_of
from scheduler.framework.status import Status
from scheduler.plugins.cluster_affinity.plugin import ClusterAffinity
from scheduler.testing import apply_plan, member_cluster, policy_snapshot
from tests.unit.scheduler.cycle_builders import NOW

PROFILE = default_profile()
ENVS = ("prod", "staging", "dev")
REGIONS = ("east", "west", "north")
NODES = names.NODE_COUNT_PROPERTY


def _cluster(
    name: str,
    env: str,
    region: str,
    gold: bool,
    tainted: bool,
    nodes: int | None,
    stale: bool,
) -> MemberCluster:
    labels = {"env": env, "region": region, **({"tier": "gold"} if gold else {})}
    return member_cluster(
        name,
        NOW,
        labels=labels,
        taints=[("gpu", "true")] if tainted else [],
        properties={} if nodes is None else {NODES: str(nodes)},
        heartbeat_age=timedelta(minutes=10 if stale else 0),
    )


clusters_st = st.builds(
    _cluster,
    st.just(""),
    st.sampled_from(ENVS),
    st.sampled_from(REGIONS),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.integers(1, 40)),
    st.integers(0, 9).map(lambda x: x == 0),
)


def _required(key: str, values: list[str]) -> dict[str, Any]:
    expression = {"key": key, "operator": "In", "values": values}
    term = {"labelSelector": {"matchExpressions": [expression]}}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [term]}}


PREFERRED = [
    {"weight": 30, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}},
    {
        "weight": 60,
        "preference": {"propertySorter": {"name": NODES, "sortOrder": names.SORT_DESCENDING}},
    },
]
TOLERATE_GPU = [{"key": "gpu", "operator": "Equal", "value": "true"}]
SPREAD = [{"maxSkew": 1, "topologyKey": "region", "whenUnsatisfiable": "DoNotSchedule"}]


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    """A policy from a few selectors, as KubeFleet's report mix builds them."""
    key = draw(st.sampled_from(("env", "region")))
    values = sorted(draw(st.sets(st.sampled_from(ENVS if key == "env" else REGIONS), min_size=1)))
    affinity: dict[str, Any] = _required(key, values)
    policy: dict[str, Any] = {}
    if draw(st.booleans()):
        policy = {"placementType": "PickAll"}
    else:
        policy = {"placementType": "PickN", "numberOfClusters": draw(st.integers(1, 4))}
        if draw(st.booleans()):
            affinity["preferredDuringSchedulingIgnoredDuringExecution"] = PREFERRED
        if draw(st.integers(0, 4)) == 0:
            policy["topologySpreadConstraints"] = SPREAD
    if draw(st.booleans()):
        policy["affinity"] = {"clusterAffinity": affinity}
    if draw(st.integers(0, 3)) == 0:
        policy["tolerations"] = TOLERATE_GPU
    return policy


CHANGES = ("env", "region", "gold", "taint", "nodes", "heartbeat", "leave", "join", "relist")
steps_st = st.lists(
    st.one_of(
        st.tuples(st.just("cycle"), st.integers(0, 11)),
        st.tuples(st.sampled_from(CHANGES), st.integers(0, 11), clusters_st),
    ),
    min_size=1,
    max_size=30,
)


def _changed(old: MemberCluster, change: str, fresh: MemberCluster) -> MemberCluster:
    """`old` with one field taken from `fresh` (a new object, as the cluster cache makes)."""
    labels = dict(old.metadata.labels)
    if change in ("env", "region"):
        labels[change] = fresh.metadata.labels[change]
    elif change == "gold":
        labels.pop("tier", None) if "tier" in labels else labels.update(tier="gold")
    spec, status = old.spec, old.status
    if change == "taint":
        spec = spec.model_copy(update={"taints": [] if spec.taints else fresh.spec.taints})
    if change in ("nodes", "heartbeat"):
        status = fresh.status
    metadata = old.metadata.model_copy(update={"labels": labels})
    return old.model_copy(update={"metadata": metadata, "spec": spec, "status": status})


@dataclass
class World:
    clusters: list[MemberCluster]
    snapshots: list[ClusterSchedulingPolicySnapshot]
    bindings: list[list[ClusterResourceBinding]]
    joined: int = 0

    def change(self, change: str, index: int, fresh: MemberCluster) -> None:
        if change == "join" or not self.clusters:
            self.joined += 1
            name = f"joined-{self.joined:02d}"
            self.clusters = sorted(
                [*self.clusters, fresh.model_copy(update={"metadata": _named(fresh, name)})],
                key=lambda c: c.metadata.name,
            )
            return
        at = index % len(self.clusters)
        if change == "leave":
            self.clusters = self.clusters[:at] + self.clusters[at + 1 :]
        elif change == "relist":  # equal content, a new object: must not matter either way
            self.clusters = [MemberCluster.model_validate(c.to_wire()) for c in self.clusters]
        else:
            self.clusters = [
                _changed(c, change, fresh) if i == at else c for i, c in enumerate(self.clusters)
            ]


def _named(cluster: MemberCluster, name: str) -> Any:
    return cluster.metadata.model_copy(update={"name": name})


@settings(max_examples=150, deadline=None)
@given(
    fleet=st.lists(clusters_st, min_size=0, max_size=10),
    pool=st.lists(policies(), min_size=1, max_size=4),
    assignment=st.lists(st.integers(0, 3), min_size=12, max_size=12),
    steps=steps_st,
    max_cells=st.sampled_from((0, 5, 40, 10_000)),
)
def test_shared_answers_decide_exactly_as_without(
    fleet: list[MemberCluster],
    pool: list[dict[str, Any]],
    assignment: list[int],
    steps: list[tuple[Any, ...]],
    max_cells: int,
) -> None:
    clusters = [
        c.model_copy(update={"metadata": _named(c, f"member-{i:02d}")}) for i, c in enumerate(fleet)
    ]
    snapshots = [
        policy_snapshot(f"p{i}", pool[k % len(pool)], index=1) for i, k in enumerate(assignment)
    ]
    world = World(clusters, snapshots, [[] for _ in snapshots])
    shared = SharedResults(max_cells=max_cells)
    now = NOW
    for step in steps:
        if step[0] != "cycle":
            world.change(*step)
            continue
        k = step[1]
        now += timedelta(seconds=40)  # the clock moves: eligibility is never shared
        data = CycleInput(
            snapshot=world.snapshots[k],
            clusters=world.clusters,
            bindings=world.bindings[k],
            now=now,
        )
        plain = schedule(data, PROFILE)
        with_shared = schedule(data, PROFILE, shared=shared)
        assert with_shared == plain
        assert shared.cells <= max_cells
        world.bindings[k], world.snapshots[k] = apply_plan(
            world.bindings[k], world.snapshots[k], plain.plan
        )


# -- what is shared, and when it is not --------------------------------------------------------


def _fleet(count: int) -> list[MemberCluster]:
    return [
        _cluster(f"member-{i:02d}", ENVS[i % 3], REGIONS[i % 3], i % 2 == 0, i % 5 == 4, i, False)
        for i in range(count)
    ]


PICK_N = {
    "placementType": "PickN",
    "numberOfClusters": 2,
    "affinity": {
        "clusterAffinity": {
            **_required("env", ["prod", "staging"]),
            "preferredDuringSchedulingIgnoredDuringExecution": PREFERRED,
        }
    },
}


def _cycle(
    shared: SharedResults, clusters: list[MemberCluster], placement: str, policy: dict[str, Any]
) -> None:
    data = CycleInput(
        snapshot=policy_snapshot(placement, policy, index=1), clusters=clusters, now=NOW
    )
    assert schedule(data, PROFILE, shared=shared) == schedule(data, PROFILE)


def test_placements_of_one_policy_share_filter_and_score_answers() -> None:
    shared, clusters = SharedResults(), _fleet(12)
    _cycle(shared, clusters, "a", PICK_N)
    first = shared.counters.cells_computed
    assert first == 3 * 12  # ClusterAffinity's Filter and Score, TaintToleration's Filter
    _cycle(shared, clusters, "b", PICK_N)
    assert shared.counters.cells_computed == first  # nothing asked again
    assert shared.counters.hits == 3


def test_a_changed_cluster_is_asked_again_and_only_it_for_cluster_scoped_answers() -> None:
    shared, clusters = SharedResults(), _fleet(12)
    _cycle(shared, clusters, "a", PICK_N)
    before = shared.counters.cells_computed
    clusters[3] = _changed(clusters[3], "env", _cluster("", "dev", "east", False, False, 1, False))
    _cycle(shared, clusters, "b", PICK_N)
    # Filters: the one changed cluster each; Score reads the whole fleet's extremes: all 12.
    assert shared.counters.cells_computed - before == 1 + 1 + 12


def test_a_cluster_joining_or_leaving_is_a_new_fleet() -> None:
    shared, clusters = SharedResults(), _fleet(12)
    _cycle(shared, clusters, "a", PICK_N)
    before = shared.counters.cells_computed
    _cycle(shared, clusters[:-1], "b", PICK_N)
    assert shared.counters.cells_computed > before


def test_plugins_reading_more_than_policy_and_cluster_are_not_shared() -> None:
    shared, clusters = SharedResults(), _fleet(6)
    spread = {**PICK_N, "topologySpreadConstraints": SPREAD}
    _cycle(shared, clusters, "a", spread)
    shared_plugins = {key[0].name for key in shared._entries}
    assert shared_plugins == {"ClusterAffinity", "TaintToleration"}


def test_the_store_keeps_within_its_budget_least_recently_used_first_out() -> None:
    shared, clusters = SharedResults(max_cells=30), _fleet(10)
    for region in REGIONS:
        policy = {
            "placementType": "PickAll",
            "affinity": {"clusterAffinity": _required("region", [region])},
        }
        _cycle(shared, clusters, region, policy)
    assert shared.cells <= 30
    assert shared.counters.evictions > 0


class _OnlyForPlacementA(ClusterAffinity):
    """An out-of-tree plugin built on an in-tree one: its Filter also reads the placement's name
    (anything besides the policy and the cluster), and it declares nothing of its own."""

    name = "OnlyForPlacementA"

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status:
        if snapshot.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) != "a":
            return Status.unschedulable("not placement a")
        return super().filter(state, snapshot, cluster)

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[Status | None]:
        if snapshot.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) != "a":
            return [Status.unschedulable("not placement a")] * len(facts)
        return super().filter_all(state, snapshot, facts)


def test_a_subclass_that_overrides_a_stage_is_not_shared_on_its_base_s_declaration() -> None:
    plugin = _OnlyForPlacementA()
    profile = dataclasses.replace(
        PROFILE,
        name="subclassed",
        pre_filter=(*PROFILE.pre_filter, plugin),
        filter=(*PROFILE.filter, plugin),
    )
    shared, clusters = SharedResults(), _fleet(6)
    for placement in ("a", "b"):
        data = CycleInput(
            snapshot=policy_snapshot(placement, PICK_N, index=1), clusters=clusters, now=NOW
        )
        assert schedule(data, profile, shared=shared) == schedule(data, profile)
    assert sharing_of(plugin, FILTER) is None
    assert sharing_of(plugin, SCORE) == FLEET  # Score is its base's, declaration and all
