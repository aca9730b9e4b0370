"""The watcher's outbox: routes coalesce per placement; busy and backed-off placements wait."""

from __future__ import annotations

import pytest

from workers.watcher_outbox import MAX_REASONS, Backoff, Outbox
from workers.watcher_routes import Route
from workflows import names

CLUSTER = names.SIGNAL_CLUSTER_CHANGED
SNAPSHOT = names.SIGNAL_SNAPSHOT_CHANGED
DELETING = names.SIGNAL_PLACEMENT_DELETING


def test_routes_for_one_placement_become_one_batch_that_counts_them() -> None:
    outbox = Outbox()
    for index in range(20):
        outbox.add(Route("web", CLUSTER, f"cluster a: labels changed ({index % 2})"))
    outbox.add(Route("api", CLUSTER, "cluster a: labels changed"))
    batches = {b.placement: b for b in outbox.take_due(0.0)}
    assert sorted(batches) == ["api", "web"]
    web = batches["web"]
    assert web.events == 20
    assert web.reason == (
        "cluster a: labels changed (0); cluster a: labels changed (1) (+18 more events)"
    )
    assert batches["api"].reason == "cluster a: labels changed"
    assert len(outbox) == 0


def test_reasons_are_capped_and_the_most_telling_signal_wins() -> None:
    outbox = Outbox()
    outbox.add(Route("web", CLUSTER, "r0"))
    outbox.add(Route("web", DELETING, "r1"))
    outbox.add(Route("web", SNAPSHOT, "r2"))
    for index in range(3, 10):
        outbox.add(Route("web", CLUSTER, f"r{index}"))
    (batch,) = outbox.take_due(0.0)
    assert batch.signal == DELETING
    assert batch.reasons == [f"r{i}" for i in range(MAX_REASONS)]
    assert batch.reason.endswith("(+7 more events)")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param((False,), False, id="gone-only"),
        pytest.param((False, True), True, id="any-may-start"),
    ],
)
def test_a_batch_may_start_a_workflow_if_any_of_its_routes_may(flags, expected) -> None:
    outbox = Outbox()
    for flag in flags:
        outbox.add(Route("web", DELETING, "x", may_start=flag))
    (batch,) = outbox.take_due(0.0)
    assert batch.may_start is expected


def test_busy_placements_keep_collecting_until_they_are_free() -> None:
    outbox = Outbox()
    outbox.add(Route("web", CLUSTER, "first"))
    outbox.add(Route("api", CLUSTER, "first"))
    assert [b.placement for b in outbox.take_due(0.0, busy={"web"})] == ["api"]
    outbox.add(Route("web", CLUSTER, "second"))
    (batch,) = outbox.take_due(0.0)
    assert batch.reasons == ["first", "second"]


def test_a_put_back_batch_waits_for_its_retry_time_and_merges_new_routes() -> None:
    outbox = Outbox()
    outbox.add(Route("web", CLUSTER, "first"))
    (batch,) = outbox.take_due(0.0)
    outbox.put_back(batch, not_before=5.0)
    outbox.add(Route("web", SNAPSHOT, "second"))
    assert outbox.take_due(4.9) == []
    assert outbox.next_due(4.9) == 5.0
    (again,) = outbox.take_due(5.0)
    assert (again.signal, again.reasons, again.events) == (SNAPSHOT, ["first", "second"], 2)
    assert outbox.next_due(5.0) is None


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 0.2), (2, 0.4), (3, 0.8), (8, 10.0), (10_000, 10.0)],
)
def test_backoff_doubles_up_to_its_maximum(attempt, expected) -> None:
    assert Backoff(initial=0.2, maximum=10.0).delay(attempt) == pytest.approx(expected)


def test_backoff_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="initial <= maximum"):
        Backoff(initial=5.0, maximum=1.0)
