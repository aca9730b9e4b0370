"""The promises fleet-scheduler makes about counts, checked on one reading of the hub and of
Temporal (docs/invariants.md).

`fleet-scheduler check` prints what `find_violations` returns and exits 1 if anything; the
reconcile runs the same checks on every run, exports the counts as
`fleet_scheduler_invariant_violations{invariant}` and requeues the placements whose next turn
repairs what was found; the stateful property tests assert them after every step of random
interleavings. One definition for all three, so they cannot drift apart.

The invariants, by the name the metric and `check` give them:

- `overcommit`: no cluster's active capacity-aware bindings ask for more than its allocatable;
  one whose placement's requests cannot be read asks for the room it holds.
- `reservation`: every such binding has its reservation, for its placement, at its placement's
  requests.
- `stale_reservation`: no reservation outlives its binding (or its placement's requests) by
  more than the grace (`scheduler.room.capacity.RESERVATION_GRACE`).
- `duplicate_binding`: no placement has two active bindings on one cluster.
- `binding_count`: no PickN placement has more active bindings than it asks for, outside a move
  in progress (a move's new binding beside the old one it replaces), once its latest policy
  snapshot is scheduled.
- `disruption_budget`: while rebalance moves are in flight (old binding Unscheduled and still
  there, new one not yet available), the placement's bindings keep its budget's bound, the old
  ones counted as KubeFleet's eviction leaves them: gone (scheduler.moves.budgets).
- `workflow`: every placement that wants the scheduler has its workflow, every workflow its
  placement. A placement younger than `WORKFLOW_GRACE` may still be without one: its start is
  on its way (the watcher's signal-with-start, which the admission window may hold back, or,
  at a watcher's start, the reconcile that starts it).
- `stranded_shortage`: a placement that says it is short of room has no room anywhere it could
  go: its own cycle, run now on what was read, would place nothing more.
- `placement_decisions`: where PlacementDecisions are published (docs/decisions.md), each
  placement's slices name exactly the clusters of its active bindings, once each, indexed from
  0, referencing the configured ClusterProfile namespace; no slices outlive their placement.
- `preemption` (docs/priority.md, "Preemption"): a preemption takes room only from bindings of
  strictly lower priority (what each nomination lists, and what each victim's preempted-by mark
  records), and never counts room twice (a nomination beside an active binding of its
  placement on that cluster).
- `stale_nomination`: room nominated for a preemptor is held no longer than twice
  `NOMINATION_GRACE` (its own turns and the reconcile's sweep drop it after one), and only for
  a placement that exists and is capacity-aware.

Pure: what the caller read in, violations out, each in a person's terms (which cluster, which
placement, by how much)."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Final

from hub import names
from hub.kinds import parent_key, placement_key, placement_label
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    PlacementDecision,
    Reservation,
)
from scheduler.bindings import published
from scheduler.cycles.models import CapacityInput, CycleInput
from scheduler.cycles.schedule import placement_type_of, schedule
from scheduler.explain.readable import first_few, shorten
from scheduler.framework.errors import SchedulerError
from scheduler.framework.profile import Profile
from scheduler.moves.budgets import available, budget_state, moved_bindings
from scheduler.preemption.marks import parse_preempted_by
from scheduler.requeue.watch_rules import wants_scheduler
from scheduler.room.capacity import (
    NOMINATION_GRACE,
    RESERVATION_GRACE,
    ClusterCapacity,
    allocated_beside,
    binding_key,
    format_amount,
    held,
    holds,
    is_active,
    missing_of,
    shown_requests,
)
from scheduler.room.quantity import QuantityError, parse_quantity
from scheduler.room.requests import RequestsError, parse_requests
from scheduler.snapshots import placement_scheduled_condition
from scheduler.snapshots.annotations import number_of_clusters

__all__ = [
    "BINDING_COUNT",
    "DISRUPTION_BUDGET",
    "DUPLICATE_BINDING",
    "INVARIANTS",
    "OVERCOMMIT",
    "PLACEMENT_DECISIONS",
    "PREEMPTION",
    "RESERVATION",
    "STALE_NOMINATION",
    "STALE_RESERVATION",
    "STRANDED_SHORTAGE",
    "WORKFLOW",
    "WORKFLOW_GRACE",
    "FleetState",
    "Violation",
    "find_violations",
]

OVERCOMMIT: Final = "overcommit"
RESERVATION: Final = "reservation"
STALE_RESERVATION: Final = "stale_reservation"
DUPLICATE_BINDING: Final = "duplicate_binding"
BINDING_COUNT: Final = "binding_count"
DISRUPTION_BUDGET: Final = "disruption_budget"
WORKFLOW: Final = "workflow"
STRANDED_SHORTAGE: Final = "stranded_shortage"
PLACEMENT_DECISIONS: Final = "placement_decisions"
PREEMPTION: Final = "preemption"
STALE_NOMINATION: Final = "stale_nomination"
INVARIANTS: Final = (
    OVERCOMMIT,
    RESERVATION,
    STALE_RESERVATION,
    DUPLICATE_BINDING,
    BINDING_COUNT,
    DISRUPTION_BUDGET,
    WORKFLOW,
    STRANDED_SHORTAGE,
    PLACEMENT_DECISIONS,
    PREEMPTION,
    STALE_NOMINATION,
)
# Bindings a message names before it counts the rest.
NAMED: Final = 3
# How much of a value written by hand a message quotes.
QUOTED: Final = 40
# How long a new placement may be without its workflow: the watcher starts it within a second,
# or once the admission window has a place for its first turn (whose wait gives up after 30 s,
# control.watcher), and a watcher that starts hands the placements created while it was down
# to the reconcile, which starts them. Longer than that, a missing workflow is an event missed.
WORKFLOW_GRACE: Final = timedelta(minutes=2)


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken promise: which (`invariant`), in a person's terms (`message`), and the
    placement (key) or cluster it is about, for those who act on it."""

    invariant: str
    message: str
    placement: str | None = None
    cluster: str | None = None


