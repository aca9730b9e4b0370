"""scheduler.framework.errors says every error the scheduler raises on purpose derives from
SchedulerError: this walks every module of the package and checks each exception class."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import scheduler
from scheduler.framework.errors import SchedulerError


def scheduler_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(scheduler.__path__, prefix="scheduler."):
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("scheduler."):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_the_walk_finds_the_package_errors() -> None:
    names = {cls.__name__ for cls in scheduler_exceptions()}
    assert {"SchedulerError", "PluginError", "SnapshotMetadataError", "QuantityError"} <= names


def test_every_scheduler_exception_derives_from_scheduler_error() -> None:
    stray = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in scheduler_exceptions()
        if not issubclass(cls, SchedulerError)
    ]
    assert not stray, f"not SchedulerErrors: {stray}"
