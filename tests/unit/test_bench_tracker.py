"""The benches' Tracker (bench/e2e_load.py) times what it saw, not when it was asked: a bench
that waits for a placement only after some other work (bench/kubefleet_report.py's resync
waits for its new placement once the whole resync is re-decided) must still get the time the
placement was seen scheduled. Loaded from its file: bench/ is scripts, not a package."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"


def e2e_load() -> ModuleType:
    name = "bench_e2e_load"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / "e2e_load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def scheduled(name: str, generation: int) -> dict[str, Any]:
    condition = {
        "type": "ClusterResourcePlacementScheduled",
        "status": "True",
        "observedGeneration": generation,
    }
    return {
        "metadata": {"name": name, "generation": generation},
        "status": {"conditions": [condition]},
    }


async def test_wait_scheduled_returns_when_the_last_was_seen_not_when_asked() -> None:
    load = e2e_load()
    tracker = load.Tracker(hub=None)  # the hub is only for start(); events are fed by hand
    for name in ("early", "late"):
        tracker._on_placement("ADDED", scheduled(name, 1))
    # Seen scheduled long before anyone waits for them: 100 s and 50 s ago.
    now = time.monotonic()
    tracker.placements["early"].scheduled[1] = now - 100.0
    tracker.placements["late"].scheduled[1] = now - 50.0
    last = await tracker.wait_scheduled(["early", "late"], 10.0, "already scheduled")
    assert last == now - 50.0
    one = await tracker.wait_scheduled(["early"], 10.0, "already scheduled")
    assert one == now - 100.0
