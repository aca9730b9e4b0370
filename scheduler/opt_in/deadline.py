"""Scheduling deadlines (docs/operations.md, "Scheduling deadlines"): how long a placement may
stay not fully scheduled before it is reported, and, when it asks, aged.

The annotation `fleet-scheduler.io/schedule-deadline` holds a duration as Go writes them, whole
units only (`30s`, `10m`, `1h30m`), optionally followed by `,aging`. Everything here is pure:
the workflow parses the annotation and keeps the clock, the activity words what is missing, the
watcher counts placements past their deadline, the CLI says how long is left, all from these
functions, so they agree."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from scheduler.cycles.models import Outcome
from scheduler.explain.explanation import Explanation
from scheduler.explain.readable import readable_reason
from scheduler.opt_in.values import AnnotationError, shown

__all__ = [
    "AGING",
    "AGING_DEFAULT_KEY",
    "DEADLINE_EXCEEDED_REASON",
    "INVALID_DEADLINE_REASON",
    "MAX_DEADLINE",
    "REPORT_INTERVAL",
    "DeadlineError",
    "ScheduleDeadline",
    "aged_key",
    "carried_deadline",
    "exceeded_message",
    "format_duration",
    "misses_at",
    "missing_line",
    "parse_deadline",
]

# The reason of the Event, and of the Scheduled condition in standalone mode, once a placement
# is past its deadline; and of the Event that says the annotation cannot be read.
DEADLINE_EXCEEDED_REASON: Final = "ScheduleDeadlineExceeded"
INVALID_DEADLINE_REASON: Final = "InvalidScheduleDeadline"
AGING: Final = "aging"
# A deadline is at least a second (the workflow's timer) and at most a year (Temporal's timers
# go further, but a longer deadline is a typo, e.g. `10000h`).
MIN_DEADLINE: Final = timedelta(seconds=1)
MAX_DEADLINE: Final = timedelta(days=365)
# How many filter reasons the missing line names before "+N more".
SHOWN_REASONS: Final = 3
# How many digits a unit may have, leading zeros aside, before it is too long (a bad value is
# quoted with at most SHOWN_VALUE characters: scheduler.opt_in.values).
MAX_DIGITS: Final = 12
# How often a placement past its deadline is reported at most, once its first miss has been:
# the Event's refresh (activities.deadline) and the turn a miss runs (workflows.deadline). A
# `1s` deadline would otherwise run a whole cycle every second, for ever.
REPORT_INTERVAL: Final = timedelta(minutes=5)
# What a turn carries instead of a value that cannot be read (carried_deadline).
INVALID_PREFIX: Final = "invalid:"

_UNITS: Final = {"h": 3600, "m": 60, "s": 1}
_DURATION: Final = re.compile(
    r"(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?", re.ASCII
)
HINT: Final = "write a duration such as 30s, 10m or 1h30m, optionally followed by ',aging'"


class DeadlineError(AnnotationError):
    """The annotation cannot be read; the message says what is wrong and what to write."""


@dataclass(frozen=True)
class ScheduleDeadline:
    """A placement's deadline: how long it may stay not fully scheduled, and whether each miss
    moves its turns one priority key up (docs/priority.md, "Aging")."""

    seconds: int
    aging: bool = False

    @property
    def text(self) -> str:
        return format_duration(self.seconds) + (f",{AGING}" if self.aging else "")


def parse_deadline(value: str) -> ScheduleDeadline:
    """The deadline an annotation value asks for. Never raises anything but DeadlineError,
    whatever the value (a property test feeds it arbitrary strings).

    Raises:
        DeadlineError: not a duration of whole hours, minutes and seconds, or an unknown
            option, or shorter than a second or longer than a year; the message quotes at most
            SHOWN_VALUE characters of the value.
    """
    text, _, option = value.strip().partition(",")
    text, option = text.strip(), option.strip()
    if option and option != AGING:
        raise DeadlineError(
            f"schedule deadline {shown(value)}: unknown option after the comma (the only one is "
            f"{AGING!r}); {HINT}"
        )
    found = _DURATION.fullmatch(text)
    if not text or found is None:
        raise DeadlineError(f"schedule deadline {shown(value)} is not a duration; {HINT}")
    # Leading zeros say nothing (`0001s` is 1s) and int() refuses more than 4300 digits, so
    # they go before counting and before int(); a unit of more than 12 digits is out of range.
    digits = {unit: (found[unit] or "").lstrip("0") for unit in _UNITS}
    too_long = any(len(d) > MAX_DIGITS for d in digits.values())
    seconds = 0 if too_long else sum(int(digits[u] or 0) * size for u, size in _UNITS.items())
    if too_long or not MIN_DEADLINE.total_seconds() <= seconds <= MAX_DEADLINE.total_seconds():
        raise DeadlineError(
            f"schedule deadline {shown(value)} must be between 1s and "
            f"{format_duration(MAX_DEADLINE)}; {HINT}"
        )
    return ScheduleDeadline(seconds=seconds, aging=bool(option))


def carried_deadline(value: str) -> tuple[str, str | None]:
    """What crosses Temporal for the annotation `value` (a turn's result, the workflow's carried
    state, a miss it reports), never the raw value, which may hold 256 KiB (issue 33):

    - (the deadline as the annotation writes it, e.g. `1m30s,aging`; None) when it reads;
    - (a stand-in, `invalid:` and a digest of the value; the problem) when it does not.

    Equal values give equal stand-ins, so the workflow still sees the annotation change; and a
    stand-in, read again, stays a problem (no deadline is made of it)."""
    if value.startswith(INVALID_PREFIX) and len(value) == len(INVALID_PREFIX) + _DIGEST_CHARS:
        return value, "the schedule deadline annotation cannot be read"  # carried already
    try:
        return parse_deadline(value).text, None
    except DeadlineError as exc:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
        return INVALID_PREFIX + digest[:_DIGEST_CHARS], str(exc)


_DIGEST_CHARS: Final = 16


def format_duration(length: float | timedelta) -> str:
    """`length` as the annotation writes it, whole seconds: 90 -> `1m30s`, 3600 -> `1h`."""
    seconds = int(length.total_seconds() if isinstance(length, timedelta) else length)
    if seconds <= 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [(hours, "h"), (minutes, "m"), (seconds, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n)


def misses_at(deadline: ScheduleDeadline, since: datetime, now: datetime) -> int:
    """How many deadline periods have passed since the placement became not fully scheduled."""
    return max(0, int((now - since).total_seconds() // deadline.seconds))


# The priority key of a task without one (Temporal's default), from which aging counts.
AGING_DEFAULT_KEY: Final = 3


def aged_key(key: int | None, misses: int, *, best: int | None) -> int | None:
    """A turn's priority key after `misses` missed deadlines of an aging placement: one key up
    (toward 1) per miss, never past `best`, the best key aging may reach (docs/priority.md,
    "Aging": the placement's own band's key unless the profile lets aging go further). None, as
    key or as best, is Temporal's default, 3. A key already at `best` or better (a person's
    `requeue --priority 1`) is left as it is: aging never demotes."""
    start = AGING_DEFAULT_KEY if key is None else key
    limit = AGING_DEFAULT_KEY if best is None else best
    if misses <= 0 or start <= limit:
        return key
    return max(limit, start - misses)


def missing_line(outcome: Outcome, explanation: Explanation | None) -> str:
    """Which clusters are missing and why, in one line, e.g. `2 of 3 clusters picked; missing
    1: 4 clusters filtered by ClusterAffinity, 1 by TaintToleration (gpu=true:NoSchedule)`."""
    if outcome.wanted is None:
        head = f"{outcome.picked} cluster(s) picked"
    else:
        head = f"{outcome.picked} of {outcome.wanted} clusters picked"
        if outcome.picked < outcome.wanted:
            head += f"; missing {outcome.wanted - outcome.picked}"
    if explanation is None:
        return head
    why: list[str] = []
    groups = sorted(explanation.filtered, key=lambda g: (-len(g.clusters), g.plugin, g.reason))
    for index, group in enumerate(groups[:SHOWN_REASONS]):
        count = len(group.clusters)
        noun = (" cluster" + ("s" if count != 1 else "")) if index == 0 else ""
        why.append(f"{count}{noun} filtered by {group.plugin} ({readable_reason(group.reason)})")
    if len(groups) > SHOWN_REASONS:
        why.append(f"+{len(groups) - SHOWN_REASONS} more reasons")
    if explanation.not_found:
        why.append(f"{len(explanation.not_found)} target(s) not in the fleet")
    if explanation.invalid:
        why.append(f"{len(explanation.invalid)} target(s) cannot take it")
    if explanation.shortage is not None:
        why.append(explanation.shortage.message())
    if not why and not explanation.evaluated:
        why.append("no cluster evaluated in the last cycle")
    return f"{head}: {', '.join(why)}" if why else head


def exceeded_message(deadline: ScheduleDeadline, misses: int, missing: str) -> str:
    """The Event's and the condition's message: stable within one deadline period, so a turn
    that finds the same clusters missing writes nothing."""
    length = format_duration(deadline.seconds * max(1, misses))
    limit = format_duration(deadline.seconds)
    return f"not fully scheduled for {length} (deadline {limit}): {missing}"
