"""What the three placement types share: the cycle context, the binding-name check, and the
grouping that keeps explanations compact."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from hub.names import OWN_PREFIX, PREEMPTED_BY_ANNOTATION, SCHEDULED_CONDITION
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterSchedulingPolicySnapshot,
    Condition,
    MemberCluster,
)
from scheduler.bindings.naming import binding_name, can_name_cluster_part, name_problem
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.cycles.classify import Classified
from scheduler.cycles.decisions import scheduled_condition, status_write
from scheduler.cycles.models import Outcome
from scheduler.cycles.plan import BindingPatch, SnapshotStatusWrite
from scheduler.explain.explanation import (
    BEYOND_ROOM_MARKER,
    SHORTAGE_MARKER,
    BeyondRoom,
    BindingAction,
    BindingGroup,
    Explanation,
    FilterGroup,
    ScoreGroup,
    Shortage,
    beyond_room_message,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.profile import CLUSTER_RESOURCES_FIT, Profile
from scheduler.framework.runner import Filtered, FinalCheck, Runner, ScoredCluster
from scheduler.framework.status import Status
from scheduler.preemption.marks import parse_preempted_by
from scheduler.room.capacity import Demand, no_room_reason, shortage

__all__ = [
    "BindingLog",
    "Context",
    "CycleOutput",
    "filter_groups",
    "room_filtered",
    "score_groups",
]


class BindingLog:
    """Collects existing-binding writes for the explanation, grouped by (action, why)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[BindingAction, str], list[str]] = {}

    def add(self, action: BindingAction, why: str, cluster: str) -> None:
        self._groups.setdefault((action, why), []).append(cluster)

    def groups(self) -> list[BindingGroup]:
        return [
            BindingGroup(action=action, why=why, clusters=clusters)
            for (action, why), clusters in self._groups.items()
        ]


