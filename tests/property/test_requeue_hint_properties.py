"""The requeue hint never skips a placement whose cycle would decide otherwise.

Each example: a fleet, a policy of any type and bindings in every state (the worlds of
test_cycle_properties), run to its fixpoint; then one cluster changes (a label read or not read
by the policy, a taint, a property, its health or namespaces). Where `may_change_decision` says
the placement's decision cannot change, running its cycles on the changed fleet must end where
it already is: bindings and policy-snapshot status alike. Where it says it may, nothing is
claimed (a requeue that decides the same is KubeFleet's behaviour)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import timedelta

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hub import names
from hub.types import ClusterResourceBinding, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler import CycleInput, default_profile, schedule
from scheduler.requeue_hints import ClusterChange, may_change_decision
from scheduler.testing import apply_plan, member_cluster, policy_snapshot
from tests.property.test_cycle_properties import NOW, PLACEMENT, POOL, bindings, policies

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


@st.composite
def specs(draw: st.DrawFn) -> list[Spec]:
    chosen = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=8, unique=True))
    out = []
    for name in chosen:
        labels = {"env": draw(st.sampled_from(["prod", "dev"]))}
        zone = draw(st.sampled_from(["x", "y", "z", None]))
        if zone:
            labels["zone"] = zone
        if draw(st.booleans()):
            labels["tier"] = "gold"
        if draw(st.booleans()):
            labels["team"] = draw(st.sampled_from(["a", "b"]))
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
    bindings: list[ClusterResourceBinding],
    fresh: bool,
) -> tuple[list[ClusterResourceBinding], ClusterSchedulingPolicySnapshot]:
    for _ in range(20):
        result = schedule(
            CycleInput(snapshot=snapshot, clusters=clusters, bindings=bindings, now=NOW,
                       fresh=fresh),
            PROFILE,
        )
        assert result.error is None, result.error
        before = (bindings, snapshot)
        bindings, snapshot = apply_plan(bindings, snapshot, result.plan)
        fresh = False
        if not result.requeue and (bindings, snapshot) == before:
            return bindings, snapshot
    raise AssertionError("no fixpoint after 20 cycles")


def _state(
    state: tuple[list[ClusterResourceBinding], ClusterSchedulingPolicySnapshot],
) -> tuple[list[object], object]:
    found, snapshot = state
    return sorted((b.to_wire() for b in found), key=lambda w: w["metadata"]["name"]), (
        snapshot.to_wire().get("status")
    )


@SETTINGS
@given(st.data())
def test_a_placement_the_hint_skips_would_decide_the_same(data: st.DataObject) -> None:
    fleet = data.draw(specs())
    policy = data.draw(policies())
    snapshot = policy_snapshot(PLACEMENT, policy, index=1)
    existing = data.draw(bindings([s.name for s in fleet]))
    fresh = policy["placementType"] == names.PICK_N and data.draw(st.booleans())
    clusters = [s.build() for s in fleet]
    steady = fixpoint(snapshot, clusters, existing, fresh)

    index = data.draw(st.integers(0, len(fleet) - 1))
    after_spec = data.draw(changed(fleet[index]))
    after = [*clusters[:index], after_spec.build(), *clusters[index + 1 :]]
    change = ClusterChange.between(clusters[index], after[index], PROFILE.ineligibility, NOW)
    plugins = PROFILE.cycle_plugins()
    if may_change_decision(plugins, steady[1].spec.policy, change):
        event("requeued")
        return
    event("skipped")
    again = fixpoint(steady[1], after, steady[0], False)
    assert _state(again) == _state(steady), change
