"""Typed errors of the scheduling framework.

A cycle never crashes the process: everything the framework or a plugin can get wrong ends as
one of these, and `scheduler.schedule` turns it into a `CycleResult` with a clear `error`.

    SchedulerError
    ├── ProfileError      a profile (YAML or code) is invalid; raised when it is loaded
    ├── PluginError       a plugin raised, or returned a code its stage does not allow
    └── ...               every other exception class of the package: the cycle and snapshot
                          errors of scheduler.errors, QuantityError, the built-in plugins'
                          own errors (caught inside the plugin, or wrapped in PluginError),
                          and scheduler.testing's PlanApplyError

Every exception class defined under scheduler/ derives from SchedulerError
(tests/unit/scheduler/test_scheduler_errors.py walks the package to check it). SelectorError,
shared with devhub, lives in hub.validation and is a ValueError."""

from __future__ import annotations

__all__ = ["PluginError", "ProfileError", "SchedulerError"]


class SchedulerError(Exception):
    """Base of every error the scheduler package raises on purpose."""


class ProfileError(SchedulerError):
    """A profile cannot be built. `path` points at the offending YAML node, e.g.
    `plugins.score.enabled[1].weight` (empty when the problem is the document itself)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class PluginError(SchedulerError):
    """A plugin failed a cycle: it raised, or returned a status its stage does not allow
    (INTERNAL_ERROR always aborts; see `scheduler.framework.interfaces`)."""

    def __init__(self, plugin: str, stage: str, detail: str) -> None:
        self.plugin = plugin
        self.stage = stage
        self.detail = detail
        super().__init__(f"plugin {plugin} failed at {stage}: {detail}")
