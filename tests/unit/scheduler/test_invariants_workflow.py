"""The `workflow` invariant: a placement without its workflow is a violation once its start is
late (WORKFLOW_GRACE), not while the watcher or the reconcile is starting it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hub.types import ClusterResourcePlacement
from scheduler.invariants import WORKFLOW, WORKFLOW_GRACE, FleetState, Violation, find_violations

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def placement(name: str, created: datetime | None) -> ClusterResourcePlacement:
    meta: dict[str, object] = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = created.isoformat().replace("+00:00", "Z")
    return ClusterResourcePlacement.from_wire(
        {"metadata": meta, "spec": {"policy": {"placementType": "PickAll"}}}
    )


def violations(*placements: ClusterResourcePlacement, running: set[str]) -> list[Violation]:
    state = FleetState(
        placements=placements, snapshots=(), bindings=(), clusters=(),
        workflows=frozenset(running),
    )  # fmt: skip
    return [v for v in find_violations(state, NOW) if v.invariant == WORKFLOW]


def test_a_new_placement_whose_start_is_on_its_way_breaks_nothing() -> None:
    """`make run`'s first reconcile runs a second after the sample placements are created, and
    starts their workflows: nothing is broken (before: one violation per placement)."""
    fresh = [placement(f"p{i}", NOW - timedelta(seconds=1)) for i in range(7)]
    assert violations(*fresh, running=set()) == []


def test_a_placement_without_its_workflow_past_the_grace_is_a_violation() -> None:
    late = placement("late", NOW - WORKFLOW_GRACE)
    unknown = placement("unknown-age", None)  # no creationTimestamp: no grace either
    running = placement("running", NOW - timedelta(hours=1))
    found = violations(late, unknown, running, running={"running", "ghost"})
    assert [v.message for v in found] == [
        "workflow of placement ghost is running, but the placement does not exist",
        "placement late has no running workflow",
        "placement unknown-age has no running workflow",
    ]


def test_a_creation_timestamp_in_the_future_buys_no_more_than_the_grace() -> None:
    """A hub clock ahead of ours (or a timestamp written by hand on a hub that keeps it) must
    not hide a missing workflow for as long as the skew: a timestamp a day ahead hid it for a
    day. A skew within the grace still waits, as a fresh placement does."""
    ahead = placement("ahead", NOW + timedelta(days=1))
    skewed = placement("skewed", NOW + timedelta(seconds=5))
    found = violations(ahead, skewed, running=set())
    assert [v.message for v in found] == ["placement ahead has no running workflow"]
