"""Fixtures of the reliability tests: a process reaper, and the system built on it.

`processes` kills every child a test started (SIGKILL to each process group) when the test
ends, passed or failed, and then fails the test if anything in those groups is still alive.
`system_factory` builds a `System` (devhub, Temporal, workers, watchers as processes) in the
test's tmp_path; when a test fails, the tail of every process log is printed with the failure."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.system import System
from tests.support.procs import Processes


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path / "logs")
    try:
        yield procs
    finally:
        procs.close()
    leftovers = procs.leftovers()
    assert not leftovers, f"processes outlived the test: {leftovers}"


@pytest.fixture
def system_factory(
    processes: Processes, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., System]]:
    built: list[System] = []

    def make(**kwargs: Any) -> System:
        system = System(processes, tmp_path / f"system-{len(built)}", **kwargs)
        built.append(system)
        return system

    yield make
    failed = getattr(request.node, "rep_call", None)
    for system in built:
        if failed is not None and failed.failed:
            for service in system.services:
                print(f"\n--- {service.describe()}")
        system.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
