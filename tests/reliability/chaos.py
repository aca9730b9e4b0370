"""The chaos scenario shared by the quick test (`make test`) and the soak (`make soak`).

Under a load of placements churned by `fleet.Fleet`, each round kills (SIGKILL) and restarts,
in turn, a worker, a watcher, the Temporal dev server (SQLite persistence) and devhub
(`--data-dir`, same port), while devhub injects API faults (500/503/429/409 on shares of the
requests, and a few binding creates that hang until the client gives up). Around every kill the
fleet changes: placements are created, re-policied (numberOfClusters, affinity, cluster names)
and deleted, and cluster labels change, some while the victim is down, so the restarted watcher
must resync and the restarted worker must pick up what the dead one held.

Then the faults stop, the Schedules are paused (their next runs would come on the wall clock's
5-minute marks, not the test's), and `invariants.converge` waits until the system is right
again and no Schedule's run is still going. Then the hub must stay quiet: nothing left cycles
or retries. Every step is logged with its time since the start, which is what a failure or the
soak prints."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from activities.decisions import DecisionSettings
from control.check import check_fleet, render_check
from tests.reliability.fleet import Fleet
from tests.reliability.invariants import Convergence, converge, hub_violations
from tests.reliability.system import System
from tests.support.schedules import pause_schedules

__all__ = ["FAULTS", "ChaosConfig", "ChaosLog", "run_chaos"]

# Shares are small: the system must keep making progress through them, as it would against a
# flaky API server, and a share on `*` also hits the test's own writes (which retry).
FAULTS: Final[tuple[dict[str, Any], ...]] = (
    {"verb": "create", "resource": "clusterresourcebindings", "status": 503, "share": 0.1},
    {"verb": "patch", "resource": "*", "status": 409, "share": 0.05},
    {"verb": "update", "resource": "*", "status": 429, "share": 0.1},
    {"verb": "list", "resource": "*", "status": 500, "share": 0.05},
    {"verb": "create", "resource": "clusterschedulingpolicysnapshots", "status": 500, "share": 0.1},
    {"verb": "delete", "resource": "*", "status": 503, "share": 0.1},
    # Held until the worker's read timeout (20 s) gives up on them; a cycle stuck on one still
    # heartbeats within the cycle activity's 30 s heartbeat timeout.
    {"verb": "create", "resource": "clusterresourcebindings", "hang": True, "share": 0.02,
     "count": 2},
)  # fmt: skip
# Work in flight when the victim dies: churn, then this long before the kill.
IN_FLIGHT_PAUSE_S: Final = 1.0
# After the last churn the faults stay on this long, so its work meets them too.
FAULT_DWELL_S: Final = 5.0
# Once converged, nobody may read or write a placement's objects for this long: a workflow
# cycling forever, or an activity retrying, would. The reconcile Schedule's runs would too, by
# design (docs/operations.md, "Reconcile safety net": each requeues the placements a cluster
# change since the previous run reaches, one read of each in its turn); one landing in the
# window made it fail once, so the Schedules are paused before convergence is awaited.
QUIET_WINDOW_S: Final = 5.0
# Member agents heartbeat every minute or so; eligibility allows five.
HEARTBEAT_EVERY_S: Final = 60.0
QUIET_VERBS: Final = ("get", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class ChaosConfig:
    clusters: int
    placements: int
    rounds: int
    churn: int  # changes of each kind per step
    converge_s: float
    seed: int = 20240501
    workers: int = 1
    watchers: int = 1

    @classmethod
    def from_env(cls, prefix: str, **defaults: Any) -> ChaosConfig:
        """Defaults overridden by `<prefix>_CLUSTERS`, `_PLACEMENTS`, `_ROUNDS`, ..."""
        values = dict(defaults)
        for name, kind in (
            ("clusters", int),
            ("placements", int),
            ("rounds", int),
            ("churn", int),
            ("converge_s", float),
            ("seed", int),
            ("workers", int),
            ("watchers", int),
        ):
            raw = os.environ.get(f"{prefix}_{name.upper()}")
            if raw:
                values[name] = kind(raw)
        return cls(**values)


@dataclass
class ChaosLog:
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    kills: dict[str, int] = field(default_factory=dict)
    restart_s: dict[str, list[float]] = field(default_factory=dict)
    fault_hits: int = 0

    def note(self, text: str) -> None:
        line = f"t+{time.monotonic() - self.started:6.1f}s {text}"
        self.lines.append(line)
        print(line, flush=True)

    def killed(self, name: str, restart_s: float) -> None:
        self.kills[name] = self.kills.get(name, 0) + 1
        self.restart_s.setdefault(name, []).append(restart_s)


async def _unsettled(system: System, fleet: Fleet) -> str:
    """How many hub-side violations right now (a measure of the work in flight)."""
    try:
        found = await asyncio.to_thread(
            hub_violations, system.hub_client, fleet.expectations(), fleet.deleted
        )
    except Exception as exc:  # an injected fault hit the test's read
        return f"unknown ({type(exc).__name__})"
    return str(len(found))


async def _churn(fleet: Fleet, size: int) -> None:
    await asyncio.to_thread(fleet.churn, size)


def _inject_faults(system: System) -> None:
    for fault in FAULTS:
        system.hub.inject(**fault)


async def _kill_and_restart(
    system: System,
    fleet: Fleet,
    log: ChaosLog,
    name: str,
    kill: Callable[[], None],
    restart: Callable[[], Awaitable[object]],
    *,
    churn: int,
    churn_while_down: bool = True,
) -> None:
    """Churn, let the work get going, SIGKILL `name`, churn again while it is down (unless
    nothing can be written then), restart it."""
    await _churn(fleet, churn)
    await asyncio.sleep(IN_FLIGHT_PAUSE_S)
    unsettled = await _unsettled(system, fleet)
    log.note(f"kill -9 {name} ({unsettled} hub-side violations at that moment)")
    kill()
    down = time.monotonic()
    if churn_while_down:
        await _churn(fleet, churn)
        log.note(f"churned {churn} of each change while {name} was down")
    await restart()
    restart_s = time.monotonic() - down
    log.killed(name, restart_s)
    log.note(f"{name} back after {restart_s:.1f}s down")


async def _restart_hub(system: System) -> None:
    await asyncio.to_thread(system.hub.start)
    _inject_faults(system)  # a new devhub process starts without faults


async def run_round(
    system: System, fleet: Fleet, config: ChaosConfig, log: ChaosLog, n: int
) -> None:
    """Kill each kind of process once (workers and watchers in rotation), churning around it."""
    worker = system.workers[n % len(system.workers)]
    watcher = system.watchers[n % len(system.watchers)]
    churn = config.churn
    await _kill_and_restart(system, fleet, log, worker.name, worker.kill, worker.start, churn=churn)
    await _kill_and_restart(
        system, fleet, log, watcher.name, watcher.kill, watcher.start, churn=churn
    )
    await _kill_and_restart(
        system, fleet, log, "temporal", system.temporal.kill, system.temporal.start, churn=churn
    )
    log.fault_hits += sum(system.hub.hits().values())  # the new devhub counts from zero
    await _kill_and_restart(
        system,
        fleet,
        log,
        "devhub",
        system.hub.kill,
        lambda: _restart_hub(system),
        churn=churn,
        churn_while_down=False,  # nothing can be written: churn once it is back instead
    )
    await _churn(fleet, churn)
    log.note(f"round {n + 1}: churned after devhub came back")


async def run_chaos(system: System, config: ChaosConfig) -> tuple[Fleet, ChaosLog, Convergence]:
    """Load, rounds of kills under faults and churn, convergence, then a quiet hub. Returns
    what happened; AssertionError if it did not converge or stay quiet."""
    log = ChaosLog()
    await system.start()
    log.note(
        f"system up: devhub, Temporal, {len(system.workers)} worker(s), "
        f"{len(system.watchers)} watcher(s)"
    )
    fleet = Fleet(system.hub_client, seed=config.seed)
    await asyncio.to_thread(fleet.add_clusters, config.clusters)
    stop = asyncio.Event()
    heartbeats = asyncio.create_task(_keep_heartbeats(fleet, stop))
    try:
        result = await _chaos(system, config, fleet, log)
    finally:
        stop.set()
        await heartbeats  # a refresh in progress finishes first: the hub must be quiet next

    busy = await quiet(system, QUIET_WINDOW_S)
    assert not busy, f"hub requests {QUIET_WINDOW_S:g}s after convergence: {busy}"
    log.note(f"quiet: no hub reads or writes of objects for {QUIET_WINDOW_S:g}s")
    # The invariants (fleet-scheduler check's): every reservation in place, no overcommit, one
    # binding per cluster, a workflow per placement, after every kill and fault.
    # PlacementDecisions too: `run` publishes them standalone (docs/decisions.md).
    state, violations = await check_fleet(
        system.hub_client,
        await system.client(),
        system.task_queue,
        decisions=DecisionSettings(),
        decisions_checked=True,
    )
    assert not violations, render_check(state, violations)
    log.note(f"invariants hold: {render_check(state, violations).strip()}")
    return fleet, log, result


async def _keep_heartbeats(fleet: Fleet, stop: asyncio.Event) -> None:
    """Play the member agents: without fresh heartbeats every cluster goes ineligible after
    KubeFleet's five minutes, and a long run would converge to something else."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), HEARTBEAT_EVERY_S)
            return
        try:
            await asyncio.to_thread(fleet.refresh_heartbeats)
        except Exception as exc:  # devhub down longer than the writes retry: next time
            print(f"heartbeat refresh failed: {type(exc).__name__}: {exc}", flush=True)