@dataclass(frozen=True)
class FleetState:
    """One reading of the hub (and of Temporal's running placement workflows).

    Placements, latest policy snapshots and bindings of both kinds (ResourcePlacements'
    included when `namespaced`); `ledgers` None when the hub serves no CapacityLedgers;
    `workflows` the keys of the running placement workflows, None when not read."""

    placements: Sequence[ClusterResourcePlacement]
    snapshots: Sequence[ClusterSchedulingPolicySnapshot]
    bindings: Sequence[ClusterResourceBinding]
    clusters: Sequence[MemberCluster]
    ledgers: Sequence[CapacityLedger] | None = ()
    budgets: Sequence[ClusterResourcePlacementDisruptionBudget] = ()
    workflows: frozenset[str] | None = None
    namespaced: bool = True
    # Every PlacementDecision that says it is ours, None when decisions are not published (or
    # the hub serves none); where a ClusterResourcePlacement's go, and the ClusterProfiles'.
    decisions: Sequence[PlacementDecision] | None = None
    decisions_namespace: str = names.FLEET_SYSTEM_NAMESPACE
    profile_namespace: str = names.FLEET_SYSTEM_NAMESPACE
    _index: _Index | None = field(default=None, repr=False, compare=False)

    def index(self) -> _Index:
        if self._index is None:
            object.__setattr__(self, "_index", _Index.of(self))
        assert self._index is not None
        return self._index


