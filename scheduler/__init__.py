"""The scheduling framework: pure, deterministic, no I/O.

`schedule(CycleInput, profile)` runs one cycle and returns a `CycleResult`: the `BindingPlan`
activities apply, whether to requeue, and the `Explanation` of every cluster's fate. Its
packages, one concept each (the cycle, the framework, room, moves, requeue, ...), are mapped in
scheduler/README.md."""

from scheduler.cycles.models import CapacityInput, CycleInput, CycleResult, Outcome
from scheduler.cycles.plan import BindingPatch, BindingPlan, SnapshotStatusWrite
from scheduler.cycles.schedule import schedule
from scheduler.errors import (
    CycleError,
    InvalidBindingError,
    InvalidInputError,
    InvalidSnapshotError,
)
from scheduler.explain.explanation import (
    BindingGroup,
    Explanation,
    FilterGroup,
    InvalidTarget,
    ScoreGroup,
)
from scheduler.framework.errors import PluginError, ProfileError, SchedulerError
from scheduler.framework.profile import Profile, ScoreMode, default_profile, load_profile

__all__ = [
    "BindingGroup",
    "BindingPatch",
    "BindingPlan",
    "CapacityInput",
    "CycleError",
    "CycleInput",
    "CycleResult",
    "Explanation",
    "FilterGroup",
    "InvalidBindingError",
    "InvalidInputError",
    "InvalidSnapshotError",
    "InvalidTarget",
    "Outcome",
    "PluginError",
    "Profile",
    "ProfileError",
    "SchedulerError",
    "ScoreGroup",
    "ScoreMode",
    "SnapshotStatusWrite",
    "default_profile",
    "load_profile",
    "schedule",
]
