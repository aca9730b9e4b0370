"""What a candidate profile would change: the same reads scheduled under two profiles, compared.

`fleet-scheduler plan --all --config NEW.yaml` asks, for every placement, whether the clusters
it ends up on would differ if the scheduler ran NEW.yaml instead of the current profile. Both
profiles see exactly the same input, so any difference is the profile's doing, not the fleet's
(a cluster that joined since the last turn moves both decisions alike).

What "the decision" is depends on the placement type, because KubeFleet's cycle keeps what it
already picked (kubefleet-rules 4.5, 4.6):

- PickN: when the normal cycles differ (it is short of N, or is being downscaled), the next
  turn's: that is the change it makes at its next turn. Otherwise the clusters each profile
  picks when it evaluates clusters, a fresh cycle (`CycleInput.fresh`), a change that waits
  for it to evaluate again (a fresh requeue, a scale-up, a policy change): a steady PickN
  placement evaluates nothing in a normal cycle, so a normal cycle would report every weight
  change as "no change".
- PickAll and PickFixed: the normal cycle, whose decision is the next turn's. Like KubeFleet's,
  a PickAll placement keeps a cluster it already holds for the same policy
  (IgnoredDuringExecution), so a candidate that filters more shows no removal until the policy
  changes.

A placement that enforces its affinity during execution (docs/enforcement.md) does drop such a
cluster: its turn first judges the clusters it holds by the profile's own required filters, and
a binding that fails is unscheduled (PickAll) or moved (PickN; PickFixed keeps it). So for one
(`enforcing`), each profile's decision is its cycle with the bindings that profile would judge
lost taken away, and those clusters' fate says why ("lost ..."). Each move is still subject to
the disruption budget and, capacity-aware, to room, as the turn's is.

Pure: one function of the cycle's input and two profiles, so `plan --all` can run it in child
processes and tests can run it without a hub."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from hub import names
from hub.types import ClusterResourceBinding
from scheduler.cycles.models import CycleInput, CycleResult
from scheduler.cycles.plan import BindingPlan
from scheduler.cycles.schedule import placement_type_of, schedule
from scheduler.explain.explanation import Explanation, ScoreGroup
from scheduler.framework.profile import Profile
from scheduler.moves.enforcement import lost_bindings

__all__ = [
    "FATE_LOST",
    "FATE_NOT_CONSIDERED",
    "FATE_NOT_EVALUATED",
    "ClusterChange",
    "Fate",
    "FleetWhatIf",
    "PlacementWhatIf",
    "compare_profiles",
    "fates_of",
    "selected_after",
    "summarize",
]

# A cluster a cycle's explanation does not mention: PickN's percentageOfClustersToScore stopped
# before it, or the cycle judged no cluster at all (a steady PickN, a failed cycle).
FATE_NOT_EVALUATED: Final = "not evaluated"
FATE_NOT_CONSIDERED: Final = "not considered"
FATE_PICKED: Final = "picked"
FATE_NOT_PICKED: Final = "not picked"
FATE_KEPT: Final = "kept"
FATE_UNSCHEDULED: Final = "unscheduled"
FATE_FIXED: Final = "fixed target"
FATE_INVALID: Final = "invalid target"
FATE_NOT_FOUND: Final = "not found"
FATE_LOST: Final = "lost (affinity enforced during execution)"
DETAIL_KEPT: Final = "has a binding of this snapshot"
DETAIL_NOT_FOUND: Final = "no such member cluster"
DETAIL_HOLDS: Final = "placed there now"

_ACTIVE_STATES: Final = frozenset({names.STATE_SCHEDULED, names.STATE_BOUND})


@dataclass(frozen=True)
class Fate:
    """What one cycle did with one cluster: `state` ("picked", "filtered by TaintToleration")
    and its detail (scores, or the plugin's reason exactly as KubeFleet words it)."""

    state: str
    detail: str = ""
    scored: bool = False
    """The detail is scores (picked, not picked), not a reason."""


@dataclass(frozen=True)
class ClusterChange:
    """A cluster the candidate's decision adds to the placement, or removes from it."""

    cluster: str
    added: bool
    now: Fate
    """What the candidate profile does with it."""
    was: Fate
    """What the current profile does with it, on the same reads."""


@dataclass(frozen=True)
class PlacementWhatIf:
    """One placement under both profiles."""

    placement: str
    """Its key: `name`, or `namespace/name` for a ResourcePlacement."""
    placement_type: str
    changes: tuple[ClusterChange, ...] = ()
    at_next_turn: bool = False
    """The change shows in the placement's next turn; False: only when it next evaluates
    clusters (PickN: a fresh requeue, a scale-up, a policy change)."""
    baseline_error: str | None = None
    candidate_error: str | None = None
    """Why that profile's cycle could not act (a plugin failing, a bad annotation)."""

    @property
    def changed(self) -> bool:
        return bool(self.changes) or self.baseline_error != self.candidate_error


@dataclass(frozen=True)
class FleetWhatIf:
    """Every placement's comparison, and what they add up to."""

    placements: tuple[PlacementWhatIf, ...]
    load: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Cluster -> (bindings added, bindings removed) over all changed placements."""

    @property
    def changed(self) -> list[PlacementWhatIf]:
        return [p for p in self.placements if p.changed]

    @property
    def added(self) -> int:
        return sum(c.added for p in self.placements for c in p.changes)

    @property
    def removed(self) -> int:
        return sum(not c.added for p in self.placements for c in p.changes)

    def busiest(self, count: int) -> list[tuple[str, int, int]]:
        """The `count` clusters whose number of bindings changes most: (cluster, added,
        removed), the largest net change first (then the most churn, then by name)."""
        ranked = sorted(
            self.load.items(),
            key=lambda item: (-abs(item[1][0] - item[1][1]), -sum(item[1]), item[0]),
        )
        return [(cluster, added, removed) for cluster, (added, removed) in ranked[:count]]


def selected_after(bindings: Iterable[ClusterResourceBinding], plan: BindingPlan) -> frozenset[str]:
    """The clusters the placement has an active (Scheduled or Bound) binding on once `plan` is
    applied: the active ones it has, less those the plan unschedules, plus those it creates or
    patches (a patch re-points an obsolete binding or revives an unscheduled one)."""
    by_name = {b.metadata.name: b for b in bindings}
    active = {
        name
        for name, b in by_name.items()
        if b.metadata.deletion_timestamp is None and b.spec.state in _ACTIVE_STATES
    }
    active -= {p.name for p in (*plan.unschedule, *plan.unschedule_dangling)}
    active |= {p.name for p in plan.patch if p.name in by_name}
    clusters = {by_name[name].spec.target_cluster for name in active}
    return frozenset(clusters | {b.spec.target_cluster for b in plan.create})


def _scores(group: ScoreGroup) -> str:
    parts = [f"affinity {group.affinity}"]
    if group.topology:
        parts.append(f"topology spread {group.topology}")
    if group.obsolete:
        # In the fresh cycles compared here, every binding the placement holds is obsolete.
        parts.append(DETAIL_HOLDS)
    if group.total is not None:
        parts.append(f"weighted total {group.total}")
    return ", ".join(parts)


def fates_of(explanation: Explanation) -> dict[str, Fate]:
    """Every cluster the explanation mentions, with its fate. PickAll scores nothing, so its
    picks carry no scores."""
    scored = explanation.placement_type == names.PICK_N
    out: dict[str, Fate] = {}
    for cluster in explanation.kept:
        out[cluster] = Fate(FATE_KEPT, DETAIL_KEPT)
    for group in explanation.bindings:
        if group.action == "unscheduled":
            for cluster in group.clusters:
                out[cluster] = Fate(FATE_UNSCHEDULED, group.why)
    for fate, groups in (
        (FATE_PICKED, explanation.picked),
        (FATE_NOT_PICKED, explanation.not_picked),
    ):
        for g in groups:
            detail = _scores(g) if scored else ""
            for cluster in g.clusters:
                out[cluster] = Fate(fate, detail, scored=scored)
    for f in explanation.filtered:
        for cluster in f.clusters:
            out[cluster] = Fate(f"filtered by {f.plugin}", f.reason)
    for cluster in explanation.valid:
        out[cluster] = Fate(FATE_FIXED)
    for target in explanation.invalid:
        out[target.cluster] = Fate(FATE_INVALID, target.reason)
    for cluster in explanation.not_found:
        out[cluster] = Fate(FATE_NOT_FOUND, DETAIL_NOT_FOUND)
    return out


def _unmentioned(explanation: Explanation) -> Fate:
    return Fate(FATE_NOT_EVALUATED if explanation.not_evaluated else FATE_NOT_CONSIDERED)


def _decision(input: CycleInput, result: CycleResult) -> frozenset[str]:
    # A cycle that cannot act writes no binding: the placement stays where it is.
    plan = BindingPlan() if result.error else result.plan
    return selected_after(input.bindings, plan)


@dataclass(frozen=True)
class _Turn:
    """One profile's turn on the reads: its enforcement (when the placement enforces), then
    its cycle."""

    input: CycleInput
    result: CycleResult
    lost: dict[str, Fate]
    """Cluster -> its fate, for the bindings the enforcement took away."""

    @property
    def decision(self) -> frozenset[str]:
        return _decision(self.input, self.result)

    def fates(self) -> dict[str, Fate]:
        return {**fates_of(self.result.explanation), **self.lost}


def _turn(input: CycleInput, profile: Profile, *, enforcing: bool) -> _Turn:
    lost: dict[str, Fate] = {}
    if enforcing and placement_type_of(input.snapshot) != names.PICK_FIXED:
        found, _ = lost_bindings(input.snapshot, input.clusters, input.bindings, profile, input.now)
        gone = {item.binding.metadata.name for item in found}
        lost = {item.cluster: Fate(FATE_LOST, item.reason) for item in found}
        if gone:
            kept = [b for b in input.bindings if b.metadata.name not in gone]
            input = input.model_copy(update={"bindings": kept})
    return _Turn(input=input, result=schedule(input, profile), lost=lost)


def compare_profiles(
    key: str,
    input: CycleInput,
    baseline: Profile,
    candidate: Profile,
    *,
    enforcing: bool = False,
) -> PlacementWhatIf:
    """The placement's decision under `baseline` and under `candidate`, on the same `input`
    (whose `fresh` is ignored: the placement type chooses, see the module doc); `enforcing`:
    the placement enforces its affinity during execution, and each profile's turn drops what
    that profile's filters judge lost first.

    A PickN placement whose next turn (a normal cycle) already decides differently, or fails
    differently, is compared on that turn, so what is said to come "at its next turn" is what
    that turn does; otherwise on the fresh cycles, a change that waits for it to evaluate."""
    placement_type = placement_type_of(input.snapshot)
    normal = input.model_copy(update={"fresh": False})
    compared = functools.partial(
        _compared, key, placement_type, baseline=baseline, candidate=candidate, enforcing=enforcing
    )
    turn = compared(normal, at_next_turn=True)
    if placement_type != names.PICK_N or turn.changed:
        return turn
    return compared(input.model_copy(update={"fresh": True}), at_next_turn=False)


def _compared(
    key: str,
    placement_type: str,
    input: CycleInput,
    *,
    baseline: Profile,
    candidate: Profile,
    enforcing: bool,
    at_next_turn: bool,
) -> PlacementWhatIf:
    before = _turn(input, baseline, enforcing=enforcing)
    after = _turn(input, candidate, enforcing=enforcing)
    was, now = before.decision, after.decision
    changes: tuple[ClusterChange, ...] = ()
    if was != now:
        was_fates, now_fates = before.fates(), after.fates()
        changes = tuple(
            ClusterChange(
                cluster=cluster,
                added=cluster in now,
                now=now_fates.get(cluster, _unmentioned(after.result.explanation)),
                was=was_fates.get(cluster, _unmentioned(before.result.explanation)),
            )
            for cluster in sorted(was ^ now)
        )
    return PlacementWhatIf(
        placement=key,
        placement_type=placement_type,
        changes=changes,
        at_next_turn=at_next_turn,
        baseline_error=before.result.error,
        candidate_error=after.result.error,
    )


def summarize(placements: Sequence[PlacementWhatIf]) -> FleetWhatIf:
    """The placements' comparisons with each cluster's change in bindings."""
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    for placement in placements:
        for change in placement.changes:
            (added if change.added else removed)[change.cluster] += 1
    load = {c: (added[c], removed[c]) for c in sorted(set(added) | set(removed))}
    return FleetWhatIf(placements=tuple(placements), load=load)