@dataclass(frozen=True)
class _Index:
    placements: Mapping[str, ClusterResourcePlacement]
    snapshots: Mapping[str, ClusterSchedulingPolicySnapshot]
    bindings_of: Mapping[str, list[ClusterResourceBinding]]
    clusters: Mapping[str, MemberCluster]
    ledgers: Mapping[str, CapacityLedger]
    requests: Mapping[str, Mapping[str, Fraction]]
    """Capacity-aware placements (a readable requests annotation), being deleted or not: the
    bindings of one being deleted consume their room until its cleanup has removed them."""
    aware: frozenset[str]
    """Placements with the requests annotation, readable or not: a typo in it does not free
    the room its bindings hold (its cycles fail until it is fixed, its reservations stay)."""

    @classmethod
    def of(cls, state: FleetState) -> _Index:
        placements = {_key(p): p for p in state.placements}
        snapshots = {}
        for snapshot in state.snapshots:
            if parent := parent_key(snapshot):
                snapshots[parent] = snapshot
        bindings_of: dict[str, list[ClusterResourceBinding]] = defaultdict(list)
        for binding in state.bindings:
            bindings_of[_owner(binding)].append(binding)
        requests = {}
        aware = set()
        for key, placement in placements.items():
            text = placement.metadata.annotations.get(names.REQUESTS_ANNOTATION)
            if text is None:
                continue
            aware.add(key)
            try:
                requests[key] = parse_requests(text)
            except RequestsError:
                continue
        return cls(
            placements=placements,
            snapshots=snapshots,
            bindings_of=bindings_of,
            clusters={c.metadata.name: c for c in state.clusters},
            ledgers={ledger.name: ledger for ledger in state.ledgers or ()},
            requests=requests,
            aware=frozenset(aware),
        )


def find_violations(
    state: FleetState,
    now: datetime,
    *,
    profile: Profile | None = None,
    grace: timedelta = RESERVATION_GRACE,
    workflow_grace: timedelta = WORKFLOW_GRACE,
    keep_going: Callable[[], bool] = lambda: True,
) -> list[Violation]:
    """Every invariant broken in `state`, in the order of INVARIANTS, then by subject.

    `grace`: how long a stale reservation may outlive what it was for; `workflow_grace`: how
    long a new placement may be without its workflow.

    `stranded_shortage` runs a cycle per placement short of room (tens of milliseconds at
    thousands of clusters); it stops at the first placement for which `keep_going()` is False,
    so a caller with a deadline (the reconcile, inside its heartbeat) stays within it."""
    found: list[Violation] = []
    found += _overcommit(state)
    found += _reservations(state, now, grace)
    found += _duplicates(state)
    found += _binding_counts(state, now)
    found += _budgets(state)
    found += _workflows(state, now, workflow_grace)
    found += _decisions(state)
    found += _preemption(state)
    found += _stale_nominations(state, now)
    found += _stranded(state, now, profile, keep_going)
    order = {name: i for i, name in enumerate(INVARIANTS)}
    return sorted(
        found, key=lambda v: (order[v.invariant], v.cluster or "", v.placement or "", v.message)
    )


# --- room and reservations ---------------------------------------------------------------------


def _overcommit(state: FleetState) -> list[Violation]:
    index = state.index()
    asked: dict[str, dict[str, Fraction]] = defaultdict(dict)
    who: dict[str, list[str]] = defaultdict(list)
    for key in sorted(index.aware):
        readable = index.requests.get(key)
        for binding in index.bindings_of.get(key, []):
            if not is_active(binding):
                continue
            # Requests that cannot be read: the binding consumes the room it holds, as the
            # capacity rules count it (its reservations stay, its moves carry them).
            requests = readable if readable is not None else _room_held(index, key, binding)
            cluster = binding.spec.target_cluster
            for resource, amount in requests.items():
                asked[cluster][resource] = asked[cluster].get(resource, Fraction(0)) + amount
            said = "" if readable is not None else ", requests unreadable: counted at its room"
            who[cluster].append(f"{binding.metadata.name} ({key}{said})")
    found = []
    for cluster, amounts in sorted(asked.items()):
        member = index.clusters.get(cluster)
        if member is None:
            continue  # a binding to a cluster that is gone is a dangling binding, not room
        supply = ClusterCapacity.of(member.status.resource_usage.allocatable)
        over = {
            r: a - supply.allocatable.get(r, Fraction(0))
            for r, a in amounts.items()
            if a > 0 and a > supply.allocatable.get(r, Fraction(0))
        }
        if not over:
            continue
        shown = {r: supply.allocatable.get(r, Fraction(0)) for r in over}
        found.append(
            Violation(
                OVERCOMMIT,
                f"cluster {cluster}: active capacity-aware bindings ask for "
                f"{shown_requests({r: amounts[r] for r in over})}, its allocatable is "
                f"{shown_requests(shown)} (over by {shown_requests(over)}): "
                f"{_listed(who[cluster])}",
                cluster=cluster,
            )
        )
    return found


