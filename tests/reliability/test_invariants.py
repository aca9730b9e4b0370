"""The chaos tests' oracle must see what it is there to catch: each hub-side violation is put in
an (in-process) devhub by hand and must be reported, and the repaired hub must pass. Without
this, a `hub_violations` that found nothing would let every chaos run pass."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

import pytest

from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
    HubObject,
    MemberCluster,
)
from scheduler.testing import binding, member_cluster, policy_snapshot
from tests.reliability.fleet import Expectation
from tests.reliability.invariants import hub_violations

T = TypeVar("T", bound=HubObject)
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _create(hub: HubClient, obj: T) -> T:
    metadata = obj.metadata.model_copy(update={"resource_version": None, "finalizers": []})
    return hub.create(obj.model_copy(update={"metadata": metadata}))


def _scheduled_placement(hub: HubClient, name: str, *, observed: int | None = None) -> None:
    placement = _create(
        hub,
        ClusterResourcePlacement.from_wire(
            {
                "metadata": {"name": name},
                "spec": {
                    "resourceSelectors": [{"version": "v1", "kind": "Namespace", "name": "app"}],
                    "policy": {"placementType": names.PICK_ALL},
                },
            }
        ),
    )
    condition = Condition(
        type=names.PLACEMENT_SCHEDULED_CONDITION,
        status=names.TRUE,
        reason=names.POLICY_FULFILLED_REASON,
        observed_generation=observed or placement.metadata.generation,
        last_transition_time=NOW,
    )
    status = placement.status.model_copy(update={"conditions": [condition]})
    hub.update_status(placement.model_copy(update={"status": status}))


@pytest.fixture
def settled(hub: HubClient) -> HubClient:
    """Clusters a and b; placement web on both, fully scheduled: no violation."""
    for cluster in ("a", "b"):
        _create(hub, member_cluster(cluster, NOW))
    _scheduled_placement(hub, "web")
    _create(hub, policy_snapshot("web", {"placementType": names.PICK_ALL}))
    for cluster in ("a", "b"):
        _create(hub, binding("web", cluster, "web-0"))
    return hub


EXPECTED = {"web": Expectation(exact=frozenset({"a", "b"}))}


def test_a_settled_hub_has_no_violation(settled: HubClient) -> None:
    assert hub_violations(settled, EXPECTED, deleted=[]) == []
    # An Unscheduled binding to the same cluster is history, not a duplicate.
    _create(settled, binding("web", "a", "web-0", state=names.STATE_UNSCHEDULED, name="web-a-1"))
    assert hub_violations(settled, EXPECTED, deleted=[]) == []


@pytest.mark.parametrize(
    ("break_it", "reported"),
    [
        (
            lambda hub: _create(hub, binding("web", "a", "web-0", name="web-a-1")),
            "duplicate: web has 2 live bindings to a",
        ),
        (
            lambda hub: _create(hub, binding("ghost", "a", "ghost-0")),
            "orphan binding ghost-a-0: placement 'ghost' does not exist",
        ),
        (
            lambda hub: hub.delete(ClusterResourceBinding, "web-b-0"),
            "web: bindings differ: missing ['b'], unexpected []",
        ),
        (
            lambda hub: hub.patch(
                ClusterResourceBinding, "web-b-0", {"spec": {"schedulingPolicySnapshotName": "x"}}
            ),
            "web: binding web-b-0 is on snapshot x, not web-0",
        ),
        (
            lambda hub: hub.patch(
                ClusterResourcePlacement, "web", {"spec": {"revisionHistoryLimit": 3}}
            ),
            "web: Scheduled is True (SchedulingPolicyFulfilled) for generation 1, "
            "placement is at 2",
        ),
        (
            lambda hub: hub.patch(
                ClusterSchedulingPolicySnapshot,
                "web-0",
                {"metadata": {"labels": {names.IS_LATEST_SNAPSHOT_LABEL: "false"}}},
            ),
            "web: 0 latest policy snapshots []",
        ),
        (
            lambda hub: hub.delete(MemberCluster, "b"),
            "web: binding web-b-0 targets a missing cluster",
        ),
    ],
    ids=[
        "duplicate",
        "orphan",
        "missing-binding",
        "stale-snapshot",
        "stale-condition",
        "no-latest",
        "missing-cluster",
    ],
)
def test_each_violation_is_reported(settled: HubClient, break_it, reported: str) -> None:  # type: ignore[no-untyped-def]
    break_it(settled)
    assert reported in hub_violations(settled, EXPECTED, deleted=[])


def test_a_deleted_placement_must_leave_nothing_behind(settled: HubClient) -> None:
    violations = hub_violations(settled, {}, deleted=["web"])
    assert violations == [
        "web: deleted placement still exists (finalizers [])",
        "web: deleted placement still has 2 bindings",
        "web: deleted placement still has 1 snapshots",
    ]
    settled.delete(ClusterResourcePlacement, "web")
    for cluster in ("a", "b"):
        settled.delete(ClusterResourceBinding, f"web-{cluster}-0")
    settled.delete(ClusterSchedulingPolicySnapshot, "web-0")
    assert hub_violations(settled, {}, deleted=["web"]) == []
