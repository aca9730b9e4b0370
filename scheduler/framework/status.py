"""Status: what a plugin says about one extension point, and how it reads in a decision.

Expected outcomes (a cluster that does not fit, a plugin with nothing to do) are Status values;
surprises are raised by the plugin and wrapped by the runner. The string form is KubeFleet's
(kubefleet-rules 4.3): the code name, then `, <error>` for an internal error, then `, <reason>` for
each reason; the plugin name is never part of it, so decisions read exactly as KubeFleet's."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Code", "Status"]


class Code(enum.Enum):
    SUCCESS = "Success"
    INTERNAL_ERROR = "InternalError"
    CLUSTER_UNSCHEDULABLE = "ClusterUnschedulable"
    CLUSTER_ALREADY_SELECTED = "ClusterAlreadySelected"
    SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    error: str | None = None

    @classmethod
    def success(cls) -> Status:
        return _SUCCESS

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.CLUSTER_UNSCHEDULABLE, reasons)

    @classmethod
    def already_selected(cls, *reasons: str) -> Status:
        return cls(Code.CLUSTER_ALREADY_SELECTED, reasons)

    @classmethod
    def skip(cls, *reasons: str) -> Status:
        return cls(Code.SKIP, reasons)

    @classmethod
    def internal_error(cls, error: str, *reasons: str) -> Status:
        return cls(Code.INTERNAL_ERROR, reasons, error=error)

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    def or_none(self) -> Status | None:
        """None for SUCCESS (a batch filter's answer for a cluster that passes), else self."""
        return None if self.code is Code.SUCCESS else self

    def __str__(self) -> str:
        parts = [self.code.value]
        if self.code is Code.INTERNAL_ERROR and self.error:
            parts.append(self.error)
        parts.extend(self.reasons)
        return ", ".join(parts)


_SUCCESS = Status(Code.SUCCESS)
