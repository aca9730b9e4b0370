"""ClusterAffinity: required terms filter clusters, preferred terms score them (kubefleet-rules
5.1).

Split like KubeFleet's `plugins/clusteraffinity/`: `filtering.py` (PreFilter, Filter),
`scoring.py` (PreScore, Score), `state.py` (compiled terms in the cycle store),
`properties.py` (reading property values), `plugin.py` (the class)."""

from scheduler.plugins.cluster_affinity.filtering import (
    REASON_CANNOT_EVALUATE,
    REASON_INVALID_TERM,
    REASON_NO_MATCH,
    SKIP_NO_REQUIRED_TERMS,
)
from scheduler.plugins.cluster_affinity.plugin import ClusterAffinity
from scheduler.plugins.cluster_affinity.scoring import SKIP_NO_PREFERRED_TERMS
from scheduler.plugins.cluster_affinity.state import NAME

__all__ = [
    "NAME",
    "REASON_CANNOT_EVALUATE",
    "REASON_INVALID_TERM",
    "REASON_NO_MATCH",
    "SKIP_NO_PREFERRED_TERMS",
    "SKIP_NO_REQUIRED_TERMS",
    "ClusterAffinity",
]
