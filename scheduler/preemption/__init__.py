"""Preemption: which bindings of lower-priority placements to take off which clusters so that a
placement short of room gets it, kube-scheduler's DefaultPreemption in fleet form (issue 37).
`victims` decides; `search` is the brute-force yardstick tests and the bench compare it with.
Not wired into the turn yet. Pure."""

from scheduler.preemption.models import (
    NEVER,
    PREEMPT_LOWER_PRIORITY,
    ClusterPreemption,
    ClusterRejection,
    Occupant,
    PreemptionPlan,
    Preemptor,
    Room,
    Victim,
)
from scheduler.preemption.victims import Choice, budget_left, choose, plan_preemption, sort_key

__all__ = [
    "NEVER",
    "PREEMPT_LOWER_PRIORITY",
    "Choice",
    "ClusterPreemption",
    "ClusterRejection",
    "Occupant",
    "PreemptionPlan",
    "Preemptor",
    "Room",
    "Victim",
    "budget_left",
    "choose",
    "plan_preemption",
    "sort_key",
]
