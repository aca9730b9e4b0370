"""PickAll (or no policy): every cluster that passes the filters (kubefleet-rules 4.5).

Only PreFilter and Filter run; there is no scoring, so candidates are taken in name order.
Scheduled and Bound bindings of the current snapshot are never removed (the policy is
"IgnoredDuringExecution"), so the condition is always True. Never requeues."""

from __future__ import annotations

from scheduler.bindings.naming import BINDING_NAME_CHECK
from scheduler.cycles.common import (
    Context,
    CycleOutput,
    filter_groups,
    room_filtered,
    score_groups,
)
from scheduler.cycles.crossref import cross_reference_picked
from scheduler.cycles.decisions import decisions_from_bindings, selected_decision
from scheduler.cycles.models import Outcome
from scheduler.framework.runner import ScoredCluster
from scheduler.framework.score import ZERO

__all__ = ["run"]


def run(ctx: Context) -> CycleOutput:
    c = ctx.classified
    state = ctx.cycle_state()
    runner = ctx.runner
    skipped = runner.pre_filter(state, ctx.snapshot)
    result = runner.filter(
        state,
        ctx.snapshot,
        ctx.clusters,
        skipped,
        final_check=ctx.name_check(),
        final_check_name=BINDING_NAME_CHECK,
    )
    candidates = sorted(
        (ScoredCluster(cluster, ZERO) for cluster in result.passed), key=lambda s: s.name
    )
    picked = [s.name for s in candidates]
    xref = cross_reference_picked(
        ctx, picked, lambda name: selected_decision(name, ZERO), c.unscheduled, c.obsolete
    )

    groups = (xref.create, xref.patched, c.scheduled, c.bound)
    count = sum(len(g) for g in groups)
    filtered = sorted(result.filtered, key=lambda f: f.name)
    decisions = decisions_from_bindings(groups, (), [(f.name, str(f.status)) for f in filtered])
    kept = sorted(b.spec.target_cluster for b in (*c.scheduled, *c.bound))
    short = ctx.shortage(room_filtered(filtered))
    kept_set = set(kept)
    return CycleOutput(
        outcome=Outcome(placement_type=ctx.placement_type, picked=count, fulfilled=True),
        explanation=ctx.explanation(
            picked=score_groups(candidates),
            created=len(xref.create),
            filtered=filter_groups(filtered),
            kept=kept,
            already_selected=sorted(n for n in result.already_selected if n not in kept_set),
            shortage=short,
        ),
        create=xref.create,
        patch=xref.patch,
        unschedule=xref.unschedule,
        snapshot_status=ctx.status(decisions, fulfilled=True, count=count, short=short),
    )
