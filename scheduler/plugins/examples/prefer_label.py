"""PreferLabel: an example Score plugin that prefers clusters carrying a label.

Written the way a third-party plugin would be: it depends only on the framework's contracts,
validates its arguments in the constructor (bad ones raise TypeError/ValueError, which the
profile loader reports with the YAML path), and adds to the affinity component so it composes
with ClusterAffinity in both score modes. Register it from a distribution's metadata:

    [project.entry-points."fleet_scheduler.plugins"]
    PreferLabel = "scheduler.plugins.examples.prefer_label:PreferLabel"
"""

from __future__ import annotations

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ScorePlugin
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Status

__all__ = ["NAME", "PreferLabel"]

NAME = "PreferLabel"
MAX_POINTS = 100


class PreferLabel:
    """Score plugin: `points` to clusters whose label `label` is present (and equals `value`
    when one is given). Stateless."""

    name = NAME

    def __init__(self, *, label: str, value: str | None = None, points: int = 10) -> None:
        if not isinstance(label, str) or not label:
            raise ValueError(f"{NAME}: label must be a non-empty string, got {label!r}")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{NAME}: value must be a string, got {value!r}")
        if isinstance(points, bool) or not isinstance(points, int) or abs(points) > MAX_POINTS:
            raise ValueError(f"{NAME}: points must be an integer in [-100, 100], got {points!r}")
        self.label, self.value, self.points = label, value, points

    def score(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> tuple[ClusterScore, Status]:
        found = cluster.metadata.labels.get(self.label)
        matches = found is not None and (self.value is None or found == self.value)
        return ClusterScore(affinity_score=self.points if matches else 0), Status.success()


_: ScorePlugin = PreferLabel(label="example")  # type-checking fails if the contract drifts
