"""Affinity enforced during execution, in a placement's turn (docs/enforcement.md).

For a placement annotated `fleet-scheduler.io/affinity-enforcement: DuringExecution`, each turn
first judges the clusters its active bindings sit on by the placement's required filters
(scheduler.moves.enforcement). For each binding whose cluster no longer passes:

- PickN: a move (activities.moves, the rebalance moves' machinery): a new binding on the best
  cluster that passes, then the old one Unscheduled, within the disruption budget;
- PickAll: the binding is marked Unscheduled, within the disruption budget;
- PickFixed: the binding is kept, and the turn says so.

Each outcome is one line in the turn's result (`TurnResult.moves`), so the placement's history
says what happened and why ("cluster lost env=prod"). What the budget holds back is tried again
after `RETRY_AFTER_SECONDS` (the turn asks for a timer: no event says the budget has room
again); a move whose target has no room tries the next target, a few a turn. A binding with
nowhere to go waits for a cluster event: a change that makes a cluster pass the placement's
filters reaches it (scheduler.moves.enforcement.gives_somewhere_to_go,
scheduler.requeue.watch_rules).

Safe to repeat: a retried turn finds a finished move's old binding Unscheduled (no longer
judged), a half-done move by its new binding's moved-from annotation (the same target again,
finished or withdrawn by the moves' own rules), and a PickAll binding already Unscheduled."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from activities.capacity import binding_key, is_active, release, requests_of
from activities.moves import ENFORCEMENT, apply_moves, budget_of, unschedule
from hub import names
from hub.client import HubClient
from hub.kinds import kinds_for
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import Profile
from scheduler.cycles.schedule import placement_type_of
from scheduler.moves.budgets import available, moved_bindings
from scheduler.moves.enforcement import Lost, enforcement_of, lost_bindings, replacement_order
from workflows.models import MoveRequest

__all__ = ["RETRY_AFTER_SECONDS", "Enforcement", "enforce"]

# How many lines one turn's result says (each lost binding is one): a fleet-wide relabel may
# take thousands of a PickAll placement's bindings at once, and the result is in history.
LINES_SHOWN: Final = 20
MORE_LINES: Final = "... and {count} more binding(s) alike"

# How soon a turn whose enforcement the disruption budget (or room) held back runs again: the
# budget frees up as the new bindings become available, which no watch event reports.
RETRY_AFTER_SECONDS: Final = 30.0

# How many targets, best first, one lost binding tries in one turn while each has no room for
# it (capacity-aware placements: the targets are ranked without room).
TARGETS_TRIED: Final = 5

KEPT_FIXED: Final = "kept {binding} on {cluster} (a PickFixed placement keeps its targets): {why}"
KEPT_NOWHERE: Final = (
    "kept {binding} on {cluster}: {why}; no other cluster passes the placement's filters"
)
UNSCHEDULED: Final = "unscheduled {binding} on {cluster}: {why}"
REFUSED_BUDGET: Final = (
    "kept {binding} on {cluster} for now: {why}; the disruption budget allows no more now"
)


@dataclass
class Enforcement:
    """What enforcement did in one turn: one line per lost binding, and whether to try again."""

    lines: list[str] = field(default_factory=list)
    retry: bool = False


def enforce(
    client: HubClient,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    read_clusters: Callable[[], list[MemberCluster]],
    profile: Profile | None,
    now: Callable[[], datetime],
) -> Enforcement:
    """Judge the placement's bound clusters and act on the lost ones (the module doc); the
    fleet is read only for a placement that asks for enforcement."""
    done = Enforcement()
    enforced, problem = enforcement_of(placement)
    if problem is not None:
        done.lines.append(problem)
    if not enforced:
        return done
    namespace = placement.metadata.namespace
    kinds = kinds_for(namespace)
    bindings = list(
        client.list(
            kinds.binding, {names.PARENT_PLACEMENT_LABEL: placement.name}, namespace=namespace
        ).items
    )
    clusters = read_clusters()
    lost, problem = lost_bindings(snapshot, clusters, bindings, profile, now())
    if problem is not None:
        done.lines.append(problem)
    if not lost:
        return done
    kind = placement_type_of(snapshot)
    if kind == names.PICK_FIXED:
        done.lines += [
            KEPT_FIXED.format(
                binding=item.binding.metadata.name, cluster=item.cluster, why=item.reason
            )
            for item in lost
        ]
    elif kind == names.PICK_ALL:
        _unschedule_lost(client, placement, bindings, lost, done)
    else:
        _move_lost(client, placement, snapshot, clusters, bindings, lost, profile, now, done)
    if len(done.lines) > LINES_SHOWN:
        more = len(done.lines) - LINES_SHOWN
        done.lines = [*done.lines[:LINES_SHOWN], MORE_LINES.format(count=more)]
    return done


def _unschedule_lost(
    client: HubClient,
    placement: ClusterResourcePlacement,
    bindings: list[ClusterResourceBinding],
    lost: Sequence[Lost],
    done: Enforcement,
) -> None:
    """PickAll: each lost binding Unscheduled while the budget allows, its room released."""
    budget = budget_of(client, placement, bindings)
    capacity_aware = requests_of(placement) is not None  # a ResourcePlacement's too
    for item in lost:
        binding = item.binding
        said = {"binding": binding.metadata.name, "cluster": item.cluster, "why": item.reason}
        if not budget.allows_one():
            done.lines.append(REFUSED_BUDGET.format(**said))
            done.retry = True
            continue
        unschedule(client, binding, f"{ENFORCEMENT.said}: {item.reason}")
        if capacity_aware:
            release(client, item.cluster, [binding_key(binding)])
        budget = budget.after_unschedule(available(binding))
        done.lines.append(UNSCHEDULED.format(**said))


def _move_lost(
    client: HubClient,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    clusters: list[MemberCluster],
    bindings: list[ClusterResourceBinding],
    lost: Sequence[Lost],
    profile: Profile | None,
    now: Callable[[], datetime],
    done: Enforcement,
) -> None:
    """PickN: a move per lost binding, to the best cluster that passes (the next best, up to
    `TARGETS_TRIED` of them, while one has no room for it); a half-done move of an earlier
    attempt keeps its target."""
    targets = iter(replacement_order(snapshot, clusters, bindings, lost, profile, now()))
    # Half-done moves of an earlier attempt (old binding -> its active new one) keep their target.
    made = {old.metadata.name: new for new, old in moved_bindings(bindings) if is_active(new)}
    moves: list[MoveRequest] = []
    for item in lost:
        binding = item.binding
        earlier = made.get(binding.metadata.name)
        target = earlier.spec.target_cluster if earlier is not None else next(targets, None)
        if target is None:
            done.lines.append(
                KEPT_NOWHERE.format(
                    binding=binding.metadata.name, cluster=item.cluster, why=item.reason
                )
            )
            continue
        moves.append(
            MoveRequest(
                binding=binding.metadata.name,
                source=item.cluster,
                target=target,
                reason=item.reason,
            )
        )
    # The targets are ranked without room: a move refused for want of room on its target tries
    # the next one, a few times a turn; what is left is tried again later.
    for attempt in range(1, TARGETS_TRIED + 1):
        if not moves:
            return
        outcome = apply_moves(
            client, placement, snapshot, moves, clusters, profile, now, cause=ENFORCEMENT
        )
        done.lines += outcome.lines
        short = set(outcome.no_room)
        if outcome.moved + len(short) + len(outcome.unreadable) < len(moves):
            done.retry = True  # refused for another reason (the budget): try again later
        again = []
        for move in moves:
            if move.binding not in short:
                continue
            target = next(targets, None) if attempt < TARGETS_TRIED else None
            if target is None:
                done.retry = True  # room may be freed: no event of ours says so
            else:
                again.append(move.model_copy(update={"target": target}))
        moves = again