@dataclass
class Context:
    """Everything one cycle reads, prepared once by `scheduler.schedule`."""

    snapshot: ClusterSchedulingPolicySnapshot
    placement: str
    clusters: Sequence[MemberCluster]
    by_name: dict[str, MemberCluster]
    classified: Classified
    crp_generation: int
    now: datetime
    profile: Profile
    runner: Runner
    placement_type: str
    used_names: set[str]
    facts: Sequence[ClusterFacts] | None = None
    """The facts of `clusters`, in their order, when the caller has them (it prepared them)."""
    log: BindingLog = field(default_factory=BindingLog)
    demand: Demand | None = None
    """Capacity-aware placements only (docs/capacity.md)."""
    beyond_room: list[BeyondRoom] = field(default_factory=list)
    """Set by `status`: the selected clusters where a kept binding exceeds the room."""
    annotation_problems: list[str] = field(default_factory=list)
    """What is wrong with the placement's own annotations (CycleInput.annotation_problems)."""

    @property
    def snapshot_name(self) -> str:
        return self.snapshot.metadata.name

    def cycle_state(self) -> CycleState:
        c = self.classified
        return CycleState(
            clusters=self.clusters,
            now=self.now,
            scheduled_or_bound=frozenset(b.spec.target_cluster for b in (*c.scheduled, *c.bound)),
            obsolete=frozenset(b.spec.target_cluster for b in c.obsolete),
            demand=self.demand,
            _by_name=self.by_name,
            _facts=self.facts,
        )

    def no_room(self, cluster: MemberCluster) -> str | None:
        """Why a capacity-aware placement's new binding does not fit on `cluster` (None: it
        fits, or the placement is not capacity-aware): ClusterResourcesFit's rule."""
        if self.demand is None:
            return None
        short = self.demand.shortfalls_on(
            cluster.metadata.name, cluster.status.resource_usage.allocatable
        )
        return no_room_reason(short) if short else None

    def shortage(self, clusters: Iterable[str], wanted: int | None = None) -> Shortage | None:
        """Bindings left unplaced for lack of room: one per cluster of `clusters` (those that
        passed every check but room), at most `wanted` (the bindings PickN still lacks; None:
        no limit). None for placements that are not capacity-aware."""
        demand = self.demand
        if demand is None:
            return None
        short = [
            demand.shortfalls_on(n, self.by_name[n].status.resource_usage.allocatable)
            for n in clusters
        ]
        unplaced = len(short) if wanted is None else min(wanted, len(short))
        found = shortage(demand.requests, unplaced, short)
        preempted = self.preempted()
        if found is not None and preempted:
            found = found.model_copy(update={"preempted": preempted})
        return found

    def preempted(self) -> list[str]:
        """Who took room this placement's bindings held: what its Unscheduled bindings'
        preempted-by annotations say (docs/priority.md, "Preemption"), by cluster."""
        said = []
        for binding in sorted(self.classified.unscheduled, key=lambda b: b.spec.target_cluster):
            value = binding.metadata.annotations.get(PREEMPTED_BY_ANNOTATION)
            mark = parse_preempted_by(value) if value else None
            if mark is not None:
                said.append(mark.who())
        return said

    def status(
        self,
        decisions: list[ClusterDecision],
        *,
        fulfilled: bool,
        count: int,
        short: Shortage | None = None,
    ) -> SnapshotStatusWrite | None:
        """The snapshot's status write with its Scheduled condition (decisions.status_write).

        For a capacity-aware placement the condition also says what room is missing, and a
        changed message is written even when the status is not (else it would stay stale)."""
        condition: Condition = scheduled_condition(self.snapshot, fulfilled=fulfilled, count=count)
        notes = [short.message()] if short is not None else []
        self.beyond_room = self._beyond_room(decisions)
        if self.beyond_room:
            notes.append(beyond_room_message(self.beyond_room))
        # last: scheduler.explain.explanation.ANNOTATION_NOTES_MARKER
        notes += self.annotation_problems
        if notes:
            condition = condition.model_copy(
                update={"message": "; ".join([condition.message, *notes])}
            )
        return status_write(
            self.snapshot,
            self.crp_generation,
            decisions,
            condition,
            self.now,
            # A placement that dropped its requests must not keep a message about room, nor
            # one whose annotations were fixed a message about them.
            compare_message=self.demand is not None
            or bool(self.annotation_problems)
            or self._says_ours(),
        )

    def _says_ours(self) -> bool:
        existing = self.snapshot.status.condition(SCHEDULED_CONDITION)
        message = existing.message if existing is not None else ""
        # Our annotations' problems all start "annotation fleet-scheduler.io/", which no
        # KubeFleet message says.
        return (
            SHORTAGE_MARKER in message
            or BEYOND_ROOM_MARKER in message
            or f"annotation {OWN_PREFIX}" in message
        )

    def _beyond_room(self, decisions: list[ClusterDecision]) -> list[BeyondRoom]:
        """The selected clusters whose room, beside the other placements' reservations, cannot
        hold this placement's binding there. A binding created by this cycle passed the room
        filter, so these are bindings the placement keeps: nothing more goes there until the
        cluster has room (its ledger holds them all: others' filters see it full)."""
        demand = self.demand
        if demand is None:
            return []
        out = []
        for decision in decisions:
            cluster = self.by_name.get(decision.cluster_name)
            if not decision.selected or cluster is None:
                continue
            short = demand.shortfalls_on(
                decision.cluster_name, cluster.status.resource_usage.allocatable
            )
            if short:
                reason = "; ".join(s.reason() for s in short)
                out.append(BeyondRoom(cluster=decision.cluster_name, reason=reason))
        return sorted(out, key=lambda b: b.cluster)

    def reusable(self) -> frozenset[str]:
        """Clusters holding a binding a cycle may re-point or revive instead of creating one."""
        c = self.classified
        return frozenset(b.spec.target_cluster for b in (*c.obsolete, *c.unscheduled))

    def name_check(self) -> FinalCheck:
        """Filters clusters that would need a new binding whose name cannot be valid."""
        return _NameCheck(self.placement, self.reusable())

    def new_binding_name(self, cluster: str) -> str:
        name = binding_name(self.placement, cluster, self.snapshot_name, self.used_names)
        self.used_names.add(name)
        return name

    def explanation(self, **fields: object) -> Explanation:
        return Explanation(
            placement_type=self.placement_type,
            snapshot=self.snapshot_name,
            score_mode=self.profile.score_mode.value,
            bindings=self.log.groups(),
            **fields,
        )


