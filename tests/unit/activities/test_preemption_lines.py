"""What a preemption's lines say of its victims: they go into the placement's history, so a
cluster with many victims names a few and counts the rest."""

from __future__ import annotations

from datetime import UTC, datetime

from activities.preemption import VICTIMS_NAMED, said_victims
from hub.types import NominatedVictim, Nomination


def nomination(count: int) -> Nomination:
    return Nomination(
        priority=100000,
        requests={"cpu": "1"},
        victims=[
            NominatedVictim(binding=f"low-{i}-m1", placement=f"low-{i}", priority=0)
            for i in range(count)
        ],
        nominated_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_a_cluster_with_many_victims_names_a_few_and_counts_the_rest() -> None:
    said = said_victims({"m1": nomination(VICTIMS_NAMED + 4), "m2": nomination(1)}, ["m1", "m2"])
    assert said == "m1 (victims low-0-m1, low-1-m1, low-2-m1 and 4 more), m2 (victims low-0-m1)"
