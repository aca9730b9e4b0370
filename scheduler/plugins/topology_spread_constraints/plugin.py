"""The TopologySpreadConstraints plugin (kubefleet-rules 5.6).

PostBatch limits a PickN cycle to one new cluster whenever the policy has a constraint, because
every pick changes the domain counts the next pick depends on; the placement then converges one
cluster per cycle. PreFilter evaluates every cluster once (`state.evaluate`); Filter and Score
only read that verdict."""

from __future__ import annotations

from collections.abc import Sequence

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster, PlacementPolicy
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    PostBatchPlugin,
    PreFilterPlugin,
    PreScorePlugin,
)
from scheduler.framework.score import ClusterScore
from scheduler.framework.sharing import NOT_SHARED
from scheduler.framework.status import Status
from scheduler.plugins.topology_spread_constraints.state import (
    NAME,
    STATE,
    TopologyError,
    TopologyState,
    evaluate,
)
from scheduler.requeue.requeue_hints import ClusterChange

__all__ = [
    "BATCH_LIMIT",
    "ERROR_NO_POLICY",
    "SKIP_NO_CONSTRAINTS",
    "SKIP_NO_DO_NOT_SCHEDULE",
    "SKIP_NO_POLICY",
    "SKIP_NO_SCORES",
    "TopologySpreadConstraints",
]

BATCH_LIMIT = 1
SKIP_NO_POLICY = "policy does not exist"
ERROR_NO_POLICY = "policy does not exist"
SKIP_NO_CONSTRAINTS = "no topology spread constraint is present"
SKIP_NO_DO_NOT_SCHEDULE = "no DoNotSchedule topology spread constraint is present"
SKIP_NO_SCORES = "no available scores"

_ZERO = ClusterScore()


class TopologySpreadConstraints:
    """PostBatch, PreFilter, Filter, PreScore and Score plugin. Stateless across cycles."""

    name = NAME
    sharing = NOT_SHARED  # reads the placement's bindings (scheduler.framework.sharing)

    def post_batch(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> tuple[int, Status]:
        policy = snapshot.spec.policy
        if policy is None:  # PostBatch runs for PickN only, which always has a policy
            return 0, Status.internal_error(ERROR_NO_POLICY)
        if not policy.topology_spread_constraints:
            return 0, Status.skip(SKIP_NO_CONSTRAINTS)
        return BATCH_LIMIT, Status.success()

    def pre_filter(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
        policy = snapshot.spec.policy
        if policy is None:
            return Status.skip(SKIP_NO_POLICY)
        if not policy.topology_spread_constraints:
            return Status.skip(SKIP_NO_CONSTRAINTS)
        try:
            verdict = self._evaluate(state, snapshot)
        except TopologyError as exc:
            return Status.internal_error(f"failed to prepare plugin state: {exc}")
        if not verdict.do_not_schedule:
            return Status.skip(SKIP_NO_DO_NOT_SCHEDULE)
        return Status.success()

    def requeue_hint(self, policy: PlacementPolicy | None, change: ClusterChange) -> bool:
        """The cluster's value of a constraint's topology key changed (its domain)."""
        if policy is None:
            return False
        return any(c.topology_key in change.labels for c in policy.topology_spread_constraints)

    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> Status:
        verdict = state.read(STATE)
        if verdict is None:
            if snapshot.spec.policy is None or not snapshot.spec.policy.topology_spread_constraints:
                return Status.success()
            try:
                verdict = self._evaluate(state, snapshot)
            except TopologyError as exc:
                return Status.internal_error(f"failed to prepare plugin state: {exc}")
        reasons = verdict.violations.get(cluster.metadata.name)
        if reasons:
            return Status.unschedulable(*reasons)
        return Status.success()

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[Status | None]:
        verdict = state.read(STATE)
        if verdict is None:  # the per-cluster path evaluates, or says why it cannot
            return [self.filter(state, snapshot, f.cluster) for f in facts]
        violations = verdict.violations
        if not violations:
            return [None] * len(facts)
        # One Status per distinct reason (statuses are compared by value).
        statuses: dict[tuple[str, ...], Status] = {}
        out: list[Status | None] = []
        for f in facts:
            reasons = violations.get(f.name)
            if not reasons:
                out.append(None)
                continue
            status = statuses.get(reasons)
            if status is None:
                status = statuses[reasons] = Status.unschedulable(*reasons)
            out.append(status)
        return out

    def pre_score(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
        policy = snapshot.spec.policy
        if policy is None:
            return Status.internal_error(ERROR_NO_POLICY)
        if not policy.topology_spread_constraints:
            return Status.skip(SKIP_NO_CONSTRAINTS)
        verdict = state.read(STATE)
        if verdict is None:  # PreFilter did not run (a profile without it): evaluate now
            try:
                verdict = self._evaluate(state, snapshot)
            except TopologyError as exc:
                return Status.internal_error(f"failed to prepare plugin state: {exc}")
        if not verdict.scores:
            return Status.skip(SKIP_NO_SCORES)
        return Status.success()

    def score(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> tuple[ClusterScore, Status]:
        verdict = state.read(STATE)
        if verdict is None:
            return _ZERO, Status.internal_error("failed to read plugin state: no state is stored")
        score = verdict.scores.get(cluster.metadata.name)
        if score is None:
            return _ZERO, Status.internal_error(
                f"no score found for cluster {cluster.metadata.name}"
            )
        return ClusterScore(topology_spread_score=score), Status.success()

    def score_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[ClusterScore | None]:
        verdict = state.read(STATE)
        if verdict is None:
            raise LookupError("no topology state: the per-cluster path reports it")
        scores = verdict.scores
        # One ClusterScore per distinct value (frozen, compared by value): a fleet's topology
        # scores take a handful of values.
        made = {value: ClusterScore(topology_spread_score=value) for value in set(scores.values())}
        # A cluster without a score raises KeyError: the per-cluster path reports it.
        return [made[scores[f.name]] for f in facts]

    def _evaluate(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> TopologyState:
        policy = snapshot.spec.policy
        constraints = policy.topology_spread_constraints if policy else []
        # The set's own membership test: the same answer as has_scheduled_or_bound_binding,
        # asked once per cluster without a Python call.
        has_binding = state.scheduled_or_bound.__contains__
        verdict = evaluate(constraints, state.cluster_facts(), has_binding)
        state.write(STATE, verdict)
        return verdict


_plugin = TopologySpreadConstraints()
_: tuple[PostBatchPlugin, PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin] = (
    _plugin,
    _plugin,
    _plugin,
    _plugin,
    _plugin,
)  # type-checking fails if the contract drifts
