"""`fleet-scheduler check`: the invariants (scheduler.invariants) on the live hub and Temporal,
each violation in a person's terms; read-only.

The reconcile runs the same checks every run (workers.reconcile); this command is for a person,
a CI job or a soak test that wants the answer now."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from temporalio.client import Client

from activities.decisions import DecisionSettings
from activities.fleet_state import read_fleet_state
from activities.reconcile import running_placements
from hub.client import HubClient
from hub.names import DECISION_SCHEDULER_NAME
from hub.types import PlacementDecision
from scheduler import Profile
from scheduler.invariants import (
    INVARIANTS,
    PLACEMENT_DECISIONS,
    FleetState,
    Violation,
    find_violations,
)

__all__ = ["CONFIRM_AFTER_S", "check_fleet", "render_check"]

# How long `check` waits before it reads again to confirm a PlacementDecision mismatch: a turn
# in flight, or one a binding's deletion has just asked for, has written them by then.
CONFIRM_AFTER_S: Final = 2.0


async def check_fleet(
    hub: HubClient,
    temporal: Client | None,
    task_queue: str,
    *,
    profile: Profile | None = None,
    resource_placements: bool = True,
    now: datetime | None = None,
    decisions: DecisionSettings | None = None,
    decisions_checked: bool | None = None,
    confirm_after_s: float = CONFIRM_AFTER_S,
) -> tuple[FleetState, list[Violation]]:
    """Read the hub (and, with `temporal`, the running placement workflows on `task_queue`)
    and check every invariant; writes nothing.

    PlacementDecisions (`decisions`: where they are published) are checked when
    `decisions_checked`, or, when it is None, if the hub holds any of ours. A turn writes its
    bindings and then its decisions, and a binding deleted by someone else is answered by the
    next turn: a mismatch is reported only if a second reading `confirm_after_s` later still
    shows it."""

    async def read() -> tuple[FleetState, list[Violation]]:
        state = await asyncio.to_thread(
            read_fleet_state,
            hub,
            resource_placements=resource_placements,
            strict=True,
            decisions=decisions if decisions_checked is not False else None,
        )
        if decisions_checked is None and not _ours(state.decisions):
            state = dataclasses.replace(state, decisions=None)
        if temporal is not None:
            running = await running_placements(temporal, task_queue)
            state = dataclasses.replace(state, workflows=frozenset(running))
        return state, find_violations(state, now or datetime.now(UTC), profile=profile)

    state, violations = await read()
    if any(v.invariant == PLACEMENT_DECISIONS for v in violations):
        await asyncio.sleep(confirm_after_s)
        _, again = await read()
        still = {v.message for v in again if v.invariant == PLACEMENT_DECISIONS}
        violations = [
            v for v in violations if v.invariant != PLACEMENT_DECISIONS or v.message in still
        ]
    return state, violations


def _ours(decisions: Sequence[PlacementDecision] | None) -> bool:
    return any(d.scheduler_name == DECISION_SCHEDULER_NAME for d in decisions or ())


def render_check(state: FleetState, violations: Sequence[Violation]) -> str:
    """Violations grouped by invariant, then one line of totals."""
    checked = (
        f"{len(state.placements)} placement(s), {len(state.bindings)} binding(s), "
        f"{len(state.clusters)} cluster(s), {len(state.ledgers or ())} ledger(s)"
        + (f", {len(state.workflows)} workflow(s)" if state.workflows is not None else "")
        + (f", {len(state.decisions)} decision slice(s)" if state.decisions is not None else "")
    )
    notes = []
    if state.workflows is None:
        notes.append("workflows not checked")
    if not state.namespaced:
        notes.append("ResourcePlacements not checked")
    if state.ledgers is None:
        notes.append("the hub serves no CapacityLedgers")
    if state.decisions is None:
        notes.append("PlacementDecisions not checked")
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not violations:
        return f"all invariants hold: {checked} checked{tail}\n"
    counts = Counter(v.invariant for v in violations)
    lines = []
    for invariant in INVARIANTS:
        if not counts[invariant]:
            continue
        lines.append(f"{invariant} ({counts[invariant]}):")
        lines += [f"  {v.message}" for v in violations if v.invariant == invariant]
    summary = ", ".join(f"{name} {counts[name]}" for name in INVARIANTS if counts[name])
    lines.append(f"{len(violations)} violation(s): {summary}; {checked} checked{tail}")
    return "\n".join(lines) + "\n"