async def _chaos(system: System, config: ChaosConfig, fleet: Fleet, log: ChaosLog) -> Convergence:
    await asyncio.to_thread(fleet.add_placements, config.placements)
    log.note(f"load: {config.clusters} clusters, {config.placements} placements created")
    _inject_faults(system)
    log.note(f"faults on: {len(FAULTS)} kinds")

    for n in range(config.rounds):
        await run_round(system, fleet, config, log, n)

    await asyncio.sleep(FAULT_DWELL_S)
    log.fault_hits += sum(system.hub.hits().values())
    system.hub.clear_faults()
    log.note(
        f"faults cleared ({log.fault_hits} requests failed or held by them); "
        f"{len(fleet.placements)} live, {len(fleet.deleted)} deleted placements"
    )
    client = await system.client()
    schedules = await pause_schedules(client, system.task_queue, "chaos: converging")
    log.note(f"paused {', '.join(schedules) or 'no'} Schedule(s): no run starts from here on")
    result = await converge(
        system.hub_client,
        client,
        fleet.expectations(),
        fleet.deleted,
        timeout_s=config.converge_s,
        schedules=schedules,
    )
    log.note(f"converged {result.seconds:.1f}s after the faults stopped ({result.polls} polls)")
    return result


async def quiet(system: System, seconds: float) -> dict[str, int]:
    """Requests per verb devhub served during `seconds` of nobody changing anything."""
    before = {verb: system.hub.count(verb) for verb in QUIET_VERBS}
    await asyncio.sleep(seconds)
    after = {verb: system.hub.count(verb) for verb in QUIET_VERBS}
    return {verb: after[verb] - before[verb] for verb in QUIET_VERBS if after[verb] > before[verb]}
