"""The watcher's outbox: routes coalesce per placement; busy and backed-off placements wait."""

from __future__ import annotations

import pytest

from control.admission import AdmissionWindow
from control.outbox import MAX_REASONS, Backoff, Outbox
from control.routes import Route
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


# --- order: priority keys, then tenants by weight, then first in, first out --------------------


def _prio(key: int | None = None, tenant: str | None = None, weight: float | None = None):
    from scheduler.framework.queue_sort import QueuePriority

    return QueuePriority(priority_key=key, fairness_key=tenant, fairness_weight=weight)


def test_a_better_key_overtakes_a_backlog_and_ties_stay_first_in_first_out() -> None:
    outbox = Outbox()
    for index in range(100):
        outbox.add(Route(f"low-{index}", CLUSTER, "x"), _prio(4))
    outbox.add(Route("high", CLUSTER, "x"), _prio(2))
    outbox.add(Route("plain", CLUSTER, "x"))  # no key: Temporal's default, 3
    taken = [b.placement for b in outbox.take_due(0.0, limit=4)]
    assert taken == ["high", "plain", "low-0", "low-1"]
    rest = [b.placement for b in outbox.take_due(0.0)]
    assert rest == [f"low-{i}" for i in range(2, 100)]


def test_a_merge_that_improves_the_key_moves_the_batch_forward_once() -> None:
    outbox = Outbox()
    outbox.add(Route("a", CLUSTER, "x"), _prio(4))
    outbox.add(Route("b", CLUSTER, "x"), _prio(4))
    outbox.add(Route("b", CHANGED := names.SIGNAL_PLACEMENT_CHANGED, "own"), _prio(3))
    outbox.add(Route("b", CLUSTER, "again"), _prio(4))  # a worse key does not move it back
    batches = outbox.take_due(0.0)
    assert [b.placement for b in batches] == ["b", "a"]
    assert batches[0].priority.priority_key == 3 and batches[0].signal == CHANGED
    assert outbox.take_due(0.0) == []


def _settled(key: int):
    """A re-decision of a placement that has what it asked for (PrioritySort's within_key 1)."""
    from scheduler.framework.queue_sort import QueuePriority

    return QueuePriority(priority_key=key, within_key=1)


def test_an_unsatisfied_turn_overtakes_re_decisions_of_the_same_key_only() -> None:
    outbox = Outbox()
    for index in range(50):
        outbox.add(Route(f"settled-{index}", CLUSTER, "x"), _settled(3))
    outbox.add(Route("worse", CLUSTER, "x"), _prio(4))
    outbox.add(Route("new", CHANGED := names.SIGNAL_PLACEMENT_CHANGED, "x"), _prio(3))
    outbox.add(Route("short", CLUSTER, "x"), _prio(3))
    taken = [b.placement for b in outbox.take_due(0.0, limit=3)]
    assert taken == ["new", "short", "settled-0"]
    rest = [b.placement for b in outbox.take_due(0.0)]
    assert rest == [f"settled-{i}" for i in range(1, 50)] + ["worse"]
    assert CHANGED


def test_a_merge_that_makes_a_placement_unsatisfied_moves_it_forward() -> None:
    outbox = Outbox()
    outbox.add(Route("a", CLUSTER, "x"), _settled(3))
    outbox.add(Route("b", CLUSTER, "x"), _settled(3))
    outbox.add(Route("b", names.SIGNAL_PLACEMENT_CHANGED, "spec"), _prio(3))
    outbox.add(Route("b", CLUSTER, "again"), _settled(3))  # does not move it back
    batches = outbox.take_due(0.0)
    assert [b.placement for b in batches] == ["b", "a"]
    assert batches[0].priority.order == (3, 0)


