"""Aging (docs/priority.md, "Aging"): a missed deadline lifts a turn one key per miss, within
the placement's band unless the profile's `agingBeyondBand` lets it go further; a deadline never
buys a placement more priority than its PriorityClass gives. Tables, no Temporal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hub.types import ObjectMeta
from scheduler import ProfileError, load_profile
from scheduler.framework.queue_sort import PriorityClasses, QueueItem, TurnCause
from scheduler.opt_in.deadline import aged_key
from scheduler.plugins.priority_sort import PrioritySort
from workflows.deadline import DeadlineClock
from workflows.starts import turn_priority

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CLASS = "fleet-scheduler.io/priority-class"
CLASSES = PriorityClasses({"release-critical": 100_000, "batch": -10}, None)


@pytest.mark.parametrize(
    ("key", "misses", "best", "aged"),
    [
        pytest.param(3, 0, 1, 3, id="no-miss"),
        pytest.param(3, 1, 1, 2, id="one-key-per-miss"),
        pytest.param(3, 5, 1, 1, id="never-past-one"),
        pytest.param(None, 1, 1, 2, id="unset-ages-from-three"),
        pytest.param(3, 5, 3, 3, id="own-key-is-the-band"),
        pytest.param(4, 5, 3, 3, id="a-fan-out-turn-comes-back-to-its-band"),
        pytest.param(5, 1, 3, 4, id="one-key-at-a-time"),
        pytest.param(None, 4, None, None, id="unset-band-is-three"),
        pytest.param(1, 2, 3, 1, id="a-better-key-is-never-demoted"),
    ],
)
def test_aging_moves_a_key_up_per_miss_never_past_its_best(
    key: int | None, misses: int, best: int | None, aged: int | None
) -> None:
    assert aged_key(key, misses, best=best) == aged


def item(name: str, cls: str | None, cause: TurnCause) -> QueueItem:
    annotations = {CLASS: cls} if cls else {}
    return QueueItem(ObjectMeta(name=name, annotations=annotations), cause, CLASSES)


def aged_keys(sort: PrioritySort, name: str, cls: str | None, misses: int) -> set[int | None]:
    """The keys the turns of an aging `1s` placement run at after `misses` misses, whatever
    caused them, as the workflow computes them from what the watcher sends."""
    own = sort.queue_sort(item(name, cls, TurnCause.PLACEMENT))
    clock = DeadlineClock()
    clock.read("1s,aging")
    clock.after_cycle(False, seed=None, now=T0)
    clock.miss(T0 + timedelta(seconds=misses))
    keys: set[int | None] = set()
    for cause in TurnCause:
        sent = turn_priority(own, sort.queue_sort(item(name, cls, cause)))
        keys.add(clock.aged(sent.priority_key, sent.best_aged_key()))
    return keys


def test_fifty_aging_placements_never_outrank_a_higher_class() -> None:
    """Fifty tenants' placements without a class, each aged by up to ten minutes of misses of a
    `1s,aging` deadline, never run a turn at or above the key of a release-critical
    placement's own turns: they stop at their own band's key, 3."""
    sort = PrioritySort()
    urgent = sort.queue_sort(item("urgent", "release-critical", TurnCause.PLACEMENT))
    assert urgent.priority_key == 2
    keys: set[int | None] = set()
    for index in range(50):
        for misses in (1, 2, 3, 10, 600):
            keys |= aged_keys(sort, f"tenant-{index}", None, misses)
    assert keys == {3}  # fan-out turns (key 4) come back to 3; none goes past it


def test_aging_lifts_a_demoted_turn_back_to_its_band_and_no_further() -> None:
    sort = PrioritySort()
    assert aged_keys(sort, "late", "batch", misses=1) == {4}  # its own key; fan-out 5 -> 4
    assert aged_keys(sort, "late", "release-critical", misses=9) == {2}


def test_the_admin_may_let_aging_go_beyond_the_band() -> None:
    """`agingBeyondBand: N` in the profile: N keys past the band's, never past key 1."""
    one = PrioritySort(agingBeyondBand=1)
    assert aged_keys(one, "late", None, misses=1) == {2, 3}  # fan-out 4 -> 3, own 3 -> 2
    assert aged_keys(one, "late", None, misses=9) == {2}
    four = PrioritySort(agingBeyondBand=4)
    assert aged_keys(four, "late", None, misses=9) == {1}
    assert four.queue_sort(item("late", None, TurnCause.FAN_OUT)).aging_limit == 1
    # Off (the default), the answer carries no limit: the reconcile's digests do not move.
    plain = PrioritySort().queue_sort(item("late", None, TurnCause.PLACEMENT))
    assert plain.aging_limit is None and "aging_limit" not in repr(plain)


@pytest.mark.parametrize("value", [-1, 5, True, "1", 1.0])
def test_a_bad_aging_beyond_band_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="agingBeyondBand must be an integer in"):
        PrioritySort(agingBeyondBand=value)  # type: ignore[arg-type]


def test_the_profile_turns_aging_beyond_the_band_on() -> None:
    profile = load_profile("pluginConfig: [{name: PrioritySort, args: {agingBeyondBand: 2}}]")
    answer = profile.queue_sorter.queue_sort(item("late", None, TurnCause.PLACEMENT))
    assert (answer.priority_key, answer.aging_limit) == (3, 1)
    with pytest.raises(ProfileError) as caught:
        load_profile("pluginConfig: [{name: PrioritySort, args: {agingBeyondBand: 9}}]")
    assert caught.value.path == "pluginConfig[0].args"
