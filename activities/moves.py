"""Applying rebalance moves in a placement's turn (docs/capacity.md, "Compaction and
rebalancing"): the new binding first, then the old one unscheduled, within the placement's
ClusterResourcePlacementDisruptionBudget, each move checked again on fresh reads.

`fleet-scheduler rebalance` and the `fleet-rebalance` Schedule only propose moves: they signal
the placement's workflow, whose next turn carries them (`TurnRequest.moves`) into this activity,
so every move and its reason is in the placement's own event history. A move goes ahead only
if, now:

- its binding is still active on the source cluster, and the placement holds nothing on the
  target (an affinity-enforcement move may hold Unscheduled bindings there: it revives one,
  `MoveCause.revives`);
- the target passes the placement's filters (a fresh cycle of the placement, without room);
- the budget allows one more disruption (KubeFleet's arithmetic, scheduler.moves.rebalance);
- the target has room: the reservation is made before the binding, as for any cycle. A
  binding whose placement's requests cannot be read now carries the reservation it holds (its
  room is what it consumes wherever it runs), and one that holds none is not moved.

Then: reserve on the target, create the new binding (Scheduled, same policy snapshot, annotated
with the binding it replaces), mark the old one Unscheduled, release its room. The budget is
KubeFleet's arithmetic on the placement's bindings as the earlier moves of the turn left them
(scheduler.moves.budgets). A retried activity finds a move half done (its new binding there, the old
one still active) and weighs it on the state from before it began, like any other move: it is
finished if the budget allows it now, and withdrawn otherwise (its new binding unscheduled, its
room released), so a placement never keeps a binding more than it asks for. Refused moves are
reported, not failures: the next rebalance proposes again from what it finds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Final

from activities.bindings import BindingNameTakenError, apply_patch, create_or_adopt
from activities.capacity import (
    NoRoomError,
    binding_key,
    is_active,
    release,
    requests_of,
    reserve,
)
from hub import names
from hub.client import HubClient
from hub.errors import ConflictError, NotFoundError
from hub.kinds import kinds_for, placement_key
from hub.types import (
    CapacityLedger,
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import CycleInput, Profile, schedule
from scheduler.bindings.naming import binding_name
from scheduler.bindings.writes import mark_unscheduled, new_binding, rebind
from scheduler.explain.readable import readable_reason
from scheduler.moves.budgets import (
    MOVED_FROM_ANNOTATION,
    MOVED_FROM_UID_ANNOTATION,
    BudgetState,
    available,
    budget_state,
    moved_from,
    replaces,
)
from scheduler.room.quantity import QuantityError, parse_quantity
from scheduler.room.requests import RequestsError, parse_requests
from workflows.models import MoveRequest

__all__ = [
    "ENFORCEMENT",
    "REBALANCE",
    "UNREADABLE_REFUSAL",
    "MoveCause",
    "MoveOutcome",
    "apply_moves",
    "budget_of",
    "feasible_clusters",
    "unschedule",
]


@dataclass(frozen=True)
class MoveCause:
    """Who asks for the moves: the words the bindings carry (the Unscheduled one's reason, the
    new one's decision reason) and which placements may be moved."""

    said: str
    """e.g. "rebalanced": the old binding is unscheduled as "rebalanced: <reason>"."""
    capacity_only: bool
    """Only capacity-aware ClusterResourcePlacements (rebalancing moves room)."""
    revives: bool = False
    """A target where the placement holds only Unscheduled bindings takes the move by reviving
    one of them, as a cycle would, instead of refusing it (affinity enforcement: standalone,
    nothing removes those bindings, and a binding lost elsewhere may have nowhere else to go)."""


REBALANCE = MoveCause(said="rebalanced", capacity_only=True)
ENFORCEMENT = MoveCause(said="affinity enforced", capacity_only=False, revives=True)


# Why a move of a binding whose placement's requests cannot be read is refused, when the
# binding holds no reservation to carry (its placement then waits for the annotation's fix).
UNREADABLE_REFUSAL: Final = "cannot be read and the binding holds no reservation to carry"


@dataclass
class MoveOutcome:
    """What the moves of one turn did, one line each, for the report and the history."""

    lines: list[str] = field(default_factory=list)
    moved: int = 0
    moved_to: dict[str, str] = field(default_factory=dict)
    """Binding moved -> the cluster it moved to (an earlier attempt's finished moves too)."""
    no_room: list[str] = field(default_factory=list)
    """The bindings whose move was refused for want of room on its target."""
    unreadable: list[str] = field(default_factory=list)
    """The bindings whose move was refused until their placement's requests read again: a
    change of that annotation runs a turn of its own, so nothing needs to try again before."""


def budget_of(
    client: HubClient,
    placement: ClusterResourcePlacement,
    bindings: Sequence[ClusterResourceBinding],
) -> BudgetState:
    """KubeFleet's view of the placement for its disruption budget, read now (no budget: no
    limit). A ClusterResourcePlacementDisruptionBudget names a ClusterResourcePlacement; a
    ResourcePlacement has none."""
    if placement.metadata.namespace:
        return budget_state(None, placement, bindings)
    try:
        budget = client.get(ClusterResourcePlacementDisruptionBudget, placement.name)
    except NotFoundError:
        budget = None
    return budget_state(budget, placement, bindings)


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
    cause: MoveCause = REBALANCE,
) -> MoveOutcome:
    """Make the moves that still hold (see the module doc); say what happened to each. A
    placement without requests moves without reservations (affinity enforcement)."""
    outcome = MoveOutcome()
    if not moves:
        return outcome
    namespace = placement.metadata.namespace
    key = placement_key(namespace, placement.name)
    kinds = kinds_for(namespace)
    text = requests_of(placement)
    # Capacity-aware: its bindings hold room on the ledgers, whether or not its requests can be
    # read now (a typo does not free the room its bindings hold, see `_carried`). A
    # ResourcePlacement's too: its cycles reserve as a ClusterResourcePlacement's do.
    aware = text is not None
    try:
        requests = parse_requests(text) if text is not None else None
    except RequestsError:
        requests = None
    if cause.capacity_only and (requests is None or namespace):
        outcome.lines = [
            f"refused {m.binding}: the placement is not a capacity-aware ClusterResourcePlacement"
            for m in moves
        ]
        return outcome
    bindings = list(
        client.list(
            kinds.binding, {names.PARENT_PLACEMENT_LABEL: placement.name}, namespace=namespace
        ).items
    )
    made = {m.binding: _made_by(m, bindings, cause) for m in moves}
    # KubeFleet's arithmetic on the bindings as they are, but for the new bindings of moves half
    # done by an earlier attempt (their old binding still active): each of those is weighed
    # again below, on the state from before it began, like a move not yet made. A move an
    # earlier attempt finished is part of the state, as any earlier move is.
    by_name = {b.metadata.name: b for b in bindings}
    budget = budget_of(client, placement, bindings).without(
        new
        for source, new in made.items()
        if new is not None and (old := by_name.get(source)) is not None and is_active(old)
    )
    feasible = feasible_clusters(snapshot, clusters, bindings, profile, now())
    allocatable = {c.metadata.name: c.status.resource_usage.allocatable for c in clusters}
    used = {b.metadata.name for b in bindings}
    for move in moves:
        by_name = {b.metadata.name: b for b in bindings}
        old = by_name.get(move.binding)
        new = made[move.binding]
        if new is not None and (old is None or not is_active(old)):
            # An earlier attempt made the whole move and failed after: only the release of the
            # old binding's room may be missing (a release is harmless to repeat).
            if old is not None and aware:
                release(client, old.spec.target_cluster, [binding_key(old)])
            outcome.moved += 1
            outcome.moved_to[move.binding] = move.target
            outcome.lines.append(
                f"moved {move.binding} {move.source} -> {move.target} as "
                f"{new.metadata.name}: {move.reason} (finished by an earlier attempt)"
            )
            continue
        stale = _revivable(move, bindings) if cause.revives and new is None else None
        refusal = _refusal(move, old, bindings, feasible, new, stale)
        if refusal is None and not budget.allows_one():
            allowed = budget.allowed()
            refusal = f"the disruption budget allows {allowed} move(s) now ({_said(budget)})"
        if refusal is not None:
            if new is not None:
                _withdraw(client, new, f"{cause.said} move withdrawn: {refusal}", aware)
                refusal += f"; its new binding {new.metadata.name} was withdrawn"
            outcome.lines.append(
                f"refused {move.binding} {move.source} -> {move.target}: "
                f"{readable_reason(refusal)}"
            )
            continue
        assert old is not None
        if new is None:
            name = (
                stale.metadata.name
                if stale is not None
                else binding_name(placement.name, move.target, snapshot.name, used)
            )
            amounts = requests
            if aware and amounts is None:
                amounts = _carried(client, old, key)
            if aware and amounts is None:
                outcome.lines.append(
                    f"refused {move.binding} {move.source} -> {move.target}: its placement's "
                    f"{names.REQUESTS_ANNOTATION} {UNREADABLE_REFUSAL}: nothing says what room "
                    "it takes"
                )
                outcome.unreadable.append(move.binding)
                continue
            try:
                if amounts is not None:
                    reserve(
                        client,
                        move.target,
                        allocatable.get(move.target, {}),
                        name,
                        key,
                        amounts,
                        now,
                    )
                if stale is not None:
                    new = _revive(client, stale, move, snapshot.name, old, cause)
                else:
                    new = _create(client, placement, move, snapshot.name, name, old, cause)
            except (NoRoomError, BindingNameTakenError) as exc:
                if aware:
                    release(client, move.target, [name])
                outcome.lines.append(f"refused {move.binding}: {readable_reason(str(exc))}")
                if isinstance(exc, NoRoomError):
                    outcome.no_room.append(move.binding)
                continue
            used.add(name)
            bindings = [b for b in bindings if b is not stale] + [new]
        budget = budget.after_move(old_was_available=available(old))
        unschedule(client, old, f"{cause.said}: {move.reason}")
        if aware:
            release(client, move.source, [binding_key(old)])
        bindings = [
            _as_unscheduled(b) if b.metadata.name == old.metadata.name else b for b in bindings
        ]
        outcome.moved += 1
        outcome.moved_to[move.binding] = move.target
        outcome.lines.append(
            f"moved {move.binding} {move.source} -> {move.target} as {new.metadata.name}: "
            f"{move.reason}"
        )
    return outcome


