"""`fleet-scheduler plan -f FILE`: what the scheduler would do with a placement, writing nothing.
(`plan --all --config NEW.yaml`, a candidate profile against the current one, is in
workers/cli/plan_profile.py; `run_plan` chooses between the two forms.)

The placement in FILE may be one that is not applied yet, or an edited copy of one that is. Plan
reads the live fleet and the placement's existing policy snapshots and bindings, derives the
policy snapshot the snapshotter (or KubeFleet's placement controller: both hash the policy the
same way) would leave as latest, runs the real scheduler on it with the configured profile, and
reports every cluster's fate and every write the cycle would make. It only ever reads: no
object is created, patched or deleted, and no workflow is started.

A capacity-aware placement the cycle leaves short of room also gets the preemption its turn
would ask for (activities.preemption `plan_for`, read-only): the clusters the PostFilter plugins
would free and the lower-priority bindings they would take, the clusters they would not and why,
or why nothing would be preempted at all.

What it cannot know: a real cycle runs later, against the fleet as it is then; and when a PickN
cycle would stop at a plugin's batch limit and requeue, the plan shows that first cycle only
(the explanation says so)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from activities.capacity import Ledgers, capacity_input, requests_of
from activities.preemption import Preemption, nominations_of, plan_for, preemptor_label
from activities.turn.cycle import Fleet, read_fleet, readable_requests
from hub import names
from hub.client import HubClient
from hub.errors import (
    HubUnavailableError,
    NotFoundError,
    UnauthorizedError,
)
from hub.kinds import kinds_for, placement_key
from hub.types import (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Nomination,
    ResourcePlacement,
)
from scheduler import CycleInput, CycleResult, Profile, schedule
from scheduler.framework.profile import default_profile
from scheduler.snapshots import SnapshotError, SnapshotSync, plan_snapshot_sync
from workers.cli.common import (
    EXIT_OK,
    CliError,
    add_hub_and_profile_arguments,
    hub_client,
    one_line,
    profile_from_file,
)
from workers.cli.plan_profile import run_plan_profile
from workers.cli.render import explanation_lines, table

API_VERSION: Final = names.PLACEMENT_API_VERSION
KIND: Final = ClusterResourcePlacement.KIND
# The kinds a FILE may hold, by `kind`.
PLACEMENT_KINDS: Final[dict[str, type[ClusterResourcePlacement]]] = {
    ClusterResourcePlacement.KIND: ClusterResourcePlacement,
    ResourcePlacement.KIND: ResourcePlacement,
}
# Stands in for the uid of a placement the API server has not seen yet (the snapshot's owner).
UNAPPLIED_UID: Final = "00000000-0000-0000-0000-000000000000"
MAX_FILE_BYTES: Final = 1 << 20
# The FREES column of a victim whose room is already nominated.
NOMINATED: Final = "(nominated)"
# `plan --all --exit-code`: some decision would change (as `git diff --exit-code`).
EXIT_CHANGED: Final = 1


class PlacementFileError(ValueError):
    """FILE is not one valid placement; the message says why in one line."""


def _first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = exc.error_count() - 1
    return f"{where}: {first['msg']}" + (f" (and {more} more problems)" if more else "")


def load_placement_file(path: Path, namespace: str | None = None) -> ClusterResourcePlacement:
    """The one ClusterResourcePlacement, or ResourcePlacement, in a YAML or JSON file. A
    ResourcePlacement's namespace is its metadata.namespace or, failing that, `namespace`
    (kubectl's -n); the two must agree when both are given.

    Raises:
        PlacementFileError: missing or unreadable file, not YAML, not exactly one document, not a
            v1beta1 placement, no name (or namespace), or fields of the wrong shape.
    """
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise PlacementFileError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlacementFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlacementFileError(f"{path}: cannot read it ({exc})") from None
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise PlacementFileError(f"{path}: not YAML ({' '.join(str(exc).split())})") from None
    if len(documents) != 1:
        raise PlacementFileError(
            f"{path}: expected one placement, found {len(documents)} documents"
        )
    document: Any = documents[0]
    if not isinstance(document, dict):
        raise PlacementFileError(f"{path}: expected an object, found {type(document).__name__}")
    kind, api_version = document.get("kind"), document.get("apiVersion")
    model = PLACEMENT_KINDS.get(kind) if isinstance(kind, str) else None
    if model is None or api_version != API_VERSION:
        raise PlacementFileError(
            f"{path}: expected apiVersion {API_VERSION}, kind {' or '.join(PLACEMENT_KINDS)}; "
            f"found apiVersion {api_version!r}, kind {kind!r}"
        )
    try:
        placement = model.model_validate(document)
    except ValidationError as exc:
        raise PlacementFileError(f"{path}: {_first_problem(exc)}") from None
    if not placement.metadata.name:
        raise PlacementFileError(f"{path}: metadata.name is missing")
    own = placement.metadata.namespace
    if not model.NAMESPACED:
        if namespace:
            raise PlacementFileError(
                f"{path}: a {kind} is cluster-scoped; -n {namespace} names a namespace"
            )
        if own:
            raise PlacementFileError(f"{path}: a {kind} is cluster-scoped, it has no namespace")
        return placement
    if own and namespace and own != namespace:
        raise PlacementFileError(
            f"{path}: the placement's namespace {own!r} does not match -n {namespace}"
        )
    if not (own or namespace):
        raise PlacementFileError(
            f"{path}: a {kind} needs a namespace: set metadata.namespace or -n"
        )
    meta = placement.metadata.model_copy(update={"namespace": own or namespace})
    return placement.model_copy(update={"metadata": meta})


@dataclass(frozen=True)
class WhatIf:
    """One planned cycle and everything it was computed from."""

    placement: str
    applied: ClusterResourcePlacement | None
    """The placement as the hub has it, None when FILE's placement is not applied."""
    policy_changed: bool
    """FILE's policy differs from the applied placement's latest snapshot (or there is none)."""
    snapshots: SnapshotSync
    """The snapshot writes the snapshotter would make first (planned, not made)."""
    snapshot: ClusterSchedulingPolicySnapshot
    """The latest policy snapshot the cycle would run on."""
    clusters_seen: int
    bindings_seen: int
    result: CycleResult
    preemption: PlannedPreemption | None = None
    """What its turn would preempt; None when the cycle leaves it not short of room."""


@dataclass(frozen=True)
class PlannedPreemption:
    """The preemption a turn would ask for, the cycle having left the placement short of room."""

    off: bool = False
    """The profile has no PostFilter plugin: preemption is off."""
    under_way: Mapping[str, Nomination] = field(default_factory=dict)
    """Room already nominated for the placement, by cluster: a turn would not plan again."""
    asked: Preemption = field(default_factory=Preemption)
    """What the PostFilter plugins answered (`plan` None: there was nothing to ask them)."""


def _as_if_applied(
    placement: ClusterResourcePlacement, applied: ClusterResourcePlacement | None
) -> ClusterResourcePlacement:
    """FILE's placement with the metadata the API server would give it on apply: the applied
    object's uid and, for a changed spec, the next generation."""
    if applied is None:
        meta = placement.metadata.model_copy(
            update={"uid": UNAPPLIED_UID, "generation": 1, "resource_version": None}
        )
    else:
        same_spec = applied.spec.model_dump() == placement.spec.model_dump()
        generation = applied.metadata.generation or 0
        meta = placement.metadata.model_copy(
            update={
                "uid": applied.metadata.uid,
                "generation": generation if same_spec else generation + 1,
                "resource_version": applied.metadata.resource_version,
                "finalizers": applied.metadata.finalizers,
            }
        )
    return placement.model_copy(update={"metadata": meta})


def _latest_after(
    sync: SnapshotSync, snapshots: list[ClusterSchedulingPolicySnapshot]
) -> ClusterSchedulingPolicySnapshot:
    if sync.create is not None:
        return sync.create
    latest = next(s for s in snapshots if s.name == sync.latest_name)
    return sync.update.apply(latest) if sync.update is not None else latest


def what_if(
    hub: HubClient,
    placement: ClusterResourcePlacement,
    *,
    profile: Profile | None = None,
    now: datetime | None = None,
) -> WhatIf:
    """Plan one cycle of `placement` against the hub's fleet and bindings; write nothing.

    Raises:
        PlacementFileError: the applied placement is being deleted, or its snapshots break the
            controller's invariants (the message says which and how to fix them).
        HubError: reading the hub failed.
    """
    name, namespace = placement.name, placement.metadata.namespace
    kinds = kinds_for(namespace)
    try:
        applied: ClusterResourcePlacement | None = hub.get(
            kinds.placement, name, namespace=namespace
        )
    except NotFoundError:
        applied = None
    key = placement_key(namespace, name)
    if applied is not None and applied.metadata.deleting:
        raise PlacementFileError(f"placement {key!r} is being deleted; nothing to plan")
    own = {names.PARENT_PLACEMENT_LABEL: name}
    snapshots = (
        list(hub.list(kinds.snapshot, own, namespace=namespace).items)
        if applied is not None
        else []
    )
    try:
        sync = plan_snapshot_sync(_as_if_applied(placement, applied), snapshots)
    except SnapshotError as exc:
        raise PlacementFileError(str(exc)) from None
    snapshot = _latest_after(sync, snapshots)
    fleet = read_fleet(hub, name, namespace=namespace)
    requests = requests_of(placement)
    ledgers = Ledgers.read(hub) if requests is not None else None
    capacity = (
        capacity_input(requests, ledgers, fleet.bindings, key)
        if requests is not None and ledgers is not None
        else None
    )
    when = now or datetime.now(UTC)
    result = schedule(
        CycleInput(
            snapshot=snapshot,
            clusters=fleet.clusters,
            bindings=fleet.bindings,
            now=when,
            capacity=capacity,
        ),
        profile,
    )
    preemption = None
    amounts = readable_requests(requests)
    if (
        ledgers is not None
        and amounts is not None
        and result.explanation.shortage is not None
        and not result.error
    ):
        preemption = _planned_preemption(
            hub, profile or default_profile(), key, placement, snapshot, result, ledgers, fleet,
            amounts, when,
        )  # fmt: skip
    return WhatIf(
        placement=key,
        applied=applied,
        policy_changed=sync.create is not None,
        snapshots=sync,
        snapshot=snapshot,
        clusters_seen=len(fleet.clusters),
        bindings_seen=len(fleet.bindings),
        result=result,
        preemption=preemption,
    )


def _planned_preemption(
    hub: HubClient,
    profile: Profile,
    key: str,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    result: CycleResult,
    ledgers: Ledgers,
    fleet: Fleet,
    requests: Mapping[str, Fraction],
    now: datetime,
) -> PlannedPreemption:
    """What the placement's turn would do after this cycle (activities.turn.cycle `_preempt`),
    read-only: nothing new while room is nominated for it, else the PostFilter plugins' plan."""
    if not profile.post_filter:
        return PlannedPreemption(off=True)
    under_way = nominations_of(ledgers, key)
    if under_way:
        return PlannedPreemption(under_way=under_way)
    asked = plan_for(
        hub, profile, key, placement, snapshot, result.explanation, ledgers, fleet.bindings,
        fleet.clusters, requests, now,
    )  # fmt: skip
    return PlannedPreemption(asked=asked)


def _snapshot_line(plan: WhatIf) -> str:
    sync = plan.snapshots
    if sync.create is not None:
        since = (
            f"the policy differs from {sync.previous_name}'s"
            if sync.previous_name is not None
            else "the placement has no policy snapshot yet"
        )
        return f"policy snapshot: {sync.create.name}, new ({since})"
    if sync.update is not None:
        changed = ", ".join(
            f"{k}={v}" for k, v in {**sync.update.labels, **sync.update.annotations}.items()
        )
        return f"policy snapshot: {plan.snapshot.name}, same policy, refreshed ({changed})"
    return f"policy snapshot: {plan.snapshot.name}, same policy, unchanged"


def _snapshot_writes(sync: SnapshotSync) -> list[str]:
    writes = []
    if sync.update is not None and sync.update.purpose == "demote":
        writes.append(f"label {sync.update.name} {names.IS_LATEST_SNAPSHOT_LABEL}=false")
    elif sync.update is not None:
        writes.append(f"update {sync.update.name}")
    writes += [f"delete {name} (beyond revisionHistoryLimit)" for name in sync.delete]
    if sync.create is not None:
        writes.append(f"create {sync.create.name}")
    return writes


def _binding_writes(result: CycleResult) -> str:
    plan = result.plan
    parts = [
        f"{len(plan.create)} bindings created",
        f"{len(plan.patch)} patched",
        f"{len(plan.unschedule) + len(plan.unschedule_dangling)} unscheduled",
        f"{len(plan.remove_finalizers)} finalizers removed",
        "snapshot status written"
        if plan.snapshot_status is not None
        else "snapshot status unchanged",
    ]
    return ", ".join(parts)


def render_plan(plan: WhatIf) -> str:
    """The `plan` text: what was read, the snapshot, every cluster's fate, the writes."""
    if plan.applied is None:
        state = "not applied"
    elif plan.policy_changed:
        state = "edited copy of the applied placement, with a different policy"
    else:
        state = "same policy as the applied placement"
    outcome = plan.result.outcome
    wanted = "" if outcome.wanted is None else f"/{outcome.wanted}"
    fulfilled = "fully scheduled" if outcome.fulfilled else "not fully scheduled"
    lines = [
        f"plan for placement {plan.placement} ({state}); nothing was written",
        _snapshot_line(plan),
        f"read: {plan.clusters_seen} member clusters, {plan.bindings_seen} bindings",
        f"outcome: {outcome.placement_type} {outcome.picked}{wanted} picked, {fulfilled}",
    ]
    if plan.result.requeue:
        lines.append(
            "requeue: another cycle would follow right away (a plugin's batch limit); "
            "this plan shows the first"
        )
    if plan.result.error:
        lines.append(f"error: {plan.result.error}")
    lines.append("")
    lines += explanation_lines(plan.result.explanation)
    if plan.preemption is not None:
        lines.append("")
        lines += preemption_lines(plan.preemption)
    lines.append("")
    snapshot_writes = _snapshot_writes(plan.snapshots)
    lines.append("writes it would make:")
    if snapshot_writes:
        lines.append(f"  policy snapshots: {'; '.join(snapshot_writes)}")
    lines.append(f"  bindings: {_binding_writes(plan.result)}")
    chosen = _chosen(plan.preemption)
    if chosen:
        lines.append(
            f"  preemption: nominate room on {', '.join(chosen)} (CapacityLedgers); the "
            "victims yield it in their own turns"
        )
    return "\n".join(lines) + "\n"


VICTIM_HEADERS: Final = ("CLUSTER", "VICTIM", "PLACEMENT", "PRIORITY", "FREES")


def _chosen(preemption: PlannedPreemption | None) -> list[str]:
    plan = preemption.asked.plan if preemption is not None else None
    return [c.cluster for c in plan.clusters] if plan is not None else []


def preemption_lines(preemption: PlannedPreemption) -> list[str]:
    """The preemption a turn would ask for (docs/priority.md, "Preemption"): each cluster it
    would free with its victims, the clusters it would not free and why; or why none."""
    if preemption.off:
        return ["preemption: none, the profile has no PostFilter plugin (preemption is off)"]
    if preemption.under_way:
        rows = [
            (cluster, v.binding, preemptor_label(v.placement), str(v.priority), NOMINATED)
            for cluster, nomination in sorted(preemption.under_way.items())
            for v in nomination.victims
        ]
        return [
            "preemption: under way, room is nominated for this placement on "
            f"{', '.join(sorted(preemption.under_way))}; a turn would not choose again",
            table(VICTIM_HEADERS, rows),
        ]
    plan = preemption.asked.plan
    if plan is None:
        said = [line.removeprefix("no preemption: ") for line in preemption.asked.lines]
        why = "; ".join(said) or "no other placement holds room on the clusters short of it"
        return [f"preemption: none, {why}"]
    if plan.reason:
        return [f"preemption: none, {plan.reason}"]
    lines = []
    if plan.clusters:
        victims = sum(len(c.victims) for c in plan.clusters)
        lines.append(
            f"preemption (priority {plan.priority}): {victims} lower-priority binding(s) on "
            f"{len(plan.clusters)} cluster(s) would give their room; nothing is preempted by plan"
        )
        rows = [
            (
                chosen.cluster,
                victim.binding,
                preemptor_label(victim.placement),
                str(victim.priority),
                victim.requests + (" (over its budget)" if victim.over_budget else ""),
            )
            for chosen in plan.clusters
            for victim in chosen.victims
        ]
        lines.append(table(VICTIM_HEADERS, rows))
        if plan.still_short:
            lines.append(f"still short after it: {plan.still_short} binding(s)")
    else:
        lines.append(f"preemption: none, no cluster can be freed (priority {plan.priority})")
    lines += [f"  not freed: {r.cluster}: {r.reason}" for r in plan.rejected]
    return lines


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name",
        nargs="?",
        default=None,
        help="with --config: compare the candidate profile with the current one "
        "on this placement only (a ClusterResourcePlacement's name, or with "
        "-n a ResourcePlacement's)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        type=Path,
        default=None,
        metavar="FILE",
        help="the ClusterResourcePlacement or ResourcePlacement to plan (YAML or "
        "JSON); it need not be applied, or may be an edited copy of one "
        "that is",
    )
    parser.add_argument(
        "-n",
        "--placement-namespace",
        dest="placement_namespace",
        default=None,
        metavar="NAMESPACE",
        help="a ResourcePlacement's namespace, when FILE does not say it, or "
        "NAME's (as kubectl's -n)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="all_placements",
        help="with --config: compare the candidate profile with the current one "
        "on every placement (ClusterResourcePlacements and "
        "ResourcePlacements) against the live fleet (docs/operations.md, "
        '"What-if for a scheduler profile")',
    )
    add_hub_and_profile_arguments(parser)
    parser.add_argument(
        "--current-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --all or NAME: the profile the scheduler runs now, the "
        "baseline (default: KubeFleet's default profile)",
    )
    parser.add_argument(
        "--exit-code",
        action="store_true",
        help="with --all or NAME: exit 1 when any decision would change, 0 "
        "when none would (for CI)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="with --all: also list the placements that would not change, and "
        "every cluster of a changed placement (ten without -v)",
    )