def _room_held(
    index: _Index, placement: str, binding: ClusterResourceBinding
) -> Mapping[str, Fraction]:
    """What an active binding of a placement whose requests cannot be read consumes: the
    reservation it holds on its cluster's ledger, or else (a binding made without one) the most
    its placement holds for any binding: its requests when they were last read."""
    ledger = index.ledgers.get(binding.spec.target_cluster)
    own = ledger.spec.reservations.get(binding_key(binding)) if ledger is not None else None
    if own is not None and own.placement == placement:
        return _amounts_of(own)
    most: dict[str, Fraction] = {}
    for other in index.ledgers.values():
        for reservation in other.spec.reservations.values():
            if reservation.placement != placement:
                continue
            for resource, amount in _amounts_of(reservation).items():
                most[resource] = max(most.get(resource, amount), amount)
    return most


def _reservations(state: FleetState, now: datetime, grace: timedelta) -> list[Violation]:
    index = state.index()
    found = []
    needed = {
        (b.spec.target_cluster, binding_key(b))
        for key in index.aware
        for b in index.bindings_of.get(key, [])
        if is_active(b)
    }
    for key, requests in index.requests.items():
        deleting = index.placements[key].metadata.deleting
        for binding in index.bindings_of.get(key, []):
            if not is_active(binding):
                continue
            cluster, name = binding.spec.target_cluster, binding_key(binding)
            if deleting:
                continue  # its cleanup releases the room with the bindings: no turn repairs it
            ledger = index.ledgers.get(cluster)
            reservation = ledger.spec.reservations.get(name) if ledger is not None else None
            if reservation is None:
                why = "has no reservation" + (
                    "" if state.ledgers is not None else " (the hub serves no CapacityLedgers)"
                )
            elif not holds(reservation, key, requests):
                why = (
                    f"has a reservation of {_amounts(reservation.requests)} for placement "
                    f"{reservation.placement}, where its placement asks for "
                    f"{shown_requests(requests)}"
                )
            else:
                continue
            found.append(
                Violation(
                    RESERVATION,
                    f"binding {binding.metadata.name} of placement {key} on cluster {cluster} "
                    f"{why}",
                    placement=key,
                    cluster=cluster,
                )
            )
    for cluster, ledger in sorted(index.ledgers.items()):
        for name, reservation in sorted(ledger.spec.reservations.items()):
            age = now - reservation.reserved_at
            if age < grace or (cluster, name) in needed:
                continue
            if not state.namespaced and "/" in name:
                continue  # a ResourceBinding's: those were not read
            found.append(
                Violation(
                    STALE_RESERVATION,
                    f"cluster {cluster}: the reservation of binding {name} (placement "
                    f"{reservation.placement}, {_amounts(reservation.requests)}) outlived "
                    f"{_why_stale(index, cluster, name, reservation.placement)} by more than "
                    f"{_duration(grace)} (reserved {_duration(age)} ago)",
                    placement=reservation.placement,
                    cluster=cluster,
                )
            )
    return found


def _why_stale(index: _Index, cluster: str, name: str, placement: str) -> str:
    if placement not in index.placements:
        return "its placement"
    if placement not in index.aware:
        return "its placement's requests"
    bindings = {binding_key(b): b for b in index.bindings_of.get(placement, [])}
    binding = bindings.get(name)
    if binding is not None and binding.spec.target_cluster != cluster:
        return "its binding's move to another cluster"
    return "its binding"


# --- bindings per placement --------------------------------------------------------------------


def _duplicates(state: FleetState) -> list[Violation]:
    found = []
    for key, bindings in sorted(state.index().bindings_of.items()):
        active = Counter(b.spec.target_cluster for b in bindings if is_active(b))
        for cluster, count in sorted(active.items()):
            if count > 1:
                held = [b.metadata.name for b in bindings if b.spec.target_cluster == cluster]
                found.append(
                    Violation(
                        DUPLICATE_BINDING,
                        f"placement {key} has {count} active bindings on cluster {cluster}: "
                        f"{_listed(held)}",
                        placement=key,
                        cluster=cluster,
                    )
                )
    return found


