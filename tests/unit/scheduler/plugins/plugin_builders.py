"""Tiny builders for plugin tests: a cluster, a policy, a snapshot, a cycle state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from hub.types import (
    Affinity,
    AgentStatus,
    ClusterAffinity,
    ClusterSchedulingPolicySnapshot,
    ClusterSelector,
    ClusterSelectorTerm,
    Condition,
    LabelSelector,
    LabelSelectorRequirement,
    MemberCluster,
    MemberClusterSpec,
    MemberClusterStatus,
    ObjectMeta,
    PlacementPolicy,
    PreferredClusterSelector,
    PropertySelector,
    PropertySelectorRequirement,
    PropertySorter,
    PropertyValue,
    ResourceUsage,
    SchedulingPolicySnapshotSpec,
    Taint,
)
from scheduler.framework.cycle_state import CycleState

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def healthy_agent(now: datetime = NOW) -> AgentStatus:
    return AgentStatus(
        type="MemberAgent",
        last_received_heartbeat=now - timedelta(seconds=30),
        conditions=[
            Condition(type="Joined", status="True", last_transition_time=now - timedelta(days=1)),
            Condition(type="Healthy", status="True", last_transition_time=now - timedelta(days=1)),
        ],
    )


def cluster(
    name: str,
    labels: Mapping[str, str] | None = None,
    *,
    taints: Iterable[Taint] = (),
    properties: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    available: Mapping[str, str] | None = None,
    agents: Iterable[AgentStatus] | None = None,
    conditions: Iterable[Condition] = (),
    namespaces: Mapping[str, str] | None = None,
    deleting: bool = False,
) -> MemberCluster:
    return MemberCluster(
        metadata=ObjectMeta(
            name=name,
            labels=dict(labels or {}),
            deletion_timestamp=NOW if deleting else None,
        ),
        spec=MemberClusterSpec(taints=list(taints)),
        status=MemberClusterStatus(
            properties={k: PropertyValue(value=v) for k, v in (properties or {}).items()},
            resource_usage=ResourceUsage(
                capacity=dict(capacity or {}),
                allocatable=dict(allocatable or {}),
                available=dict(available or {}),
            ),
            agent_status=[healthy_agent()] if agents is None else list(agents),
            conditions=list(conditions),
            namespaces=None if namespaces is None else dict(namespaces),
        ),
    )


def snapshot(
    policy: PlacementPolicy | None = None, *, namespace: str | None = None
) -> ClusterSchedulingPolicySnapshot:
    return ClusterSchedulingPolicySnapshot(
        metadata=ObjectMeta(name="crp-1-0", namespace=namespace),
        spec=SchedulingPolicySnapshotSpec(policy=policy, policy_hash="aGFzaA=="),
    )


def state(
    *clusters: MemberCluster,
    scheduled: Iterable[str] = (),
    obsolete: Iterable[str] = (),
    now: datetime = NOW,
) -> CycleState:
    return CycleState(
        clusters=list(clusters),
        now=now,
        scheduled_or_bound=frozenset(scheduled),
        obsolete=frozenset(obsolete),
    )


# --- selectors -------------------------------------------------------------------------------


def labels(
    match: Mapping[str, str] | None = None, *expressions: LabelSelectorRequirement
) -> LabelSelector:
    return LabelSelector(match_labels=dict(match or {}), match_expressions=list(expressions))


def expr(key: str, operator: str, *values: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key=key, operator=operator, values=list(values))


def prop(name: str, operator: str, *values: str) -> PropertySelectorRequirement:
    return PropertySelectorRequirement.model_construct(
        name=name, operator=operator, values=list(values)
    )


def term(
    label_selector: LabelSelector | None = None,
    *properties: PropertySelectorRequirement,
    sorter: tuple[str, str] | None = None,
) -> ClusterSelectorTerm:
    return ClusterSelectorTerm(
        label_selector=label_selector,
        property_selector=PropertySelector.model_construct(match_expressions=list(properties))
        if properties
        else None,
        property_sorter=PropertySorter(name=sorter[0], sort_order=sorter[1]) if sorter else None,
    )


def affinity_policy(
    required: Iterable[ClusterSelectorTerm] | None = None,
    preferred: Iterable[tuple[int, ClusterSelectorTerm]] = (),
    placement_type: str = "PickN",
) -> PlacementPolicy:
    return PlacementPolicy(
        placement_type=placement_type,
        affinity=Affinity(
            cluster_affinity=ClusterAffinity(
                required_during_scheduling_ignored_during_execution=None
                if required is None
                else ClusterSelector(cluster_selector_terms=list(required)),
                preferred_during_scheduling_ignored_during_execution=[
                    PreferredClusterSelector.model_construct(weight=weight, preference=preference)
                    for weight, preference in preferred
                ],
            )
        ),
    )