# What `plan` is given, when it is not one of its two forms.
USAGE_ONE_FORM: Final = (
    "give -f FILE (plan a placement), or --config FILE with --all or NAME (compare a candidate "
    "profile with the current one)"
)
USAGE_ALL_AND_MORE: Final = "--all covers every placement; leave out {what}"
USAGE_NEEDS_CONFIG: Final = (
    "--all and NAME compare a candidate profile with the current one: give it with --config FILE"
)
USAGE_FILE_ONLY: Final = "{flag} applies to --all or NAME, not to -f FILE"


def _profile_form(args: argparse.Namespace) -> bool:
    """Which form the command line asks for: True for the profile comparison (--all, NAME),
    False for -f FILE. Raises CliError for a mixture."""
    if args.all_placements:
        for what, given in (
            ("NAME", args.name),
            ("-f FILE", args.filename),
            ("-n NAMESPACE", args.placement_namespace),
        ):
            if given is not None:
                raise CliError(USAGE_ALL_AND_MORE.format(what=what))
    if args.filename is not None:
        if args.name is not None:
            raise CliError(f"give -f FILE or NAME, not both ({USAGE_ONE_FORM})")
        for flag, given in (
            ("--current-config", args.current_config is not None),
            ("--exit-code", args.exit_code),
            ("--verbose", args.verbose),
        ):
            if given:
                raise CliError(USAGE_FILE_ONLY.format(flag=flag))
        return False
    if not (args.all_placements or args.name is not None):
        raise CliError(USAGE_ONE_FORM)
    if args.config is None:
        raise CliError(USAGE_NEEDS_CONFIG)
    return True


def run_plan(args: argparse.Namespace) -> int:
    if _profile_form(args):
        changed = run_plan_profile(args, None if args.all_placements else args.name)
        return EXIT_CHANGED if changed and args.exit_code else EXIT_OK
    placement = load_placement_file(args.filename, args.placement_namespace)
    profile = profile_from_file(args.config)
    hub = hub_client(args.kubeconfig, args.context, local_default=True)
    try:
        planned = what_if(hub, placement, profile=profile)
    except (HubUnavailableError, UnauthorizedError) as exc:
        raise CliError(f"cannot read the hub at {hub.host}: {one_line(exc)}") from exc
    finally:
        hub.close()
    sys.stdout.write(render_plan(planned))
    return EXIT_OK
