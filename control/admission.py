"""The admission window: how many turns the watcher lets into Temporal at once
(`AdmissionWindow`, docs/priority.md "Admission"), and its size when it sizes itself
(`--admission-window auto`).

A fixed window is a guess: small enough to keep an urgent turn from waiting behind a backlog, it
also starves Temporal's pipeline when nothing better waits (a window of 16 cost a plain burst
20-40% of its rate on the measured 2-core machine, bench/RESULTS.md "Admission"); large enough
not to, it holds nothing back. What the window should hold is what Temporal drains in a little
while, and that is measured: by Little's law, `rate x TARGET_WAIT_S` turns in Temporal keep its
pipeline busy for TARGET_WAIT_S, and a turn let in behind them (of a better key, which the
window never keeps out) waits behind at most about that much work.

    size = max(FLOOR, ceil(rate x TARGET_WAIT_S))     START while the rate is not known yet

The rate is turns seen done (the placement's Scheduled condition shows its generation) per
second, counted only while turns wait for a place: then the window is what limits, and the
rate is Temporal's. Outside a backlog, completions say how fast work arrives, not how fast it
drains, so a quiet hour neither shrinks the window nor forgets the rate the next burst meets.
Expired turns, failed sends and placements that went away are not completions.

The estimate settles where it should. A window too small for the pipeline drains W turns per
turn time T, so the next size is W x TARGET_WAIT_S / T, larger as long as a turn takes less than
TARGET_WAIT_S on its own; once the pipeline is full the rate stops growing with the window and
the size settles at rate x TARGET_WAIT_S. A fleet whose turns take longer than TARGET_WAIT_S
on their own (a slow hub) sees the window shrink to FLOOR and drains at FLOOR per turn time
whatever Temporal could do; `--admission-window off` or a fixed N is for that.

Pure and single-threaded (the watcher's loop owns it); time is an argument."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Final

from scheduler.framework.queue_sort import HIGHEST_PRIORITY_KEY, LOWEST_PRIORITY_KEY

__all__ = [
    "FLOOR",
    "RATE_HORIZON_S",
    "RATE_MIN_SAMPLES",
    "RATE_WARMUP_S",
    "START",
    "TARGET_WAIT_S",
    "AdmissionWindow",
    "AutoSizing",
    "DrainRate",
]

# How much work an urgent turn may find ahead of it in Temporal. The goal is 3 s from creation
# to scheduled for an urgent placement behind a backlog; its own trip (send, workflow task,
# cycle, status write, watch) takes about a second on the measured 2-core machine under load,
# which leaves 2 s. Less would starve the pipeline there: turns took about 1.1 s from send to
# seen done with 16 in flight (a burst ran at 14/s with a window of 16), so at 1.5 s the window
# would keep only ~1.3 turn times of work in, at 2 s ~1.8.
TARGET_WAIT_S: Final = 2.0
# The smallest the window gets once the rate is known: the fixed window measured to help
# (bench/RESULTS.md, "Admission"). A rate measured through a stall (Temporal paused, every turn
# slow), or turns slower than TARGET_WAIT_S on their own, shrink the window toward it, and below
# it the pipeline loses more than an urgent turn gains (16 already cost a burst 20-40%).
FLOOR: Final = 16
# The size before any rate is known (a cold start: 1,500 placements created at once). Generous:
# a burst must not be throttled while its rate is unknown, and the measured machine drains
# 15-23 placements/s, so 64 is 3-4 s of work; it shrinks or grows as soon as the rate is known.
START: Final = 64
# The rate is over the last this many seconds of backlog: long enough to smooth the watch's
# batches of completions, short enough to follow a slowdown within one burst.
RATE_HORIZON_S: Final = 10.0
# ...and not known before this much backlog time and this many completions after the first one
# counted: the first completions of a cold start arrive together, after the pipeline filled.
RATE_WARMUP_S: Final = 2.0
RATE_MIN_SAMPLES: Final = 8
# A size within this of an integer is that integer: 30.000000004 turns is 30, not 31.
_EPSILON: Final = 1e-9


@dataclass(frozen=True, slots=True)
class AutoSizing:
    """How an automatic window sizes itself (the module docstring); tests shrink it."""

    target_wait_s: float = TARGET_WAIT_S
    floor: int = FLOOR
    start: int = START
    horizon_s: float = RATE_HORIZON_S
    warmup_s: float = RATE_WARMUP_S
    min_samples: int = RATE_MIN_SAMPLES

    def __post_init__(self) -> None:
        if self.target_wait_s <= 0 or self.horizon_s <= 0 or self.warmup_s <= 0:
            raise ValueError(
                "the automatic admission window needs a positive target wait, horizon and "
                f"warm-up, got {self.target_wait_s}, {self.horizon_s} and {self.warmup_s}"
            )
        if self.warmup_s > self.horizon_s:
            raise ValueError(
                f"the admission rate's warm-up ({self.warmup_s}s) must fit in its horizon "
                f"({self.horizon_s}s)"
            )
        if self.floor < 1 or self.start < 1 or self.min_samples < 1:
            raise ValueError(
                "the automatic admission window's floor, start and samples must be at least 1, "
                f"got {self.floor}, {self.start} and {self.min_samples}"
            )

    def size(self, rate: float | None) -> int:
        """The window for a drain rate in turns per second (None: not known yet)."""
        if rate is None:
            return self.start
        return max(self.floor, math.ceil(rate * self.target_wait_s - _EPSILON))

    def drain_rate(self) -> DrainRate:
        return DrainRate(self.horizon_s, self.warmup_s, self.min_samples)


class DrainRate:
    """Turns seen done per second while turns wait for a place in the window.

    Its clock runs only while turns wait (`waiting`): completions are stamped on it, and the
    rate is those of the last `horizon_s` of it over that time. In the first horizon after the
    first completion counted, the time runs from that completion, not from when turns began
    to wait: a cold start's pipeline fills before anything finishes, and counting that time
    would halve the first estimate. Unknown (None) until `warmup_s` of it and `min_samples`
    completions after the first; known for good afterwards (0.0 after a stall)."""

    def __init__(
        self,
        horizon_s: float = RATE_HORIZON_S,
        warmup_s: float = RATE_WARMUP_S,
        min_samples: int = RATE_MIN_SAMPLES,
    ) -> None:
        self.horizon_s = horizon_s
        self.warmup_s = warmup_s
        self.min_samples = min_samples
        self._elapsed = 0.0  # waiting time before the current wait began
        self._since: float | None = None  # when the current wait began (None: nothing waits)
        self._origin: float | None = None  # the first completion counted, on the waiting clock
        self._done: deque[float] = deque()  # completions after the origin, on the waiting clock
        self._known = False

    @property
    def is_waiting(self) -> bool:
        return self._since is not None

    def waiting(self, now: float, waiting: bool) -> None:
        """From `now` on, turns wait for a place (True) or none do (False)."""
        if waiting and self._since is None:
            self._since = now
        elif not waiting and self._since is not None:
            self._elapsed = self._clock(now)
            self._since = None

    def done(self, now: float) -> bool:
        """A turn was seen done at `now`. Counted only while turns wait (True when counted)."""
        if self._since is None:
            return False
        at = self._clock(now)
        if self._origin is None:
            self._origin = at
        else:
            self._done.append(at)
        return True

    def rate(self, now: float) -> float | None:
        """Turns per second over the last `horizon_s` of waiting time; None until known."""
        if self._origin is None:
            return None
        at = self._clock(now)
        start = max(self._origin, at - self.horizon_s)
        while self._done and self._done[0] <= start:
            self._done.popleft()
        span = at - start
        if not self._known:
            if span < self.warmup_s or len(self._done) < self.min_samples:
                return None
            self._known = True
        return len(self._done) / span

    def _clock(self, now: float) -> float:
        if self._since is None:
            return self._elapsed
        return self._elapsed + max(0.0, now - self._since)


class AdmissionWindow:
    """The turns sent and not yet seen done: how much work the watcher has let into Temporal.

    Temporal orders tasks by priority within one task queue, but a placement's turn crosses
    several (the workflow queue for a new run's first task, the worker's sticky queue for the
    rest, the activity queue), and a worker runs the tasks it holds side by side, whatever their
    key. With 5,000 placements started at once every stage is full of them, and a placement of
    high priority waits behind their continuations (docs/priority.md, "Admission"). So the
    watcher lets at most `size` turns of a key or better in at a time; the rest wait in the
    outbox, in priority and fairness order, and go as turns finish. A turn counts from its send
    until the placement's Scheduled condition shows its generation (the watcher sees it on its
    watch: `finished`), the placement is gone or the send failed (`release`), or `timeout`
    seconds passed (`expire`: a turn whose condition nobody writes must not hold a place forever).

    `size` is a number of turns (0: no window, everything is admitted) or an `AutoSizing`: then
    the window starts at its `start` and `adapt` sizes it from the drain rate, the turns
    `finished` per second while turns wait for a place (control.admission). Any window on
    measures that rate (`drain_rate`); only an automatic one follows it. A size that shrinks
    below the turns in takes nobody's place: it admits nothing until enough have finished.

    Keyed by placement: a placement holds at most one place, at the key of its latest send.
    Pure; time is an argument."""

    def __init__(self, size: int | AutoSizing, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError(f"the admission timeout must be positive, got {timeout}")
        self.auto: AutoSizing | None
        if isinstance(size, AutoSizing):
            self.auto, self.size, self._drain = size, size.start, size.drain_rate()
        elif size < 0:
            raise ValueError(f"the admission window must be 0 or more, got {size}")
        else:
            self.auto, self.size, self._drain = None, size, DrainRate()
        self.timeout = timeout
        # The rate as of the last `adapt` (None: not known yet), for metrics and logs.
        self.drain_rate: float | None = None
        # placement -> (admitted at, priority key), oldest first: expiry pops from the front.
        self._admitted: dict[str, tuple[float, int]] = {}
        self._by_key = [0] * (LOWEST_PRIORITY_KEY + 1)

    def __len__(self) -> int:
        return len(self._admitted)

    def __contains__(self, placement: object) -> bool:
        return placement in self._admitted

    def placements(self) -> list[str]:
        """The placements holding a place, oldest first."""
        return list(self._admitted)

    def admits(self, priority_key: int) -> bool:
        """Whether a turn at `priority_key` may go in now: fewer than `size` turns of it or a
        better key are in."""
        if self.size == 0:
            return True
        return sum(self._by_key[HIGHEST_PRIORITY_KEY : _clamped(priority_key) + 1]) < self.size

    def admit(self, placement: str, priority_key: int, now: float) -> None:
        """Give the placement a place at `priority_key`. One that holds a place already keeps
        it, and the time it took it (so a placement signalled again and again while its turn
        never finishes still expires), at the new key."""
        if self.size == 0:
            return
        held = self._admitted.get(placement)
        since = now if held is None else held[0]
        if held is not None:
            self._by_key[held[1]] -= 1
        priority_key = _clamped(priority_key)
        self._admitted[placement] = (since, priority_key)  # an existing entry keeps its position
        self._by_key[priority_key] += 1

    def release(self, placement: str) -> bool:
        """The placement's turn will not run, or is no longer ours to wait for (the placement
        is gone): its place is free, and the drain rate does not count it. False when it held
        none."""
        held = self._admitted.pop(placement, None)
        if held is None:
            return False
        self._by_key[held[1]] -= 1
        return True

    def finished(self, placement: str, now: float) -> bool:
        """The placement's turn was seen done at `now`: its place is free, and while turns wait
        for a place it counts toward the drain rate. False when it held none."""
        if not self.release(placement):
            return False
        self._drain.done(now)
        return True

    def waiting(self, now: float, waiting: bool) -> None:
        """From `now` on, turns wait for a place (the window refused one), or none do: the drain
        rate is measured only while some do."""
        self._drain.waiting(now, waiting)

    @property
    def is_waiting(self) -> bool:
        return self._drain.is_waiting

    def adapt(self, now: float) -> bool:
        """Measure the drain rate at `now` and, for an automatic window, size the window from
        it. True when the window grew (waiting turns may go in at once)."""
        if self.size == 0:
            return False
        self.drain_rate = self._drain.rate(now)
        if self.auto is None:
            return False
        before, self.size = self.size, self.auto.size(self.drain_rate)
        return self.size > before

    def expire(self, now: float) -> list[str]:
        """Release and return the placements admitted `timeout` or more seconds before `now`
        (not completions: the drain rate does not count them)."""
        expired: list[str] = []
        while self._admitted:
            placement, (since, _) = next(iter(self._admitted.items()))
            if since + self.timeout > now:
                break
            self.release(placement)
            expired.append(placement)
        return expired

    def next_expiry(self) -> float | None:
        """When the oldest place expires (None: nothing is admitted)."""
        for since, _ in self._admitted.values():
            return since + self.timeout
        return None


def _clamped(priority_key: int) -> int:
    return min(max(priority_key, HIGHEST_PRIORITY_KEY), LOWEST_PRIORITY_KEY)
