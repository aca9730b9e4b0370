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

from temporalio.client import Client

from activities.fleet_state import read_fleet_state
from activities.reconcile import running_placements
from hub.client import HubClient
from scheduler import Profile
from scheduler.invariants import INVARIANTS, FleetState, Violation, find_violations

__all__ = ["check_fleet", "render_check"]


async def check_fleet(
    hub: HubClient,
    temporal: Client | None,
    task_queue: str,
    *,
    profile: Profile | None = None,
    resource_placements: bool = True,
    now: datetime | None = None,
) -> tuple[FleetState, list[Violation]]:
    """Read the hub (and, with `temporal`, the running placement workflows on `task_queue`)
    and check every invariant; writes nothing."""
    state = await asyncio.to_thread(
        read_fleet_state, hub, resource_placements=resource_placements, strict=True
    )
    if temporal is not None:
        running = await running_placements(temporal, task_queue)
        state = dataclasses.replace(state, workflows=frozenset(running))
    violations = find_violations(state, now or datetime.now(UTC), profile=profile)
    return state, violations


def render_check(state: FleetState, violations: Sequence[Violation]) -> str:
    """Violations grouped by invariant, then one line of totals."""
    checked = (
        f"{len(state.placements)} placement(s), {len(state.bindings)} binding(s), "
        f"{len(state.clusters)} cluster(s), {len(state.ledgers or ())} ledger(s)"
        + (f", {len(state.workflows)} workflow(s)" if state.workflows is not None else "")
    )
    notes = []
    if state.workflows is None:
        notes.append("workflows not checked")
    if not state.namespaced:
        notes.append("ResourcePlacements not checked")
    if state.ledgers is None:
        notes.append("the hub serves no CapacityLedgers")
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
