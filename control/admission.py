"""The admission window's size when it sizes itself (`--admission-window auto`).

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

__all__ = [
    "FLOOR",
    "RATE_HORIZON_S",
    "RATE_MIN_SAMPLES",
    "RATE_WARMUP_S",
    "START",
    "TARGET_WAIT_S",
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
