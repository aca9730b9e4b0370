"""TopologySpreadConstraints: spread a PickN placement evenly over topology domains.

Split like KubeFleet's `plugins/topologyspreadconstraints/`: `state.py` (domain counts, the
skew table, the per-cycle verdict) and `plugin.py` (the extension points)."""

from scheduler.plugins.topology_spread_constraints.plugin import (
    BATCH_LIMIT,
    ERROR_NO_POLICY,
    SKIP_NO_CONSTRAINTS,
    SKIP_NO_DO_NOT_SCHEDULE,
    SKIP_NO_POLICY,
    SKIP_NO_SCORES,
    TopologySpreadConstraints,
)
from scheduler.plugins.topology_spread_constraints.state import (
    NAME,
    REASON_VIOLATED,
    SCHEDULE_ANYWAY_PENALTY,
    SKEW_CHANGE_SCORE_FACTOR,
)

__all__ = [
    "BATCH_LIMIT",
    "ERROR_NO_POLICY",
    "NAME",
    "REASON_VIOLATED",
    "SCHEDULE_ANYWAY_PENALTY",
    "SKEW_CHANGE_SCORE_FACTOR",
    "SKIP_NO_CONSTRAINTS",
    "SKIP_NO_DO_NOT_SCHEDULE",
    "SKIP_NO_POLICY",
    "SKIP_NO_SCORES",
    "TopologySpreadConstraints",
]
