"""DefaultPreemption: kube-scheduler's PostFilter default, for placements (docs/priority.md,
"Preemption"). When a capacity-aware placement's cycle leaves it short of room, the turn gives
this plugin every cluster that passes the placement's filters but room, with the bindings that
hold that room; it chooses victims of strictly lower priority as kube-scheduler does
(scheduler.preemption.victims), within the disruption budgets.

Who may take whose room. A ClusterResourcePlacement is cluster-scoped, made by whoever runs the
fleet: it may preempt any binding of lower priority. A ResourcePlacement belongs to a namespace,
and by default preempts only ResourcePlacements of its own namespace, the tenant's own work;
the `resourcePlacementVictims` argument widens that:

    pluginConfig:
      - name: DefaultPreemption
        args: {resourcePlacementVictims: SameNamespace}   # or ResourcePlacements, or All

A profile turns preemption off by disabling the plugin (`plugins: {postFilter: {disabled:
[{name: DefaultPreemption}]}}`); a PriorityClass with `preemptionPolicy: Never` turns it off
for the placements of that class."""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from hub.types import ClusterSchedulingPolicySnapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Status
from scheduler.preemption.models import Candidates, Occupant, PreemptionPlan, Room
from scheduler.preemption.victims import plan_preemption

__all__ = ["NAME", "SCOPES", "DefaultPreemption"]

NAME: Final = "DefaultPreemption"
SAME_NAMESPACE: Final = "SameNamespace"
RESOURCE_PLACEMENTS: Final = "ResourcePlacements"
ALL: Final = "All"
SCOPES: Final = (SAME_NAMESPACE, RESOURCE_PLACEMENTS, ALL)


class DefaultPreemption:
    name = NAME

    def __init__(self, *, resourcePlacementVictims: str = SAME_NAMESPACE) -> None:
        if resourcePlacementVictims not in SCOPES:
            raise ValueError(
                f"resourcePlacementVictims must be one of {', '.join(SCOPES)}, "
                f"got {resourcePlacementVictims!r}"
            )
        self.scope = resourcePlacementVictims

    def post_filter(
        self, state: CycleState, snapshot: ClusterSchedulingPolicySnapshot, candidates: Candidates
    ) -> tuple[PreemptionPlan | None, Status]:
        preemptor = candidates.preemptor
        rooms = [self._guarded(preemptor.placement, room) for room in candidates.rooms]
        plan = plan_preemption(preemptor, rooms, candidates.budgets)
        if not plan.clusters:
            why = plan.reason or "no cluster can be freed"
            return plan, Status.unschedulable(why)
        return plan, Status.success()

    def protection(self, preemptor: str, occupant: str) -> str:
        """Why a binding of `occupant` is never this preemptor's victim ("" when it may be).
        Keys: `name` for a ClusterResourcePlacement, `namespace/name` for a ResourcePlacement."""
        namespace, slash, _ = preemptor.partition("/")
        if not slash or self.scope == ALL:
            return ""
        occupant_namespace, occupant_slash, _ = occupant.partition("/")
        if not occupant_slash:
            return (
                f"a ResourcePlacement does not preempt a ClusterResourcePlacement "
                f"({NAME} resourcePlacementVictims: {self.scope})"
            )
        if self.scope == SAME_NAMESPACE and occupant_namespace != namespace:
            return (
                f"a ResourcePlacement preempts only in its own namespace ({NAME} "
                f"resourcePlacementVictims: {self.scope})"
            )
        return ""

    def _guarded(self, preemptor: str, room: Room) -> Room:
        occupants = tuple(self._occupant(preemptor, o) for o in room.occupants)
        return replace(room, occupants=occupants)

    def _occupant(self, preemptor: str, occupant: Occupant) -> Occupant:
        why = self.protection(preemptor, occupant.placement)
        return replace(occupant, protected=why) if why else occupant
