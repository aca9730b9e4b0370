"""Rebalancing (docs/capacity.md, "Compaction and rebalancing"): `fleet-scheduler rebalance`
and the `fleet-rebalance` Schedule's activity (here) read the hub, plan moves
(scheduler.moves.rebalance) and propose them to the placements' workflows with the `move` signal;
each workflow's next turn makes those that still hold (activities.moves), so every move is in
its placement's history with its reason.

Which bindings may move: the active bindings of ClusterResourcePlacements that are PickN,
capacity-aware (`fleet-scheduler.io/requests`) and opt in with `fleet-scheduler.io/rebalance:
allowed`, and that hold a reservation (one its placement's next turn has not made yet stays
where it is, its requests counted all the same). Every other active binding pins its cluster:
it is in use whatever moves. Where a binding may go: the clusters its placement's filters pass
(a fresh cycle of the placement, room aside: the planner counts room itself), and within its
placement's ClusterResourcePlacementDisruptionBudget: as many moves in a row as KubeFleet's
arithmetic allows (scheduler.moves.budgets)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Final

from temporalio import activity
from temporalio.client import (
    Client,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.capacity import Ledgers, binding_key, held, is_active, requests_of
from activities.moves import feasible_clusters
from hub import names as hub_names
from hub.client import HubClient
from hub.errors import NotFoundError
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import Profile
from scheduler.moves.budgets import budget_state
from scheduler.moves.rebalance import Fleet, Movable, Move, Strategy, in_use, plan_moves
from scheduler.opt_in.placement_annotations import RebalanceError, parse_rebalance
from scheduler.room.capacity import ClusterCapacity
from scheduler.room.quantity import QuantityError, parse_quantity
from scheduler.room.requests import RequestsError, parse_requests
from workflows import names
from workflows.models import MoveRequest, MovesRequest, RebalanceInput, RebalanceReport

__all__ = [
    "RebalanceFleet",
    "RebalancePlan",
    "plan_rebalance",
    "propose",
]

log = logging.getLogger(__name__)

SIGNAL_CONCURRENCY: Final = 16


@dataclass
class RebalancePlan:
    strategy: Strategy
    moves: list[Move]
    before: Fleet
    movable: list[Movable]
    skipped: dict[str, str] = field(default_factory=dict)
    """Placement -> why it is left alone although it asked to be rebalanced."""

    def clusters_in_use(self) -> tuple[int, int]:
        """(before, after) the moves."""
        where = {m.binding: m.cluster for m in self.movable}
        for move in self.moves:
            where[move.binding] = move.target
        after = [
            Movable(m.placement, m.binding, where[m.binding], m.requests, m.targets)
            for m in self.movable
        ]
        return len(in_use(self.before, self.movable)), len(in_use(self.before, after))


def plan_rebalance(
    hub: HubClient,
    strategy: Strategy,
    *,
    profile: Profile | None = None,
    placement: str | None = None,
    now: datetime | None = None,
) -> RebalancePlan:
    """Read the hub and plan; writes nothing. `placement` narrows the moves to one placement
    (the others' bindings then stay where they are)."""
    now = now or datetime.now(UTC)
    clusters = list(hub.list(MemberCluster).items)
    ledgers = Ledgers.read(hub)
    placements = list(hub.list(ClusterResourcePlacement).items)
    latest = {hub_names.IS_LATEST_SNAPSHOT_LABEL: "true"}
    snapshots = {
        s.placement_name: s for s in hub.list(ClusterSchedulingPolicySnapshot, latest).items
    }
    every_binding = list(hub.list(ClusterResourceBinding).items)
    bindings = [b for b in every_binding if is_active(b)]
    budgets = {b.name: b for b in _budgets(hub)}

    supply = {
        c.metadata.name: ClusterCapacity.of(c.status.resource_usage.allocatable) for c in clusters
    }
    fleet = Fleet(
        {name: dict(capacity.allocatable) for name, capacity in supply.items()},
        {name: held(ledger) for name, ledger in ledgers.by_cluster.items()},
    )
    by_placement: dict[str, list[ClusterResourceBinding]] = {}
    for binding in bindings:
        owner = binding.metadata.labels.get(hub_names.PARENT_PLACEMENT_LABEL, "")
        by_placement.setdefault(owner, []).append(binding)
    every_of: dict[str, list[ClusterResourceBinding]] = {}
    for binding in every_binding:
        owner = binding.metadata.labels.get(hub_names.PARENT_PLACEMENT_LABEL, "")
        every_of.setdefault(owner, []).append(binding)
    _count_unreserved(fleet, ledgers, placements, by_placement)

    movable: list[Movable] = []
    allowed: dict[str, int | None] = {}
    skipped: dict[str, str] = {}
    for crp in placements:
        why = _not_movable(crp, snapshots.get(crp.name), placement)
        if why is not None:
            if hub_names.REBALANCE_ANNOTATION in crp.metadata.annotations and why != _OTHER:
                skipped[crp.name] = why
            continue
        own = by_placement.get(crp.name, [])
        targets = feasible_clusters(snapshots[crp.name], clusters, own, profile, now)
        # KubeFleet counts every binding of the placement, Unscheduled ones too.
        state = budget_state(budgets.get(crp.name), crp, every_of.get(crp.name, []))
        allowed[crp.name] = state.moves_in_a_row(limit=len(own))
        for binding in own:
            reservation = _reservation(ledgers, binding)
            if reservation is None:
                continue  # made before its placement declared requests: it stays
            movable.append(
                Movable(crp.name, binding.name, binding.spec.target_cluster, reservation, targets)
            )
    moving = {m.binding for m in movable}
    pinned = [b for b in bindings if b.name not in moving]
    fleet.pinned = dict(Counter(b.spec.target_cluster for b in pinned))
    for binding in pinned:
        owner = binding.metadata.labels.get(hub_names.PARENT_PLACEMENT_LABEL, "")
        fleet.occupants.setdefault(binding.spec.target_cluster, set()).add(owner)
    moves = plan_moves(fleet, movable, allowed, strategy)
    return RebalancePlan(strategy, moves, fleet, movable, skipped)


_OTHER: Final = "not asked for"


def _not_movable(
    crp: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot | None,
    only: str | None,
) -> str | None:
    asked = crp.metadata.annotations.get(hub_names.REBALANCE_ANNOTATION)
    if asked is None or (only is not None and crp.name != only):
        return _OTHER
    try:
        parse_rebalance(asked)
    except RebalanceError as exc:
        return str(exc)  # said among the skipped: the value is there, but not "allowed"
    if crp.metadata.deleting:
        return "it is being deleted"
    policy = crp.spec.policy
    if policy is None or policy.effective_type != hub_names.PICK_N:
        return "only PickN placements are rebalanced"
    text = requests_of(crp)
    if text is None:
        return f"it declares no {hub_names.REQUESTS_ANNOTATION}"
    try:
        parse_requests(text)
    except RequestsError as exc:
        return f"its requests cannot be read: {exc}"
    if snapshot is None:
        return "it has no latest policy snapshot yet"
    return None


def _reservation(ledgers: Ledgers, binding: ClusterResourceBinding) -> dict[str, Fraction] | None:
    ledger = ledgers.by_cluster.get(binding.spec.target_cluster)
    if ledger is None:
        return None
    reservation = ledger.spec.reservations.get(binding_key(binding))
    if reservation is None:
        return None
    try:
        return {r: parse_quantity(q) for r, q in reservation.requests.items()}
    except QuantityError:
        return None


def _count_unreserved(
    fleet: Fleet,
    ledgers: Ledgers,
    placements: Iterable[ClusterResourcePlacement],
    active: dict[str, list[ClusterResourceBinding]],
) -> None:
    """Add to `fleet.allocated` what active bindings of capacity-aware placements consume
    beyond their reservations (a reservation missing, or smaller than the requests now): until
    their placement's next turn makes it, the ledger undercounts them, and a plan must not."""
    for crp in placements:
        text = requests_of(crp)
        if text is None:
            continue
        try:
            requests = parse_requests(text)
        except RequestsError:
            continue
        for binding in active.get(crp.name, []):
            reserved = _reservation(ledgers, binding) or {}
            extra = {
                r: amount - reserved.get(r, Fraction(0))
                for r, amount in requests.items()
                if amount > reserved.get(r, Fraction(0))
            }
            if extra:
                fleet.add(binding.spec.target_cluster, extra, +1)


def _budgets(hub: HubClient) -> Iterable[ClusterResourcePlacementDisruptionBudget]:
    try:
        return list(hub.list(ClusterResourcePlacementDisruptionBudget).items)
    except NotFoundError:  # a hub without the kind: no budgets
        return []


async def propose(
    client: Client, moves: Sequence[Move], reason: str
) -> tuple[list[str], dict[str, str]]:
    """Signal each placement's workflow with its moves; (placements reached, not reached: why)."""
    by_placement: dict[str, list[MoveRequest]] = {}
    for move in moves:
        by_placement.setdefault(move.placement, []).append(
            MoveRequest(
                binding=move.binding, source=move.source, target=move.target, reason=move.reason
            )
        )
    gate = asyncio.Semaphore(SIGNAL_CONCURRENCY)
    reached: list[str] = []
    missed: dict[str, str] = {}

    async def send(placement: str, requests: list[MoveRequest]) -> None:
        async with gate:
            handle = client.get_workflow_handle(names.workflow_id(placement))
            try:
                await handle.signal(names.SIGNAL_MOVE, MovesRequest(moves=requests, reason=reason))
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                missed[placement] = "its workflow is not running"
                return
            reached.append(placement)

    await asyncio.gather(*(send(p, r) for p, r in by_placement.items()))
    return sorted(reached), missed


# --- the Schedule ------------------------------------------------------------------------------


class RebalanceFleet:
    """The `fleet-rebalance` Schedule's activity: plan from the hub, propose by signal."""

    def __init__(
        self, hub: HubClient, client: Client, profile: Callable[[], Profile | None] | None = None
    ) -> None:
        self._hub = hub
        self._client = client
        self._profile = profile or (lambda: None)

    @activity.defn(name=names.ACTIVITY_REBALANCE_FLEET)
    async def rebalance_fleet(self, request: RebalanceInput) -> RebalanceReport:
        plan = await asyncio.to_thread(
            plan_rebalance, self._hub, request.strategy, profile=self._profile()
        )
        activity.heartbeat(f"planned {len(plan.moves)} move(s)")
        reached, missed = await propose(
            self._client, plan.moves, f"fleet-rebalance Schedule, {request.strategy}"
        )
        before, after = plan.clusters_in_use()
        summary = (
            f"{request.strategy}: proposed {len(plan.moves)} move(s) to {len(reached)} "
            f"placement(s); clusters in use {before} -> {after} if all are made"
        )
        if plan.moves:
            log.info("rebalance: %s", summary)
        return RebalanceReport(
            moves=[
                f"{m.binding} ({m.placement}) {m.source} -> {m.target}: {m.reason}"
                for m in plan.moves
            ],
            not_reached=missed,
            skipped=plan.skipped,
            clusters_before=before,
            clusters_after=after,
            summary=summary,
        )
