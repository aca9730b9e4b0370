"""The extension points KubeFleet's framework uses, as Protocols (kubefleet-rules 4.3).

A plugin implements any subset and sets `name`. Every method gets the cycle's `CycleState` and
the policy snapshot being scheduled (`snapshot.spec.policy` may be None: that means PickAll).
Plugins must be stateless across cycles (one instance serves every cycle) and do no I/O.

Codes each point may return, and what the runner then does:

- post_batch -> (limit, Status). SUCCESS: `limit` is a candidate batch size, used if
  0 <= limit < the current minimum (which starts at the desired batch size). SKIP: ignored.
  Anything else aborts the cycle.
- pre_filter -> Status. SUCCESS: run. SKIP: this plugin's `filter` is not called this cycle.
  Anything else aborts.
- filter -> Status, per cluster; plugins in profile order, stopping at the first non-SUCCESS.
  SUCCESS from all: the cluster passes. CLUSTER_UNSCHEDULABLE: filtered out, and the status is
  the cluster's decision reason. CLUSTER_ALREADY_SELECTED: dropped silently (neither passed nor
  filtered). INTERNAL_ERROR or anything else: aborts the cycle.
- pre_score -> Status. SUCCESS: run. SKIP: this plugin's `score` is not called. Else aborts.
- score -> (ClusterScore, Status), per passed cluster. SUCCESS: the score is added
  component-wise to the cluster's total. Anything else aborts.
- post_filter -> (PreemptionPlan | None, Status), after the cycle, when a capacity-aware
  placement is left short of room (the turn calls it with `scheduler.preemption`'s candidates,
  built from the hub). SUCCESS with a plan: that plan is made, and no later plugin is asked.
  Anything else: its reasons are reported and the next plugin is asked. A plugin that raises
  stops preemption for the turn, reported as the plugin's failure.

Requeue hint (optional, any plugin): `requeue_hint(policy, change)` says whether the plugin's
verdict or score for a member cluster may change with `change` (scheduler.requeue.requeue_hints); a
cluster's change skips a placement (scheduler.requeue.reach) only when every plugin of the profile
answers False. A profile looks the method up once, when it is built (`RequeueHint`).

"Aborts" means the cycle ends with a `PluginError` naming the plugin; a plugin that raises is
treated the same way. Neither ends the process.

Batch forms (optional, for speed at thousands of clusters): a filter plugin may also define
`filter_all(state, snapshot, facts)`, returning one Status (or None for SUCCESS) per cluster,
and a score plugin `score_all(state, snapshot, facts)`, one ClusterScore (or None) per cluster;
`facts` are the clusters' `scheduler.clusters.facts.ClusterFacts` (compact, cached across cycles;
the model is `.cluster`). They must answer exactly what the per-cluster methods answer for every
cluster. The runner uses them when every plugin of the stage has one; if a batch method raises
or returns a code other than SUCCESS, CLUSTER_UNSCHEDULABLE or CLUSTER_ALREADY_SELECTED, the
stage runs again per cluster, so failures are reported exactly as without batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Status

if TYPE_CHECKING:
    from scheduler.preemption.models import Candidates, PreemptionPlan

__all__ = [
    "BatchFilterPlugin",
    "BatchScorePlugin",
    "FilterPlugin",
    "Plugin",
    "PostBatchPlugin",
    "PostFilterPlugin",
    "PreFilterPlugin",
    "PreScorePlugin",
    "RequeueHint",
    "ScorePlugin",
]

RequeueHint = Callable[[Any, Any], bool]
"""A plugin's `requeue_hint(policy, change)`, as a profile resolves it once when built
(`Profile.requeue_hints`): its arguments are a PlacementPolicy or None and a
scheduler.requeue.requeue_hints.ClusterChange, typed loosely so the framework imports nothing of the
requeue hints."""


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PostBatchPlugin(Plugin, Protocol):
    def post_batch(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> tuple[int, Status]: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> Status: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> tuple[ClusterScore, Status]: ...


@runtime_checkable
class BatchFilterPlugin(FilterPlugin, Protocol):
    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> Sequence[Status | None]: ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    def score_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> Sequence[ClusterScore | None]: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """kube-scheduler's PostFilter, for placements left short of room (DefaultPreemption)."""

    def post_filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, candidates: Candidates
    ) -> tuple[PreemptionPlan | None, Status]: ...
