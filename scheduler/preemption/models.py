"""What preemption is given and what it answers (scheduler.preemption).

The inputs are built in-process by the turn that reads the hub (exact amounts, `Fraction`); the
plan is a `WireModel` (amounts as quantities), because it crosses Temporal: the turn returns it
to the workflow, and `explain` and `plan -f` show it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from scheduler.room.capacity import ClusterCapacity
from scheduler.wire import WireModel

__all__ = [
    "NEVER",
    "PREEMPT_LOWER_PRIORITY",
    "Candidates",
    "ClusterPreemption",
    "ClusterRejection",
    "Occupant",
    "PreemptionPlan",
    "Preemptor",
    "Room",
    "Victim",
]

# PriorityClass `preemptionPolicy` values (Kubernetes' names; absent means the first).
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
NEVER: Final = "Never"


@dataclass(frozen=True, slots=True)
class Preemptor:
    """The placement left short for lack of room."""

    placement: str
    """Its key: `name`, or `namespace/name` for a ResourcePlacement."""
    priority: int
    requests: Mapping[str, Fraction]
    """What one of its bindings consumes."""
    short: int
    """How many more bindings it wants that room would place (one per cluster)."""
    policy: str = PREEMPT_LOWER_PRIORITY
    """Its PriorityClass's `preemptionPolicy`: `Never` preempts nothing."""


@dataclass(frozen=True, slots=True)
class Occupant:
    """An active capacity-aware binding on a candidate cluster, which its reservation counts in
    the cluster's `allocated`."""

    binding: str
    placement: str
    priority: int
    requests: Mapping[str, Fraction]
    protected: str = ""
    """Why it is never a victim of this preemptor whatever its priority (a ResourcePlacement
    does not preempt a ClusterResourcePlacement unless the profile says so); empty: it may be."""


@dataclass(frozen=True, slots=True)
class Room:
    """A cluster that passes every filter of the preemptor's but room: its capacity (all of its
    reservations in `allocated`, the occupants' among them) and the bindings that hold it."""

    cluster: str
    capacity: ClusterCapacity
    occupants: tuple[Occupant, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Candidates:
    """What the PostFilter plugins are given: the placement short of room, every cluster that
    passes its filters but room, and how many disruptions each occupant's placement may still
    take (absent or None: no budget)."""

    preemptor: Preemptor
    rooms: tuple[Room, ...]
    budgets: Mapping[str, int | None] = field(default_factory=dict)


class Victim(WireModel):
    binding: str
    placement: str
    priority: int
    requests: str
    """`cpu=4,memory=8Gi`: what its removal frees."""
    over_budget: bool = False
    """Its removal spends more than its placement's disruption budget allows (only when the
    plan was asked to overspend budgets, as kube-scheduler may violate a PDB)."""


class ClusterPreemption(WireModel):
    """A cluster the preemptor takes, and whom it takes it from."""

    cluster: str
    victims: list[Victim]
    freed: str
    """The victims' requests summed, in the resources the preemptor asks for."""
    budget_violations: int = 0


class ClusterRejection(WireModel):
    cluster: str
    reason: str


class PreemptionPlan(WireModel):
    """Which clusters to free for the preemptor, and why the others could not be."""

    placement: str
    priority: int
    clusters: list[ClusterPreemption] = []
    rejected: list[ClusterRejection] = []
    still_short: int = 0
    """Bindings the plan does not make room for."""
    reason: str = ""
    """Why nothing was tried at all (`preemptionPolicy: Never`), else empty."""
