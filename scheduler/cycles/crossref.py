"""Cross-referencing picked clusters with existing bindings (kubefleet-rules 4.8).

The result says which bindings to create, which to patch (re-point an obsolete binding at the
latest snapshot, or revive an Unscheduled one to its previous state) and which to mark
Unscheduled. One deliberate difference from KubeFleet: at most one binding per cluster is
re-used. KubeFleet patches every obsolete and unscheduled binding of a picked cluster (10.20),
which leaves two live bindings for one cluster; PickFixed keeps one but leaves the other
obsolete bindings of a valid target obsolete forever. Here obsolete bindings are preferred
(their resources are still in place), then name order (PickN, PickAll) or the last in name
order (PickFixed, KubeFleet's map lookup); surplus obsolete bindings are marked Unscheduled and
surplus Unscheduled ones are left alone. Which clusters are picked does not change."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hub import names
from hub.types import ClusterDecision, ClusterResourceBinding
from scheduler.bindings.writes import mark_unscheduled, new_binding, rebind
from scheduler.cycles.common import Context
from scheduler.cycles.plan import BindingPatch
from scheduler.errors import InvalidBindingError

__all__ = [
    "WHY_DUPLICATE",
    "WHY_OBSOLETE",
    "WHY_REPOINT",
    "WHY_REVIVE",
    "CrossReference",
    "cross_reference_fixed",
    "cross_reference_picked",
]

WHY_OBSOLETE = "obsolete: cluster not picked by the latest policy"
WHY_DUPLICATE = "obsolete duplicate: another binding of this cluster is re-used"
WHY_REPOINT = "obsolete: cluster picked again, re-pointed at the latest snapshot"
WHY_REVIVE = "unscheduled: cluster picked again, restored to its previous state"
_REVIVABLE = (names.STATE_SCHEDULED, names.STATE_BOUND)


@dataclass
class CrossReference:
    create: list[ClusterResourceBinding] = field(default_factory=list)
    patch: list[BindingPatch] = field(default_factory=list)
    patched: list[ClusterResourceBinding] = field(default_factory=list)
    """Every re-used binding as it will be, including ones whose patch was a no-op."""
    unschedule: list[BindingPatch] = field(default_factory=list)

    def reuse(
        self,
        ctx: Context,
        binding: ClusterResourceBinding,
        *,
        state: str,
        decision: ClusterDecision,
        revive: bool,
    ) -> None:
        why = WHY_REVIVE if revive else WHY_REPOINT
        updated, patch = rebind(
            binding,
            state=state,
            snapshot_name=ctx.snapshot_name,
            decision=decision,
            clear_previous_state=revive,
            why=why,
        )
        self.patched.append(updated)
        if patch is not None:
            self.patch.append(patch)
            ctx.log.add("revived" if revive else "patched", why, binding.spec.target_cluster)

    def drop(self, ctx: Context, binding: ClusterResourceBinding, why: str) -> None:
        self.unschedule.append(mark_unscheduled(binding, why))
        ctx.log.add("unscheduled", why, binding.spec.target_cluster)

    def new(self, ctx: Context, cluster: str, decision: ClusterDecision) -> None:
        name = ctx.new_binding_name(cluster)
        namespace = ctx.snapshot.metadata.namespace
        self.create.append(
            new_binding(name, ctx.placement, cluster, ctx.snapshot_name, decision, namespace)
        )


def previous_state(binding: ClusterResourceBinding) -> str:
    state = binding.metadata.annotations.get(names.PREVIOUS_BINDING_STATE_ANNOTATION)
    if state is None:
        raise InvalidBindingError(
            f"binding {binding.metadata.name!r} is Unscheduled but has no "
            f"{names.PREVIOUS_BINDING_STATE_ANNOTATION} annotation, so it cannot be revived"
        )
    if state not in _REVIVABLE:
        raise InvalidBindingError(
            f"binding {binding.metadata.name!r} has {names.PREVIOUS_BINDING_STATE_ANNOTATION}="
            f"{state!r}; expected {' or '.join(_REVIVABLE)}"
        )
    return state


def cross_reference_picked(
    ctx: Context,
    picked: Sequence[str],
    decision: Callable[[str], ClusterDecision],
    unscheduled: Sequence[ClusterResourceBinding],
    obsolete: Sequence[ClusterResourceBinding],
) -> CrossReference:
    """kubefleet-rules 4.8.1 (PickAll, PickN). `picked` is in rank order; creates follow it."""
    out = CrossReference()
    wanted = set(picked)
    checked: set[str] = set()
    reused: set[str] = set()
    for binding in obsolete:
        cluster = binding.spec.target_cluster
        checked.add(cluster)
        if cluster not in wanted:
            out.drop(ctx, binding, WHY_OBSOLETE)
        elif cluster in reused:
            out.drop(ctx, binding, WHY_DUPLICATE)
        else:
            reused.add(cluster)
            out.reuse(
                ctx, binding, state=binding.spec.state, decision=decision(cluster), revive=False
            )
    for binding in unscheduled:
        cluster = binding.spec.target_cluster
        checked.add(cluster)
        if cluster in wanted and cluster not in reused:
            reused.add(cluster)
            out.reuse(
                ctx, binding, state=previous_state(binding), decision=decision(cluster), revive=True
            )
    for cluster in picked:
        if cluster not in checked:
            out.new(ctx, cluster, decision(cluster))
    return out


def cross_reference_fixed(
    ctx: Context,
    valid: Sequence[str],
    decision: Callable[[str], ClusterDecision],
    scheduled_or_bound: Sequence[ClusterResourceBinding],
    unscheduled: Sequence[ClusterResourceBinding],
    obsolete: Sequence[ClusterResourceBinding],
) -> CrossReference:
    """kubefleet-rules 4.8.2 (PickFixed), valid targets in list order."""
    out = CrossReference()
    current = {b.spec.target_cluster for b in scheduled_or_bound}
    # KubeFleet builds maps by target cluster: the last binding in name order wins.
    last_unscheduled = {b.spec.target_cluster: b for b in unscheduled}
    last_obsolete = {b.spec.target_cluster: b for b in obsolete}
    for cluster in valid:
        if cluster in current:
            continue
        if cluster in last_obsolete:
            binding = last_obsolete[cluster]
            out.reuse(
                ctx, binding, state=binding.spec.state, decision=decision(cluster), revive=False
            )
        elif cluster in last_unscheduled:
            binding = last_unscheduled[cluster]
            out.reuse(
                ctx, binding, state=previous_state(binding), decision=decision(cluster), revive=True
            )
        else:
            out.new(ctx, cluster, decision(cluster))
    targets = set(valid)
    for binding in obsolete:
        cluster = binding.spec.target_cluster
        if cluster not in targets:
            out.drop(ctx, binding, WHY_OBSOLETE)
        elif cluster in current or last_obsolete[cluster] is not binding:
            out.drop(ctx, binding, WHY_DUPLICATE)
    return out