def _said(budget: BudgetState) -> str:
    bound = (
        f"maxUnavailable {budget.max_unavailable}"
        if budget.max_unavailable is not None
        else f"minAvailable {budget.min_available}"
    )
    return f"{bound}, {budget.available} of {budget.bindings} binding(s) available"


def _as_unscheduled(binding: ClusterResourceBinding) -> ClusterResourceBinding:
    spec = binding.spec.model_copy(update={"state": names.STATE_UNSCHEDULED})
    return binding.model_copy(update={"spec": spec})


def _create(
    client: HubClient,
    placement: ClusterResourcePlacement,
    move: MoveRequest,
    snapshot: str,
    name: str,
    old: ClusterResourceBinding,
    cause: MoveCause,
) -> ClusterResourceBinding:
    decision = ClusterDecision(
        cluster_name=move.target, selected=True, reason=_decided(move, cause)
    )
    binding = new_binding(
        name, placement.name, move.target, snapshot, decision, placement.metadata.namespace
    )
    marks = {MOVED_FROM_ANNOTATION: move.binding}
    if old.metadata.uid:
        marks[MOVED_FROM_UID_ANNOTATION] = old.metadata.uid
    meta = binding.metadata.model_copy(update={"annotations": marks})
    created, _ = create_or_adopt(client, binding.model_copy(update={"metadata": meta}))
    if not replaces(created, old):
        raise BindingNameTakenError(f"binding {name!r} exists and is another move's")
    return created