_NAMEABLE = "BindingName/nameable"
"""`ClusterFacts.derived` key: whether the cluster's name can be a binding name's cluster part
(a function of the name alone)."""


class _NameCheck:
    """The binding-name check of one cycle; `on_facts` is the same check on a cluster's facts,
    which the runner's batched filter has at hand."""

    def __init__(self, placement: str, reusable: frozenset[str]) -> None:
        self.placement = placement
        self.reusable = reusable
        self.placement_ok = name_problem(placement, "") is None

    def __call__(self, cluster: MemberCluster) -> Status | None:
        return self.on_facts(facts_of(cluster))

    def on_facts(self, facts: ClusterFacts) -> Status | None:
        name = facts.name
        if self.placement_ok:
            derived = facts.derived
            nameable = derived.get(_NAMEABLE)
            if nameable is None:
                nameable = derived[_NAMEABLE] = can_name_cluster_part(name)
            if nameable:
                return None
        if name in self.reusable:
            return None
        problem = name_problem(self.placement, name)
        return None if problem is None else Status.unschedulable(problem)


@dataclass
class CycleOutput:
    """What a placement type's cycle decided; `scheduler.schedule` adds the prelude writes."""

    outcome: Outcome
    explanation: Explanation
    create: list[ClusterResourceBinding] = field(default_factory=list)
    patch: list[BindingPatch] = field(default_factory=list)
    unschedule: list[BindingPatch] = field(default_factory=list)
    snapshot_status: SnapshotStatusWrite | None = None
    requeue: bool = False


def room_filtered(filtered: Iterable[Filtered]) -> list[str]:
    """The clusters ClusterResourcesFit filtered: it runs last, so they passed every other
    filter and only lacked room."""
    return [f.name for f in filtered if f.plugin == CLUSTER_RESOURCES_FIT]


def score_groups(ranked: Iterable[ScoredCluster]) -> list[ScoreGroup]:
    """Consecutive clusters with equal scores share one group (input is already ranked)."""
    groups: list[ScoreGroup] = []
    last: tuple[int, int, int, int | None] | None = None
    names: list[str] = []
    for scored in ranked:
        s = scored.score
        key = (
            s.topology_spread_score,
            s.affinity_score,
            s.obsolete_placement_affinity_score,
            scored.total,
        )
        if key != last:
            if last is not None:
                groups.append(_score_group(last, names))
            last, names = key, []
        names.append(scored.name)
    if last is not None:
        groups.append(_score_group(last, names))
    return groups


def _score_group(key: tuple[int, int, int, int | None], clusters: list[str]) -> ScoreGroup:
    topology, affinity, obsolete, total = key
    return ScoreGroup(
        topology=topology, affinity=affinity, obsolete=obsolete, total=total, clusters=clusters
    )


def filter_groups(filtered: Iterable[Filtered]) -> list[FilterGroup]:
    """One group per (plugin, reason), groups and names sorted."""
    by_reason: dict[tuple[str, str], list[str]] = {}
    text: dict[int, str] = {}  # a status shared by many clusters is rendered once
    for item in filtered:
        status = item.status
        reason = text.get(id(status))
        if reason is None:
            reason = text[id(status)] = str(status)
        by_reason.setdefault((item.plugin, reason), []).append(item.name)
    return [
        FilterGroup(plugin=plugin, reason=reason, clusters=sorted(clusters))
        for (plugin, reason), clusters in sorted(by_reason.items())
    ]