def _binding_counts(state: FleetState, now: datetime) -> list[Violation]:
    index = state.index()
    found = []
    for key, placement in sorted(index.placements.items()):
        snapshot = index.snapshots.get(key)
        if snapshot is None or placement.metadata.deleting:
            continue
        if placement_type_of(snapshot) != names.PICK_N or not _settled(placement, snapshot, now):
            continue
        try:
            wanted = number_of_clusters(snapshot)
        except SchedulerError:
            continue
        active = [b for b in index.bindings_of.get(key, []) if is_active(b)]
        moving = [new for new, old in moved_bindings(active)]  # half done: both active
        if len(active) - len(moving) > wanted:
            found.append(
                Violation(
                    BINDING_COUNT,
                    f"placement {key} asks for {wanted} cluster(s) and has {len(active)} active "
                    f"binding(s)"
                    + (f" ({len(moving)} of them moves in progress)" if moving else "")
                    + f": {_listed(sorted(b.spec.target_cluster for b in active))}",
                    placement=key,
                )
            )
    return found


def _budgets(state: FleetState) -> list[Violation]:
    """With rebalance moves in flight (old binding Unscheduled, not yet removed; new one not yet
    Available), the budget's bound holds on the bindings, counting the old ones as KubeFleet's
    eviction would leave them: gone. Before each move the turn allowed it only while one more
    disruption kept that bound (scheduler.moves.budgets), so this holds unless the budget was set or
    tightened, or other bindings became unavailable, while they were in flight."""
    index = state.index()
    found = []
    for budget in sorted(state.budgets, key=lambda b: b.name):
        placement = index.placements.get(budget.name)
        if placement is None:
            continue
        bindings = index.bindings_of.get(budget.name, [])
        in_flight = [
            (new, old)
            for new, old in moved_bindings(bindings)
            if is_active(new) and not is_active(old) and not available(new)
        ]
        if not in_flight:
            continue
        try:
            now = budget_state(budget, placement, bindings).without(old for _, old in in_flight)
            kept = now.respected()
        except ValueError:
            continue  # nothing KubeFleet's arithmetic can read
        if kept:
            continue
        bound = (
            f"maxUnavailable {budget.spec.max_unavailable}"
            if budget.spec.max_unavailable is not None
            else f"minAvailable {budget.spec.min_available}"
        )
        found.append(
            Violation(
                DISRUPTION_BUDGET,
                f"placement {budget.name}: {len(in_flight)} rebalance move(s) in flight "
                f"({_listed(sorted(new.metadata.name for new, _ in in_flight))}) leave "
                f"{now.available} of {now.bindings} binding(s) available, outside its "
                f"disruption budget ({bound})",
                placement=budget.name,
            )
        )
    return found


# --- workflows ---------------------------------------------------------------------------------


def _workflows(state: FleetState, now: datetime, grace: timedelta) -> list[Violation]:
    if state.workflows is None:
        return []
    index = state.index()
    found = []
    for key, placement in sorted(index.placements.items()):
        created = placement.metadata.creation_timestamp
        if created is not None and -grace < now - created < grace:
            # Its start is on its way (WORKFLOW_GRACE). A creation time further ahead of our
            # clock than the grace is no reason to wait: a skew must not hide a missing one.
            continue
        if wants_scheduler(placement) and key not in state.workflows:
            found.append(
                Violation(WORKFLOW, f"placement {key} has no running workflow", placement=key)
            )
    for key in sorted(state.workflows - index.placements.keys()):
        if not state.namespaced and "/" in key:
            continue
        found.append(
            Violation(
                WORKFLOW,
                f"workflow of placement {key} is running, but the placement does not exist",
                placement=key,
            )
        )
    return found


# --- published decisions ----------------------------------------------------------------------