def _revive(
    client: HubClient,
    stale: ClusterResourceBinding,
    move: MoveRequest,
    snapshot: str,
    old: ClusterResourceBinding,
    cause: MoveCause,
) -> ClusterResourceBinding:
    """The move's new binding made of the placement's Unscheduled one on the target: Scheduled
    at the latest snapshot with the move's decision, annotated as a created one is (a retried
    turn finds it so), its previous-binding-state gone (scheduler.bindings.writes.rebind). A
    Conflict (it changed since read) fails the attempt; the retry reads it again."""
    decision = ClusterDecision(
        cluster_name=move.target, selected=True, reason=_decided(move, cause)
    )
    revived, patch = rebind(
        stale,
        state=names.STATE_SCHEDULED,
        snapshot_name=snapshot,
        decision=decision,
        clear_previous_state=True,
        why=f"{cause.said}: revived for {move.binding}",
    )
    # The marks of a move it once was the new binding of go (a uid of null: removed).
    marks: dict[str, str | None] = {
        MOVED_FROM_ANNOTATION: move.binding,
        MOVED_FROM_UID_ANNOTATION: old.metadata.uid or None,
    }
    assert patch is not None  # an Unscheduled binding always changes state
    metadata = patch.merge_patch.setdefault("metadata", {})
    assert isinstance(metadata, dict)
    annotations = metadata.setdefault("annotations", {})
    assert isinstance(annotations, dict)
    annotations.update(marks)
    apply_patch(client, patch)
    kept = {**revived.metadata.annotations, **marks}
    meta = revived.metadata.model_copy(
        update={"annotations": {k: v for k, v in kept.items() if v is not None}}
    )
    return revived.model_copy(update={"metadata": meta})


