"""The fast paths of a cycle decide exactly as the plain ones, over wider fleets than worlds.py
draws: up to 40 clusters over several zones and regions, up to two spread constraints of either
kind, property values spelled several ways ("0.5" and "500m", "2k" and "2000", text that is no
quantity, none at all), unhealthy and stale agents, and bindings in every state.

The references are the plain forms of what the fast paths shortcut:

- the whole cycle through the plugins' per-cluster methods and the runner's per-cluster loop
  (`per_cluster`), which do not share the batched paths' memos (one score object per
  combination, one weight per property value, one eligibility comparison per cluster);
- topology spread: KubeFleet's evaluateAllConstraints cluster by cluster (`reference_spread`
  below), against the verdict computed once per domain;
- the property extremes: strict comparisons cluster by cluster, first spelling kept
  (`reference_extremes`), against min/max over values kept on the clusters' facts;
- and every result is the same with the facts cache (and what plugins keep on the facts)
  emptied before the cycle or left from the previous one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from hub import names
from hub.types import MemberCluster, TopologySpreadConstraint
from scheduler import CycleInput, CycleResult, default_profile, schedule
from scheduler.clusters import facts
from scheduler.framework.profile import ScoreMode
from scheduler.plugins.cluster_affinity.properties import QuantityCache, compile_property
from scheduler.plugins.cluster_affinity.scoring import _extremes, _readable
from scheduler.plugins.topology_spread_constraints.state import (
    SCHEDULE_ANYWAY_PENALTY,
    SKEW_CHANGE_SCORE_FACTOR,
    Constraint,
    count_domains,
    evaluate,
    will_violate,
)
from scheduler.room.quantity import Quantity
from scheduler.testing import member_cluster, policy_snapshot
from tests.property.worlds import NOW, PLACEMENT, SETTINGS, bindings, per_cluster

ZONES = ["a", "b", "c", "d", None]
REGIONS = ["east", "west", None]
# Equal values spelled differently, values that are no quantity, and no value at all.
# Around the default heartbeat timeout of 5 minutes, and far beyond it.
HEARTBEAT_AGES = [
    timedelta(minutes=4, seconds=59),
    timedelta(minutes=5),
    timedelta(minutes=5, microseconds=1),
    timedelta(minutes=5, seconds=1),
    timedelta(minutes=90),
]
COSTS = ["1", "1000m", "0.5", "500m", "2k", "2000", "1e3", "7", "0.1", "not-a-number", None]


@st.composite
def fleets(draw: st.DrawFn, costs: Sequence[str | None] = COSTS) -> list[MemberCluster]:
    count = draw(st.integers(1, 40))
    out = []
    for index in range(count):
        labels = {"env": draw(st.sampled_from(["prod", "staging", "dev"]))}
        for key, choices in (("zone", ZONES), ("region", REGIONS)):
            value = draw(st.sampled_from(choices))
            if value is not None:
                labels[key] = value
        if draw(st.booleans()):
            labels["tier"] = "gold"
        cost = draw(st.sampled_from(costs))
        properties = {"nodes": str(draw(st.integers(1, 9)))}
        if cost is not None:
            properties["cost"] = cost
        health = draw(st.sampled_from(["ok", "ok", "ok", "stale", "unjoined", "sick", "leaving"]))
        out.append(
            member_cluster(
                f"c{index:03d}",
                NOW,
                labels=labels,
                taints=[("gpu", "true")] if draw(st.integers(0, 4)) == 0 else [],
                properties=properties,
                heartbeat_age=draw(st.sampled_from(HEARTBEAT_AGES))
                if health == "stale"
                else timedelta(seconds=30),
                joined=health != "unjoined",
                healthy=health != "sick",
                deleting=health == "leaving",
            )
        )
    return out


def spread_constraints() -> st.SearchStrategy[list[dict[str, object]]]:
    one = st.fixed_dictionaries(
        {
            "maxSkew": st.integers(1, 3),
            "topologyKey": st.sampled_from(["zone", "region"]),
            "whenUnsatisfiable": st.sampled_from([names.DO_NOT_SCHEDULE, names.SCHEDULE_ANYWAY]),
        }
    )
    return st.lists(one, max_size=2)


@st.composite
def pick_n_policies(draw: st.DrawFn) -> dict[str, object]:
    preferred: list[dict[str, object]] = []
    if draw(st.booleans()):
        preferred.append(
            {
                "weight": draw(st.sampled_from([30, -20])),
                "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}},
            }
        )
    for prop in draw(st.lists(st.sampled_from(["cost", "nodes"]), max_size=2)):
        order = draw(st.sampled_from([names.SORT_ASCENDING, names.SORT_DESCENDING]))
        selector = draw(st.sampled_from([None, {"matchLabels": {"env": "prod"}}]))
        preference: dict[str, object] = {"propertySorter": {"name": prop, "sortOrder": order}}
        if selector is not None:
            preference["labelSelector"] = selector
        preferred.append({"weight": draw(st.sampled_from([60, 7, 0])), "preference": preference})
    affinity: dict[str, object] = {}
    if preferred:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if draw(st.booleans()):
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "clusterSelectorTerms": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "env", "operator": "In", "values": ["prod", "staging"]}
                        ]
                    }
                }
            ]
        }
    policy: dict[str, object] = {
        "placementType": names.PICK_N,
        "numberOfClusters": draw(st.integers(0, 12)),
        "topologySpreadConstraints": draw(spread_constraints()),
    }
    if affinity:
        policy["affinity"] = {"clusterAffinity": affinity}
    if draw(st.booleans()):
        policy["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    return policy


@st.composite
def cycle_inputs(draw: st.DrawFn) -> CycleInput:
    fleet = draw(fleets())
    policy = draw(st.one_of(pick_n_policies(), st.just({"placementType": names.PICK_ALL})))
    return CycleInput(
        snapshot=policy_snapshot(PLACEMENT, policy, index=1),
        clusters=fleet,
        bindings=draw(bindings([c.metadata.name for c in fleet])),
        now=NOW,
        fresh=draw(st.booleans()) if policy["placementType"] == names.PICK_N else False,
    )


def cold(data: CycleInput, run: Callable[[CycleInput], CycleResult]) -> CycleResult:
    facts.forget()
    return run(data)


WEIGHTED = dataclasses.replace(
    default_profile(),
    score_mode=ScoreMode.WEIGHTED_SUM,
    weights={"ClusterAffinity": 3, "TopologySpreadConstraints": 2},
)


@SETTINGS
@given(cycle_inputs(), st.booleans())
def test_batched_cycle_decides_as_the_per_cluster_one_over_wide_fleets(
    data: CycleInput, weighted: bool
) -> None:
    """Bindings written, scores, decisions and their reasons, explanation: all the same, in
    either score mode."""
    fast = WEIGHTED if weighted else default_profile()
    plain = per_cluster(fast)
    expected = cold(data, lambda d: schedule(d, plain))
    assert cold(data, lambda d: schedule(d, fast)) == expected
    assert schedule(data, fast) == expected  # warm: facts and what plugins kept on them


def reference_spread(
    constraints: Sequence[TopologySpreadConstraint],
    fleet: Sequence[MemberCluster],
    has_binding: Callable[[str], bool],
) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """evaluateAllConstraints as KubeFleet loops it: every constraint, every cluster."""
    parsed = [Constraint.of(c) for c in constraints]
    ordered = [c for c in parsed if c.do_not_schedule] + [
        c for c in parsed if not c.do_not_schedule
    ]
    violations: dict[str, tuple[str, ...]] = {}
    scores: dict[str, int] = {}
    for constraint in ordered:
        counts = count_domains(fleet, constraint.topology_key, has_binding)
        for cluster in fleet:
            name = cluster.metadata.name
            if name in violations:
                continue
            domain = cluster.metadata.labels.get(constraint.topology_key)
            if domain is None:
                scores[name] = scores.get(name, 0)
                continue
            violated, change = will_violate(counts, domain, constraint.max_skew)
            if violated and constraint.do_not_schedule:
                violations[name] = (constraint.violation,)
                scores.pop(name, None)
            elif violated:
                scores[name] = scores.get(name, 0) - SCHEDULE_ANYWAY_PENALTY
            else:
                scores[name] = scores.get(name, 0) + change * SKEW_CHANGE_SCORE_FACTOR
    return violations, scores


@SETTINGS
@given(fleets(), spread_constraints(), st.data())
def test_spread_verdict_per_domain_is_the_per_cluster_one(
    fleet: list[MemberCluster], raw: list[dict[str, object]], data: st.DataObject
) -> None:
    constraints = [TopologySpreadConstraint.model_validate(c) for c in raw]
    bound = set(data.draw(st.lists(st.sampled_from([c.metadata.name for c in fleet]))))
    verdict = evaluate(constraints, fleet, bound.__contains__)
    assert (verdict.violations, verdict.scores) == reference_spread(
        constraints, fleet, bound.__contains__
    )


def reference_extremes(
    prop: str, fleet: Sequence[MemberCluster]
) -> tuple[Quantity | None, Quantity | None, dict[str, Quantity | None]]:
    """Strict comparisons in fleet order: among equal values the first spelling stays."""
    ref, cache = compile_property(prop), QuantityCache()
    smallest = largest = None
    values: dict[str, Quantity | None] = {}
    for cluster in fleet:
        value = values[cluster.metadata.name] = _readable(ref, facts.build(cluster), cache)
        if value is None:
            continue
        if smallest is None or value.nanos < smallest.nanos:
            smallest = value
        if largest is None or value.nanos > largest.nanos:
            largest = value
    return smallest, largest, values


def spelled(quantity: Quantity | None) -> tuple[int, int, int, float] | None:
    """Everything interpolation reads of a quantity, spelling included."""
    if quantity is None:
        return None
    return (quantity.nanos, quantity.mantissa, quantity.exponent, quantity.approximate)


@SETTINGS
@given(
    st.one_of(fleets(), fleets(costs=["1", "1000m", "2", "2000m", None])),
    st.sampled_from(["cost", "nodes"]),
    st.booleans(),
)
def test_property_extremes_are_the_strict_loop_ones(
    fleet: list[MemberCluster], prop: str, warm: bool
) -> None:
    if not warm:
        facts.forget()
    found = _extremes(compile_property(prop), fleet, QuantityCache())
    smallest, largest, values = reference_extremes(prop, fleet)
    assert spelled(found.smallest) == spelled(smallest)
    assert spelled(found.largest) == spelled(largest)
    assert {n: spelled(v) for n, v in found.values.items()} == {
        n: spelled(v) for n, v in values.items()
    }