def _decisions(state: FleetState) -> list[Violation]:
    """Each placement's PlacementDecision slices against its bindings (docs/decisions.md). A
    placement being deleted is its cleanup's business (bindings go first, then its slices);
    slices whose placement is gone are left over."""
    if state.decisions is None:
        return []
    index = state.index()
    groups: dict[tuple[bool, str, str], list[PlacementDecision]] = defaultdict(list)
    for item in state.decisions:
        kind = item.metadata.labels.get(names.DECISION_PLACEMENT_KIND_LABEL)
        owner = item.metadata.labels.get(names.DECISION_KEY_LABEL)
        if kind not in _DECISION_KINDS or owner is None:
            continue  # not ours
        groups[(_DECISION_KINDS[kind], item.metadata.namespace or "", owner)].append(item)
    found = []
    # Placements by the namespace their slices belong in, with what is wrong with each.
    by_namespace: dict[str, list[tuple[str, list[str], bool]]] = defaultdict(list)
    ours_in: set[str] = {namespace for _, namespace, _ in groups}
    for key, placement in sorted(index.placements.items()):
        namespace = placement.metadata.namespace
        target = published.DecisionTarget(
            placement=placement.name,
            namespaced=namespace is not None,
            namespace=namespace or state.decisions_namespace,
            profile_namespace=state.profile_namespace,
        )
        slices = groups.pop((target.namespaced, target.namespace, placement.name), [])
        if placement.metadata.deleting:
            continue
        bindings = index.bindings_of.get(key, [])
        problems = published.problems(target, slices, bindings)
        is_bound = bool(published.active_decisions(bindings))
        by_namespace[target.namespace].append((key, problems, is_bound))
    for namespace, placements in sorted(by_namespace.items()):
        bound = [key for key, _, on_some in placements if on_some]
        if namespace not in ours_in and bound:
            # Not one slice of ours where these belong: no turn could write there (the
            # namespace is missing, or RBAC refuses), and requeueing each placement would not
            # help. One violation, for a person, about the namespace.
            found.append(
                Violation(
                    PLACEMENT_DECISIONS,
                    f"namespace {namespace} holds no PlacementDecision of ours, yet "
                    f"{len(bound)} placement(s) there have active bindings ({_listed(bound)}): "
                    "does the namespace exist, and may the scheduler write PlacementDecisions "
                    "in it? (docs/decisions.md)",
                )
            )
            continue
        for key, problems, _ in placements:
            found += [
                Violation(PLACEMENT_DECISIONS, f"placement {key}: {problem}", placement=key)
                for problem in problems
            ]
    for (namespaced, namespace, name), slices in sorted(groups.items()):
        if namespaced and not state.namespaced:
            continue  # ResourcePlacements not read: nothing to conclude
        if not namespaced and namespace != state.decisions_namespace:
            continue  # published under another setting: not what this reading is about
        key = placement_key(namespace if namespaced else None, name)
        found.append(
            Violation(
                PLACEMENT_DECISIONS,
                f"PlacementDecision(s) {_listed(sorted(s.name for s in slices))} in namespace "
                f"{namespace} are left over from placement {key}, which does not exist",
                placement=key,
            )
        )
    return found


_DECISION_KINDS: Final = {
    published.CLUSTER_PLACEMENT_KIND: False,
    published.NAMESPACED_PLACEMENT_KIND: True,
}


# --- shortage ----------------------------------------------------------------------------------


