"""The soak (`make soak`, marker `soak`, excluded from `make test`): the chaos scenario of
chaos.py at full size. Defaults: 1,000 placements over 30 clusters, two workers and two
watchers, three rounds in which each kind of process is killed once (workers and watchers in
rotation), faults and churn throughout. Override with RELIABILITY_SOAK_* variables (CLUSTERS,
PLACEMENTS, ROUNDS, CHURN, CONVERGE_S, SEED, WORKERS, WATCHERS)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability.chaos import ChaosConfig, run_chaos
from tests.reliability.system import System

SOAK = ChaosConfig.from_env(
    "RELIABILITY_SOAK",
    clusters=30,
    placements=1000,
    rounds=3,
    churn=40,
    converge_s=600.0,
    workers=2,
    watchers=2,
)
SOAK_TIMEOUT_S = 3600

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.soak,
    pytest.mark.timeout(SOAK_TIMEOUT_S),
]


async def test_soak_converges_after_rounds_of_kills_under_faults_and_churn(
    system_factory: Callable[..., System],
) -> None:
    system = system_factory(workers=SOAK.workers, watchers=SOAK.watchers, fault_seed=SOAK.seed)
    fleet, log, result = await run_chaos(system, SOAK)

    assert log.kills["temporal"] == SOAK.rounds and log.kills["devhub"] == SOAK.rounds
    assert sum(n for name, n in log.kills.items() if name.startswith("worker")) == SOAK.rounds
    assert not system.dead(), system.dead()
    # The oracle a person would run: `fleet-scheduler check` on the soaked hub and Temporal.
    checked = subprocess.run(
        [
            str(Path(sys.executable).with_name("fleet-scheduler")), "check",
            "--kubeconfig", str(system.hub.kubeconfig),
            "--temporal-address", system.temporal.address,
            "--task-queue", system.task_queue,
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("all invariants hold: "), checked.stdout
    print(f"\nfleet-scheduler check: {checked.stdout.strip()}")
    print(
        f"\nsoak: {len(fleet.placements)} live, {len(fleet.deleted)} deleted placements; "
        f"changes {fleet.changes}; {log.fault_hits} faulted requests; kills {log.kills}; "
        f"restart seconds {log.restart_s}; converged in {result.seconds:.1f}s"
    )
