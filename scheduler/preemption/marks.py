"""The mark a preemption leaves on a victim's binding it unscheduled (docs/priority.md,
"Preemption"): `fleet-scheduler.io/preempted-by: crp/checkout (priority 100000) on member-3,
over priority 0`. Written by the victim's turn; read by its cycles (the Scheduled condition says
who took its room) and by `check` (a victim is always of strictly lower priority). One writer,
one parser: here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["PreemptedBy", "parse_preempted_by"]

_MARK: Final = re.compile(
    r"^(?P<preemptor>\S+) \(priority (?P<priority>-?\d+)\) on (?P<cluster>\S+), "
    r"over priority (?P<victim>-?\d+)$"
)


@dataclass(frozen=True, slots=True)
class PreemptedBy:
    preemptor: str
    """As people name it: `crp/checkout`, `rp/shop/web`."""
    priority: int
    cluster: str
    victim_priority: int

    def who(self) -> str:
        """e.g. "crp/checkout (priority 100000) on member-3"."""
        return f"{self.preemptor} (priority {self.priority}) on {self.cluster}"

    def text(self) -> str:
        """The annotation's value."""
        return f"{self.who()}, over priority {self.victim_priority}"


def parse_preempted_by(value: str) -> PreemptedBy | None:
    """The mark as written, or None when it cannot be read (written by hand)."""
    found = _MARK.match(value.strip())
    if found is None:
        return None
    return PreemptedBy(
        preemptor=found["preemptor"],
        priority=int(found["priority"]),
        cluster=found["cluster"],
        victim_priority=int(found["victim"]),
    )
