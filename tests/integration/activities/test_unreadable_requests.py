"""A placement whose requests annotation can no longer be read (issue 33, finding 4): its cycles
fail with a condition and write no binding, and the bindings it holds keep the room they
reserved while the value was valid. An affinity-enforcement move of such a binding carries that
reservation to its target (it must fit there, as any move's) and releases it on the source; a
binding with no reservation to carry is not moved. `check` counts every such binding, by the
reservation it holds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import pytest
from temporalio.testing import ActivityEnvironment

from activities.fleet_state import read_fleet_state
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    ClusterResourcePlacement,
    Namespace,
    ResourceBinding,
    ResourcePlacement,
)
from scheduler import invariants
from scheduler.invariants import find_violations
from tests.integration.activities.activity_helpers import (
    ENFORCED,
    Rig,
    active,
    add_cluster,
    add_placement,
    pick_n,
    relabel,
    turn,
    violations,
)
from workflows.models import TurnRequest, TurnResult

CPU: Final = names.REQUESTS_ANNOTATION
UNREADABLE: Final = "cpu=6,,memory"
PROD: Final = {"env": "prod"}


def reserved(hub: HubClient, cluster: str) -> dict[str, str]:
    """Binding -> its reserved cpu on the cluster's ledger."""
    ledgers = {ledger.name: ledger for ledger in hub.list(CapacityLedger).items}
    ledger = ledgers.get(cluster)
    if ledger is None:
        return {}
    return {k: r.requests.get("cpu", "0") for k, r in ledger.spec.reservations.items()}


def garble(hub: HubClient, placement: str) -> None:
    hub.patch(ClusterResourcePlacement, placement, {"metadata": {"annotations": {CPU: UNREADABLE}}})


def web_on_a_then_unreadable(
    hub: HubClient, rig: Rig, env: ActivityEnvironment, fixed: dict[str, Any] | None
) -> None:
    """`web` (cpu=6, PickN 1, enforcing env=prod) scheduled on a, with `fill` (cpu=6) pinned
    to b when `fixed`; then web's requests made unreadable and a relabelled out of prod."""
    add_cluster(hub, "a", labels=PROD, allocatable={"cpu": "8"})
    if fixed is not None:
        add_placement(hub, "fill", fixed, annotations={CPU: "cpu=6"})
        turn(env, rig.activities, "fill")
    add_placement(hub, "web", pick_n(1), annotations={**ENFORCED, CPU: "cpu=6"})
    turn(env, rig.activities, "web")
    assert list(active(hub, "web")) == ["a"]
    add_cluster(hub, "b", labels=PROD, allocatable={"cpu": "8"})
    if fixed is not None:
        turn(env, rig.activities, "fill", 2)
        assert list(active(hub, "fill")) == ["b"]
    garble(hub, "web")
    relabel(hub, "a", {"env": "retired"})