def _revivable(
    move: MoveRequest, bindings: Sequence[ClusterResourceBinding]
) -> ClusterResourceBinding | None:
    """The binding a move onto its target revives: the first, by name, of the placement's
    Unscheduled bindings there, when it holds no other binding there (None otherwise; any
    others stay Unscheduled, which counts for nothing)."""
    there = [
        b for b in bindings if b.spec.target_cluster == move.target and not b.metadata.deleting
    ]
    if not there or any(b.spec.state != names.STATE_UNSCHEDULED for b in there):
        return None
    return min(there, key=lambda b: b.metadata.name)


def unschedule(client: HubClient, binding: ClusterResourceBinding, why: str) -> None:
    """Mark the binding Unscheduled; a conflict (the rollout controller wrote its status) is
    read again, up to a few times."""
    for _ in range(3):
        try:
            apply_patch(client, mark_unscheduled(binding, why))
            return
        except ConflictError:
            binding = client.get(
                type(binding), binding.metadata.name, namespace=binding.metadata.namespace
            )
            if not is_active(binding):
                return
    apply_patch(client, mark_unscheduled(binding, why))


def _withdraw(client: HubClient, new: ClusterResourceBinding, why: str, aware: bool) -> None:
    """Take back the new binding of a half-done move that may not be finished: unscheduled,
    its room released (`aware`: a capacity-aware placement's). The placement is left with the
    binding it had."""
    unschedule(client, new, why)
    if aware:
        release(client, new.spec.target_cluster, [binding_key(new)])


def _carried(
    client: HubClient, old: ClusterResourceBinding, placement: str
) -> dict[str, Fraction] | None:
    """The room the binding holds on its cluster's ledger for its placement, for a move of a
    binding whose placement's requests cannot be read now: the move takes that room to the
    target (and must fit there), as the binding consumes it wherever it runs. None when it holds
    none that can be read: nothing says what room it would take."""
    try:
        ledger = client.get(CapacityLedger, old.spec.target_cluster)
    except NotFoundError:
        return None
    held = ledger.spec.reservations.get(binding_key(old))
    if held is None or held.placement != placement or not held.requests:
        return None
    try:
        return {r: parse_quantity(q) for r, q in held.requests.items()}
    except QuantityError:
        return None


def _made_by(
    move: MoveRequest, bindings: Sequence[ClusterResourceBinding], cause: MoveCause
) -> ClusterResourceBinding | None:
    """The new binding an earlier attempt of this very move created, if it is there: active on
    the target, made to replace the move's binding (or, made before the moved-from annotations,
    carrying this move's decision reason)."""
    old = next((b for b in bindings if b.metadata.name == move.binding), None)
    for binding in bindings:
        if binding.spec.target_cluster != move.target or not is_active(binding):
            continue
        if old is not None and replaces(binding, old):
            return binding
        source = moved_from(binding)
        if (old is None and source == move.binding) or (
            source is None and binding.spec.cluster_decision.reason == _decided(move, cause)
        ):
            return binding
    return None


def _refusal(
    move: MoveRequest,
    old: ClusterResourceBinding | None,
    bindings: Sequence[ClusterResourceBinding],
    feasible: frozenset[str],
    half_done: ClusterResourceBinding | None,
    revived: ClusterResourceBinding | None = None,
) -> str | None:
    if old is None or not is_active(old):
        return "the binding is gone or no longer active"
    if old.spec.target_cluster != move.source:
        return f"the binding is on {old.spec.target_cluster}, not {move.source}"
    other = next(
        (b for b in bindings if b is not half_done and is_active(b) and replaces(b, old)), None
    )
    if other is not None:
        # Another move of it (affinity enforcement's, or an earlier proposal's) is half done:
        # a second new binding would leave the placement one above what it asks for.
        return f"another move of the binding is under way (to {other.spec.target_cluster})"
    held = [
        b
        for b in bindings
        if b.spec.target_cluster == move.target and not b.metadata.deleting and b is not half_done
    ]
    if held and revived is None:
        # an Unscheduled one too: a cycle would revive it, a move must not add a second (an
        # enforcement move revives it itself: `revived`)
        return f"the placement already has a binding on {move.target} ({held[0].spec.state})"
    if move.target not in feasible:
        return f"{move.target} does not pass the placement's filters"
    return None


def _decided(move: MoveRequest, cause: MoveCause) -> str:
    """The new binding's decision reason (bindings made before the moved-from annotation are
    known by it)."""
    return f"{cause.said}: {move.reason}"
