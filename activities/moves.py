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
from hub.errors import AlreadyExistsError, ConflictError, NotFoundError
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
    """KubeFleet's eviction rule: the binding's Available condition is True, observed at the
    binding's current generation."""
    for condition in binding.status.get("conditions", []) or []:
        if condition.get("type") == names.BINDING_AVAILABLE_CONDITION:
            observed = condition.get("observedGeneration") or 0
            return condition.get("status") == names.TRUE and observed == (
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
    # As KubeFleet's eviction controller counts: every binding of the placement, whatever its
    # state; available ones by their condition.
    return disruptions_allowed(
        desired,
        len(bindings),
        sum(1 for b in bindings if available(b)),
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
    charged = 0
    for move in moves:
        by_name = {b.metadata.name: b for b in bindings}
        old = by_name.get(move.binding)
        present = {b.spec.target_cluster: b for b in bindings if not b.metadata.deleting}
        half_done = _half_done(move, present)
        refusal = _refusal(move, old, present, feasible, half_done)
        # A half-done move (an earlier attempt created the new binding, then failed) costs
        # nothing more: the budget read now already counts its new binding as unavailable.
        if refusal is None and half_done is None and allowed is not None and charged >= allowed:
            refusal = f"the disruption budget allows {allowed} move(s) now"
        if refusal is not None:
            outcome.lines.append(
                f"refused {move.binding} {move.source} -> {move.target}: {refusal}"
            )
            continue
        assert old is not None
        new = half_done
        if new is None:
            name = binding_name(placement.name, move.target, snapshot.name, used)
            try:
                reserve(
                    client, move.target, allocatable.get(move.target, {}), name, key, requests, now
                )
                new = _create(client, placement.name, move, snapshot.name, name)
            except (NoRoomError, _NotOurs) as exc:
                release(client, move.target, [name])
                outcome.lines.append(f"refused {move.binding}: {exc}")
                continue
            charged += 1
            used.add(name)
            bindings.append(new)
        _unschedule(client, old, f"rebalanced: {move.reason}")
        release(client, move.source, [binding_key(old)])
        bindings = [
            b.model_copy(
                update={"spec": b.spec.model_copy(update={"state": names.STATE_UNSCHEDULED})}
            )
            if b.metadata.name == old.metadata.name
            else b
            for b in bindings
        ]
        outcome.moved += 1
        outcome.lines.append(
            f"moved {move.binding} {move.source} -> {move.target} as {new.metadata.name}: "
            f"{move.reason}"
        )
    return outcome


class _NotOurs(Exception):
    """The new binding's name is taken by a binding that is not this move's."""


def _create(
    client: HubClient, placement: str, move: MoveRequest, snapshot: str, name: str
) -> ClusterResourceBinding:
    decision = ClusterDecision(cluster_name=move.target, selected=True, reason=_decided(move))
    try:
        return client.create(new_binding(name, placement, move.target, snapshot, decision))
    except AlreadyExistsError:
        existing = client.get(ClusterResourceBinding, name)
    if (
        existing.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) != placement
        or existing.spec.target_cluster != move.target
        or existing.metadata.deleting
    ):
        raise _NotOurs(f"binding {name!r} exists and is not this move's to adopt")
    return existing


def _unschedule(client: HubClient, binding: ClusterResourceBinding, why: str) -> None:
    """Mark the old binding Unscheduled; a conflict (the rollout controller wrote its status)
    is read again, up to a few times."""
    for _ in range(3):
        try:
            apply_patch(client, mark_unscheduled(binding, why))
            return
        except ConflictError:
            binding = client.get(ClusterResourceBinding, binding.metadata.name)
            if not is_active(binding):
                return
    apply_patch(client, mark_unscheduled(binding, why))


def _half_done(
    move: MoveRequest, present: dict[str, ClusterResourceBinding]
) -> ClusterResourceBinding | None:
    """The new binding an earlier attempt of this very move created, if it is there."""
    held = present.get(move.target)
    if held is not None and is_active(held) and held.spec.cluster_decision.reason == _decided(move):
        return held
    return None


def _refusal(
    move: MoveRequest,
    old: ClusterResourceBinding | None,
    present: dict[str, ClusterResourceBinding],
    feasible: frozenset[str],
    half_done: ClusterResourceBinding | None,
) -> str | None:
    if old is None or not is_active(old):
        return "the binding is gone or no longer active"
    if old.spec.target_cluster != move.source:
        return f"the binding is on {old.spec.target_cluster}, not {move.source}"
    held = present.get(move.target)
    if held is not None and half_done is None:
        # an Unscheduled one too: a cycle would revive it, a move must not add a second
        return f"the placement already has a binding on {move.target} ({held.spec.state})"
    if move.target not in feasible:
        return f"{move.target} does not pass the placement's filters"
    return None


def _decided(move: MoveRequest) -> str:
    """The new binding's decision reason; a retried turn knows its half-done move by it."""
    return f"rebalanced: {move.reason}"
