"""PickN: the N best clusters, changing as little as possible (kubefleet-rules 4.6).

With present = Scheduled + Bound bindings of the latest snapshot:

* A (downscale / cleanup), N <= present and (present - N + obsolete) > 0: every obsolete
  binding, then the lowest-ranked present - N bindings (Scheduled before Bound, each by their
  stored score, then target name) are marked Unscheduled;
* B (steady), N == present and no obsolete binding: only a status refresh;
* C (schedule), N > present: run every stage, pick the best min(N - present, batch limit)
  clusters, cross-reference, and requeue at once if a plugin's batch limit was hit.

`CycleInput.fresh` counts current bindings as obsolete for one cycle, which lands in C (or A
for N = 0). The optional percentageOfClustersToScore stops filtering early in C."""

from __future__ import annotations

import math
import operator
import zlib
from collections.abc import Sequence

from hub.types import ClusterResourceBinding, MemberCluster
from scheduler.bindings.naming import BINDING_NAME_CHECK
from scheduler.bindings.writes import mark_unscheduled
from scheduler.clusters.facts import facts_of
from scheduler.cycles.common import (
    Context,
    CycleOutput,
    filter_groups,
    room_filtered,
    score_groups,
)
from scheduler.cycles.crossref import cross_reference_picked
from scheduler.cycles.decisions import (
    decisions_from_bindings,
    selected_decision,
)
from scheduler.cycles.models import Outcome
from scheduler.framework.profile import ScoreMode

__all__ = [
    "MIN_FEASIBLE_CLUSTERS",
    "WHY_DOWNSCALE",
    "WHY_DOWNSCALE_OBSOLETE",
    "downscale_order",
    "run",
]

WHY_DOWNSCALE = "downscale: more clusters selected than numberOfClusters"
WHY_DOWNSCALE_OBSOLETE = "downscale: obsolete binding removed while trimming"
MIN_FEASIBLE_CLUSTERS = 100
"""Percentage mode never stops before this many feasible clusters (kube-scheduler's
minFeasibleNodesToFind)."""


def downscale_order(
    bindings: Sequence[ClusterResourceBinding], mode: ScoreMode
) -> list[ClusterResourceBinding]:
    """Lowest-ranked first (kubefleet-rules 4.4): bindings without a stored score, by target name;
    then by stored (topology, affinity) score, then target name. Weighted-sum profiles compare
    the stored topology + affinity instead (per-plugin contributions are not persisted)."""

    def key(b: ClusterResourceBinding) -> tuple[int, int, int, str, str]:
        score = b.spec.cluster_decision.cluster_score
        name = b.spec.target_cluster
        if score is None:
            return (0, 0, 0, name, b.metadata.name)
        # A stored score with a missing field would panic KubeFleet; count it as 0.
        topology = score.priority_score or 0
        affinity = score.affinity_score or 0
        if mode is ScoreMode.WEIGHTED_SUM:
            return (1, topology + affinity, 0, name, b.metadata.name)
        return (1, topology, affinity, name, b.metadata.name)

    return sorted(bindings, key=key)


def run(ctx: Context, n: int) -> CycleOutput:
    c = ctx.classified
    present = len(c.scheduled) + len(c.bound)
    if n <= present and present - n + len(c.obsolete) > 0:
        return _downscale(ctx, n, present - n)
    if n <= present:
        return _steady(ctx, n)
    return _schedule(ctx, n, n - present)


def _finish(
    ctx: Context, n: int, groups: Sequence[Sequence[ClusterResourceBinding]]
) -> tuple[Outcome, int]:
    """The outcome once `groups` are the selected bindings (the condition counts them all)."""
    count = sum(len(g) for g in groups)
    outcome = Outcome(
        placement_type=ctx.placement_type, wanted=n, picked=count, fulfilled=count >= n
    )
    return outcome, count


def _downscale(ctx: Context, n: int, k: int) -> CycleOutput:
    c = ctx.classified
    for binding in c.obsolete:
        ctx.log.add("unscheduled", WHY_DOWNSCALE_OBSOLETE, binding.spec.target_cluster)
    mode = ctx.profile.score_mode
    scheduled, bound = list(c.scheduled), list(c.bound)
    trimmed: list[ClusterResourceBinding] = []
    if 0 < k < len(scheduled):
        ordered = downscale_order(scheduled, mode)
        trimmed, scheduled = ordered[:k], ordered[k:]
    elif k > 0 and k == len(scheduled):
        trimmed, scheduled = scheduled, []
    elif k > 0 and k < len(scheduled) + len(bound):
        ordered = downscale_order(bound, mode)
        left = k - len(scheduled)
        trimmed, scheduled, bound = [*scheduled, *ordered[:left]], [], ordered[left:]
    elif k > 0:
        trimmed, scheduled, bound = [*scheduled, *bound], [], []
    for binding in trimmed:
        ctx.log.add("unscheduled", WHY_DOWNSCALE, binding.spec.target_cluster)
    patches = [mark_unscheduled(b, WHY_DOWNSCALE_OBSOLETE) for b in c.obsolete]
    patches += [mark_unscheduled(b, WHY_DOWNSCALE) for b in trimmed]
    groups = (scheduled, bound)
    outcome, count = _finish(ctx, n, groups)
    decisions = decisions_from_bindings(groups, (), ())
    return CycleOutput(
        outcome=outcome,
        explanation=ctx.explanation(
            wanted=n,
            branch="downscale",
            kept=sorted(b.spec.target_cluster for b in (*scheduled, *bound)),
        ),
        unschedule=patches,
        snapshot_status=ctx.status(decisions, fulfilled=count >= n, count=count),
    )


