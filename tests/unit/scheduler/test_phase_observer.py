"""The runner tells an observer when each extension point runs (what activities trace)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from scheduler import CycleInput, default_profile, schedule
from tests.unit.scheduler.cycle_builders import NOW, cluster, pick_all, pick_fixed, pick_n


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    @contextmanager
    def phase(self, stage: str) -> Iterator[None]:
        self.events.append(f"+{stage}")
        yield
        self.events.append(f"-{stage}")


TOPOLOGY = [{"topologyKey": "zone"}]


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        pytest.param(
            pick_n(2, topologySpreadConstraints=TOPOLOGY),
            ["PostBatch", "PreFilter", "Filter", "PreScore", "Score"],
            id="pick-n",
        ),
        pytest.param(pick_all(), ["PreFilter", "Filter"], id="pick-all"),
        pytest.param(pick_fixed("a"), [], id="pick-fixed-runs-no-plugins"),
    ],
)
def test_each_extension_point_is_observed_once_in_order(snapshot, expected) -> None:
    recorder = Recorder()
    clusters = [cluster("a", zone="1"), cluster("b", zone="2")]
    result = schedule(
        CycleInput(snapshot=snapshot, clusters=clusters, now=NOW), default_profile(), recorder
    )
    assert result.error is None
    assert recorder.events == [e for stage in expected for e in (f"+{stage}", f"-{stage}")]


def test_observing_does_not_change_the_decisions() -> None:
    clusters = [cluster(n, zone=str(i % 2)) for i, n in enumerate("abcdef")]
    cycle = CycleInput(
        snapshot=pick_n(3, topologySpreadConstraints=TOPOLOGY), clusters=clusters, now=NOW
    )
    assert schedule(cycle, default_profile(), Recorder()) == schedule(cycle, default_profile())
