"""Preemption: which bindings of lower-priority placements to take off which clusters so that a
placement short of room gets it, kube-scheduler's DefaultPreemption in fleet form (issue 37).
`inputs` builds its view from the ledgers, `victims` decides, and `search` is the brute-force
yardstick tests and the bench compare it with. The DefaultPreemption PostFilter plugin
(scheduler.plugins.default_preemption) calls it; activities.preemption reads the hub for it and
makes its plan. Pure."""

from scheduler.preemption.inputs import rooms_from_ledgers
from scheduler.preemption.models import (
    NEVER,
    PREEMPT_LOWER_PRIORITY,
    Candidates,
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
    "Candidates",
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
    "rooms_from_ledgers",
    "sort_key",
]