def _steady(ctx: Context, n: int) -> CycleOutput:
    c = ctx.classified
    groups = (c.bound, c.scheduled)
    outcome, count = _finish(ctx, n, groups)
    decisions = decisions_from_bindings(groups, (), ())
    return CycleOutput(
        outcome=outcome,
        explanation=ctx.explanation(
            wanted=n,
            branch="steady",
            kept=sorted(b.spec.target_cluster for b in (*c.bound, *c.scheduled)),
        ),
        snapshot_status=ctx.status(decisions, fulfilled=count >= n, count=count),
    )


def _evaluation_order(
    ctx: Context, desired: int, limit: int
) -> tuple[Sequence[MemberCluster], int | None]:
    """The clusters to filter, and how many feasible ones are enough (None = all)."""
    pct = ctx.profile.percentage_of_clusters_to_score
    clusters = ctx.clusters
    if pct is None:
        return clusters, None
    enough = max(MIN_FEASIBLE_CLUSTERS, math.ceil(len(clusters) * pct / 100), min(desired, limit))
    if enough >= len(clusters):
        return clusters, None
    # Clusters holding an obsolete binding first, so a policy change does not move a placement
    # merely because its cluster fell outside the sample; then a per-placement pseudo-random
    # but stable order: different placements start in different parts of the fleet, and one
    # placement sees the same order every cycle.
    seed = ctx.placement.encode() + b"/"
    holding = {b.spec.target_cluster for b in ctx.classified.obsolete}

    def key(cluster: MemberCluster) -> tuple[bool, int, str]:
        name = facts_of(cluster).name
        return (name not in holding, zlib.crc32(seed + name.encode()), name)

    return sorted(clusters, key=key), enough


_RANK = operator.attrgetter("key")


def _schedule(ctx: Context, n: int, desired: int) -> CycleOutput:
    c = ctx.classified
    runner, snapshot = ctx.runner, ctx.snapshot
    state = ctx.cycle_state()
    limit = runner.post_batch(state, snapshot, desired)
    skipped_filters = runner.pre_filter(state, snapshot)
    clusters, enough = _evaluation_order(ctx, desired, limit)
    result = runner.filter(
        state,
        snapshot,
        clusters,
        skipped_filters,
        final_check=ctx.name_check(),
        final_check_name=BINDING_NAME_CHECK,
        enough=enough,
    )
    skipped_scores = runner.pre_score(state, snapshot)
    scored = runner.score(state, snapshot, result.passed, skipped_scores)
    scored.sort(key=_RANK, reverse=True)
    k = min(desired, limit, len(scored))
    picked, not_picked = scored[:k], scored[k:]
    by_name = {s.name: s for s in picked}
    xref = cross_reference_picked(
        ctx,
        [s.name for s in picked],
        lambda name: selected_decision(name, by_name[name].score),
        c.unscheduled,
        c.obsolete,
    )
    filtered = sorted(result.filtered, key=lambda f: f.name)
    kept = sorted(b.spec.target_cluster for b in (*c.scheduled, *c.bound))
    kept_set = set(kept)
    explanation_fields: dict[str, object] = {
        "wanted": n,
        "branch": "schedule",
        "picked": score_groups(picked),
        "created": len(xref.create),
        "not_picked": score_groups(not_picked),
        "filtered": filter_groups(filtered),
        "kept": kept,
        "already_selected": sorted(x for x in result.already_selected if x not in kept_set),
        "not_evaluated": result.not_evaluated,
    }
    reused = len(xref.create) + len(xref.patched)
    present = len(c.scheduled) + len(c.bound)
    # KubeFleet also requeues when a plugin's limit is 0, which can never make progress: an
    # endless immediate requeue. Here a zero limit ends the cycle with the status instead.
    if desired > limit and reused == limit and limit > 0:
        notes = [f"batch limit {limit} reached (wanted {desired} more): requeue"]
        return CycleOutput(
            outcome=Outcome(
                placement_type=ctx.placement_type,
                wanted=n,
                picked=present + reused,
                fulfilled=False,
            ),
            explanation=ctx.explanation(**explanation_fields, notes=notes),
            create=xref.create,
            patch=xref.patch,
            unschedule=xref.unschedule,
            requeue=True,
        )
    groups = (xref.create, xref.patched, c.scheduled, c.bound)
    outcome, count = _finish(ctx, n, groups)
    decisions = decisions_from_bindings(
        groups,
        [(s.name, s.score) for s in not_picked],
        [(f.name, str(f.status)) for f in filtered],
    )
    short = ctx.shortage(room_filtered(filtered), n - count)
    return CycleOutput(
        outcome=outcome,
        explanation=ctx.explanation(**explanation_fields, shortage=short),
        create=xref.create,
        patch=xref.patch,
        unschedule=xref.unschedule,
        snapshot_status=ctx.status(decisions, fulfilled=count >= n, count=count, short=short),
    )
