"""The small worlds the cycle's properties are drawn over, shared by the property tests: member
clusters (some ineligible, tainted, leaving), a policy of any placement type with affinity, a
property sorter, topology spread and tolerations, and existing bindings in every state (current,
obsolete, unscheduled, deleting, dangling); and a profile whose plugins the runner cannot batch."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from hub import names
from hub.types import ClusterResourceBinding, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler import CycleInput, CycleResult, Profile, default_profile, schedule
from scheduler.testing import binding, member_cluster, policy_snapshot

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
PLACEMENT = "web"
LATEST = "web-1"
OLD = "web-0"
POOL = [f"c{i:02d}" for i in range(14)]
SETTINGS = settings(
    max_examples=int(os.environ.get("CYCLE_PROPERTY_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass
class World:
    snapshot: ClusterSchedulingPolicySnapshot
    clusters: list[MemberCluster]
    bindings: list[ClusterResourceBinding]
    fresh: bool

    @property
    def placement_type(self) -> str:
        policy = self.snapshot.spec.policy
        return names.PICK_ALL if policy is None else policy.effective_type

    def run(self, **changes: object) -> CycleResult:
        world = {"snapshot": self.snapshot, "clusters": self.clusters, "bindings": self.bindings}
        world.update(changes)
        return schedule(
            CycleInput(now=NOW, fresh=self.fresh, **world),  # type: ignore[arg-type]
            default_profile(),
        )


@st.composite
def clusters(draw: st.DrawFn) -> list[MemberCluster]:
    chosen = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=len(POOL), unique=True))
    out = []
    for name in chosen:
        labels = {"env": draw(st.sampled_from(["prod", "dev"]))}
        zone = draw(st.sampled_from(["x", "y", "z", None]))
        if zone:
            labels["zone"] = zone
        if draw(st.booleans()):
            labels["tier"] = "gold"
        health = draw(st.sampled_from(["ok", "ok", "ok", "stale", "unjoined", "leaving"]))
        taints = [("gpu", "true")] if draw(st.integers(0, 4)) == 0 else []
        cost = draw(st.integers(0, 50))
        out.append(
            member_cluster(
                name,
                NOW,
                labels=labels,
                taints=taints,
                properties={"cost": str(cost)},
                heartbeat_age=timedelta(minutes=10 if health == "stale" else 0),
                joined=health != "unjoined",
                deleting=health == "leaving",
            )
        )
    return out


@st.composite
def policies(draw: st.DrawFn, placement_type: str | None = None) -> dict[str, object]:
    kind = placement_type or draw(st.sampled_from([names.PICK_ALL, names.PICK_N, names.PICK_FIXED]))
    policy: dict[str, object] = {"placementType": kind}
    if kind == names.PICK_FIXED:
        policy["clusterNames"] = draw(st.lists(st.sampled_from([*POOL, "ghost"]), max_size=6))
        return policy
    affinity: dict[str, object] = {}
    if draw(st.booleans()):
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"env": "prod"}}}]
        }
    if kind == names.PICK_N:
        policy["numberOfClusters"] = draw(st.integers(0, 7))
        preferred = []
        if draw(st.booleans()):
            weight = draw(st.sampled_from([20, -10, 100]))
            preferred.append(
                {
                    "weight": weight,
                    "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}},
                }
            )
        if draw(st.booleans()):
            order = draw(st.sampled_from([names.SORT_ASCENDING, names.SORT_DESCENDING]))
            preferred.append(
                {
                    "weight": 50,
                    "preference": {"propertySorter": {"name": "cost", "sortOrder": order}},
                }
            )
        if preferred:
            affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if draw(st.booleans()):
            policy["topologySpreadConstraints"] = [
                {
                    "maxSkew": draw(st.integers(1, 2)),
                    "topologyKey": "zone",
                    "whenUnsatisfiable": draw(
                        st.sampled_from([names.DO_NOT_SCHEDULE, names.SCHEDULE_ANYWAY])
                    ),
                }
            ]
    if affinity:
        policy["affinity"] = {"clusterAffinity": affinity}
    if draw(st.booleans()):
        policy["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    return policy


@st.composite
def bindings(draw: st.DrawFn, cluster_names: list[str]) -> list[ClusterResourceBinding]:
    targets = draw(st.lists(st.sampled_from([*cluster_names, "gone"]), max_size=10))
    out = []
    for index, target in enumerate(targets):
        state = draw(
            st.sampled_from([names.STATE_SCHEDULED, names.STATE_BOUND, names.STATE_UNSCHEDULED])
        )
        snapshot = draw(st.sampled_from([LATEST, LATEST, OLD]))
        score = draw(st.none() | st.tuples(st.integers(-50, 100), st.integers(-2, 1)))
        annotations = {"team": "blue"}
        if state == names.STATE_UNSCHEDULED:
            previous = draw(st.sampled_from([names.STATE_SCHEDULED, names.STATE_BOUND]))
            annotations[names.PREVIOUS_BINDING_STATE_ANNOTATION] = previous
        deleting = NOW if draw(st.integers(0, 9)) == 0 else None
        out.append(
            binding(
                PLACEMENT,
                target,
                snapshot,
                state=state,
                name=f"{PLACEMENT}-{target}-{index:02d}",
                score=score,
                annotations=annotations,
                deleting=deleting,
            )
        )
    return out


@st.composite
def worlds(draw: st.DrawFn, placement_type: str | None = None) -> World:
    fleet = draw(clusters())
    policy = draw(policies(placement_type))
    snapshot = policy_snapshot(PLACEMENT, policy, index=1)
    existing = draw(bindings([c.metadata.name for c in fleet]))
    fresh = draw(st.booleans()) if policy["placementType"] == names.PICK_N else False
    return World(snapshot, fleet, existing, fresh)


@dataclass(frozen=True)
class _PerCluster:
    """A plugin seen through its per-cluster methods only: the runner cannot batch it."""

    plugin: Any

    @property
    def name(self) -> str:
        return str(self.plugin.name)

    def filter(self, *args: Any) -> Any:
        return self.plugin.filter(*args)

    def score(self, *args: Any) -> Any:
        return self.plugin.score(*args)


def per_cluster(profile: Profile) -> Profile:
    """`profile` with each filter and score plugin seen through its per-cluster methods only."""
    return dataclasses.replace(
        profile,
        filter=tuple(_PerCluster(p) for p in profile.filter),
        score=tuple(_PerCluster(p) for p in profile.score),
    )
