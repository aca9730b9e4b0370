"""`fleet-scheduler plan --all --config NEW.yaml` (or `plan [-n NAMESPACE] NAME --config ...`):
what a candidate scheduler profile would change across the fleet, writing nothing.

Every placement (ClusterResourcePlacements and ResourcePlacements) is scheduled twice on the
same live reads: with the candidate profile and with the current one (`--current-config`,
default KubeFleet's default profile), and the decisions are compared (scheduler.explain.whatif says
what "the decision" is per placement type, and when a change would take effect). The hub is read
with a handful of list calls, whatever the fleet's size (every member cluster, every latest
policy snapshot, every binding, every placement, the capacity ledgers), grouped in memory;
the cycles are pure and, for a large fleet, run in child processes. Nothing is created,
patched or deleted and no workflow is started: Temporal is not needed at all."""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from activities.capacity import Ledgers, capacity_input, ledgers_problem, requests_of
from hub import names
from hub.client import HubClient
from hub.errors import HubUnavailableError, NotFoundError, UnauthorizedError
from hub.kinds import kinds_for, parent_key, placement_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    ResourceBinding,
    ResourcePlacement,
    SchedulingPolicySnapshot,
)
from hub.types.meta import HubObject
from scheduler import CapacityInput, CycleInput, Profile, default_profile
from scheduler.explain.readable import readable_reason
from scheduler.explain.whatif import (
    ClusterChange,
    Fate,
    FleetWhatIf,
    PlacementWhatIf,
    compare_profiles,
    summarize,
)
from scheduler.moves.enforcement import enforces
from workers.cli.common import CliError, hub_client, one_line, profile_from_file

__all__ = ["FleetReads", "compare_fleet", "read_fleet_once", "render_profile_plan"]

T = TypeVar("T", bound=HubObject)

LATEST: Final = {names.IS_LATEST_SNAPSHOT_LABEL: "true"}
DEFAULT_BASELINE: Final = "the built-in default profile (KubeFleet's)"
# How many clusters the summary lists, those whose number of bindings changes most.
BUSIEST: Final = 5
# How many clusters each changed placement lists without -v, before "and N more".
CHANGES_SHOWN: Final = 10
# Below this many placements the cycles run in this process: starting children costs more.
PROCESSES_FROM: Final = 200
# Placements per task sent to a child process: few round trips, even shares.
CHUNK: Final = 50
WHEN_NEXT_TURN: Final = "at its next turn"
WHEN_EVALUATES: Final = "only when it next evaluates clusters"
NOTE_EVALUATES: Final = (
    "note: \"only when it next evaluates clusters\": KubeFleet's cycle keeps the clusters a "
    "PickN placement already has, so the change waits for a fresh requeue (requeue --fresh), a "
    "scale-up or a policy change"
)
SKIPPED_NO_SNAPSHOT: Final = "no latest policy snapshot yet"
SKIPPED_DELETING: Final = "being deleted"


@dataclass(frozen=True)
class FleetReads:
    """One reading of the hub: what every placement's cycles need."""

    clusters: list[MemberCluster]
    placements: dict[str, ClusterResourcePlacement]
    snapshots: dict[str, ClusterSchedulingPolicySnapshot]
    """Placement key -> its latest policy snapshot."""
    bindings: dict[str, list[ClusterResourceBinding]]
    """Placement key -> its bindings (of every state)."""
    ledgers: Ledgers | None = None
    ledgers_problem: str | None = None
    """Why the ledgers could not be read (capacity-aware cycles then fail, as a turn would)."""


def _key(obj: HubObject) -> str:
    return placement_key(obj.metadata.namespace, obj.name)


def _served(read: Callable[[], list[T]]) -> list[T]:
    """A namespaced kind a hub may not serve (no CRD) or let us read: none, as `run
    --no-resource-placements` schedules none."""
    try:
        return read()
    except (NotFoundError, UnauthorizedError):
        return []


