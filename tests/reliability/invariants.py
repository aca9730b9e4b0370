"""What "converged" means after chaos, as lists of violations (empty = holds).

Hub side (`hub_violations`), read in one list per kind:
- every live placement is fully scheduled: its ClusterResourcePlacementScheduled condition is
  True for its current generation, it has exactly one latest policy snapshot, and its live
  bindings (not Unscheduled, not deleting) are the ones its `Expectation` names, all on existing
  clusters and all pointing at that latest snapshot;
- no duplicate binding: at most one live binding per (placement, cluster);
- no orphan binding: every binding's parent placement exists;
- every deleted placement is gone, with its bindings and policy snapshots.

Temporal side (`temporal_violations`):
- every live placement has a running workflow `crp/<name>` that is idle (no activity or
  workflow task pending; an activity past `max_attempt` attempts is reported as stuck
  retrying), and its FleetFullyScheduled search attribute is true;
- every deleted placement's workflow has completed (or never started);
- no run a Schedule started (the reconcile's, the rebalance's: `schedules`) is still running:
  its requeues would still be on their way.

`converge` polls both until they hold or a deadline passes, then fails listing what did not."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from tests.reliability.fleet import Expectation
from workflows import names as wf_names

__all__ = [
    "Convergence",
    "converge",
    "hub_violations",
    "schedule_violations",
    "temporal_violations",
]

# An activity still failing after this many attempts once faults have stopped is stuck.
MAX_ATTEMPT: Final = 3
DESCRIBE_PARALLELISM: Final = 16
POLL_S: Final = 2.0
# Wait this many times as long as a check took before the next one.
CHECK_SHARE_FACTOR: Final = 3.0
PROGRESS_EVERY_S: Final = 15.0
SHOWN_VIOLATIONS: Final = 25


def hub_violations(
    hub: HubClient, expectations: Mapping[str, Expectation], deleted: Iterable[str]
) -> list[str]:
    placements = {p.name: p for p in hub.list(ClusterResourcePlacement)}
    bindings = hub.list(ClusterResourceBinding).items
    snapshots = hub.list(ClusterSchedulingPolicySnapshot).items
    clusters = {c.name for c in hub.list(MemberCluster)}
    found: list[str] = []

    live: dict[str, list[ClusterResourceBinding]] = defaultdict(list)
    all_of: dict[str, int] = Counter()
    for binding in bindings:
        parent = binding.metadata.labels.get(names.PARENT_PLACEMENT_LABEL, "")
        all_of[parent] += 1
        if parent not in placements:
            found.append(f"orphan binding {binding.name}: placement {parent!r} does not exist")
        if binding.spec.state != names.STATE_UNSCHEDULED and not binding.metadata.deleting:
            live[parent].append(binding)
    for parent, held in live.items():
        for cluster, n in Counter(b.spec.target_cluster for b in held).items():
            if n > 1:
                found.append(f"duplicate: {parent} has {n} live bindings to {cluster}")

    latest: dict[str, list[str]] = defaultdict(list)
    snapshots_of: dict[str, int] = Counter()
    for snapshot in snapshots:
        parent = snapshot.metadata.labels.get(names.PARENT_PLACEMENT_LABEL, "")
        snapshots_of[parent] += 1
        if snapshot.is_latest:
            latest[parent].append(snapshot.name)

    for name, expectation in sorted(expectations.items()):
        placement = placements.get(name)
        if placement is None:
            found.append(f"{name}: placement missing from the hub")
            continue
        if placement.metadata.deleting:
            found.append(f"{name}: placement unexpectedly deleting")
        found += [f"{name}: {v}" for v in _scheduled(placement)]
        if len(latest[name]) != 1:
            found.append(f"{name}: {len(latest[name])} latest policy snapshots {latest[name]}")
        held = live.get(name, [])
        targets = [b.spec.target_cluster for b in held]
        found += [f"{name}: {v}" for v in expectation.violations(targets)]
        for binding in held:
            if binding.spec.target_cluster not in clusters:
                found.append(f"{name}: binding {binding.name} targets a missing cluster")
            if latest[name] and binding.spec.scheduling_policy_snapshot_name != latest[name][0]:
                found.append(
                    f"{name}: binding {binding.name} is on snapshot "
                    f"{binding.spec.scheduling_policy_snapshot_name}, not {latest[name][0]}"
                )

    for name in sorted(deleted):
        if name in placements:
            meta = placements[name].metadata
            found.append(f"{name}: deleted placement still exists (finalizers {meta.finalizers})")
        if all_of[name]:
            found.append(f"{name}: deleted placement still has {all_of[name]} bindings")
        if snapshots_of[name]:
            found.append(f"{name}: deleted placement still has {snapshots_of[name]} snapshots")
    return found


def _scheduled(placement: ClusterResourcePlacement) -> list[str]:
    condition = placement.status.condition(names.PLACEMENT_SCHEDULED_CONDITION)
    generation = placement.metadata.generation
    if condition is None:
        return ["no Scheduled condition"]
    if condition.status != names.TRUE or condition.observed_generation != generation:
        return [
            f"Scheduled is {condition.status} ({condition.reason}) for generation "
            f"{condition.observed_generation}, placement is at {generation}"
        ]
    return []


async def temporal_violations(
    client: Client, live: Iterable[str], deleted: Iterable[str], max_attempt: int = MAX_ATTEMPT
) -> list[str]:
    gate = asyncio.Semaphore(DESCRIBE_PARALLELISM)

    async def check(name: str, want_running: bool) -> list[str]:
        handle = client.get_workflow_handle(wf_names.workflow_id(name))
        async with gate:
            try:
                description = await handle.describe()
            except RPCError as exc:
                if exc.status == RPCStatusCode.NOT_FOUND and not want_running:
                    return []  # deleted before any workflow was needed
                return [f"{name}: cannot describe its workflow: {exc.message}"]
        status = description.status
        if not want_running:
            if status != WorkflowExecutionStatus.COMPLETED:
                return [f"{name}: deleted placement's workflow is {status}, not COMPLETED"]
            return []
        if status != WorkflowExecutionStatus.RUNNING:
            return [f"{name}: workflow is {status}, not RUNNING"]
        problems = []
        raw = description.raw_description
        for pending in raw.pending_activities:
            failure = pending.last_failure.message if pending.HasField("last_failure") else ""
            if pending.attempt > max_attempt:
                problems.append(
                    f"{name}: stuck retrying {pending.activity_type.name}, attempt "
                    f"{pending.attempt} ({failure[:200]})"
                )
            else:
                problems.append(f"{name}: still running {pending.activity_type.name}")
        if raw.HasField("pending_workflow_task"):
            problems.append(f"{name}: a workflow task is pending")
        return problems

    results = await asyncio.gather(
        *(check(name, True) for name in sorted(live)),
        *(check(name, False) for name in sorted(deleted)),
    )
    found = [problem for result in results for problem in result]
    if not found:
        live_set = set(live)
        query = (
            f"{wf_names.PLACEMENT_WORKFLOWS_QUERY} AND ExecutionStatus = 'Running' "
            f"AND {wf_names.SA_FULLY_SCHEDULED.name} = false"
        )
        async for execution in client.list_workflows(query):
            name = wf_names.placement_name(execution.id)
            if name in live_set:
                found.append(f"{name}: search attribute says not fully scheduled")
    return found


async def schedule_violations(client: Client, schedules: Iterable[str]) -> list[str]:
    """The runs the Schedules `schedules` started that still run (the Schedule's own record,
    not the eventually consistent visibility store)."""
    found = []
    for schedule_id in schedules:
        described = await client.get_schedule_handle(schedule_id).describe()
        found += [
            f"{schedule_id}: its run {action.workflow_id} is still running"
            for action in described.info.running_actions
        ]
    return found


@dataclass
class Convergence:
    seconds: float
    polls: int


async def converge(
    hub: HubClient,
    client: Client,
    expectations: Mapping[str, Expectation],
    deleted: Iterable[str],
    *,
    timeout_s: float,
    schedules: Iterable[str] = (),
) -> Convergence:
    """Poll until both sides hold (and no run of `schedules` is running); AssertionError
    listing the violations after `timeout_s`."""
    schedules = list(schedules)
    deleted = sorted(deleted)
    started = time.monotonic()
    polls = 0
    violations: list[str] = []
    reported = started
    while True:
        polls += 1
        checking = time.monotonic()
        try:
            violations = await asyncio.to_thread(hub_violations, hub, expectations, deleted)
            # A Schedule's run first: once none runs, its requeues have reached the workflows,
            # where the next check sees them.
            if not violations:
                violations = await schedule_violations(client, schedules)
            if not violations:
                violations = await temporal_violations(client, expectations, deleted)
        except Exception as exc:  # a read that failed is not convergence
            violations = [f"check failed: {type(exc).__name__}: {exc}"]
        now = time.monotonic()
        if not violations:
            return Convergence(now - started, polls)
        if now - started > timeout_s:
            shown = "\n  ".join(violations[:SHOWN_VIOLATIONS])
            raise AssertionError(
                f"not converged after {timeout_s:g}s ({len(violations)} violations):\n  {shown}"
            )
        if now - reported >= PROGRESS_EVERY_S:
            reported = now
            print(
                f"  converging: {len(violations)} violations after {now - started:.0f}s, "
                f"e.g. {violations[0]}",
                flush=True,
            )
        # Reading a whole 1,000-placement hub is work too: keep the checks a small share of it.
        await asyncio.sleep(max(POLL_S, CHECK_SHARE_FACTOR * (now - checking)))