def _stranded(
    state: FleetState, now: datetime, profile: Profile | None, keep_going: Callable[[], bool]
) -> list[Violation]:
    index = state.index()
    found = []
    # Room a ledger does not show is not free: the active bindings of capacity-aware placements
    # that lack their reservation (a ledger deleted, requests declared late) consume it until
    # their placement's turn reserves again, and a cycle then would find it taken.
    unreserved = _unreserved(index)
    # In an order that changes from run to run (by the clock's minute), so a caller that stops
    # early covers every placement over a few runs; results are sorted by the caller.
    stamp = now.strftime("%Y%m%d%H%M")
    for key, requests in sorted(
        index.requests.items(),
        key=lambda item: hashlib.sha256(f"{stamp}/{item[0]}".encode()).digest(),
    ):
        if not keep_going():
            break
        snapshot = index.snapshots.get(key)
        placement = index.placements[key]
        if (
            snapshot is None
            or placement.metadata.deleting
            or not _settled(placement, snapshot, now)
        ):
            continue
        condition = snapshot.status.condition(names.SCHEDULED_CONDITION)
        missing = missing_of(condition.message) if condition is not None else None
        if not missing:
            continue
        bindings = index.bindings_of.get(key, [])
        text = placement.metadata.annotations[names.REQUESTS_ANNOTATION]
        allocated = _plus(allocated_beside(index.ledgers, bindings, key), unreserved, exclude=key)
        capacity = CapacityInput(requests=text, allocated=allocated)
        result = schedule(
            CycleInput(
                snapshot=snapshot,
                clusters=list(index.clusters.values()),
                bindings=bindings,
                now=now,
                capacity=capacity,
            ),
            profile,
        )
        if result.error:
            continue
        revived = {p.name for p in result.plan.patch} & {
            b.metadata.name for b in bindings if not is_active(b)
        }
        places = sorted(
            [b.spec.target_cluster for b in result.plan.create]
            + [b.spec.target_cluster for b in bindings if b.metadata.name in revived]
        )
        if not places:
            continue
        free = _free(index, places[0], requests)
        found.append(
            Violation(
                STRANDED_SHORTAGE,
                f"placement {key} says it is short of {shown_requests(missing)}, but its cycle "
                f"would place a binding on {_listed(places)} now ({places[0]}: {free} free)",
                placement=key,
                cluster=places[0],
            )
        )
    return found


def _preemption(state: FleetState) -> list[Violation]:
    index = state.index()
    found = []
    for cluster, ledger in sorted(index.ledgers.items()):
        for key, nomination in sorted(ledger.spec.nominations.items()):
            label = placement_label(key)
            for victim in nomination.victims:
                if victim.priority >= nomination.priority:
                    found.append(
                        Violation(
                            PREEMPTION,
                            f"cluster {cluster}: the room nominated for {label} (priority "
                            f"{nomination.priority}) names victim {victim.binding} of "
                            f"{placement_label(victim.placement)} at priority {victim.priority}, "
                            "not lower",
                            placement=key,
                            cluster=cluster,
                        )
                    )
            there = [
                b.metadata.name
                for b in index.bindings_of.get(key, [])
                if is_active(b) and b.spec.target_cluster == cluster
            ]
            if there:
                found.append(
                    Violation(
                        PREEMPTION,
                        f"cluster {cluster}: {label} holds room twice there, its nomination "
                        f"beside its active binding(s) {_listed(there)}",
                        placement=key,
                        cluster=cluster,
                    )
                )
    for binding in state.bindings:
        value = binding.metadata.annotations.get(names.PREEMPTED_BY_ANNOTATION)
        if value is None:
            continue
        mark = parse_preempted_by(value)
        owner = _owner(binding)
        where = f"binding {binding.metadata.name} of {placement_label(owner)}"
        if mark is None:
            message = (
                f"{where} says it was preempted, but its {names.PREEMPTED_BY_ANNOTATION} "
                f"{shorten(value, QUOTED)!r} cannot be read"
            )
        elif mark.victim_priority >= mark.priority:
            message = (
                f"{where} was preempted by {mark.who()}, at its own priority "
                f"{mark.victim_priority}: not lower"
            )
        else:
            continue
        found.append(
            Violation(PREEMPTION, message, placement=owner, cluster=binding.spec.target_cluster)
        )
    return found


def _stale_nominations(state: FleetState, now: datetime) -> list[Violation]:
    index = state.index()
    found = []
    for cluster, ledger in sorted(index.ledgers.items()):
        for key, nomination in sorted(ledger.spec.nominations.items()):
            placement = index.placements.get(key)
            label = placement_label(key)
            if placement is None and (state.namespaced or "/" not in key):
                why = f"{label} does not exist"
            elif placement is not None and key not in index.aware:
                why = f"{label} does not declare {names.REQUESTS_ANNOTATION}"
            elif now - nomination.nominated_at > 2 * NOMINATION_GRACE:
                why = (
                    f"held since {nomination.nominated_at.isoformat()}, longer than "
                    f"{int(2 * NOMINATION_GRACE.total_seconds() // 60)} minutes"
                )
            else:
                continue
            found.append(
                Violation(
                    STALE_NOMINATION,
                    f"cluster {cluster}: room is nominated for a preemption of {label}, but {why}",
                    placement=key,
                    cluster=cluster,
                )
            )
    return found