def _ledgers(hub: HubClient) -> tuple[Ledgers | None, str | None]:
    try:
        return Ledgers.read(hub), None
    except (NotFoundError, UnauthorizedError) as exc:
        return None, ledgers_problem(exc)


# Every kind `read_fleet_once` lists (the RBAC scan, tests/unit/deploy, reads it: the reads go
# through one generic helper).
READ_KINDS: Final = (
    MemberCluster,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    ClusterResourceBinding,
    ResourcePlacement,
    SchedulingPolicySnapshot,
    ResourceBinding,
)


def read_fleet_once(hub: HubClient) -> FleetReads:
    """Every kind a cycle reads, each listed once, in parallel."""

    def listed(kind: type[T], selector: dict[str, str] | None = None) -> Callable[[], list[T]]:
        return lambda: list(hub.list(kind, selector).items)

    reads: dict[str, Callable[[], Any]] = {
        "clusters": listed(MemberCluster),
        "crps": listed(ClusterResourcePlacement),
        "snapshots": listed(ClusterSchedulingPolicySnapshot, LATEST),
        "bindings": listed(ClusterResourceBinding),
        "rps": lambda: _served(listed(ResourcePlacement)),
        "rp_snapshots": lambda: _served(listed(SchedulingPolicySnapshot, LATEST)),
        "rbs": lambda: _served(listed(ResourceBinding)),
        "ledgers": lambda: _ledgers(hub),
    }
    with ThreadPoolExecutor(max_workers=len(reads), thread_name_prefix="plan-read") as pool:
        futures = {name: pool.submit(read) for name, read in reads.items()}
        got = {name: future.result() for name, future in futures.items()}
    bindings: dict[str, list[ClusterResourceBinding]] = defaultdict(list)
    for binding in (*got["bindings"], *got["rbs"]):
        bindings[parent_key(binding)].append(binding)
    ledgers, problem = got["ledgers"]
    return FleetReads(
        clusters=got["clusters"],
        placements={_key(p): p for p in (*got["crps"], *got["rps"])},
        snapshots={parent_key(s): s for s in (*got["snapshots"], *got["rp_snapshots"])},
        bindings=dict(bindings),
        ledgers=ledgers,
        ledgers_problem=problem,
    )


def read_one_placement(hub: HubClient, name: str, namespace: str | None) -> FleetReads:
    """What one placement's cycles read: the placement, its latest snapshot and bindings, every
    member cluster, and the ledgers when it is capacity-aware.

    Raises:
        CliError: the hub has no such placement.
    """
    kinds = kinds_for(namespace)
    try:
        placement = hub.get(kinds.placement, name, namespace=namespace)
    except NotFoundError:
        where = f" in namespace {namespace!r}" if namespace else ""
        raise CliError(
            f"no {kinds.placement.KIND} named {name!r}{where} on the hub"
            + ("" if namespace else " (a ResourcePlacement is named with -n NAMESPACE NAME)")
        ) from None
    own = {names.PARENT_PLACEMENT_LABEL: name}
    snapshots = hub.list(kinds.snapshot, {**own, **LATEST}, namespace=namespace).items
    bindings = list(hub.list(kinds.binding, own, namespace=namespace).items)
    ledgers, problem = _ledgers(hub) if requests_of(placement) is not None else (None, None)
    key = placement_key(namespace, name)
    return FleetReads(
        clusters=list(hub.list(MemberCluster).items),
        placements={key: placement},
        snapshots={key: snapshots[0]} if snapshots else {},
        bindings={key: bindings},
        ledgers=ledgers,
        ledgers_problem=problem,
    )


@dataclass(frozen=True)
class Work:
    """The placements to compare, and those left out with why."""

    inputs: list[tuple[str, CycleInput]]
    skipped: dict[str, str] = field(default_factory=dict)
    enforcing: frozenset[str] = frozenset()
    """The keys of those that enforce their affinity during execution (docs/enforcement.md)."""


