"""The ClusterAffinity plugin: required terms filter, preferred terms score (kubefleet-rules 5.1).

The work lives in `filtering.py` and `scoring.py`; this class wires it to the extension points
and keeps the compiled terms in the cycle store, so each selector is compiled once per cycle
and each distinct quantity text is parsed once per cycle."""

from __future__ import annotations

from collections.abc import Sequence

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster, PlacementPolicy
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
)
from scheduler.framework.score import ClusterScore
from scheduler.framework.sharing import CLUSTER, FILTER, FLEET, SCORE, canonical
from scheduler.framework.status import Status
from scheduler.plugins.cluster_affinity.filtering import (
    SKIP_NO_REQUIRED_TERMS,
    compile_required,
    filter_cluster,
    filter_clusters,
    required_terms,
)
from scheduler.plugins.cluster_affinity.properties import QuantityCache
from scheduler.plugins.cluster_affinity.scoring import (
    SKIP_NO_PREFERRED_TERMS,
    ScoringError,
    compile_preferred,
    preferred_terms,
    score_cluster,
    score_clusters,
)
from scheduler.plugins.cluster_affinity.state import (
    NAME,
    PREFERRED,
    QUANTITIES,
    REQUIRED,
    PreferredTerm,
    RequiredTerm,
)
from scheduler.requeue.requeue_hints import ClusterChange, affinity_may_change

__all__ = ["ClusterAffinity"]

_ZERO = ClusterScore()


class ClusterAffinity:
    """PreFilter, Filter, PreScore and Score plugin. Stateless across cycles."""

    name = NAME
    # Filter reads the required terms and the cluster; Score the preferred terms, the cluster
    # and every cluster's value of a sorted property (scheduler.framework.sharing).
    sharing = {FILTER: CLUSTER, SCORE: FLEET}

    def signature(self, stage: str, snapshot: ClusterSchedulingPolicySnapshot) -> str:
        policy = snapshot.spec.policy
        return canonical(required_terms(policy) if stage == FILTER else preferred_terms(policy))

    def requeue_hint(self, policy: PlacementPolicy | None, change: ClusterChange) -> bool:
        """A label or property the policy's affinity terms read changed."""
        return affinity_may_change(policy, change)

    def pre_filter(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
        terms = required_terms(snapshot.spec.policy)
        if not terms:
            return Status.skip(SKIP_NO_REQUIRED_TERMS)
        state.write(REQUIRED, compile_required(terms))
        return Status.success()

    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> Status:
        terms = self._required(state, snapshot)
        if not terms:
            return Status.success()  # nothing required (PreFilter would have skipped us)
        return filter_cluster(terms, facts_of(cluster), _quantities(state))

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[Status | None]:
        terms = self._required(state, snapshot)
        if not terms:
            return [None] * len(facts)
        return filter_clusters(terms, facts, _quantities(state))

    def pre_score(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
        terms = preferred_terms(snapshot.spec.policy)
        if not terms:
            return Status.skip(SKIP_NO_PREFERRED_TERMS)
        try:
            compiled = compile_preferred(terms, state.cluster_facts(), _quantities(state))
        except ScoringError as exc:
            return Status.internal_error(str(exc))
        state.write(PREFERRED, compiled)
        return Status.success()

    def score(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> tuple[ClusterScore, Status]:
        try:
            terms = self._preferred(state, snapshot)
            affinity = score_cluster(terms, facts_of(cluster), _quantities(state))
        except ScoringError as exc:
            return _ZERO, Status.internal_error(str(exc))
        return ClusterScore(affinity_score=affinity), Status.success()

    def score_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[ClusterScore | None]:
        # A ScoringError propagates: the per-cluster path reports it as KubeFleet does.
        terms = self._preferred(state, snapshot)
        totals = score_clusters(terms, facts, _quantities(state))
        # One ClusterScore per distinct total (frozen, compared by value).
        made = {total: ClusterScore(affinity_score=total) for total in set(totals)}
        return [made[total] for total in totals]

    def _required(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> tuple[RequiredTerm, ...]:
        terms = state.read(REQUIRED)
        if terms is None:  # called without PreFilter: compile now, once
            terms = compile_required(required_terms(snapshot.spec.policy))
            state.write(REQUIRED, terms)
        return terms

    def _preferred(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> tuple[PreferredTerm, ...]:
        terms = state.read(PREFERRED)
        if terms is None:  # called without PreScore: compile now, once
            preferred = preferred_terms(snapshot.spec.policy)
            terms = compile_preferred(preferred, state.cluster_facts(), _quantities(state))
            state.write(PREFERRED, terms)
        return terms


def _quantities(state: CycleState) -> QuantityCache:
    cache = state.read(QUANTITIES)
    if cache is None:
        cache = QuantityCache()
        state.write(QUANTITIES, cache)
    return cache


_plugin = ClusterAffinity()
_: tuple[PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin] = (
    _plugin,
    _plugin,
    _plugin,
    _plugin,
)  # type-checking fails if the contract drifts
