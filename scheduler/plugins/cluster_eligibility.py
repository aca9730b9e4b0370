"""ClusterEligibility: filters out clusters that left the fleet, lost contact or stay unhealthy.

Reference 5.2 and section 6. Filter only (no PreFilter), so it runs for PickAll and PickN. The
decision reason is the eligibility checker's reason, word for word; the clock is the cycle's
`now`, never read here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster, PlacementPolicy
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BatchFilterPlugin
from scheduler.framework.sharing import NOT_SHARED
from scheduler.framework.status import Status
from scheduler.requeue.requeue_hints import ClusterChange, verdict

__all__ = ["DEFAULT_TIMEOUT_MINUTES", "NAME", "ClusterEligibility"]

NAME = "ClusterEligibility"
DEFAULT_TIMEOUT_MINUTES = 5


class ClusterEligibility:
    """Filter plugin around `EligibilityChecker`. Stateless, so one instance serves every cycle.

    Args (profile YAML): `heartbeat_timeout_minutes`, `health_timeout_minutes`, both positive
    numbers, KubeFleet's defaults 5."""

    name = NAME
    sharing = NOT_SHARED  # reads the cycle's clock (scheduler.framework.sharing)

    def __init__(
        self,
        *,
        heartbeat_timeout_minutes: float = DEFAULT_TIMEOUT_MINUTES,
        health_timeout_minutes: float = DEFAULT_TIMEOUT_MINUTES,
    ) -> None:
        self.checker = EligibilityChecker(
            heartbeat_timeout=_minutes("heartbeat_timeout_minutes", heartbeat_timeout_minutes),
            health_timeout=_minutes("health_timeout_minutes", health_timeout_minutes),
        )

    def requeue_hint(self, policy: PlacementPolicy | None, change: ClusterChange) -> bool:
        """This plugin's own checker's verdict (its timeouts may be the profile's own); known
        only from digests (the reconcile's, made with the profile's checker), their verdict."""
        if change.before is None or change.after is None:
            return change.eligibility
        # Figures aside ("last received 10.00 minutes ago" and "3.00 minutes ago" are one
        # verdict), as the reconcile's records judge it.
        before = self.checker.check_facts(change.before, change.now)
        after = self.checker.check_facts(change.after, change.now)
        return verdict(before) != verdict(after)

    def filter(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        cluster: MemberCluster,
    ) -> Status:
        reason = self.checker.check_facts(facts_of(cluster), state.now)
        if reason is None:
            return Status.success()
        return Status.unschedulable(reason)

    def filter_all(
        self,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        facts: Sequence[ClusterFacts],
    ) -> list[Status | None]:
        statuses: dict[str, Status] = {}  # one Status per reason (compared by value)
        out: list[Status | None] = []
        for reason in self.checker.check_all(facts, state.now):
            if reason is None:
                out.append(None)
                continue
            status = statuses.get(reason)
            if status is None:
                status = statuses[reason] = Status.unschedulable(reason)
            out.append(status)
        return out


def _minutes(argument: str, value: object) -> timedelta:
    # Profiles come from user YAML: say which argument is wrong and what it must be.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{NAME}: {argument} must be a number of minutes, got {type(value).__name__} {value!r}"
        )
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{NAME}: {argument} must be a positive number of minutes, got {value!r}")
    return timedelta(minutes=value)


_: BatchFilterPlugin = ClusterEligibility()  # type-checking fails if the contract drifts
