"""Binding classification, the first step of every cycle (kubefleet-rules 4.1 step 4).

Rules apply in order, first match wins; each class keeps name order because the bindings are
sorted by name first, as KubeFleet does after listing them. "Dangling" is only about clusters
that are gone or leaving: a cluster that is merely ineligible keeps its bindings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hub import names
from hub.types import ClusterResourceBinding, MemberCluster

__all__ = ["Classified", "classify"]


@dataclass(slots=True)
class Classified:
    deleting: list[ClusterResourceBinding] = field(default_factory=list)
    unscheduled: list[ClusterResourceBinding] = field(default_factory=list)
    dangling: list[ClusterResourceBinding] = field(default_factory=list)
    obsolete: list[ClusterResourceBinding] = field(default_factory=list)
    scheduled: list[ClusterResourceBinding] = field(default_factory=list)
    bound: list[ClusterResourceBinding] = field(default_factory=list)
    ignored: list[ClusterResourceBinding] = field(default_factory=list)
    """Current-snapshot bindings in no known state (e.g. empty): KubeFleet ignores them."""

    def as_fresh(self) -> Classified:
        """The same bindings with Scheduled and Bound ones of the current snapshot counted as
        obsolete (CycleInput.fresh), still in name order."""
        obsolete = sorted(
            [*self.obsolete, *self.scheduled, *self.bound], key=lambda b: b.metadata.name
        )
        return Classified(
            deleting=self.deleting,
            unscheduled=self.unscheduled,
            dangling=self.dangling,
            obsolete=obsolete,
            ignored=self.ignored,
        )


def classify(
    bindings: Iterable[ClusterResourceBinding],
    clusters: Mapping[str, MemberCluster],
    snapshot_name: str,
) -> Classified:
    out = Classified()
    for binding in sorted(bindings, key=lambda b: b.metadata.name):
        spec = binding.spec
        cluster = clusters.get(spec.target_cluster)
        if binding.metadata.deletion_timestamp is not None:
            out.deleting.append(binding)
        elif spec.state == names.STATE_UNSCHEDULED:
            out.unscheduled.append(binding)
        elif cluster is None or cluster.metadata.deletion_timestamp is not None:
            out.dangling.append(binding)
        elif spec.scheduling_policy_snapshot_name != snapshot_name:
            out.obsolete.append(binding)
        elif spec.state == names.STATE_SCHEDULED:
            out.scheduled.append(binding)
        elif spec.state == names.STATE_BOUND:
            out.bound.append(binding)
        else:
            out.ignored.append(binding)
    return out
