"""Which placements a member cluster's change reaches, and why: the one home of that answer, for
the watcher's routes (control.routes) and the reconcile's plan (scheduler.requeue.reconcile) alike,
as kube-scheduler registers each plugin's hints once (EventsToRegister) and one caller runs them.

A change reaches the placements that want the scheduler (`wants_scheduler`):

- every one, when the cluster is gone (deleted or leaving): their bindings there now dangle;
- by KubeFleet's rule (kubefleet-rules section 7): PickAll and nil-policy placements always,
  PickN and PickFixed ones while not fully scheduled;
- beyond it, a placement that enforces its affinity during execution (scheduler.moves.enforcement)
  when it holds an active binding on the cluster, since the change may take that binding away,
  or when the change may give a binding it lost somewhere to go (`gives_somewhere_to_go`).

Then an update (never a departure) is narrowed to the placements whose decision it may change:
the profile's requeue hints, resolved once when the profile was built (`Profile.requeue_hints`),
judge it (scheduler.requeue.requeue_hints.may_change_decision). Without a profile, or when what
changed cannot be told (two records whose difference is unknown), nothing is narrowed.

The callers differ only in how they know the change: the watcher sees the cluster before and
after (`ClusterEvent.updated`), the reconcile two records of it (`ClusterEvent.from_records`).
Pure: hub types in, keys out."""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from hub import names
from hub.kinds import parent_key, placement_key
from hub.types import ClusterResourceBinding, ClusterResourcePlacement, MemberCluster
from scheduler.framework.profile import Profile
from scheduler.moves.enforcement import enforces, gives_somewhere_to_go
from scheduler.requeue.requeue_hints import (
    ClusterChange,
    change_between_records,
    may_change_decision,
)
from scheduler.requeue.watch_rules import is_fully_scheduled, wants_scheduler
from scheduler.room.capacity import is_active

__all__ = ["Bindings", "ClusterEvent", "Reached", "Why", "reach"]


class Why(enum.Enum):
    """Why a cluster's change reaches a placement."""

    GONE = "the cluster is gone"
    RULE = "KubeFleet's rule"
    """PickAll or no policy, or PickN / PickFixed not fully scheduled."""
    BOUND_HERE = "it enforces its affinity and holds a binding there"
    SOMEWHERE_TO_GO = "it enforces its affinity and a binding it lost may move there"


@dataclass(frozen=True, slots=True)
class Reached:
    """A placement (by key, `hub.kinds.placement_key`) a cluster's change reaches, and why."""

    placement: str
    why: Why


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A member cluster's change, as `reach` reads it."""

    name: str
    now: datetime
    left: bool = False
    """The cluster is gone (deleted, or leaving): every placement is reached."""
    cluster: MemberCluster | None = None
    """The cluster after an update: where a lost binding may go (None when it left)."""
    change: ClusterChange | None = None
    """What an update changed, for the requeue hints; None: not known, nothing is narrowed."""
    enforcing_only: bool = False
    """The update matters only to placements that enforce their affinity (a taint added, which
    KubeFleet's rule ignores): no other placement is reached."""

    @classmethod
    def gone(cls, name: str, now: datetime) -> ClusterEvent:
        return cls(name, now, left=True)

    @classmethod
    def updated(
        cls,
        old: MemberCluster,
        new: MemberCluster,
        profile: Profile | None,
        now: datetime,
        *,
        enforcing_only: bool = False,
    ) -> ClusterEvent:
        """An update seen before and after (the watcher's), judged by the profile's verdict of
        eligibility (no profile: not narrowed)."""
        change = (
            None if profile is None else ClusterChange.between(old, new, profile.ineligibility, now)
        )
        name = new.metadata.name
        return cls(name, now, cluster=new, change=change, enforcing_only=enforcing_only)

    @classmethod
    def from_records(
        cls, cluster: MemberCluster, before: str | None, after: str, now: datetime
    ) -> ClusterEvent:
        """An update known from two records of the cluster (the reconcile's,
        scheduler.requeue.requeue_hints.record_of); `before` None: no record before (not
        narrowed)."""
        name = cluster.metadata.name
        change = None if before is None else change_between_records(name, before, after, now)
        return cls(name, now, cluster=cluster, change=change)