def cycle_inputs(reads: FleetReads, now: datetime) -> Work:
    """One cycle input per placement, as its next turn would read it (without the clusters:
    they are the same for all, and are added where the cycle runs)."""
    inputs: list[tuple[str, CycleInput]] = []
    skipped: dict[str, str] = {}
    enforcing: set[str] = set()
    for key in sorted(reads.placements):
        placement = reads.placements[key]
        snapshot = reads.snapshots.get(key)
        if placement.metadata.deleting:
            skipped[key] = SKIPPED_DELETING
            continue
        if snapshot is None:
            skipped[key] = SKIPPED_NO_SNAPSHOT
            continue
        bindings = reads.bindings.get(key, [])
        requests = requests_of(placement)
        capacity: CapacityInput | None = None
        if requests is not None and reads.ledgers is not None:
            capacity = capacity_input(requests, reads.ledgers, bindings, key)
        elif requests is not None:
            capacity = CapacityInput(requests=requests, problem=reads.ledgers_problem)
        inputs.append(
            (key, CycleInput(snapshot=snapshot, bindings=bindings, now=now, capacity=capacity))
        )
        if enforces(placement):
            enforcing.add(key)
    return Work(inputs=inputs, skipped=skipped, enforcing=frozenset(enforcing))


# A child process's state: the fleet and both profiles, set once by `_start_child`.
_child: dict[str, Any] = {}


def _profile(path: Path | None) -> Profile:
    return profile_from_file(path) or default_profile()


def _start_child(clusters: list[MemberCluster], baseline: Path | None, candidate: Path) -> None:
    _child.update(clusters=clusters, baseline=_profile(baseline), candidate=_profile(candidate))


def _compare_chunk(chunk: list[tuple[str, CycleInput, bool]]) -> list[PlacementWhatIf]:
    clusters = _child["clusters"]
    return [
        compare_profiles(
            key,
            input.model_copy(update={"clusters": clusters}),
            _child["baseline"],
            _child["candidate"],
            enforcing=enforcing,
        )
        for key, input, enforcing in chunk
    ]


def compare_fleet(
    reads: FleetReads,
    work: Work,
    baseline: Path | None,
    candidate: Path,
    processes: int | None = None,
) -> FleetWhatIf:
    """Every placement of `work` under both profiles; in child processes (one per core, or
    `processes`) once there are PROCESSES_FROM placements or more."""
    count = processes if processes is not None else (os.cpu_count() or 1)
    items = [(key, input, key in work.enforcing) for key, input in work.inputs]
    if count <= 1 or len(items) < PROCESSES_FROM:
        _start_child(reads.clusters, baseline, candidate)
        try:
            return summarize(_compare_chunk(items))
        finally:
            _child.clear()
    chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]
    with ProcessPoolExecutor(
        max_workers=count,
        initializer=_start_child,
        initargs=(reads.clusters, baseline, candidate),
    ) as pool:
        return summarize([p for part in pool.map(_compare_chunk, chunks) for p in part])


def _fate(fate: Fate) -> str:
    if not fate.detail:
        return fate.state
    return f"{fate.state}: {readable_reason(fate.detail)}"


def change_line(change: ClusterChange) -> str:
    """e.g. `+ member-7  picked (affinity 40, was not picked: affinity 10)`, or
    `- member-3  filtered by TaintToleration: gpu=true:NoSchedule (was picked)`."""
    now, was = change.now, _fate(change.was)
    sign = "+" if change.added else "-"
    if now.scored and now.detail:
        text = f"{now.state} ({now.detail}, was {was})"
    else:
        text = f"{_fate(now)} (was {was})"
    return f"  {sign} {change.cluster}  {text}"


def _placement_lines(placement: PlacementWhatIf, verbose: bool = False) -> list[str]:
    added = sum(c.added for c in placement.changes)
    removed = len(placement.changes) - added
    when = WHEN_NEXT_TURN if placement.at_next_turn else WHEN_EVALUATES
    lines = [
        f"{placement.placement} ({placement.placement_type}): +{added} -{removed} clusters, "
        f"{when}"
    ]
    if placement.candidate_error != placement.baseline_error:
        lines.append(f"  candidate: {placement.candidate_error or 'no error'}")
        lines.append(f"  current:   {placement.baseline_error or 'no error'}")
    shown = placement.changes if verbose else placement.changes[:CHANGES_SHOWN]
    lines += [change_line(c) for c in shown]
    if len(placement.changes) > len(shown):
        lines.append(f"  and {len(placement.changes) - len(shown)} more (-v lists every cluster)")
    return lines