def test_a_refused_unsatisfied_turn_holds_back_gated_turns_of_its_key_not_re_decisions() -> None:
    outbox = Outbox()
    outbox.add(Route("settled", CLUSTER, "x"), _settled(3))  # needs no place
    outbox.add(Route("a", CLUSTER, "x"), _prio(3), gated=True)
    outbox.add(Route("b", CLUSTER, "x"), _prio(3), gated=True)
    taken = outbox.take_due(0.0, admit=lambda batch: batch.placement != "a")
    assert [b.placement for b in taken] == ["settled"]
    assert [b.placement for b in outbox.take_due(0.0)] == ["a", "b"]


def test_fan_out_stays_true_only_while_every_route_is_a_fan_out() -> None:
    outbox = Outbox()
    outbox.add(Route("a", CLUSTER, "x", fan_out=True))
    outbox.add(Route("b", CLUSTER, "x", fan_out=True))
    outbox.add(Route("b", names.SIGNAL_PLACEMENT_CHANGED, "own"))
    flags = {b.placement: b.fan_out for b in outbox.take_due(0.0)}
    assert flags == {"a": True, "b": False}


def test_tenants_share_a_key_in_proportion_to_their_weights() -> None:
    outbox = Outbox()
    for index in range(300):
        outbox.add(Route(f"a-{index}", CLUSTER, "x"), _prio(3, "a", 2.0))
    for index in range(300):
        outbox.add(Route(f"b-{index}", CLUSTER, "x"), _prio(3, "b", 1.0))
    first = [b.placement[0] for b in outbox.take_due(0.0, limit=90)]
    assert first.count("a") == 60 and first.count("b") == 30


def test_a_tenant_arriving_late_is_served_at_once_but_gets_no_credit_for_waiting() -> None:
    outbox = Outbox()
    for index in range(1000):
        outbox.add(Route(f"a-{index}", CLUSTER, "x"), _prio(3, "a"))
    assert len(outbox.take_due(0.0, limit=500)) == 500
    for index in range(10):
        outbox.add(Route(f"b-{index}", CLUSTER, "x"), _prio(3, "b"))
    nxt = [b.placement[0] for b in outbox.take_due(0.0, limit=20)]
    assert nxt == ["a", "b"] * 10 or nxt == ["b", "a"] * 10


def test_busy_and_held_back_batches_keep_their_place_in_line() -> None:
    outbox = Outbox()
    for name in ("a", "b", "c"):
        outbox.add(Route(name, CLUSTER, "x"))
    assert [b.placement for b in outbox.take_due(0.0, busy={"a"}, limit=1)] == ["b"]
    (c,) = outbox.take_due(0.0, busy={"a"})
    outbox.put_back(c, not_before=10.0)
    outbox.add(Route("d", CLUSTER, "x"))
    # a is free again and goes first; c waits for its time; d is next
    assert [b.placement for b in outbox.take_due(1.0)] == ["a", "d"]
    assert [b.placement for b in outbox.take_due(10.0)] == ["c"]
    assert len(outbox) == 0


# --- admission: the window of turns in Temporal ---------------------------------------------------


def test_a_refusal_holds_back_gated_batches_of_its_key_and_worse_only() -> None:
    outbox = Outbox()
    for name in ("a", "b", "c"):
        outbox.add(Route(name, CLUSTER, "x"), _prio(4), gated=True)
    outbox.add(Route("fan-out", CLUSTER, "x"), _prio(4))  # needs no place
    outbox.add(Route("worse", CLUSTER, "x"), _prio(5), gated=True)
    outbox.add(Route("deleting", CLUSTER, "x"), _prio(5))  # needs no place
    outbox.add(Route("better", CLUSTER, "x"), _prio(2), gated=True)
    refused = {"b"}
    taken = outbox.take_due(0.0, admit=lambda batch: batch.placement not in refused)
    # b is refused: c (gated, behind it) and worse (gated, a worse key) wait; what needs no
    # place goes, in order, and so does the better key's gated batch
    assert [b.placement for b in taken] == ["better", "a", "fan-out", "deleting"]
    refused.clear()
    assert [b.placement for b in outbox.take_due(0.0)] == ["b", "c", "worse"]


