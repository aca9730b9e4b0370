"""Applying rebalance moves in a placement's turn (docs/capacity.md, "Compaction and
rebalancing"): the new binding first, then the old one unscheduled, within the placement's
ClusterResourcePlacementDisruptionBudget, each move checked again on fresh reads.

`fleet-scheduler rebalance` and the `fleet-rebalance` Schedule only propose moves: they signal
the placement's workflow, whose next turn carries them (`TurnRequest.moves`) into this activity,
so every move and its reason is in the placement's own event history. A move goes ahead only
if, now:

- its binding is still active on the source cluster, and the placement holds nothing on the
  target;
- the target passes the placement's filters (a fresh cycle of the placement, without room);
- the budget allows one more disruption (KubeFleet's arithmetic, scheduler.rebalance);
- the target has room: the reservation is made before the binding, as for any cycle.

Then: reserve on the target, create the new binding (Scheduled, same policy snapshot), mark the
old one Unscheduled, release its room. A retried activity finds a move half done (the new
binding there, the old one still active) and finishes it. Refused moves are reported, not
failures: the next rebalance proposes again from what it finds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from activities.bindings import apply_patch
from activities.capacity import (
    NoRoomError,
    binding_key,
    is_active,
    release,
    requests_of,
    reserve,
)
from activities.models import MoveRequest
from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, NotFoundError
from hub.kinds import kinds_for, placement_key
from hub.types import (
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import CycleInput, Profile, schedule
from scheduler.naming import binding_name
from scheduler.rebalance import disruptions_allowed
from scheduler.requests import RequestsError, parse_requests
from scheduler.writes import mark_unscheduled, new_binding

__all__ = [
    "MoveOutcome",
    "allowed_by",
    "apply_moves",
    "available",
    "budget_for",
    "feasible_clusters",
]


@dataclass
class MoveOutcome:
    """What the moves of one turn did, one line each, for the report and the history."""

    lines: list[str] = field(default_factory=list)
    moved: int = 0


def available(binding: ClusterResourceBinding) -> bool:
    """KubeFleet's eviction rule: the binding's Available condition is True for its generation."""
    for condition in binding.status.get("conditions", []) or []:
        if condition.get("type") == names.BINDING_AVAILABLE_CONDITION:
            observed = condition.get("observedGeneration") or 0
            return condition.get("status") == names.TRUE and observed >= (
                binding.metadata.generation or 0
            )
    return False


def allowed_by(
    budget: ClusterResourcePlacementDisruptionBudget | None,
    placement: ClusterResourcePlacement,
    bindings: Sequence[ClusterResourceBinding],
) -> int | None:
    """Disruptions `budget` allows the placement now, given its bindings (None: no budget)."""
    if budget is None:
        return None
    policy = placement.spec.policy
    desired = (policy.number_of_clusters or 0) if policy is not None else 0
    active = [b for b in bindings if is_active(b)]
    return disruptions_allowed(
        desired,
        len(active),
        sum(1 for b in active if available(b)),
        max_unavailable=budget.spec.max_unavailable,
        min_available=budget.spec.min_available,
    )


def budget_for(
    client: HubClient,
    placement: ClusterResourcePlacement,
    bindings: Sequence[ClusterResourceBinding],
) -> int | None:
    """Disruptions the placement's budget allows now (None: it has none, no limit)."""
    try:
        budget = client.get(ClusterResourcePlacementDisruptionBudget, placement.name)
    except NotFoundError:
        return None
    return allowed_by(budget, placement, bindings)


def feasible_clusters(
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: list[MemberCluster],
    bindings: list[ClusterResourceBinding],
    profile: Profile | None,
    now: datetime,
) -> frozenset[str]:
    """The clusters the placement's filters pass, room aside: a fresh cycle, written nowhere."""
    result = schedule(
        CycleInput(snapshot=snapshot, clusters=clusters, bindings=bindings, now=now, fresh=True),
        profile,
    )
    explanation = result.explanation
    return frozenset(
        c for group in (*explanation.picked, *explanation.not_picked) for c in group.clusters
    )


