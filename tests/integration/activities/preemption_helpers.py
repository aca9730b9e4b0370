"""The preemption tests' fleet (docs/priority.md, "Preemption"): three clusters of 8 CPUs, the
turns the workflows would run, the watcher's routes, and a sample after every step that no
cluster holds more than its room."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from temporalio.testing import ActivityEnvironment

from control.views import Change
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    Namespace,
    ObjectMeta,
    PriorityClass,
    ResourceBinding,
    ResourcePlacement,
)
from scheduler.room.capacity import is_active
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    pick_n,
    routes_for,
    turn,
)
from workflows.models import TurnRequest

CLUSTERS = ("member-1", "member-2", "member-3")
LOW, URGENT = 1_000, 101_000
LOWS = tuple(f"low-{i}" for i in range(6))
PROD = {"env": "prod"}  # what `pick_n` requires


def add_class(hub: HubClient, name: str, value: int, policy: str | None = None) -> None:
    hub.create(
        PriorityClass(
            metadata=ObjectMeta(name=name),
            value=value,
            preemption_policy=policy or "PreemptLowerPriority",
        )
    )


def asks(cpu: int, priority_class: str) -> dict[str, str]:
    return {
        names.REQUESTS_ANNOTATION: f"cpu={cpu}",
        names.PRIORITY_CLASS_ANNOTATION: priority_class,
    }


def active_by_cluster(hub: HubClient) -> dict[str, list[ClusterResourceBinding]]:
    out: dict[str, list[ClusterResourceBinding]] = {c: [] for c in CLUSTERS}
    namespaced = [
        b
        for ns in hub.list(Namespace).items
        for b in hub.list(ResourceBinding, namespace=ns.metadata.name).items
    ]
    for binding in [*hub.list(ClusterResourceBinding).items, *namespaced]:
        if is_active(binding):
            out.setdefault(binding.spec.target_cluster, []).append(binding)
    return out


def owner(binding: ClusterResourceBinding) -> str:
    return binding.metadata.labels[names.PARENT_PLACEMENT_LABEL]


class Fleet:
    """The fleet, its turns, and a sample after every step: no cluster above its room."""

    def __init__(self, hub: HubClient, env: ActivityEnvironment, rig: Rig, cpu: str = "8") -> None:
        self.hub, self.env, self.rig = hub, env, rig
        self.cycle = 0
        self.samples = 0
        self.cpu = Fraction(cpu)
        self.lines: dict[str, list[str]] = {}
        for name in CLUSTERS:
            add_cluster(hub, name, allocatable={"cpu": cpu}, labels=PROD)

    def turn(self, placement: str) -> Any:
        self.cycle += 1
        before = {x.name: x for x in self.hub.list(CapacityLedger).items}
        if "/" in placement:  # a ResourcePlacement's key, as the watcher routes it
            namespace, name = placement.split("/", 1)
            request = TurnRequest(
                placement=name, namespace=namespace, cycle=self.cycle, reason="test"
            )
            result = self.env.run(self.rig.activities.schedule_once, request)
        else:
            result = turn(self.env, self.rig.activities, placement, self.cycle)
        self.lines.setdefault(placement, []).extend(result.moves)
        self.sample()
        self.owed = self._routed(before)
        return result

    def sample(self) -> None:
        """Every active binding's requests on a cluster fit its room."""
        self.samples += 1
        for cluster, bindings in active_by_cluster(self.hub).items():
            used = Fraction(0)
            for binding in bindings:
                kind = ResourcePlacement if binding.metadata.namespace else ClusterResourcePlacement
                crp = self.hub.get(kind, owner(binding), namespace=binding.metadata.namespace)
                used += Fraction(crp.metadata.annotations[names.REQUESTS_ANNOTATION][4:])
            assert used <= self.cpu, f"{cluster} holds {used} CPU of {self.cpu}"

    def _routed(self, before: dict[str, CapacityLedger]) -> set[str]:
        """Whom the watcher wakes for the ledgers' changes in the last step."""
        owed = set()
        for ledger in self.hub.list(CapacityLedger).items:
            old = before.get(ledger.name)
            if (
                old is not None
                and old.metadata.resource_version == ledger.metadata.resource_version
            ):
                continue
            change = Change("MODIFIED" if old else "ADDED", old, ledger)
            owed |= {placement for placement, _ in routes_for(self.hub, change)}
        return owed

    def deliver(self, limit: int = 20) -> None:
        """Run every turn owed, as the workflows would, until none is."""
        owed = set(self.owed)
        for _ in range(limit):  # bounded by: a preemption settles in a few rounds
            if not owed:
                return
            next_owed: set[str] = set()
            for placement in sorted(owed):
                self.turn(placement)
                next_owed |= self.owed
            owed = next_owed
        raise AssertionError(f"turns still owed after {limit} rounds: {sorted(owed)}")


def add_rp(hub: HubClient, namespace: str, name: str, n: int, annotations: dict[str, str]) -> None:
    hub.create(
        ResourcePlacement.from_wire(
            {
                "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
                "spec": {
                    "resourceSelectors": [
                        {"group": "", "version": "v1", "kind": "ConfigMap", "name": "app"}
                    ],
                    "policy": pick_n(n),
                },
            }
        )
    )


def rp_turn(full: Fleet, namespace: str, name: str) -> Any:
    full.cycle += 1
    request = TurnRequest(placement=name, namespace=namespace, cycle=full.cycle, reason="test")
    result = full.env.run(full.rig.activities.schedule_once, request)
    full.sample()
    return result


def fill(hub: HubClient, env: ActivityEnvironment, rig: Rig) -> Fleet:
    """The issue's fleet: the classes, and six `cpu=4` placements of the low one, two a cluster."""
    add_class(hub, "batch", LOW)
    add_class(hub, "release-critical", URGENT)
    add_class(hub, "polite", URGENT, "Never")
    fleet = Fleet(hub, env, rig)
    for name in LOWS:
        add_placement(hub, name, pick_n(1), annotations=asks(4, "batch"))
        fleet.turn(name)
    assert all(len(b) == 2 for b in active_by_cluster(hub).values())
    return fleet