def test_a_refused_batch_that_was_not_gated_is_gated_from_then_on() -> None:
    outbox = Outbox()
    outbox.add(Route("a", CLUSTER, "x"), _prio(3))
    outbox.add(Route("b", CLUSTER, "x"), _prio(3))
    taken = outbox.take_due(0.0, admit=lambda batch: batch.placement != "a")
    assert [b.placement for b in taken] == ["b"]
    (a,) = outbox.take_due(0.0)
    assert a.placement == "a" and a.gated


def test_a_batch_whose_turn_is_done_leaves_the_gated_line() -> None:
    outbox = Outbox()
    outbox.add(Route("blocker", CLUSTER, "x"), _prio(3), gated=True)
    outbox.add(Route("p", CLUSTER, "x"), _prio(3), gated=True)
    closed = lambda batch: not batch.gated  # noqa: E731 - a window with no room
    assert outbox.take_due(0.0, admit=closed) == []
    outbox.set_gated("p", False)
    assert [b.placement for b in outbox.take_due(0.0, admit=closed)] == ["p"]
    assert len(outbox) == 1


def test_a_refused_batch_is_not_charged_to_its_tenant() -> None:
    outbox = Outbox()
    for index in range(4):
        outbox.add(Route(f"a-{index}", CLUSTER, "x"), _prio(3, "a"))
        outbox.add(Route(f"b-{index}", CLUSTER, "x"), _prio(3, "b"))
    for _ in range(5):  # refused five times over: a's virtual time must not move
        assert outbox.take_due(0.0, admit=lambda batch: False) == []
    assert [b.placement for b in outbox.take_due(0.0, limit=4)] == ["a-0", "b-0", "a-1", "b-1"]


def test_the_window_counts_the_same_and_better_keys_only() -> None:
    window = AdmissionWindow(2, timeout=30.0)
    window.admit("low-1", 4, now=0.0)
    window.admit("low-2", 4, now=0.0)
    assert not window.admits(4) and not window.admits(5)
    assert window.admits(2)  # two low turns never keep a high one out
    window.admit("high-1", 2, now=0.0)
    window.admit("high-2", 2, now=0.0)
    assert not window.admits(2) and not window.admits(3)
    assert window.admits(1)
    assert window.release("high-1") and not window.release("high-1")
    assert window.admits(2) and not window.admits(4)  # high-2 and the lows still count for 4
    assert len(window) == 3


def test_a_placement_holds_one_place_at_its_latest_key_since_it_first_took_it() -> None:
    window = AdmissionWindow(2, timeout=30.0)
    window.admit("p", 4, now=0.0)
    window.admit("p", 2, now=20.0)
    assert len(window) == 1 and window.admits(4)
    window.admit("q", 4, now=1.0)
    assert not window.admits(4) and window.admits(1)
    # signalled again and again, p still expires 30 s after it first took its place
    assert window.expire(30.0) == ["p"] and window.placements() == ["q"]


def test_places_expire_oldest_first_after_the_timeout() -> None:
    window = AdmissionWindow(3, timeout=10.0)
    window.admit("a", 3, now=0.0)
    window.admit("b", 3, now=5.0)
    assert window.next_expiry() == 10.0
    assert window.expire(9.9) == []
    assert window.expire(10.5) == ["a"]
    window.release("b")
    window.admit("b", 3, now=12.0)  # released, then admitted anew: a new clock
    assert window.expire(16.0) == [] and window.next_expiry() == 22.0
    assert window.expire(100.0) == ["b"] and window.next_expiry() is None


def test_a_window_of_zero_admits_everything_and_holds_nothing() -> None:
    window = AdmissionWindow(0, timeout=1.0)
    for index in range(100):
        assert window.admits(5)
        window.admit(f"p-{index}", 5, now=0.0)
    assert len(window) == 0


@pytest.mark.parametrize(("size", "timeout"), [(-1, 1.0), (1, 0.0), (1, -2.0)])
def test_the_window_refuses_nonsense(size: int, timeout: float) -> None:
    with pytest.raises(ValueError, match="admission"):
        AdmissionWindow(size, timeout)