def apply_moves(
    client: HubClient,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    moves: Sequence[MoveRequest],
    clusters: list[MemberCluster],
    profile: Profile | None,
    now: Callable[[], datetime],
) -> MoveOutcome:
    """Make the moves that still hold (see the module doc); say what happened to each."""
    outcome = MoveOutcome()
    if not moves:
        return outcome
    key = placement_key(placement.metadata.namespace, placement.name)
    kinds = kinds_for(placement.metadata.namespace)
    text = requests_of(placement)
    try:
        requests = parse_requests(text) if text is not None else None
    except RequestsError:
        requests = None
    if requests is None or placement.metadata.namespace:
        outcome.lines = [
            f"refused {m.binding}: the placement is not a capacity-aware ClusterResourcePlacement"
            for m in moves
        ]
        return outcome
    bindings = list(
        client.list(kinds.binding, {names.PARENT_PLACEMENT_LABEL: placement.name}).items
    )
    allowed = budget_for(client, placement, bindings)
    feasible = feasible_clusters(snapshot, clusters, bindings, profile, now())
    allocatable = {c.metadata.name: c.status.resource_usage.allocatable for c in clusters}
    used = {b.metadata.name for b in bindings}
    for move in moves:
        by_name = {b.metadata.name: b for b in bindings}
        old = by_name.get(move.binding)
        holding = {b.spec.target_cluster: b for b in bindings if is_active(b)}
        refusal = _refusal(move, old, holding, feasible)
        if refusal is None and allowed is not None and outcome.moved >= allowed:
            refusal = f"the disruption budget allows {allowed} move(s) now"
        if refusal is not None:
            outcome.lines.append(
                f"refused {move.binding} {move.source} -> {move.target}: {refusal}"
            )
            continue
        assert old is not None
        new = holding.get(move.target)
        if new is None:  # not a half-done move from an earlier attempt
            name = binding_name(placement.name, move.target, snapshot.name, used)
            try:
                reserve(
                    client,
                    move.target,
                    allocatable.get(move.target, {}),
                    name,
                    key,
                    requests,
                    now,
                )
            except NoRoomError as exc:
                outcome.lines.append(f"refused {move.binding}: {exc}")
                continue
            decision = ClusterDecision(
                cluster_name=move.target, selected=True, reason=_decided(move)
            )
            created = new_binding(name, placement.name, move.target, snapshot.name, decision)
            try:
                new = client.create(created)
            except AlreadyExistsError:
                new = client.get(ClusterResourceBinding, name)
            used.add(name)
            bindings.append(new)
        apply_patch(client, mark_unscheduled(old, f"rebalanced: {move.reason}"))
        release(client, move.source, [binding_key(old)])
        bindings = [b for b in bindings if b.metadata.name != old.metadata.name]
        outcome.moved += 1
        outcome.lines.append(
            f"moved {move.binding} {move.source} -> {move.target} as {new.metadata.name}: "
            f"{move.reason}"
        )
    return outcome


def _refusal(
    move: MoveRequest,
    old: ClusterResourceBinding | None,
    holding: dict[str, ClusterResourceBinding],
    feasible: frozenset[str],
) -> str | None:
    if old is None or not is_active(old):
        return "the binding is gone or no longer active"
    if old.spec.target_cluster != move.source:
        return f"the binding is on {old.spec.target_cluster}, not {move.source}"
    held = holding.get(move.target)
    if held is not None and held.spec.cluster_decision.reason != _decided(move):
        return f"the placement already has a binding on {move.target}"
    if move.target not in feasible:
        return f"{move.target} does not pass the placement's filters"
    return None


def _decided(move: MoveRequest) -> str:
    """The new binding's decision reason; a retried turn knows its half-done move by it."""
    return f"rebalanced: {move.reason}"
