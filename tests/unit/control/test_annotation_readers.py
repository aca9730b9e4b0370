"""Issue 33: no annotation value, however bad, raises out of the watcher's gauges (a raise made
the whole /metrics page answer 500) or out of `check`'s invariants. The gauges are called as
functions on a cache of placements, the way a scrape calls them; the invariants on a fleet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from control.telemetry import deadlines_exceeded, shortages
from hub import names
from hub.types import ClusterResourcePlacement
from scheduler.invariants import FleetState, find_violations
from scheduler.opt_in.placement_annotations import RULES
from scheduler.testing import binding, member_cluster, policy_snapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEYS = [rule.key for rule in RULES]
VALUES = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["0" * 5000 + "1s", "cpu=1e" + "0" * 5000 + "1", "x" * 120_000, " , "]),
    st.integers(0, 5000).map(lambda n: "0" * n + "1s"),
)


def placement(annotations: dict[str, str]) -> ClusterResourcePlacement:
    """A PickN placement not fully scheduled for an hour, with `annotations`."""
    since = (NOW - timedelta(hours=1)).isoformat()
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": "web", "generation": 1, "annotations": annotations},
            "spec": {
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace"}],
                "policy": {"placementType": "PickN", "numberOfClusters": 2},
            },
            "status": {
                "conditions": [
                    {
                        "type": ClusterResourcePlacement.SCHEDULED_CONDITION,
                        "status": "False",
                        "reason": "SchedulingPolicyUnfulfilled",
                        "message": "not enough room for 1 binding(s); missing cpu=1",
                        "observedGeneration": 1,
                        "lastTransitionTime": since,
                    }
                ]
            },
        }
    )


@settings(max_examples=150, deadline=None)
@given(values=st.fixed_dictionaries({}, optional={key: VALUES for key in KEYS}))
@example(values={names.SCHEDULE_DEADLINE_ANNOTATION: "0" * 5000 + "1s"})
@example(values={names.REQUESTS_ANNOTATION: "cpu=1e" + "1" * 5000})
def test_no_value_raises_out_of_a_gauge_or_check(values: dict[str, str]) -> None:
    crp = placement(values)
    exceeded = deadlines_exceeded([crp], NOW)
    assert exceeded in (0, 1)
    if values.get(names.SCHEDULE_DEADLINE_ANNOTATION) == "0" * 5000 + "1s":
        assert exceeded == 1  # 1s, not fully scheduled for an hour
    list(shortages([crp]))

    snapshot = policy_snapshot("web", crp.spec.policy)
    state = FleetState(
        placements=[crp],
        snapshots=[snapshot],
        bindings=[binding("web", "a", snapshot.name)],
        clusters=[member_cluster("a", NOW, allocatable={"cpu": "4"})],
        workflows=frozenset({"web"}),
    )
    find_violations(state, NOW)