class Bindings:
    """Bindings by the placement they belong to and the clusters they are active on, grouped on
    first use (one scan of them all) and kept for every later question."""

    def __init__(self, bindings: Iterable[ClusterResourceBinding]) -> None:
        self._bindings = bindings
        self._by_placement: dict[str, list[ClusterResourceBinding]] | None = None
        self._bound: dict[str, set[str]] | None = None

    def _grouped(self) -> tuple[dict[str, list[ClusterResourceBinding]], dict[str, set[str]]]:
        if self._by_placement is None or self._bound is None:
            by_placement: defaultdict[str, list[ClusterResourceBinding]] = defaultdict(list)
            bound: defaultdict[str, set[str]] = defaultdict(set)
            for binding in self._bindings:
                key = parent_key(binding)
                by_placement[key].append(binding)
                if is_active(binding):
                    bound[binding.spec.target_cluster].add(key)
            self._by_placement, self._bound = dict(by_placement), dict(bound)
        return self._by_placement, self._bound

    def bound_on(self, cluster: str) -> set[str]:
        """The keys of the placements with an active binding on `cluster`."""
        return self._grouped()[1].get(cluster, set())

    def of(self, placement: str) -> list[ClusterResourceBinding]:
        """The bindings of the placement with key `placement`."""
        return self._grouped()[0].get(placement, [])


def reach(
    event: ClusterEvent,
    placements: Iterable[ClusterResourcePlacement],
    profile: Profile | None,
    *,
    bindings: Bindings | None = None,
    clusters: Mapping[str, MemberCluster] | None = None,
) -> list[Reached]:
    """The placements `event` reaches, in the order of `placements`, each with why.

    `bindings`: every binding of the fleet; None when not known, and then every enforcing
    placement counts as bound on the cluster. `clusters`: every member cluster by name, where an
    enforcing placement's lost binding may be judged to go (with `bindings` only). `profile`:
    whose requeue hints narrow an update (None: KubeFleet's rule alone)."""
    chosen = _by_rule(event, placements, bindings, clusters or {}, profile)
    if event.left or event.change is None or profile is None:
        return [reached for reached, _ in chosen]
    hints, change = profile.requeue_hints, event.change
    return [
        reached
        for reached, placement in chosen
        if may_change_decision(
            hints,
            placement.spec.policy,
            change,
            # Its cycle reads room itself (an unreadable annotation counts too).
            capacity_aware=names.REQUESTS_ANNOTATION in placement.metadata.annotations,
        )
    ]


def _by_rule(
    event: ClusterEvent,
    placements: Iterable[ClusterResourcePlacement],
    bindings: Bindings | None,
    clusters: Mapping[str, MemberCluster],
    profile: Profile | None,
) -> list[tuple[Reached, ClusterResourcePlacement]]:
    """KubeFleet's rule and enforcement's additions (the module docstring), hints aside."""
    chosen: list[tuple[Reached, ClusterResourcePlacement]] = []
    holding: set[str] | None = None
    for placement in placements:
        if not wants_scheduler(placement):
            continue
        key = placement_key(placement.metadata.namespace, placement.metadata.name)
        if event.left:
            chosen.append((Reached(key, Why.GONE), placement))
            continue
        if event.enforcing_only and not enforces(placement):
            continue
        policy = placement.spec.policy
        always = policy is None or policy.effective_type == names.PICK_ALL
        if always or not is_fully_scheduled(placement):
            chosen.append((Reached(key, Why.RULE), placement))
        elif enforces(placement):
            # Asked at most once, and only for such a placement (a scan of every binding).
            if holding is None and bindings is not None:
                holding = bindings.bound_on(event.name)
            if holding is None or key in holding:
                chosen.append((Reached(key, Why.BOUND_HERE), placement))
            elif (
                bindings is not None
                and event.cluster is not None
                and gives_somewhere_to_go(
                    placement, bindings.of(key), clusters, event.cluster, profile, event.now
                )
            ):
                chosen.append((Reached(key, Why.SOMEWHERE_TO_GO), placement))
    return chosen
