"""The quick chaos test, part of `make test`: ~150 placements over 20 clusters, each process
killed once under API faults and churn, then everything must converge.

See tests/reliability/chaos.py for the scenario and invariants.py for what "converged" means.
Sizes can be raised through RELIABILITY_QUICK_* variables (CLUSTERS, PLACEMENTS, ROUNDS, CHURN,
CONVERGE_S, SEED, WORKERS, WATCHERS); `make soak` runs the long form."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.reliability.chaos import ChaosConfig, run_chaos
from tests.reliability.system import System

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUICK = ChaosConfig.from_env(
    "RELIABILITY_QUICK",
    clusters=20,
    placements=120,
    rounds=1,
    churn=8,
    # A worker killed mid-prepare holds its placement until prepare's 60 s start-to-close
    # timeout; the rest of the chaos runs meanwhile.
    converge_s=150.0,
)


async def test_everything_converges_after_each_process_is_killed_under_faults_and_churn(
    system_factory: Callable[..., System],
) -> None:
    system = system_factory(workers=QUICK.workers, watchers=QUICK.watchers, fault_seed=QUICK.seed)
    fleet, log, _result = await run_chaos(system, QUICK)

    victims = {"temporal", "devhub", system.workers[0].name, system.watchers[0].name}
    assert set(log.kills) == victims, log.kills
    assert fleet.deleted and fleet.changes.get("numberOfClusters changes")
    assert fleet.changes.get("cluster label changes")
    assert not system.dead(), system.dead()
    print(f"\nchanges: {fleet.changes}\nrestart seconds: {log.restart_s}")
