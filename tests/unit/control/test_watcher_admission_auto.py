"""`--admission-window auto` (control.admission): the drain rate is measured only while turns wait
for a place, and the window is sized from it by Little's law; a shrink evicts nobody, a growth
lets waiting turns in at once, and turns that expire or go away are not completions."""

from __future__ import annotations

import pytest

from control.admission import START, AdmissionWindow, AutoSizing, DrainRate

SIZING = AutoSizing(target_wait_s=2.0, floor=16, start=64, horizon_s=10.0, warmup_s=2.0)


def _finish_at(rate: DrainRate, times: list[float]) -> None:
    for at in times:
        rate.done(at)


def _every(step: float, start: float, stop: float) -> list[float]:
    """start, start + step, ... up to stop, stop included."""
    return [start + i * step for i in range(round((stop - start) / step) + 1)]


# --- the drain rate ------------------------------------------------------------------------------


def test_the_rate_is_unknown_until_warmed_up_and_leaves_out_the_fill_time() -> None:
    """A cold start: 1,500 placements wait from t=0, the first turn finishes at t=3 (the pipeline
    filled first), then 10 a second. The 3 s before anything could finish do not count."""
    rate = DrainRate(horizon_s=10.0, warmup_s=2.0, min_samples=8)
    rate.waiting(0.0, True)
    assert rate.rate(2.0) is None
    _finish_at(rate, _every(0.1, 3.0, 4.0))
    assert rate.rate(4.0) is None  # 1 s of completions: still warming up
    _finish_at(rate, _every(0.1, 4.1, 5.0))
    # 20 after the first in 2 s: 10/s, not 21 in 5 s (4.2/s)
    assert rate.rate(5.0) == pytest.approx(10.0, rel=0.01)


def test_a_steady_rate_is_measured_and_a_drop_is_followed_within_the_horizon() -> None:
    rate = DrainRate(horizon_s=10.0, warmup_s=2.0, min_samples=8)
    rate.waiting(0.0, True)
    _finish_at(rate, _every(0.05, 0.0, 30.0))  # 20/s
    assert rate.rate(30.0) == pytest.approx(20.0, rel=0.01)
    _finish_at(rate, _every(0.2, 30.2, 35.0))  # then 5/s
    assert rate.rate(35.0) == pytest.approx((5 * 20 + 5 * 5) / 10, rel=0.02)  # half of each
    _finish_at(rate, _every(0.2, 35.2, 45.0))
    assert rate.rate(45.0) == pytest.approx(5.0, rel=0.02)


def test_only_time_and_turns_while_a_backlog_waits_count() -> None:
    """Outside a backlog, completions say how fast work arrives: a trickle must not shrink the
    window, and a quiet hour must not make the next burst start from nothing."""
    rate = DrainRate(horizon_s=10.0, warmup_s=2.0, min_samples=8)
    rate.waiting(0.0, True)
    _finish_at(rate, _every(0.05, 0.0, 10.0))  # 20/s while a backlog waits
    rate.waiting(10.0, False)
    assert not rate.done(500.0)  # a trickle: one turn now and then, nothing waiting
    assert rate.rate(3600.0) == pytest.approx(20.0, rel=0.01)
    rate.waiting(3600.0, True)  # the next burst: the rate it meets is the last one measured
    assert rate.rate(3601.0) == pytest.approx(180 / 10, rel=0.01)  # (1 s, 10 s] of the last


def test_once_known_a_stall_measures_zero_not_unknown() -> None:
    rate = DrainRate(horizon_s=10.0, warmup_s=2.0, min_samples=8)
    rate.waiting(0.0, True)
    _finish_at(rate, _every(0.1, 0.0, 5.0))
    assert rate.rate(5.0) == pytest.approx(10.0, rel=0.01)
    assert rate.rate(100.0) == 0.0  # nothing finished in the last 10 s of backlog


# --- the size ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "size"),
    [
        pytest.param(None, 64, id="unknown-start"),
        pytest.param(15.0, 30, id="little"),
        pytest.param(15.1, 31, id="rounded-up"),
        pytest.param(0.15 * 100, 30, id="float-noise-is-not-a-turn"),
        pytest.param(3.0, 16, id="floor"),
        pytest.param(0.0, 16, id="stalled"),
        pytest.param(400.0, 800, id="fast"),
    ],
)
def test_the_window_holds_what_temporal_drains_in_the_target_wait(
    rate: float | None, size: int
) -> None:
    assert SIZING.size(rate) == size