def test_a_move_of_a_binding_whose_requests_cannot_be_read_overcommits_nothing(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """6 + 6 CPUs on an 8-CPU cluster, as reproduced: before, the move went ahead without a
    reservation on b, kept the one on a, and `check` saw nothing."""
    rig = make_activities()
    fixed = {"placementType": "PickFixed", "clusterNames": ["b"]}
    web_on_a_then_unreadable(hub, rig, env, fixed)
    result = turn(env, rig.activities, "web", 2)
    assert list(active(hub, "web")) == ["a"], result.moves  # b has 2 CPUs free, not 6
    assert any(line.startswith("refused") and "no room" in line for line in result.moves), (
        result.moves
    )
    assert violations(hub, {invariants.OVERCOMMIT}) == []
    [kept] = active(hub, "web").values()
    assert reserved(hub, "a") == {kept.name: "6"}  # the room it holds stays held


def test_a_move_of_a_binding_whose_requests_cannot_be_read_carries_its_reservation(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    web_on_a_then_unreadable(hub, rig, env, None)
    [old] = active(hub, "web").values()
    result = turn(env, rig.activities, "web", 2)
    assert list(active(hub, "web")) == ["b"], result.moves
    [new] = active(hub, "web").values()
    assert reserved(hub, "b") == {new.name: "6"}, result.moves
    assert old.name not in reserved(hub, "a")
    assert violations(hub, set(invariants.INVARIANTS) - {invariants.WORKFLOW}) == []


def test_a_binding_with_unreadable_requests_and_no_reservation_is_not_moved(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    """Nothing says what room it would take on the target: it stays, and the turn says why."""
    rig = make_activities()
    web_on_a_then_unreadable(hub, rig, env, None)
    hub.delete(CapacityLedger, "a")
    result = turn(env, rig.activities, "web", 2)
    assert list(active(hub, "web")) == ["a"], result.moves
    assert reserved(hub, "b") == {}
    assert any("cannot be read" in line for line in result.moves), result.moves
    # Only fixing the annotation can change that, and the fix runs a turn of its own (it is a
    # decision annotation): no timer polls it meanwhile.
    assert result.report is None or result.report.requeue_after_seconds is None, result.report


def add_resource_placement(
    hub: HubClient, namespace: str, name: str, policy: dict[str, Any], annotations: dict[str, str]
) -> None:
    if namespace not in {n.metadata.name for n in hub.list(Namespace).items}:
        hub.create(Namespace(metadata={"name": namespace}))
    spec = {
        "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "c"}],
        "policy": policy,
    }
    wire = {"metadata": {"name": name, "namespace": namespace, "annotations": annotations}}
    hub.create(ResourcePlacement.from_wire({**wire, "spec": spec}))


def rp_turn(env: ActivityEnvironment, rig: Rig, name: str, number: int) -> TurnResult:
    request = TurnRequest(placement=name, namespace="shop", cycle=number, reason="test")
    result: TurnResult = env.run(rig.activities.schedule_once, request)
    return result


def rp_active(hub: HubClient, name: str) -> dict[str, str]:
    listed = hub.list(ResourceBinding, {names.PARENT_PLACEMENT_LABEL: name}, namespace="shop").items
    return {
        b.spec.target_cluster: b.metadata.name
        for b in listed
        if b.spec.state != names.STATE_UNSCHEDULED
    }


@pytest.mark.parametrize("requests", ["cpu=6", UNREADABLE])
def test_an_enforcement_move_of_a_resource_placement_carries_its_reservation(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment, requests: str
) -> None:
    """A ResourcePlacement reserves room as a ClusterResourcePlacement does (ledger keys
    `namespace/name`): its affinity-enforcement moves must carry and release it too. Before,
    a move of one reserved nothing on its target and released nothing on its source, whether
    its requests read or not: 6 + 6 CPUs on an 8-CPU cluster."""
    rig = make_activities()
    add_cluster(hub, "a", labels=PROD, allocatable={"cpu": "8"})
    add_resource_placement(hub, "shop", "web", pick_n(1), {**ENFORCED, CPU: "cpu=6"})
    rp_turn(env, rig, "web", 1)
    assert list(rp_active(hub, "web")) == ["a"]
    add_cluster(hub, "b", labels=PROD, allocatable={"cpu": "8"})
    add_placement(hub, "fill", {"placementType": "PickFixed", "clusterNames": ["b"]},
                  annotations={CPU: "cpu=6"})  # fmt: skip
    turn(env, rig.activities, "fill")
    assert list(active(hub, "fill")) == ["b"]
    rp = hub.get(ResourcePlacement, "web", namespace="shop")
    hub.patch(
        ResourcePlacement, "web", {"metadata": {"annotations": {CPU: requests}}}, namespace="shop"
    )
    assert rp.metadata.namespace == "shop"
    relabel(hub, "a", {"env": "retired"})
    result = rp_turn(env, rig, "web", 2)
    assert list(rp_active(hub, "web")) == ["a"], result.moves  # b has 2 CPUs free, not 6
    assert any("no room" in line for line in result.moves), result.moves
    [kept] = rp_active(hub, "web").values()
    assert reserved(hub, "a") == {f"shop/{kept}": "6"}
    state = read_fleet_state(hub)
    found = find_violations(state, datetime.now(UTC))
    assert [v.message for v in found if v.invariant == invariants.OVERCOMMIT] == []
