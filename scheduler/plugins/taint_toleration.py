"""TaintToleration: a cluster is feasible only if the policy tolerates every one of its taints.

kubefleet-rules 5.4, after KubeFleet's `plugins/tainttoleration/filtering.go`. Filter only, so it
runs for PickAll and PickN; PickFixed runs no plugins. The reason renders the taint the way Go's
`%+v` renders a `*Taint`, because that string lands in decisions users and tools already read.

A toleration whose operator is absent (None) gets the API server's default, `Equal`; one whose
operator is present but empty, or anything but `Equal`/`Exists`, tolerates nothing, as in
KubeFleet (kubefleet-rules 10.25)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster, PlacementPolicy, Taint
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.interfaces import BatchFilterPlugin
from scheduler.framework.sharing import CLUSTER, FILTER, canonical
from scheduler.framework.status import Status
from scheduler.requeue.requeue_hints import ClusterChange

__all__ = ["NAME", "REASON_UNTOLERATED", "TaintToleration", "render_taint", "untolerated"]

NAME = "TaintToleration"
REASON_UNTOLERATED = "taint {taint} cannot be tolerated"

EQUAL = "Equal"
EXISTS = "Exists"


@dataclass(frozen=True, slots=True)
class _Toleration:
    """A toleration with Go's zero values in place of None."""

    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == EXISTS:
            return not self.key or self.key == taint.key
        if self.operator == EQUAL:
            return self.key == taint.key and self.value == (taint.value or "")
        return False


TOLERATIONS: StateKey[tuple[_Toleration, ...]] = StateKey(f"{NAME}/tolerations")


def render_taint(taint: Taint) -> str:
    """Go's `%+v` of a *Taint: `&{Key:key1 Value:value1 Effect:NoSchedule}`."""
    return f"&{{Key:{taint.key} Value:{taint.value or ''} Effect:{taint.effect}}}"


class TaintToleration:
    """Filter plugin. Stateless across cycles; the policy's tolerations are read once per cycle."""

    name = NAME
    sharing = {FILTER: CLUSTER}  # the policy's tolerations and the cluster's taints

    def signature(self, stage: str, snapshot: ClusterSchedulingPolicySnapshot) -> str:
        policy = snapshot.spec.policy
        return canonical(policy.tolerations if policy is not None else [])

    def requeue_hint(self, policy: PlacementPolicy | None, change: ClusterChange) -> bool:
        """Only the cluster's taints decide here."""
        return change.taints

    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> Status:
        taints = facts_of(cluster).taints
        if not taints:
            return Status.success()
        return _verdict(taints, _tolerations(state, snapshot)) or Status.success()

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[Status | None]:
        tolerations = _tolerations(state, snapshot)
        return [
            _verdict(f.taints, tolerations) if f.taints else None for f in facts
        ]


def _verdict(taints: Sequence[Taint], tolerations: tuple[_Toleration, ...]) -> Status | None:
    """Unschedulable for the first taint no toleration tolerates, else None."""
    for taint in taints:
        if not any(toleration.tolerates(taint) for toleration in tolerations):
            return Status.unschedulable(REASON_UNTOLERATED.format(taint=render_taint(taint)))
    return None


def untolerated(policy: PlacementPolicy | None, taints: Sequence[Taint]) -> Taint | None:
    """The first of `taints` the policy's tolerations do not tolerate (the one Filter names),
    or None."""
    tolerations = _compiled(policy)
    return next((t for t in taints if not any(x.tolerates(t) for x in tolerations)), None)


def _compiled(policy: PlacementPolicy | None) -> tuple[_Toleration, ...]:
    return tuple(
        _Toleration(
            key=t.key or "",
            operator=EQUAL if t.operator is None else t.operator,
            value=t.value or "",
            effect=t.effect or "",
        )
        for t in (policy.tolerations if policy else ())
    )


def _tolerations(
    state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
) -> tuple[_Toleration, ...]:
    cached = state.read(TOLERATIONS)
    if cached is not None:
        return cached
    tolerations = _compiled(snapshot.spec.policy)
    state.write(TOLERATIONS, tolerations)
    return tolerations


_: BatchFilterPlugin = TaintToleration()  # type-checking fails if the contract drifts
