"""`schedule`: one scheduling cycle for one placement, as a pure function.

It does what KubeFleet's RunSchedulingCycleFor does between listing and writing (kubefleet-rules
4.1): classify the bindings, plan the prelude writes (finalizers of deleting bindings, dangling
bindings), dispatch on the placement type, and return the plan with the explanation.

A cycle that cannot act (unknown placement type, bad annotation, a failing plugin, a binding
that cannot be revived, inconsistent input) returns `CycleResult.error` and a plan with no
binding writes at all, not even the prelude's: writing part of a cycle the scheduler does not
understand is worse than waiting for the input to be fixed. When the snapshot's CRP-generation
is readable, the plan still writes the snapshot status with a False Scheduled condition whose
message says what is wrong, so the placement shows it; the decisions are left as they were."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from hub import names
from hub.types import ClusterSchedulingPolicySnapshot, Condition, MemberCluster
from scheduler.bindings.writes import mark_unscheduled, remove_finalizer
from scheduler.clusters.facts import prepare
from scheduler.cycles import pick_all, pick_fixed, pick_n
from scheduler.cycles.classify import classify
from scheduler.cycles.common import Context, CycleOutput
from scheduler.cycles.decisions import status_write
from scheduler.cycles.models import CapacityInput, CycleInput, CycleResult, Outcome
from scheduler.cycles.plan import BindingPlan, SnapshotStatusWrite
from scheduler.errors import CycleError, InvalidInputError, InvalidSnapshotError
from scheduler.explain.explanation import Explanation
from scheduler.framework.errors import PluginError
from scheduler.framework.profile import Profile, default_profile
from scheduler.framework.runner import PhaseObserver, Runner
from scheduler.framework.sharing import SharedResults
from scheduler.room.capacity import Demand, room_rows, shown_requests
from scheduler.room.quantity import QuantityError, parse_quantity
from scheduler.room.requests import RequestsError, parse_requests
from scheduler.snapshots.annotations import crp_generation, number_of_clusters

__all__ = [
    "ERROR_CONDITION_MESSAGE",
    "UNKNOWN_PLACEMENT_TYPE",
    "WHY_DANGLING",
    "WHY_DELETING",
    "placement_type_of",
    "schedule",
]

UNKNOWN_PLACEMENT_TYPE = 'unknown placement type "{type}" (expected PickAll, PickN or PickFixed)'
ERROR_CONDITION_MESSAGE = "scheduling failed: {error}"
WHY_DELETING = "binding is being deleted: remove the scheduler's cleanup finalizer"
WHY_DANGLING = "dangling: the target cluster left the fleet"


def placement_type_of(snapshot: ClusterSchedulingPolicySnapshot) -> str:
    """The placement type with API defaults applied: no policy or no type means PickAll."""
    policy = snapshot.spec.policy
    return names.PICK_ALL if policy is None else policy.effective_type


def schedule(
    input: CycleInput,
    profile: Profile | None = None,
    observer: PhaseObserver | None = None,
    shared: SharedResults | None = None,
) -> CycleResult:
    """Runs one cycle. Never raises for bad input or failing plugins: see the module doc.

    `observer`, when given, is told when each extension point starts and ends (tracing).
    `shared` (for `profile` only) reuses other placements' answers of plugins that declare them
    shareable (scheduler.framework.sharing): the result is the same without it."""
    profile = profile if profile is not None else default_profile()
    placement_type = placement_type_of(input.snapshot)
    try:
        return _run(input, profile, placement_type, observer, shared)
    except (CycleError, PluginError) as exc:
        return _failed(input, placement_type, exc)


def _run(
    input: CycleInput,
    profile: Profile,
    placement_type: str,
    observer: PhaseObserver | None,
    shared: SharedResults | None = None,
) -> CycleResult:
    snapshot = input.snapshot
    fleet = prepare(input.clusters)
    by_name = {facts.name: facts.cluster for facts in fleet}
    if len(by_name) != len(input.clusters):
        counts = Counter(c.metadata.name for c in input.clusters)
        twice = sorted(n for n, k in counts.items() if k > 1)
        raise InvalidInputError(f"member cluster names listed more than once: {', '.join(twice)}")
    placement = snapshot.placement_name
    if not placement:
        raise InvalidSnapshotError(
            f"policy snapshot {snapshot.metadata.name!r} has no "
            f"{names.PARENT_PLACEMENT_LABEL} label"
        )
    generation = crp_generation(snapshot)
    if placement_type not in names.PLACEMENT_TYPES:
        raise InvalidSnapshotError(UNKNOWN_PLACEMENT_TYPE.format(type=placement_type))
    classified = classify(input.bindings, by_name, snapshot.metadata.name)
    wanted = number_of_clusters(snapshot) if placement_type == names.PICK_N else None
    if wanted is not None and input.fresh:
        classified = classified.as_fresh()
    ctx = Context(
        snapshot=snapshot,
        placement=placement,
        clusters=input.clusters,
        by_name=by_name,
        classified=classified,
        crp_generation=generation,
        now=input.now,
        profile=profile,
        runner=Runner(profile, observer, shared),
        placement_type=placement_type,
        used_names={b.metadata.name for b in input.bindings},
        facts=fleet,
        demand=_demand(input.capacity),
        annotation_problems=list(input.annotation_problems),
    )
    # The prelude's log entries come first in the explanation, as its writes do in the plan.
    finalizers = []
    for binding in classified.deleting:
        patch = remove_finalizer(binding, WHY_DELETING)
        if patch is not None:
            finalizers.append(patch)
            ctx.log.add("finalizerRemoved", WHY_DELETING, binding.spec.target_cluster)
    dangling = [mark_unscheduled(b, WHY_DANGLING) for b in classified.dangling]
    for binding in classified.dangling:
        ctx.log.add("unscheduled", WHY_DANGLING, binding.spec.target_cluster)

    output: CycleOutput
    if placement_type == names.PICK_FIXED:
        output = pick_fixed.run(ctx)
    elif wanted is not None:
        output = pick_n.run(ctx, wanted)
    else:
        output = pick_all.run(ctx)
    plan = BindingPlan(
        remove_finalizers=finalizers,
        unschedule_dangling=dangling,
        create=output.create,
        patch=output.patch,
        unschedule=output.unschedule,
        snapshot_status=output.snapshot_status,
    )
    explanation = output.explanation
    if ctx.demand is not None:
        explanation = _with_room(explanation, ctx.demand, by_name)
        if ctx.beyond_room:
            explanation = explanation.model_copy(update={"beyond_room": ctx.beyond_room})
    return CycleResult(
        plan=plan,
        requeue=output.requeue,
        outcome=output.outcome,
        explanation=explanation,
    )


def _with_room(
    explanation: Explanation, demand: Demand, by_name: dict[str, MemberCluster]
) -> Explanation:
    """The explanation of a capacity-aware cycle, with the room of every cluster it judged."""
    judged = sorted({c for c, _ in explanation.fates() if c in by_name})
    rows = room_rows(demand, ((c, by_name[c].status.resource_usage.allocatable) for c in judged))
    return explanation.model_copy(
        update={"room": rows, "requests": shown_requests(demand.requests)}
    )


def _demand(capacity: CapacityInput | None) -> Demand | None:
    """The capacity-aware view of the cycle, or None for a placement without requests."""
    if capacity is None:
        return None
    if capacity.problem:
        raise InvalidInputError(capacity.problem)
    try:
        requests = parse_requests(capacity.requests)
    except RequestsError as exc:
        raise InvalidInputError(f"annotation {names.REQUESTS_ANNOTATION}: {exc}") from exc
    allocated: dict[str, dict[str, Fraction]] = {}
    for cluster, amounts in capacity.allocated.items():
        try:
            allocated[cluster] = {r: parse_quantity(q) for r, q in amounts.items()}
        except QuantityError as exc:
            raise InvalidInputError(f"reservations on cluster {cluster!r}: {exc}") from exc
    return Demand(requests, allocated)


def _failed(input: CycleInput, placement_type: str, exc: Exception) -> CycleResult:
    snapshot = input.snapshot
    error = str(exc)
    write: SnapshotStatusWrite | None = None
    try:
        generation: int | None = crp_generation(snapshot)
    except InvalidSnapshotError:
        generation = None  # observedCRPGeneration is required: nothing truthful to write
    if generation is not None:
        condition = Condition(
            type=names.SCHEDULED_CONDITION,
            status=names.FALSE,
            reason=names.POLICY_UNFULFILLED_REASON,
            message=ERROR_CONDITION_MESSAGE.format(error=error),
            observed_generation=snapshot.metadata.generation or 0,
        )
        write = status_write(
            snapshot,
            generation,
            list(snapshot.status.target_clusters),
            condition,
            input.now,
            compare_message=True,
        )
    return CycleResult(
        plan=BindingPlan(snapshot_status=write),
        outcome=Outcome(placement_type=placement_type),
        explanation=Explanation(
            placement_type=placement_type, snapshot=snapshot.metadata.name, notes=[error]
        ),
        error=error,
    )