def _unreserved(index: _Index) -> dict[str, list[tuple[str, Mapping[str, Fraction]]]]:
    """Cluster -> (placement, what it consumes beyond its reservation) for every active binding
    of a capacity-aware placement whose reservation is missing or holds less."""
    out: dict[str, list[tuple[str, Mapping[str, Fraction]]]] = defaultdict(list)
    for key, requests in index.requests.items():
        for binding in index.bindings_of.get(key, []):
            if not is_active(binding):
                continue
            cluster = binding.spec.target_cluster
            ledger = index.ledgers.get(cluster)
            reservation = (
                ledger.spec.reservations.get(binding_key(binding)) if ledger is not None else None
            )
            if reservation is not None and holds(reservation, key, requests):
                continue
            had = _amounts_of(reservation) if reservation is not None else {}
            extra = {r: a - had.get(r, Fraction(0)) for r, a in requests.items()}
            extra = {r: a for r, a in extra.items() if a > 0}
            if extra:
                out[cluster].append((key, extra))
    return out


def _amounts_of(reservation: Reservation) -> dict[str, Fraction]:
    out = {}
    for resource, text in reservation.requests.items():
        try:
            out[resource] = parse_quantity(text)
        except QuantityError:
            continue
    return out


def _plus(
    allocated: dict[str, dict[str, str]],
    unreserved: Mapping[str, list[tuple[str, Mapping[str, Fraction]]]],
    *,
    exclude: str,
) -> dict[str, dict[str, str]]:
    """`allocated` with other placements' unreserved consumption added."""
    out = {cluster: dict(amounts) for cluster, amounts in allocated.items()}
    for cluster, items in unreserved.items():
        for placement, extra in items:
            if placement == exclude:
                continue
            held = out.setdefault(cluster, {})
            for resource, amount in extra.items():
                current = parse_quantity(held[resource]) if resource in held else Fraction(0)
                held[resource] = format_amount(current + amount)
    return out


def _free(index: _Index, cluster: str, requests: Mapping[str, Fraction]) -> str:
    member = index.clusters[cluster]
    ledger = index.ledgers.get(cluster)
    taken = held(ledger) if ledger is not None else {}
    for _, extra in _unreserved(index).get(cluster, []):
        for resource, amount in extra.items():
            taken[resource] = taken.get(resource, Fraction(0)) + amount
    capacity = ClusterCapacity.of(member.status.resource_usage.allocatable, taken)
    parts = []
    for resource in requests:
        left = capacity.free(resource)
        parts.append(f"{resource} {format_amount(left) if left is not None else 'none'}")
    return ", ".join(parts)


# --- helpers -----------------------------------------------------------------------------------


def _settled(
    placement: ClusterResourcePlacement, snapshot: ClusterSchedulingPolicySnapshot, now: datetime
) -> bool:
    """A turn has scheduled the latest snapshot at the placement's generation."""
    condition = placement_scheduled_condition(placement, snapshot, now)
    return condition.reason != names.SCHEDULE_PENDING_REASON


def _key(placement: ClusterResourcePlacement) -> str:
    return placement_key(placement.metadata.namespace, placement.metadata.name)


def _owner(binding: ClusterResourceBinding) -> str:
    parent = binding.metadata.labels.get(names.PARENT_PLACEMENT_LABEL, "")
    return placement_key(binding.metadata.namespace, parent)


def _listed(items: Iterable[str]) -> str:
    return first_few(items, NAMED)


def _amounts(requests: Mapping[str, str]) -> str:
    return ",".join(f"{r}={q}" for r, q in requests.items()) or "nothing"


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m"
    return f"{seconds}s"