def test_the_defaults_start_generous() -> None:
    assert AutoSizing().size(None) == START == 64


@pytest.mark.parametrize(
    "options",
    [
        {"target_wait_s": 0.0},
        {"horizon_s": -1.0},
        {"warmup_s": 0.0},
        {"warmup_s": 20.0, "horizon_s": 10.0},
        {"floor": 0},
        {"start": 0},
        {"min_samples": 0},
    ],
)
def test_nonsense_sizing_is_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="admission"):
        AutoSizing(**options)  # type: ignore[arg-type]


# --- the window ----------------------------------------------------------------------------------


def _full(window: AdmissionWindow, count: int, now: float = 0.0, prefix: str = "p") -> list[str]:
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        window.admit(name, 3, now)
    return names


def test_an_automatic_window_starts_generous_and_shrinks_without_evicting() -> None:
    window = AdmissionWindow(SIZING, timeout=30.0)
    assert window.size == 64
    names = _full(window, 64)
    assert not window.admits(3)
    window.waiting(0.0, True)  # the 65th and more wait
    for index, name in enumerate(names[:21]):  # 20 after the first in 2 s: 10/s
        assert window.finished(name, 1.0 + index * 0.1)
    window.adapt(3.0)
    assert window.size == 20 and window.drain_rate == pytest.approx(10.0)
    assert len(window) == 43  # nobody evicted by the shrink...
    assert not window.admits(3)  # ...but nobody new goes in until fewer than 20 are
    for name in names[21:44]:
        window.release(name)
    assert len(window) == 20 and not window.admits(3)
    window.release(names[44])
    assert window.admits(3)


def test_a_window_that_grows_lets_waiting_turns_in_at_once() -> None:
    window = AdmissionWindow(SIZING, timeout=30.0)
    window.waiting(0.0, True)
    for index, name in enumerate(_full(window, 21, prefix="slow")):
        window.finished(name, 1.0 + index * 0.25)  # 4/s: the floor, 16
    assert window.adapt(6.0) is False and window.size == 16
    held = _full(window, 16)
    assert not window.admits(3)
    for index in range(500):  # 50/s, each place taken again at once
        at = 6.02 + index * 0.02
        assert window.finished(held.pop(0), at) and window.admits(3)
        held.append(name := f"fast-{index}")
        window.admit(name, 3, at)
    assert len(window) == 16 and not window.admits(3)
    assert window.adapt(16.0) is True
    assert window.size == 100 and window.admits(3)


def test_turns_that_expire_or_go_away_are_not_completions() -> None:
    window = AdmissionWindow(AutoSizing(floor=1, start=4, warmup_s=1.0, min_samples=2), 10.0)
    window.waiting(0.0, True)
    expired = _full(window, 4)
    assert window.expire(10.0) == expired
    gone = _full(window, 4, now=10.0, prefix="gone")
    for name in gone:
        window.release(name)  # the placement was deleted, or the send failed
    window.adapt(20.0)
    assert window.drain_rate is None and window.size == 4  # nothing measured: still the start
    for index, name in enumerate(_full(window, 4, now=20.0, prefix="done")):
        window.finished(name, 20.0 + index)
    window.adapt(23.0)
    assert window.drain_rate == pytest.approx(1.0) and window.size == 2


def test_a_fixed_window_measures_the_rate_but_keeps_its_size() -> None:
    window = AdmissionWindow(16, timeout=30.0)
    window.waiting(0.0, True)
    for index, name in enumerate(_full(window, 16)):
        window.finished(name, index * 0.2)
    assert window.adapt(3.0) is False
    assert window.size == 16 and window.drain_rate == pytest.approx(5.0)


def test_no_window_measures_nothing() -> None:
    window = AdmissionWindow(0, timeout=30.0)
    window.waiting(0.0, True)
    assert not window.finished("p", 1.0)  # it admitted nobody
    assert window.adapt(5.0) is False and window.drain_rate is None
