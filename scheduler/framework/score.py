"""Scores: three components compared in order, never summed (kubefleet-rules 4.4).

KubeFleet keeps one integer per concern: the topology spread score, the affinity score, and the
obsolete-placement preference (0 or 1, never persisted). A cluster outranks another when its
tuple `(topology, affinity, obsolete)` is larger; equal tuples fall back to the cluster name, the
larger name ranking higher."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ZERO", "ClusterScore"]


@dataclass(frozen=True, slots=True)
class ClusterScore:
    topology_spread_score: int = 0
    affinity_score: int = 0
    obsolete_placement_affinity_score: int = 0

    def __add__(self, other: ClusterScore) -> ClusterScore:
        return ClusterScore(
            self.topology_spread_score + other.topology_spread_score,
            self.affinity_score + other.affinity_score,
            self.obsolete_placement_affinity_score + other.obsolete_placement_affinity_score,
        )

    def key(self) -> tuple[int, int, int]:
        """The lexicographic comparison key of KubeFleet's default profile."""
        return (
            self.topology_spread_score,
            self.affinity_score,
            self.obsolete_placement_affinity_score,
        )


ZERO = ClusterScore()
