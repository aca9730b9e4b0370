"""The invariants (scheduler.invariants, docs/invariants.md) under random interleavings: a
Hypothesis state machine drives the real activities (turns, cleanups, moves, sweeps) against a
real devhub, with the watcher's routes (the pure functions the watcher runs) deciding which
placements owe a turn after every step, and checks every invariant after every step.

What may be broken, and only then:
- `overcommit` on a cluster grows only in a step that changes supply or demand behind the
  scheduler's back (a cluster shrinks, a placement's requests change, a ledger is deleted), or
  in a step that began while a placement with a binding there owed the turn that makes its
  reservation (docs/invariants.md, "What is not promised"). The machine counts it itself, on
  every cluster: a binding whose placement's requests cannot be read consumes the room it
  holds (or, holding none, what its placement last asked for), and `check` must see every
  overcommit the machine counts from reservations alone;
- `disruption_budget` only for moves made before the budget was set or tightened;
- `reservation` only for placements that owe a turn;
- `stale_reservation` never right after a sweep;
- `stranded_shortage` only for placements that owe a turn: freed room must have woken them;
- `placement_decisions` only for placements that owe a turn (a binding changed behind the
  scheduler's back, a turn that failed between its bindings and its decisions);
- `duplicate_binding`, `binding_count`, `preemption` never;
- `stale_nomination` never right after a sweep, and only for a nomination older than its grace
  or one of a placement whose requests annotation was removed.
Preemption (placements of sampled PriorityClasses, one of them `preemptionPolicy: Never`):
every binding a victim's turn unscheduled with a `preempted-by` mark naming P on cluster C was
named by a nomination of P on C that the machine saw on the ledgers (recorded after every
turn): a preemption retried half done is finished, never done again; and a step that preempts
a placement's bindings had its disruption budget allow that many disruptions when it began.
Once every turn owed has run, an enforcing PickN placement keeps a binding on a cluster it lost
only while no other cluster passes its filters, or while its last turn asked for a timer (the
budget or room held the move back): a cluster that came to pass must have reached it.

`make test` runs a bounded number of examples; `make soak` many more
(FLEET_INVARIANT_EXAMPLES, FLEET_INVARIANT_STEPS)."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from temporalio.testing import ActivityEnvironment

from activities.capacity import sweep_ledgers, sweep_nominations_of_fleet
from activities.decisions import DecisionSettings
from activities.fleet_state import read_fleet_state
from activities.moves import UNREADABLE_REFUSAL
from activities.plumbing import ActivitySettings
from activities.preemption import preemptor_label
from activities.rebalance import plan_rebalance
from control.routes import Room, route_change
from control.views import Change, routing_copy
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.errors import NotFoundError
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    MemberCluster,
    ObjectMeta,
    PriorityClass,
)
from hub.types.meta import HubObject
from scheduler.clusters.eligibility import EligibilityChecker
from scheduler.cycles.schedule import placement_type_of
from scheduler.invariants import (
    BINDING_COUNT,
    DISRUPTION_BUDGET,
    DUPLICATE_BINDING,
    OVERCOMMIT,
    PLACEMENT_DECISIONS,
    PREEMPTION,
    RESERVATION,
    STALE_NOMINATION,
    STALE_RESERVATION,
    STRANDED_SHORTAGE,
    FleetState,
    Violation,
    find_violations,
)
from scheduler.moves.budgets import available, budget_state, moved_from
from scheduler.moves.enforcement import enforces, lost_bindings, replacement_order
from scheduler.preemption.marks import parse_preempted_by
from scheduler.requeue.reconcile import plan_reconcile
from scheduler.room.capacity import ClusterCapacity, binding_key, held, is_active
from scheduler.room.quantity import parse_quantity
from scheduler.testing import member_cluster
from tests.integration.activities.activity_helpers import Activities, add_placement
from tests.support.policies import prod_only
from workflows.models import CleanupRequest, MoveRequest, TurnRequest

EXAMPLES = int(os.environ.get("FLEET_INVARIANT_EXAMPLES", "12"))
STEPS = int(os.environ.get("FLEET_INVARIANT_STEPS", "25"))
CLUSTERS = ("c0", "c1", "c2", "c3")
PLACEMENTS = ("p0", "p1", "p2", "p3", "p4")
START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# What the examples did, printed with -s: a machine that never reaches a state is no test.
SEEN: Counter[str] = Counter()

# Affinity enforced during execution (docs/enforcement.md): clusters are relabelled and tainted,
# and enforcing placements move (PickN) or drop (PickAll) the bindings there.
PROD_ONLY: dict[str, Any] = prod_only()
enforced = st.booleans()
ENFORCED = ": cluster "  # in every enforcement line ("...: cluster lost env=prod")

policies = st.sampled_from(
    [
        {"placementType": "PickN", "numberOfClusters": 1},
        {"placementType": "PickN", "numberOfClusters": 1},
        {"placementType": "PickN", "numberOfClusters": 2},
        {"placementType": "PickN", "numberOfClusters": 2},
        {"placementType": "PickAll"},
        {"placementType": "PickFixed", "clusterNames": ["c0", "c1"]},
        {"placementType": "PickN", "numberOfClusters": 2, **PROD_ONLY},
        {"placementType": "PickAll", **PROD_ONLY},
    ]
)
# Mostly capacity-aware: that is where the counts are.
requests = st.one_of(st.none(), st.integers(1, 5).map(lambda n: f"cpu={n}"), st.just("cpu=2"))
movable = st.sampled_from([True, True, False])
# PriorityClasses (name -> value, preemptionPolicy), made in every example; placements name one
# (or none: priority 0), so that higher ones preempt lower ones where room is short.
CLASSES: dict[str, tuple[int, str]] = {
    "low": (0, "PreemptLowerPriority"),
    "mid": (1_000, "PreemptLowerPriority"),
    "high": (100_000, "PreemptLowerPriority"),
    "patient": (100_000, "Never"),
}
classes = st.sampled_from([None, "low", "mid", "mid", "high", "high", "patient"])
urgencies = st.sampled_from(["high", "high", "mid", "patient"])
# Where a turn cut short in a preemption fails: a victim's release of its room (after its
# unschedule), its unschedule or a move's old binding, a move's new binding, its Event.
FAULTS = [
    ("update", "capacityledgers"),
    ("patch", "clusterresourcebindings"),
    ("create", "clusterresourcebindings"),
    ("create", "events"),
]


DECISIONS = DecisionSettings()


@dataclass
class World:
    """What the machine shares with the test: the hub, the activities, the clock."""

    devhub: DevHub
    hub: HubClient
    env: ActivityEnvironment
    now: list[datetime] = field(default_factory=lambda: [START])


def make_machine(world: World) -> type[RuleBasedStateMachine]:
    hub, env = world.hub, world.env
    # PlacementDecisions published, as `run` does standalone: they must follow the bindings
    # through every interleaving too (docs/decisions.md).
    activities = Activities(hub, ActivitySettings(clock=lambda: world.now[0], decisions=DECISIONS))

    class InvariantsMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            world.devhub.reset()
            world.now[0] = START
            self.owed: set[str] = set()
            self.moves: dict[str, list[MoveRequest]] = {}
            self.cycle = 0
            self.allowed_over: dict[str, Fraction] = {}
            self.excused: set[str] = set()  # clusters whose supply or demand just moved
            # Clusters holding an active binding of a placement that owed a turn when the step
            # began: that turn makes its reservation, and until it has run the ledger
            # undercounts it (the documented window).
            self.owing: set[str] = set()
            self.before_budget: dict[str, set[str]] = {}  # placement -> moves older than its budget
            self.swept = False
            self.names: set[str] = set()  # placements created and not deleted
            self.again: set[str] = set()  # placements whose last turn asked for a timer
            # Placement -> the CPUs it last asked for in a value that reads: what its bindings
            # consume while its annotation cannot be read.
            self.asked: dict[str, int] = {}
            # Placements made unreadable while each active binding held its reservation: every
            # active binding they have keeps holding one (moves carry it) until they are fixed.
            self.garbled: set[str] = set()
            # (preemptor, cluster) -> every victim binding a nomination of it there ever named.
            self.nominated: dict[tuple[str, str], set[str]] = {}
            self.victims: set[str] = set()  # placements a nomination asks to yield, now
            self.unaware: set[str] = set()  # placements whose requests annotation was removed
            self.last: FleetState | None = None  # the reading after the previous step
            for name, (value, policy) in CLASSES.items():
                hub.create(
                    PriorityClass(
                        metadata=ObjectMeta(name=name), value=value, preemption_policy=policy
                    )
                )
            self.seen: dict[str, dict[str, HubObject]] = self._read()
            SEEN["examples"] += 1

        # --- the world ----------------------------------------------------------------------

        @initialize(
            cpus=st.lists(st.integers(4, 12), min_size=len(CLUSTERS), max_size=len(CLUSTERS))
        )
        def fleet(self, cpus: list[int]) -> None:
            for name, cpu in zip(CLUSTERS, cpus, strict=True):
                self._cluster(name, str(cpu), create=True)
            self._routed()

        @initialize(
            first=st.lists(
                st.tuples(policies, requests, movable, enforced, classes), min_size=3, max_size=4
            ),
            # Most examples start with a preemption (or a `patient` placement that waits).
            urgent=st.sampled_from([True, True, True, False]).flatmap(
                lambda on: st.tuples(st.integers(1, 2), urgencies) if on else st.none()
            ),
        )
        def placements(
            self,
            first: list[tuple[dict[str, Any], str | None, bool, bool, str | None]],
            urgent: tuple[int, str] | None,
        ) -> None:
            for name, (policy, asks, movable, enforcing, priority) in zip(
                PLACEMENTS, first, strict=False
            ):
                self.create(name, policy, asks, movable, enforcing, priority)
            self.deliver_everything()
            if urgent is not None and len(self.names) < len(PLACEMENTS):
                self.urgent(*urgent)
                self.deliver_everything()

        def _cluster(self, name: str, cpu: str, *, create: bool = False) -> None:
            wanted = member_cluster(
                name, world.now[0], allocatable={"cpu": cpu}, labels={"env": "prod"}
            )
            current = hub.create(wanted) if create else hub.get(MemberCluster, name)
            hub.update_status(current.model_copy(update={"status": wanted.status}))

        def _read(self) -> dict[str, dict[str, HubObject]]:
            kinds: dict[str, type[HubObject]] = {
                "placements": ClusterResourcePlacement,
                "bindings": ClusterResourceBinding,
                "clusters": MemberCluster,
                "ledgers": CapacityLedger,
            }
            return {
                key: {o.metadata.name: o for o in hub.list(kind).items}
                for key, kind in kinds.items()
            }

        def _routed(self) -> None:
            """What the watcher would signal for everything that changed since the last step."""
            now = self._read()
            room = Room(
                clusters={n: routing_copy(c) for n, c in now["clusters"].items()},  # type: ignore[misc]
                ledgers=now["ledgers"],  # type: ignore[arg-type]
                bindings=[routing_copy(b) for b in now["bindings"].values()],  # type: ignore[misc]
            )
            placements = {n: routing_copy(p) for n, p in now["placements"].items()}
            for kind in ("clusters", "ledgers", "bindings", "placements"):
                before, after = self.seen[kind], now[kind]
                for name in before.keys() | after.keys():
                    old, new = before.get(name), after.get(name)
                    if new is None:
                        change = Change("DELETED", routing_copy(old), routing_copy(old))  # type: ignore[arg-type]
                    elif old is None:
                        change = Change("ADDED", None, routing_copy(new))
                    elif old.metadata.resource_version == new.metadata.resource_version:
                        continue
                    else:
                        change = Change("MODIFIED", routing_copy(old), routing_copy(new))
                    routes = route_change(
                        change,  # type: ignore[arg-type]
                        placements=placements,  # type: ignore[arg-type]
                        standalone=True,
                        checker=EligibilityChecker(),
                        now=world.now[0],
                        room=room,
                    )
                    self.owed |= {r.placement for r in routes if r.placement in placements}
            self.seen = now

        # --- rules: what people and controllers do -----------------------------------------

        @rule(name=st.sampled_from(PLACEMENTS), policy=policies, asks=requests,
              movable=movable, enforcing=enforced, priority=classes)  # fmt: skip
        def create(
            self,
            name: str,
            policy: dict[str, Any],
            asks: str | None,
            movable: bool,
            enforcing: bool = False,
            priority: str | None = None,
        ) -> None:
            annotations = {}
            if priority is not None:
                annotations[names.PRIORITY_CLASS_ANNOTATION] = priority
            if enforcing:
                annotations[names.AFFINITY_ENFORCEMENT_ANNOTATION] = "DuringExecution"
            if asks is not None:
                annotations[names.REQUESTS_ANNOTATION] = asks
            if movable:
                annotations[names.REBALANCE_ANNOTATION] = names.REBALANCE_ALLOWED
            try:
                add_placement(hub, name, policy, annotations=annotations)
            except Exception as exc:  # it exists (or is being deleted): nothing happens
                SEEN[f"create failed: {type(exc).__name__}"] += 1
                return
            self.names.add(name)
            self._asked(name, asks)
            SEEN["created"] += 1
            SEEN[f"created:{priority}"] += 1

        def _asked(self, name: str, asks: str | None) -> None:
            self.garbled.discard(name)
            if asks is None:
                self.asked.pop(name, None)
            elif (cpus := _cpus(asks)) is not None:
                self.asked[name] = cpus

        @precondition(lambda self: bool(self.names))
        @rule(data=st.data(), asks=st.one_of(requests, st.just("cpu=two")))
        def annotate(self, data: st.DataObject, asks: str | None) -> None:
            name = data.draw(st.sampled_from(sorted(self.names)))
            try:
                hub.patch(
                    ClusterResourcePlacement,
                    name,
                    {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: asks}}},
                )
            except NotFoundError:
                return
            self._asked(name, asks)
            if asks is None:
                self.unaware.add(name)
            self.excused |= set(CLUSTERS)

        @precondition(lambda self: len(self.names) < len(PLACEMENTS))
        @rule(n=st.integers(1, 2), priority=urgencies)
        def urgent(self, n: int, priority: str) -> None:
            """A placement of a high class that asks for one CPU more than any cluster has free
            (within the largest one's CPUs): short of room wherever anything runs, it preempts
            lower priorities (or, `patient`, waits)."""
            name = next(p for p in PLACEMENTS if p not in self.names)
            ledgers = {x.name: x for x in hub.list(CapacityLedger).items}
            frees, sizes = [], []
            for cluster in hub.list(MemberCluster).items:
                size = parse_quantity(cluster.status.resource_usage.allocatable["cpu"])
                ledger = ledgers.get(cluster.name)
                taken = held(ledger).get("cpu", Fraction(0)) if ledger is not None else 0
                frees.append(size - taken)
                sizes.append(size)
            cpus = max(min(max(frees) + 1, max(sizes)), 1) if sizes else 4
            policy = {"placementType": "PickN", "numberOfClusters": n}
            self.create(name, policy, f"cpu={cpus}", False, False, priority)
            SEEN["urgent"] += 1

        @precondition(lambda self: bool(self.names))
        @rule(data=st.data(), priority=classes)
        def reclass(self, data: st.DataObject, priority: str | None) -> None:
            """A placement's PriorityClass changed: only its queue order reads it (no turn is
            routed), and nominations and marks keep the priorities they were made with."""
            name = data.draw(st.sampled_from(sorted(self.names)))
            with contextlib.suppress(NotFoundError):
                hub.patch(
                    ClusterResourcePlacement,
                    name,
                    {"metadata": {"annotations": {names.PRIORITY_CLASS_ANNOTATION: priority}}},
                )

        @rule(pick=st.integers(0, 50))
        def garble(self, pick: int) -> None:
            """A placement's requests made unreadable mid-run (a typo in an edit): its bindings
            consume what they did, so no cluster is excused; its cycles fail until it is fixed,
            and its enforcement moves carry the room they hold."""
            readable = sorted(
                p.name
                for p in hub.list(ClusterResourcePlacement).items
                if _cpus(p.metadata.annotations.get(names.REQUESTS_ANNOTATION, "")) is not None
                and not p.metadata.deleting
            )
            if readable:
                self._garble(readable[pick % len(readable)])

        @precondition(lambda self: len(self.names) < len(PLACEMENTS))
        @rule(cpu=st.integers(1, 5))
        def typo_then_retired(self, cpu: int) -> None:
            """The interleaving of issue 33's finding 4: an enforcing placement scheduled, its
            requests made unreadable, its cluster leaving env=prod, then its turn (the watcher
            routes both changes to it), whose move must carry the room its binding holds."""
            name = next(n for n in PLACEMENTS if n not in self.names)
            policy = {"placementType": "PickN", "numberOfClusters": 1, **PROD_ONLY}
            self.create(name, policy, f"cpu={cpu}", False, True)
            if name not in self.names:
                return
            self._turn(name)
            self._routed()
            held = sorted(
                b.spec.target_cluster
                for b in hub.list(ClusterResourceBinding).items
                if b.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) == name and is_active(b)
            )
            self._garble(name)
            if held:
                SEEN["typo, then its cluster retired"] += 1
                self.relabel(held[0], "retired")
                self._routed()
                self._turn(name)

        def _garble(self, name: str) -> None:
            text = hub.get(ClusterResourcePlacement, name).metadata.annotations[
                names.REQUESTS_ANNOTATION
            ]
            hub.patch(
                ClusterResourcePlacement,
                name,
                {"metadata": {"annotations": {names.REQUESTS_ANNOTATION: f"{text},,"}}},
            )
            SEEN["garbled"] += 1
            if not self._unreserved(name):
                self.garbled.add(name)

        def _unreserved(self, name: str) -> list[str]:
            """The active bindings of `name` that hold no reservation of its own."""
            held = {
                (ledger.name, key)
                for ledger in hub.list(CapacityLedger).items
                for key, r in ledger.spec.reservations.items()
                if r.placement == name
            }
            return [
                b.name
                for b in hub.list(ClusterResourceBinding).items
                if b.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) == name
                and is_active(b)
                and (b.spec.target_cluster, b.name) not in held
            ]

        @precondition(lambda self: bool(self.names))
        @rule(data=st.data())
        def delete_placement(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(sorted(self.names)))
            self.names.discard(name)
            self.garbled.discard(name)
            try:
                hub.delete(ClusterResourcePlacement, name)
            except NotFoundError:
                return

        @rule(cluster=st.sampled_from(CLUSTERS))
        def delete_ledger(self, cluster: str) -> None:
            try:
                hub.delete(CapacityLedger, cluster)
            except NotFoundError:
                return
            self.excused.add(cluster)
            self.garbled.clear()  # their reservations there are gone, and nothing makes them

        @rule(cluster=st.sampled_from(CLUSTERS), cpu=st.integers(1, 12))
        def resize_cluster(self, cluster: str, cpu: int) -> None:
            self._cluster(cluster, str(cpu))
            self.excused.add(cluster)

        @rule(cluster=st.sampled_from(CLUSTERS), env=st.sampled_from(["prod", "retired"]))
        def relabel(self, cluster: str, env: str) -> None:
            hub.patch(MemberCluster, cluster, {"metadata": {"labels": {"env": env}}})
            SEEN[f"relabel:{env}"] += 1

        @rule(cluster=st.sampled_from(CLUSTERS), on=st.booleans())
        def taint(self, cluster: str, on: bool) -> None:
            taints = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}] if on else []
            hub.patch(MemberCluster, cluster, {"spec": {"taints": taints}})
            SEEN[f"taint:{on}"] += 1

        @rule(
            name=st.sampled_from(PLACEMENTS), min_available=st.booleans(), value=st.integers(0, 2)
        )
        def budget(self, name: str, min_available: bool, value: int) -> None:
            # A budget set (or tightened) while moves are in flight governs the moves after it,
            # not those: remember them.
            self.before_budget[name] = {
                b.name
                for b in hub.list(ClusterResourceBinding).items
                if b.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) == name and moved_from(b)
            }
            spec = {"minAvailable": value} if min_available else {"maxUnavailable": value}
            with contextlib.suppress(NotFoundError):
                hub.delete(ClusterResourcePlacementDisruptionBudget, name)
            hub.create(
                ClusterResourcePlacementDisruptionBudget.from_wire(
                    {"metadata": {"name": name}, "spec": spec}
                )
            )

        @rule(pick=st.integers(0, 50))
        def rollout_makes_available(self, pick: int) -> None:
            # An index, not a draw from what the hub holds: generated data must not depend on
            # the hub (binding names carry a hash of what they are made from, not a choice).
            active = [b for b in hub.list(ClusterResourceBinding).items if is_active(b)]
            if not active:
                return
            binding = sorted(active, key=lambda b: (b.spec.target_cluster, b.name))[
                pick % len(active)
            ]
            from tests.integration.activities.activity_helpers import make_available

            make_available(hub, binding)

        @precondition(lambda self: bool(self.names))
        @rule(strategy=st.sampled_from(["pack", "spread"]))
        def propose_moves(self, strategy: str) -> None:
            plan = plan_rebalance(hub, strategy, now=world.now[0])  # type: ignore[arg-type]
            SEEN["moves proposed"] += len(plan.moves)
            SEEN["movable"] += len(plan.movable)
            for move in plan.moves:
                self.moves.setdefault(move.placement, []).append(
                    MoveRequest(
                        binding=move.binding,
                        source=move.source,
                        target=move.target,
                        reason=move.reason,
                    )
                )
                self.owed.add(move.placement)

        @rule(minutes=st.sampled_from([1, 16]))
        def advance_clock(self, minutes: int) -> None:
            world.now[0] += timedelta(minutes=minutes)
            for cluster in hub.list(MemberCluster).items:  # agents keep heartbeating
                self._cluster(cluster.name, cluster.status.resource_usage.allocatable["cpu"])

        def sweep(self) -> None:
            aware = {
                p.name
                for p in hub.list(ClusterResourcePlacement).items
                if names.REQUESTS_ANNOTATION in p.metadata.annotations
            }
            sweep_ledgers(hub, aware, hub.list(ClusterResourceBinding).items, world.now[0])
            sweep_nominations_of_fleet(hub, aware, world.now[0])
            self.swept = True

        @rule()
        def reconcile(self) -> None:
            """The reconcile's hub side: what its invariants find, requeued; then its sweep."""
            state = read_fleet_state(hub, resource_placements=False, decisions=DECISIONS)
            found = find_violations(state, world.now[0])
            plan = plan_reconcile(
                state.placements, state.snapshots, state.clusters, state.bindings,
                {p.name for p in state.placements}, None, standalone=True, now=world.now[0],
                resource_placements=False, violations=found,
            )  # fmt: skip
            self.owed |= set(plan.requeue)
            self.sweep()

        # --- rules: what the scheduler does -------------------------------------------------

        @precondition(lambda self: bool(self.owed))
        @rule(data=st.data())
        def turn(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(sorted(self.owed)))
            self._turn(name)

        @precondition(lambda self: bool(self.owed))
        @rule()
        def deliver_everything(self) -> None:
            for _ in range(3):  # a turn may owe another (a requeue, freed room)
                for name in sorted(self.owed):
                    self._turn(name)
                self._routed()
            if not self.owed:
                self._no_lost_binding_kept_where_it_could_move()

        def _no_lost_binding_kept_where_it_could_move(self) -> None:
            """Once every turn owed has run: an enforcing PickN placement keeps a binding on a
            cluster it lost only while no other cluster passes its filters, or while its last
            turn asked to be run again (the budget or room held the move back). A cluster that
            came to pass must have reached it (docs/enforcement.md)."""
            state = read_fleet_state(hub, resource_placements=False)
            snapshots = {s.placement_name: s for s in state.snapshots}
            for placement in state.placements:
                snapshot = snapshots.get(placement.name)
                if (
                    snapshot is None
                    or placement.metadata.deleting
                    or not enforces(placement)
                    or placement_type_of(snapshot) != names.PICK_N
                    or placement.name in self.again
                ):
                    continue
                bindings = [
                    b
                    for b in state.bindings
                    if b.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) == placement.name
                ]
                now = world.now[0]
                lost, _ = lost_bindings(snapshot, state.clusters, bindings, None, now)
                if not lost:
                    continue
                SEEN["lost binding kept"] += 1
                order = replacement_order(snapshot, state.clusters, bindings, lost, None, now)
                assert not order, (placement.name, [item.reason for item in lost], order)

        @precondition(lambda self: bool(self.moves))
        @rule(data=st.data())
        def turn_that_fails_after_its_first_create(self, data: st.DataObject) -> None:
            """A crash between a move's new binding and the old one's unschedule: the retried
            turn (a later `turn`) finds the move half done."""
            self._failing_turn(data.draw(st.sampled_from(sorted(self.moves))))

        @precondition(lambda self: bool(self.owed))
        @rule(data=st.data())
        def turn_that_fails_after_its_first_binding_patch(self, data: st.DataObject) -> None:
            """A crash right after a turn's first binding write (an enforcement move's new
            binding made, its old one not yet unscheduled; a PickAll unschedule lost): the
            retried turn (a later `turn`) finds the work half done."""
            self._failing_turn(data.draw(st.sampled_from(sorted(self.owed))))

        @precondition(lambda self: bool(self.victims))
        @rule(data=st.data(), fault=st.sampled_from(FAULTS))
        def turn_that_fails_halfway_through_a_preemption(
            self, data: st.DataObject, fault: tuple[str, str]
        ) -> None:
            """A victim's turn cut short while it yields (its binding unscheduled, its room not
            yet released; a move's new binding made, its old one kept; its Event lost): the
            retried turn (a later `turn`) finishes the preemption, never does it again."""
            SEEN[f"preemption turn faulted: {' '.join(fault)}"] += 1
            self._failing_turn(data.draw(st.sampled_from(sorted(self.victims))), fault)

        def _failing_turn(
            self, name: str, fault_at: tuple[str, str] = ("patch", "clusterresourcebindings")
        ) -> None:
            verb, resource = fault_at
            fault = world.devhub.faults.inject(verb=verb, resource=resource, status=500, count=1)
            try:
                self._turn(name, keep_moves=True)
            except Exception:
                SEEN["failed turns"] += 1  # as Temporal sees it: the attempt failed, retried
            finally:
                fault.remove()
            self.owed.add(name)

        def _turn(self, name: str, *, keep_moves: bool = False) -> None:
            self.cycle += 1
            moves = self.moves.get(name, [])
            request = TurnRequest(placement=name, cycle=self.cycle, reason="machine", moves=moves)
            result = env.run(activities.schedule_once, request)
            SEEN["turn"] += 1
            SEEN[f"turn:{result.prepared.phase}"] += 1
            SEEN["moves made"] += sum(line.startswith("moved") for line in result.moves)
            SEEN["moves refused"] += sum(line.startswith("refused") for line in result.moves)
            SEEN["enforced"] += sum(ENFORCED in line for line in result.moves)
            SEEN["preempting on"] += sum(line.startswith("preempting on") for line in result.moves)
            SEEN["preempted: unscheduled"] += sum(
                line.startswith("unscheduled ") and "preempted by" in line for line in result.moves
            )
            SEEN["preempted: moved"] += sum(
                line.startswith("moved ") and "preempted by" in line for line in result.moves
            )
            SEEN["preemption under way"] += sum(
                line.startswith("preemption under way") for line in result.moves
            )
            SEEN["no preemption"] += sum(line.startswith("no preemption") for line in result.moves)
            if result.report is not None:
                SEEN["nominated"] += result.report.writes.nominated
            self._nominations()
            if result.prepared.phase == "deleting":
                env.run(activities.cleanup_placement, CleanupRequest(placement=name))
            if not keep_moves:
                self.moves.pop(name, None)
            self.owed.discard(name)
            report = result.report
            if report is not None and (report.requeue or report.requeue_after_seconds):
                self.again.add(name)  # its workflow runs it again on a timer
            elif any(UNREADABLE_REFUSAL in line for line in result.moves):
                # Held until its requests read again: the fix is a turn of its own, no timer.
                self.again.add(name)
            else:
                self.again.discard(name)
            # The watcher hears each turn's writes as they land, not a step's sum of them: a
            # nomination made by one turn and the room its victim released in the next, seen
            # together, free nothing, where the watcher wakes the preemptor for the release.
            self._routed()

        # --- after every step ----------------------------------------------------------------

        @invariant()
        def counts_stay_true(self) -> None:
            SEEN["checks"] += 1
            self._routed()
            state = read_fleet_state(hub, resource_placements=False, decisions=DECISIONS)
            found = find_violations(state, world.now[0])
            by: dict[str, list[Violation]] = {}
            SEEN.update(f"violation:{v.invariant}" for v in found)
            for violation in found:
                by.setdefault(violation.invariant, []).append(violation)
            for kind in (DUPLICATE_BINDING, BINDING_COUNT, PREEMPTION):
                assert kind not in by, [v.message for v in by[kind]]
            self._nominations(state)
            self._stale_nominations(by.get(STALE_NOMINATION, []))
            self._preempted_once(state)
            self._budgets_allowed_preemptions(state)
            spent = [v for v in by.get(DISRUPTION_BUDGET, []) if not self._budget_after(state, v)]
            assert not spent, [v.message for v in spent]
            for kind in (RESERVATION, STRANDED_SHORTAGE, PLACEMENT_DECISIONS):
                unowed = [v.message for v in by.get(kind, []) if v.placement not in self.owed]
                assert not unowed, unowed
            if self.swept:
                assert STALE_RESERVATION not in by, [v.message for v in by[STALE_RESERVATION]]
            self._overcommit(state, by.get(OVERCOMMIT, []))
            for name in sorted(self.garbled):
                assert not self._unreserved(name), (
                    f"placement {name}'s requests cannot be read, and these bindings of it hold "
                    f"no room: {self._unreserved(name)}"
                )
            self.swept = False
            self.excused.clear()
            self.last = state
            self.owing = {
                b.spec.target_cluster
                for b in state.bindings
                if is_active(b) and b.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) in self.owed
            }

        def _nominations(self, state: FleetState | None = None) -> None:
            """Record every victim each nomination on the ledgers names (after every turn: a
            nomination may be made, yielded to and taken within one step)."""
            ledgers = state.ledgers if state is not None else hub.list(CapacityLedger).items
            self.victims = set()
            for ledger in ledgers or ():
                for key, nomination in ledger.spec.nominations.items():
                    named = self.nominated.setdefault((key, ledger.name), set())
                    named |= {v.binding for v in nomination.victims}
                    self.victims |= {v.placement for v in nomination.victims}

        def _stale_nominations(self, found: list[Violation]) -> None:
            """None right after a sweep; otherwise only past the grace, or of a placement whose
            requests were removed (its turns no longer read the ledgers; the sweep drops it)."""
            if self.swept:
                assert not found, [v.message for v in found]
            for violation in found:
                SEEN["stale nomination"] += 1
                assert "longer than" in violation.message or (
                    violation.placement in self.unaware
                ), violation.message

        def _preempted_once(self, state: FleetState) -> None:
            """Every binding marked as preempted by P on C was named by a nomination of P on
            C: a victim's retried turn yields only what a nomination asks, never more."""
            labels = {preemptor_label(key): key for key, _ in self.nominated}
            for binding in state.bindings:
                text = binding.metadata.annotations.get(names.PREEMPTED_BY_ANNOTATION)
                if text is None:
                    continue
                mark = parse_preempted_by(text)
                assert mark is not None, text
                key = labels.get(mark.preemptor)
                named = self.nominated.get((key, mark.cluster), set()) if key else set()
                assert binding_key(binding) in named, (
                    f"binding {binding.name} was preempted ({text}) without a nomination of "
                    f"{mark.preemptor} on {mark.cluster} naming it: {sorted(named)}"
                )
                SEEN["preempted bindings checked"] += 1

        def _budgets_allowed_preemptions(self, state: FleetState) -> None:
            """The bindings a step preempted (unscheduled with a mark) of a placement with a
            disruption budget: the budget allowed a disruption when the step began, and as many
            as it took of the available ones (an unavailable one costs the budget nothing)."""
            last = self.last
            if last is None:
                return
            before = {b.metadata.uid: b for b in last.bindings}
            taken: dict[str, list[ClusterResourceBinding]] = {}
            for binding in state.bindings:
                old = before.get(binding.metadata.uid)
                if (
                    old is not None
                    and is_active(old)
                    and not is_active(binding)
                    and names.PREEMPTED_BY_ANNOTATION in binding.metadata.annotations
                    and binding.metadata.annotations != old.metadata.annotations
                ):
                    owner = binding.metadata.labels[names.PARENT_PLACEMENT_LABEL]
                    taken.setdefault(owner, []).append(old)
            budgets = {b.name: b for b in last.budgets}
            placements = {p.name: p for p in last.placements}
            for owner, olds in sorted(taken.items()):
                SEEN["preempted in a step"] += len(olds)
                budget, placement = budgets.get(owner), placements.get(owner)
                if budget is None or placement is None:
                    continue
                bindings = [
                    b
                    for b in last.bindings
                    if b.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) == owner
                ]
                allowed = budget_state(budget, placement, bindings).allowed()
                spent = sum(available(b) for b in olds)
                SEEN["preempted within a budget"] += len(olds)
                assert allowed is None or allowed >= max(spent, 1), (
                    f"{owner}: {len(olds)} binding(s) preempted ({spent} available) where its "
                    f"budget allowed {allowed} disruption(s)"
                )

        def _budget_after(self, state: Any, violation: Violation) -> bool:
            """The budget was set while every move now in flight was already made."""
            older = self.before_budget.get(violation.placement or "")
            if older is None:
                return False
            in_flight = {
                b.name
                for b in state.bindings
                if b.metadata.labels.get(names.PARENT_PLACEMENT_LABEL) == violation.placement
                and moved_from(b)
                and is_active(b)
            }
            return in_flight <= older

        def _overcommit(self, state: Any, found: list[Violation]) -> None:
            """Overcommit grows only where supply or demand moved behind the scheduler's back,
            or while a placement with a binding there owes the turn that reserves for it; and
            `check` reports every overcommit counted from reservations alone."""
            reported = {v.cluster for v in found}
            for cluster in CLUSTERS:
                now, exact, known = self._over(state, cluster)
                if now > 0 and exact:
                    assert cluster in reported, (
                        f"cluster {cluster} is overcommitted by {now} CPU and check says nothing"
                    )
                # The growth the scheduler answers for is of the demand it can know: a binding
                # whose placement's requests cannot be read, and which holds no reservation (its
                # ledger deleted), consumes room that nothing on the hub says (docs/capacity.md,
                # limits); `garbled` checks that no move of ours makes one.
                if known > self.allowed_over.get(cluster, Fraction(0)):
                    assert cluster in self.excused or cluster in self.owing, (
                        f"cluster {cluster} got more overcommitted ({now} CPU) in a step that "
                        f"moved neither its supply nor its demand: "
                        f"{[v.message for v in found if v.cluster == cluster]}"
                    )
                self.allowed_over[cluster] = known

        def _over(self, state: Any, cluster: str) -> tuple[Fraction, bool, Fraction]:
            """How far the cluster's active bindings ask beyond its CPUs; whether each
            binding of a placement whose requests cannot be read was counted by a reservation
            of its own (not by what its placement last asked for); and how far without those
            that were not (what the hub still says of the demand)."""
            member = next(c for c in state.clusters if c.name == cluster)
            supply = ClusterCapacity.of(member.status.resource_usage.allocatable)
            asked = Fraction(0)
            unknown = Fraction(0)
            exact = True
            placements = {p.name: p for p in state.placements}
            ledger = next((x for x in state.ledgers or () if x.name == cluster), None)
            held = ledger.spec.reservations if ledger is not None else {}
            for binding in state.bindings:
                owner = placements.get(
                    binding.metadata.labels.get(names.PARENT_PLACEMENT_LABEL, "")
                )
                if (
                    owner is None
                    or binding.spec.target_cluster != cluster
                    or not is_active(binding)
                ):
                    continue
                text = owner.metadata.annotations.get(names.REQUESTS_ANNOTATION)
                if text is None:
                    continue
                cpus = _cpus(text)
                if cpus is not None:
                    asked += cpus
                    continue
                own = held.get(binding.name)
                if own is not None and own.placement == owner.name:
                    asked += parse_quantity(own.requests.get("cpu", "0"))
                elif owner.name in self.asked:
                    asked += self.asked[owner.name]
                    unknown += self.asked[owner.name]
                    exact = False
            cpus = supply.allocatable.get("cpu", Fraction(0))
            zero = Fraction(0)
            return max(asked - cpus, zero), exact, max(asked - unknown - cpus, zero)

    return InvariantsMachine


def _cpus(text: str) -> int | None:
    """The CPUs a requests value the machine writes asks for; None when it cannot be read."""
    if text.startswith("cpu=") and text[4:].isdigit():
        return int(text[4:])
    return None


def test_every_count_stays_true_in_every_order_of_events(
    devhub: DevHub, hub_kubeconfig: Any
) -> None:
    hub = HubClient.from_kubeconfig(hub_kubeconfig, timeout=(2.0, 10.0))
    world = World(devhub=devhub, hub=hub, env=ActivityEnvironment())
    try:
        run_state_machine_as_test(
            make_machine(world),
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                derandomize=os.environ.get("FLEET_INVARIANT_SEED") is None,
            ),
        )
    finally:
        devhub.faults.clear()
        hub.close()
        print("invariants machine:", dict(sorted(SEEN.items())))
