"""How a problem with one of our annotation values is said: the error every parser of
`scheduler.opt_in.placement_annotations` raises, and the bounded quote of the value it carries.

An annotation may hold 256 KiB, and a problem travels far: into a turn's result, the workflow's
carried state, its details, the Scheduled condition and the log. So a problem quotes at most
`SHOWN_VALUE` characters of the value, however long the value is (issue 33)."""

from __future__ import annotations

from typing import Final

from scheduler.framework.errors import SchedulerError

__all__ = ["SHOWN_VALUE", "AnnotationError", "shown"]

SHOWN_VALUE: Final = 40


class AnnotationError(SchedulerError, ValueError):
    """One of our annotations holds a value its rule refuses; the message says what is wrong
    and what to write, and quotes at most `SHOWN_VALUE` characters of the value."""


def shown(value: str) -> str:
    """`value` quoted for a problem: its first `SHOWN_VALUE` characters, then `...` if cut."""
    return repr(value if len(value) <= SHOWN_VALUE else value[:SHOWN_VALUE] + "...")
