"""CycleInput and CycleResult: what one scheduling cycle reads and what it returns.

The input is everything KubeFleet's cycle reads (kubefleet-rules 4.1: the latest policy snapshot,
all MemberClusters, the placement's bindings) plus "now", because eligibility depends on the clock
and scheduler/ never reads one. The result is a plan for activities to apply, whether to run
again at once, and an explanation of every cluster's fate."""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from hub.types import ClusterResourceBinding, ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.cycles.plan import BindingPlan
from scheduler.explain.explanation import Explanation
from scheduler.wire import WireModel

__all__ = ["CapacityInput", "CycleInput", "CycleResult", "Outcome"]


class CapacityInput(WireModel):
    """Capacity-aware placement (docs/capacity.md): the placement's requests and what other
    placements' reservations hold on each cluster."""

    requests: str
    """The placement's `fleet-scheduler.io/requests` annotation as written (read by the cycle:
    a bad one fails the cycle with a condition naming the entry)."""
    allocated: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Cluster -> resource -> quantity reserved there by *other* placements' bindings (the
    placement's own reservations left out). A cluster not listed holds none."""
    problem: str | None = None
    """Why the reservations could not be read (the hub serves no CapacityLedgers, or refuses
    them): the cycle fails with a condition saying so, and writes no binding."""


class CycleInput(WireModel):
    snapshot: ClusterSchedulingPolicySnapshot
    """The placement's latest policy snapshot, as read (its status is compared and replaced)."""
    clusters: list[MemberCluster] = Field(default_factory=list)
    """Every MemberCluster of the fleet, including ineligible and leaving ones."""
    bindings: list[ClusterResourceBinding] = Field(default_factory=list)
    """Every binding labelled with the placement's name, read directly from the API server."""
    now: AwareDatetime
    """The cycle's clock (eligibility, lastTransitionTime); must carry a timezone."""
    fresh: bool = False
    """PickN only: reschedule from scratch. Scheduled and Bound bindings of the latest snapshot
    are treated as obsolete for this one cycle, so they compete again with every other cluster
    (keeping the obsolete-placement preference as a final tie-break) and those not re-picked
    are marked Unscheduled. Applies to this cycle only: a requeued follow-up cycle must pass
    False, or it would start over. Ignored for PickAll and PickFixed."""
    capacity: CapacityInput | None = None
    """Set only for a placement that declares requests; None leaves the cycle KubeFleet's."""
    annotation_problems: list[str] = Field(default_factory=list)
    """What is wrong with the placement's own annotations whose problem does not fail the
    cycle (scheduler.opt_in.placement_annotations.annotation_problems: deadline, enforcement,
    priority class, rebalance), each quoting at most 40 characters of its value: added to the
    Scheduled condition's message. Empty, as for every placement without our annotations, leaves the
    condition KubeFleet's."""


class Outcome(WireModel):
    placement_type: str
    wanted: int | None = None
    """N for PickN, the number of distinct targets for PickFixed, None for PickAll."""
    picked: int = 0
    """Clusters selected once the plan is applied (the count in the Scheduled condition)."""
    fulfilled: bool = False
    """The Scheduled condition this cycle writes (or would write) is True."""


class CycleResult(WireModel):
    plan: BindingPlan
    requeue: bool = False
    """Run another cycle right away (PickN hit a plugin's batch limit, kubefleet-rules 4.6 step
    8)."""
    requeue_after_seconds: float | None = None
    """Run another cycle after this delay. KubeFleet's framework never asks for one (10.23)."""
    outcome: Outcome
    explanation: Explanation
    error: str | None = None
    """Why the cycle could not act (bad snapshot, plugin failure, bad binding). The plan then
    has no binding writes, and a snapshot status with a False condition saying so when the
    snapshot's CRP-generation can be read. Retrying without a change will not help."""
