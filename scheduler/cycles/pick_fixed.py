"""PickFixed: exactly the listed clusters (kubefleet-rules 4.7). No plugin runs.

Each distinct target is valid (exists and eligible), invalid (exists, ineligible, with the
eligibility reason) or not found. Valid targets get a binding; obsolete bindings of other
clusters are unscheduled. The decisions and condition follow the classification, not the
bindings: a current binding whose cluster became ineligible is kept but reported unselected.

Deliberate differences from KubeFleet:
* an empty list is scheduled like any other: obsolete bindings are unscheduled and the status
  says True, "found 0 cluster(s)". KubeFleet returns early and writes nothing (10.4), leaving
  the placement SchedulePending and the old bindings in place, although its placement
  controller treats "PickFixed with an empty list" as fulfilled by design (2.7);
* a name listed twice counts once (KubeFleet would create two bindings for it);
* a target whose name cannot form a binding name is invalid with that reason (KubeFleet
  aborts the cycle)."""

from __future__ import annotations

from scheduler.bindings.naming import name_problem
from scheduler.cycles.common import Context, CycleOutput
from scheduler.cycles.crossref import cross_reference_fixed
from scheduler.cycles.decisions import fixed_decisions, selected_fixed_decision
from scheduler.cycles.models import Outcome
from scheduler.explain.explanation import InvalidTarget

__all__ = ["NOTE_DUPLICATES", "NOTE_EMPTY", "run"]

NOTE_EMPTY = "clusterNames is empty: no cluster is selected, by design"
NOTE_DUPLICATES = "clusterNames lists {count} name(s) more than once; each counts once"


def run(ctx: Context) -> CycleOutput:
    c = ctx.classified
    policy = ctx.snapshot.spec.policy
    listed = policy.cluster_names if policy is not None else []
    targets = list(dict.fromkeys(listed))
    current = [*c.scheduled, *c.bound]
    reusable = {b.spec.target_cluster for b in (*current, *c.obsolete, *c.unscheduled)}
    # Capacity-aware placements: a target without a Scheduled or Bound binding needs room.
    # (PickFixed runs no plugins, so ClusterResourcesFit's rule is applied here.)
    holding = {b.spec.target_cluster for b in current}
    short: list[str] = []
    valid: list[str] = []
    invalid: list[tuple[str, str]] = []
    not_found: list[str] = []
    for name in targets:
        cluster = ctx.by_name.get(name)
        if cluster is None:
            not_found.append(name)
            continue
        reason = ctx.profile.ineligibility(cluster, ctx.now)
        if reason is None and name not in reusable:
            reason = name_problem(ctx.placement, name)
        if reason is None and name not in holding:
            reason = ctx.no_room(cluster)
            if reason is not None:
                short.append(name)
        if reason is None:
            valid.append(name)
        else:
            invalid.append((name, reason))

    xref = cross_reference_fixed(
        ctx, valid, selected_fixed_decision, current, c.unscheduled, c.obsolete
    )
    fulfilled = not invalid and not not_found
    decisions = fixed_decisions(valid, invalid, not_found)
    shortage = ctx.shortage(short)
    notes = []
    if not listed:
        notes.append(NOTE_EMPTY)
    if len(listed) > len(targets):
        notes.append(NOTE_DUPLICATES.format(count=len(listed) - len(targets)))
    return CycleOutput(
        outcome=Outcome(
            placement_type=ctx.placement_type,
            wanted=len(targets),
            picked=len(valid),
            fulfilled=fulfilled,
        ),
        explanation=ctx.explanation(
            wanted=len(targets),
            created=len(xref.create),
            valid=valid,
            invalid=[InvalidTarget(cluster=n, reason=r) for n, r in invalid],
            not_found=not_found,
            kept=sorted(b.spec.target_cluster for b in current),
            notes=notes,
            shortage=shortage,
        ),
        create=xref.create,
        patch=xref.patch,
        unschedule=xref.unschedule,
        snapshot_status=ctx.status(
            decisions, fulfilled=fulfilled, count=len(valid), short=shortage
        ),
    )