def render_profile_plan(
    fleet: FleetWhatIf,
    *,
    candidate: Path,
    baseline: Path | None,
    skipped: dict[str, str],
    clusters: int,
    verbose: bool = False,
) -> str:
    """The `plan --all` text: the profiles compared, each changed placement with its clusters
    added and removed, then the summary."""
    current = str(baseline) if baseline is not None else DEFAULT_BASELINE
    lines = [
        f"candidate profile {candidate} against the current profile, {current}; "
        "nothing was written",
        f"read: {clusters} member clusters, {len(fleet.placements) + len(skipped)} placements",
        "",
    ]
    changed = fleet.changed
    for placement in changed:
        lines += _placement_lines(placement, verbose)
        lines.append("")
    unchanged = [p for p in fleet.placements if not p.changed]
    if verbose:
        lines += [f"{p.placement} ({p.placement_type}): no change" for p in unchanged]
        lines += [f"{key}: skipped, {why}" for key, why in sorted(skipped.items())]
        if unchanged or skipped:
            lines.append("")
    lines.append(f"placements examined: {len(fleet.placements)}")
    lines.append(f"placements changed: {len(changed)} ({len(unchanged)} unchanged)")
    if skipped:
        lines.append(f"placements skipped: {len(skipped)} (no policy snapshot yet, or deleting)")
    lines.append(f"bindings moved: {fleet.added} added, {fleet.removed} removed")
    if any(not p.at_next_turn for p in changed):
        lines.append(NOTE_EVALUATES)
    busiest = fleet.busiest(BUSIEST)
    if busiest:
        lines.append("clusters whose load changes most (bindings added/removed):")
        lines += [f"  {cluster}  +{a} -{r}" for cluster, a, r in busiest]
    return "\n".join(lines) + "\n"


def plan_profile(
    hub: HubClient,
    *,
    candidate: Path,
    baseline: Path | None,
    name: str | None = None,
    namespace: str | None = None,
    verbose: bool = False,
    processes: int | None = None,
) -> tuple[str, bool]:
    """The report and whether any decision would change. `name` None: every placement."""
    try:
        reads = (
            read_fleet_once(hub) if name is None else read_one_placement(hub, name, namespace)
        )
    except (HubUnavailableError, UnauthorizedError) as exc:
        raise CliError(f"cannot read the hub at {hub.host}: {one_line(exc)}") from exc
    work = cycle_inputs(reads, datetime.now(UTC))
    if name is not None and work.skipped:
        key = placement_key(namespace, name)
        raise CliError(f"placement {key!r}: {work.skipped[key]}; nothing to compare")
    fleet = compare_fleet(reads, work, baseline, candidate, processes)
    text = render_profile_plan(
        fleet,
        candidate=candidate,
        baseline=baseline,
        skipped=work.skipped,
        clusters=len(reads.clusters),
        verbose=verbose,
    )
    return text, bool(fleet.changed)


def run_plan_profile(args: argparse.Namespace, name: str | None) -> bool:
    """`plan --all` / `plan NAME` with `--config`: print the report; True if anything changes."""
    # Both files are read here first, so a bad one is an error before the hub is read.
    profile_from_file(args.config)
    profile_from_file(args.current_config)
    hub = hub_client(args.kubeconfig, args.context, local_default=True)
    try:
        text, changed = plan_profile(
            hub,
            candidate=args.config,
            baseline=args.current_config,
            name=name,
            namespace=args.placement_namespace,
            verbose=args.verbose,
        )
    finally:
        hub.close()
    sys.stdout.write(text)
    return changed
