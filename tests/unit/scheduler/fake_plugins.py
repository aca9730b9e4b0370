"""Tiny plugins for framework tests: each does one obvious thing driven by cluster labels, so a
test reads as "this label, therefore that fate" without depending on the real plugins."""

from __future__ import annotations

from dataclasses import dataclass, field

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.profile import Profile, ScoreMode
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Status

CHECKER = EligibilityChecker()

REASON_NOT_READY = "cluster is labelled ready=false"
REASON_ALREADY = "resource placement has already been scheduled or bounded on the cluster"


@dataclass
class Ready:
    """Filter: clusters labelled ready=false are unschedulable."""

    name: str = "Ready"

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status:
        if cluster.metadata.labels.get("ready") == "false":
            return Status.unschedulable(REASON_NOT_READY)
        return Status.success()


@dataclass
class Eligible:
    """Filter: ineligible clusters are unschedulable (ClusterEligibility's contract)."""

    name: str = "Eligible"

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status:
        reason = CHECKER.check(cluster, state.now)
        return Status.success() if reason is None else Status.unschedulable(reason)


@dataclass
class AntiAffinity:
    """SamePlacementAntiAffinity's contract: drop clusters already holding a current binding,
    prefer clusters holding an obsolete one."""

    name: str = "AntiAffinity"

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status:
        if state.has_scheduled_or_bound_binding(cluster.metadata.name):
            return Status.already_selected(REASON_ALREADY)
        return Status.success()

    def score(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> tuple[ClusterScore, Status]:
        obsolete = 1 if state.has_obsolete_binding(cluster.metadata.name) else 0
        return ClusterScore(obsolete_placement_affinity_score=obsolete), Status.success()


@dataclass
class LabelScore:
    """Score: affinity and topology read from the labels `affinity` and `topology`."""

    name: str = "LabelScore"

    def score(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> tuple[ClusterScore, Status]:
        labels = cluster.metadata.labels
        return (
            ClusterScore(
                topology_spread_score=int(labels.get("topology", "0")),
                affinity_score=int(labels.get("affinity", "0")),
            ),
            Status.success(),
        )


@dataclass
class Batch:
    """PostBatch: a fixed batch size limit (TopologySpreadConstraints returns 1)."""

    limit: int = 1
    name: str = "Batch"

    def post_batch(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot
    ) -> tuple[int, Status]:
        return self.limit, Status.success()


@dataclass
class Recorder:
    """Filter and Score that record which clusters they saw."""

    name: str = "Recorder"
    filtered: list[str] = field(default_factory=list)
    scored: list[str] = field(default_factory=list)

    def filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> Status:
        self.filtered.append(cluster.metadata.name)
        return Status.success()

    def score(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, cluster: MemberCluster
    ) -> tuple[ClusterScore, Status]:
        self.scored.append(cluster.metadata.name)
        return ClusterScore(), Status.success()


def fake_profile(
    *,
    batch: int | None = None,
    percentage: int | None = None,
    mode: ScoreMode = ScoreMode.LEXICOGRAPHIC,
    weights: dict[str, int] | None = None,
) -> Profile:
    """Ready, Eligible and AntiAffinity filters; LabelScore and AntiAffinity scores; an
    optional batch limit."""
    ready, anti, label = Ready(), AntiAffinity(), LabelScore()
    return Profile(
        name="fake",
        post_batch=(Batch(batch),) if batch is not None else (),
        filter=(ready, Eligible(), anti),
        score=(label, anti),
        score_mode=mode,
        weights=weights or {},
        percentage_of_clusters_to_score=percentage,
    )
