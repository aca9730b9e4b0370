"""KubeFleet's performance report, reproduced against our stack at its default settings.

    python bench/kubefleet_report.py [--clusters 1000] [--placements 1000]
        [--storm-clusters 100] [--storm-placements 10000] [--only PHASES | --skip PHASES]
        [--pick-n 10] [--wide-n 100] [--churn-pause 0] [--new-after 1] [--trace]
        [--timeout 1800]
        [--temporal-db sqlite|memory]
        [--scheduler-flag=--FLAG=VALUE ...] [--worker-flag=...] [--watcher-flag=...] [--keep]

KubeFleet's report ran its hub scheduler at 1,000 member clusters and 1,000
ClusterResourcePlacements and measured: a new PickN-100 placement is fully placed at p90 in
20 s; 30 s while 100 rollouts run at once; a full resync (every placement through the scheduler
again) takes 11 min 15 s. This bench runs the same scenarios, and two of our own at 10,000
placements, each part of the stack its own process (bench/e2e_stack.py, as bench/e2e.py):
devhub, the Temporal dev server, the worker (`run --components workflows,activities
--processes 2`) and the watcher (`run --components watcher`). No tuning flag: everything else
is `run`'s default (the reconcile Schedule every 5 minutes, the workers choosing where turns
run, the admission window's default, 1,000 cached workflows). `--scheduler-flag` (both
parts), `--worker-flag` and `--watcher-flag` append flags, to compare forced choices.

The fleet is bench/e2e_load.py's (env prod/staging/dev, ten regions, every tenth cluster
tainted `gpu` and tolerated by none of the placements below), heartbeats kept fresh. The mix
(`e2e_load.region_env_placement`): 70% PickN --pick-n (required affinity on env, on five of
the ten regions, or both; preferring gold, then big clusters), 20% PickAll of one region, 10%
PickAll of one env. "Fully scheduled" is e2e.py's: the placement's Scheduled condition True for
its generation, seen on a watch. Prints `name value` lines.

Phases, on a stack at K = --clusters (setup runs whenever a later phase of its stack does):

1. setup: P = --placements placements of the mix created 48 at a time. setup.create_s: first
   create to last; setup.scheduled_s: first create to every one fully scheduled.
2. pickn100: 20 new PickN --wide-n placements (100; no required affinity, so any untainted
   cluster), one every 0.5 s. Per placement, its create to its 100th binding seen on a watch:
   pickn100.p50_s, p90_s, max_s (and scheduled_p90_s: to fully scheduled). Goal: p90 <= 2 s
   (KubeFleet: 20 s).
3. churn: the same 20 arrivals while 100 of the setup placements are edited without pause:
   each editor changes its placement's policy (PickN: numberOfClusters N+1, N, N+1, ...;
   PickAll: the `gpu` toleration, then a preferred term on and off; `churn_edit`), waits until
   that generation is fully scheduled and edits again (after --churn-pause, default 0), so 100
   edits are always in flight (KubeFleet's 100 concurrent rollouts): the arrivals queue behind
   them. The editors start first; the arrivals begin once every editor's first edit is out.
   churn.p50_s, p90_s, max_s as pickn100; churn.edits: edits sent while the arrivals ran.
   Goal: p90 <= 5 s (KubeFleet: 30 s).
4. resync: every placement workflow gets the `requeue` signal (32 at a time, as the watcher
   sends), at the fan-out key our own full resyncs use (a watcher's start-up signals, the
   reconcile: one key below a placement's own; `--resync-key own`: at the placement's own key,
   as `fleet-scheduler requeue` asks), and 1 s in (--new-after) a new PickN placement is
   created.
   resync.redecided_s: first signal until every placement's `status` query counts one cycle
   more than before (checked once the worker's cycle counter has risen by P, then every
   second; resync.counted_s is when the counter had); resync.new_placement_s: the new one's
   create to fully scheduled (when the bench's watch saw it so, however long the resync goes
   on after). Goals: <= 60 s (KubeFleet: 11 min 15 s) and <= 5 s. --trace prints the history
   events of the new placement and of three resynced ones (the first, middle and last
   signalled) as seconds after its create or requeue: where each one waited
   (resync.trace.<who>.<n>.<event type>).

Then on a stack of its own at K = --storm-clusters:

5. storm: P = --storm-placements placements of the mix (storm.setup.*), then
   (a) the anchor cluster `member-00000` changes env prod -> dev: storm.label.cycles (the
   worker's cycle counter), storm.label.quiet_s (until no cycle has finished for 3 s, the 3 s
   not counted), beside what the bench itself computes from the placements it created:
   storm.label.reading_placements: policies that read `env` at all (a required or preferred
   term's label selector, a topology spread key); storm.label.changeable_placements: of those,
   the ones whose required affinity and tolerations admit the cluster before or after the
   change, the only ones whose filter or score of that cluster can differ. An upper bound: it
   does not apply KubeFleet's rule that a fulfilled PickN keeps its picks (it counts them), nor
   ask whether a changed score would reorder anything. storm.label.kubefleet_rule_placements:
   what KubeFleet's cluster watcher would requeue (every PickAll and every PickN short of its
   N; the mix's PickN are all fulfilled once set up). (b) a label no placement reads
   (`bench/unread`) on the same cluster: storm.unread.cycles (goal <= 10), .quiet_s,
   .changeable_placements (0 by the same rule).
6. restart: right after the storm, the watcher process is stopped and started again with the
   same flags. The reconcile its start triggers also acts on the storm's cluster changes since
   its previous run (judged by the profile's requeue hints, as the watcher judged them).
   restart.cycles: cycles the restart caused (goal < 100); restart.quiet_s: from the new
   watcher's start until the reconcile its start triggered has completed (its signals sent)
   and no cycle has finished for 3 s, the 3 s not counted (goal <= 10 s). With the reconcile
   Schedule off (`--scheduler-flag=--reconcile-every=0`) the watcher signals every placement
   itself, which the bench cannot see the end of: then only the cycles say quiet."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any, Final

import aiohttp
import e2e_load as load
from e2e import (
    SIGNAL_CONCURRENCY,
    Cycles,
    _metrics_url,
    compile_bytecode,
    percentile,
    report,
)
from e2e_load import Hub, Tracker, each
from e2e_stack import Child, Stack, run_bench, self_peak_rss_mb
from outage import statuses
from priority import heartbeats
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from scheduler.framework.queue_sort import DEFAULT_PRIORITY_KEY
from workers.temporal_client import TemporalTarget, connect
from workflows import names
from workflows.models import RequeueRequest

PHASES: Final = ("setup", "pickn100", "churn", "resync", "storm", "restart")
FLEET_PHASES: Final = PHASES[:4]
STORM_PHASES: Final = PHASES[4:]
TASK_QUEUE: Final = "bench-kubefleet"
READY: Final = r"^fleet-scheduler run: ready in"
WORKER_FLAGS: Final = ("--components", "workflows,activities", "--processes", "2")
WATCHER_FLAGS: Final = ("--components", "watcher")
CREATE_CONCURRENCY: Final = 48
ARRIVALS: Final = 20
ARRIVAL_GAP_S: Final = 0.5
# The key a fan-out turn of a plain placement asks for: one below its own (docs/priority.md).
FAN_OUT_KEY: Final = DEFAULT_PRIORITY_KEY + 1
CHURN_PLACEMENTS: Final = 100
RESYNC_NEW_AFTER_S: Final = 1.0
TRACE_EVENTS: Final = 14  # --trace: history events shown of each traced workflow
STATUS_ROUND_S: Final = 1.0
METRICS_POLL_S: Final = 0.2
# How long the restart waits for the reconcile its watcher's start triggers before it decides
# there is none (the Schedule turned off with a flag).
RECONCILE_WAIT_S: Final = 120.0
GPU_TOLERATION: Final = {"key": "gpu", "operator": "Exists"}
PICK_ALL_PREFERENCE: Final = {
    "weight": 10,
    "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}},
}
STORM_KEY: Final = "env"
STORM_VALUE: Final = "dev"
UNREAD_LABEL: Final = "bench/unread"
REPO: Final = Path(__file__).resolve().parent.parent


# --- what a policy reads and admits: the bench's own reading, independent of the scheduler ---


def _required_terms(policy: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = (policy.get("affinity") or {}).get("clusterAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return list(required.get("clusterSelectorTerms") or [])


def _preferred_terms(policy: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = (policy.get("affinity") or {}).get("clusterAffinity") or {}
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return [p.get("preference") or {} for p in preferred]


def _selector_keys(selector: dict[str, Any] | None) -> set[str]:
    if not selector:
        return set()
    keys = set(selector.get("matchLabels") or {})
    keys.update(e["key"] for e in selector.get("matchExpressions") or [])
    return keys


def _selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and the four operators); none matches all."""
    if not selector:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        present = key in labels
        if (
            (operator == "In" and not (present and labels[key] in values))
            or (operator == "NotIn" and present and labels[key] in values)
            or (operator == "Exists" and not present)
            or (operator == "DoesNotExist" and present)
        ):
            return False
    return True


def reads(policy: dict[str, Any], key: str) -> bool:
    """Whether any part of the policy looks at label `key` of a cluster."""
    selectors = [t.get("labelSelector") for t in _required_terms(policy)]
    selectors += [t.get("labelSelector") for t in _preferred_terms(policy)]
    spread = {c.get("topologyKey") for c in policy.get("topologySpreadConstraints") or []}
    return key in spread or any(key in _selector_keys(s) for s in selectors)


def _tolerated(policy: dict[str, Any], taint: dict[str, Any]) -> bool:
    for toleration in policy.get("tolerations") or []:
        if toleration.get("key") not in (None, "", taint["key"]):
            continue
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value") == taint.get("value"):
            return True
    return False


def admits(policy: dict[str, Any], labels: dict[str, str], taints: list[dict[str, Any]]) -> bool:
    """Whether a cluster with these labels and taints passes the policy's required terms (any
    one of them) and its tolerations: it is a candidate. Property selectors are not used by the
    mixes here, so they are not read."""
    terms = _required_terms(policy)
    if terms and not any(_selector_matches(t.get("labelSelector"), labels) for t in terms):
        return False
    return all(_tolerated(policy, taint) for taint in taints)


def eligible(policy: dict[str, Any], clusters: list[dict[str, Any]]) -> int:
    return sum(
        admits(policy, c["metadata"].get("labels") or {}, c["spec"].get("taints") or [])
        for c in clusters
    )


def changeable(
    bodies: Iterable[dict[str, Any]],
    key: str,
    before: dict[str, str],
    after: dict[str, str],
    taints: list[dict[str, Any]],
) -> tuple[int, int]:
    """(placements whose policy reads `key`, those of them that admit the cluster before or
    after the change): see the module docstring, phase 5."""
    reading = admitting = 0
    for body in bodies:
        policy = body["spec"]["policy"]
        if not reads(policy, key):
            continue
        reading += 1
        if admits(policy, before, taints) or admits(policy, after, taints):
            admitting += 1
    return reading, admitting


def churn_edit(policy: dict[str, Any], edit: int, pick_n: int) -> dict[str, Any]:
    """The merge patch of a churn editor's edit number `edit` (0, 1, ...) of a mix placement.
    Every edit changes the spec (a new generation). PickN: numberOfClusters N+1, N, N+1, ...
    (one cluster more, then one let go). PickAll: first the `gpu` toleration (the region's or
    env's tainted clusters join), then a preferred term on and off (a new policy, the same
    clusters). Tolerations may only be added (KubeFleet's webhook, devhub's CRD rules), and at
    most 100, so no edit toggles one."""
    if policy["placementType"] == "PickN":
        count = pick_n + 1 if edit % 2 == 0 else pick_n
        return {"spec": {"policy": {"numberOfClusters": count}}}
    if edit == 0:
        return {"spec": {"policy": {"tolerations": [GPU_TOLERATION]}}}
    preferred = [PICK_ALL_PREFERENCE] if edit % 2 == 1 else None
    affinity = {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    return {"spec": {"policy": {"affinity": affinity}}}


# --- one stack -----------------------------------------------------------------------------------


@dataclass
class Deployment:
    """One stack with its fleet, scheduler parts, and the placements the bench made on it."""

    args: argparse.Namespace
    stack: Stack
    hub: Hub
    session: aiohttp.ClientSession
    client: Client
    tracker: Tracker
    cycles: Cycles
    worker: Child
    watcher: Child
    watcher_argv: list[str]
    run_id: str
    fleet: list[dict[str, Any]]
    watcher_metrics: str = ""  # the watcher's /metrics (a restart moves it)
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def clusters_routed(self) -> int:
        """MemberCluster updates the watcher has routed to placements (from its /metrics)."""
        async with self.session.get(self.watcher_metrics) as response:
            response.raise_for_status()
            text = await response.text()
        return sum(
            int(float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines()
            if line.startswith("fleet_scheduler_watcher_events")
            and 'kind="MemberCluster"' in line
            and 'action="signalled"' in line
        )

    def name(self, phase: str, index: int) -> str:
        return f"k{self.run_id}-{phase}-{index:05d}"

    async def create(self, body: dict[str, Any]) -> None:
        self.bodies[body["metadata"]["name"]] = body
        await self.hub.create(load.PLACEMENTS_PATH, body)

    async def wait_scheduled(self, names_: list[str], what: str, generation: int = 1) -> float:
        return await self.tracker.wait_scheduled(names_, self.args.timeout, what, generation)


def git_commit() -> str:
    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *argv], capture_output=True, text=True, check=False
        ).stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def part_flags(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The worker's and the watcher's flags beyond the stack's addresses and task queue."""
    worker = [*WORKER_FLAGS, *args.scheduler_flag, *args.worker_flag]
    watcher = [*WATCHER_FLAGS, *args.scheduler_flag, *args.watcher_flag]
    return worker, watcher


async def start_deployment(
    args: argparse.Namespace, stack: Stack, clusters: int, label: str
) -> Deployment:
    """devhub, Temporal, K clusters, the worker and the watcher, on `stack` (the caller stops
    it, whatever happens here)."""
    stack.start_devhub()
    server = await stack.start_temporal()
    client = await connect(TemporalTarget(server.target, server.namespace))
    hub = Hub(stack.hub_url, stack.token, connections=CREATE_CONCURRENCY + CHURN_PLACEMENTS + 16)
    session = aiohttp.ClientSession()
    deployment: Deployment | None = None
    try:
        fleet = load.fleet(clusters)
        started = time.monotonic()
        await hub.add_clusters(fleet)
        report(f"{label}.clusters_s", time.monotonic() - started)
        worker_flags, watcher_flags = part_flags(args)
        worker = stack.scheduler_part("worker", TASK_QUEUE, *worker_flags)
        watcher = stack.scheduler_part("watcher", TASK_QUEUE, *watcher_flags)
        worker.start(ready=READY)
        watcher.start(ready=READY)
        metrics = _metrics_url(await asyncio.to_thread(worker.wait_ready))
        watcher_metrics = _metrics_url(await asyncio.to_thread(watcher.wait_ready))
        tracker = Tracker(hub)
        await tracker.start()
        deployment = Deployment(
            args=args,
            stack=stack,
            hub=hub,
            session=session,
            client=client,
            tracker=tracker,
            cycles=Cycles(session, metrics),
            worker=worker,
            watcher=watcher,
            watcher_argv=list(watcher.argv),
            run_id=secrets.token_hex(3),
            fleet=fleet,
            watcher_metrics=watcher_metrics,
        )
        return deployment
    finally:
        if deployment is None:
            await session.close()
            await hub.close()


async def stop_deployment(deployment: Deployment | None, stack: Stack, label: str) -> None:
    """Stop everything the stack runs; its processes' peak memory first."""
    if deployment is not None:
        await deployment.tracker.stop()
        if deployment.tracker.errors:
            report(f"{label}.tracker.watch_errors", len(deployment.tracker.errors))
        stack.sample_peaks()
        for child in (deployment.worker, deployment.watcher):
            child.stop()
            report(f"{label}.rss.{child.name}.peak_mb", child.peak_mb or float("nan"))
            for name, peak in sorted(child.descendant_peaks_mb.items()):
                report(f"{label}.rss.{name}.peak_mb", peak)
        await deployment.session.close()
        await deployment.hub.close()
    stack.sample_peaks()
    if stack.devhub is not None and stack.devhub.peak_mb is not None:
        report(f"{label}.rss.devhub.peak_mb", stack.devhub.peak_mb)
    if stack.temporal_peak_mb is not None:
        report(f"{label}.rss.temporal.peak_mb", stack.temporal_peak_mb)
    await stack.stop_all()


# --- phases --------------------------------------------------------------------------------------


async def setup(d: Deployment, prefix: str, count: int) -> list[str]:
    """`count` placements of the mix, created CREATE_CONCURRENCY at a time, all scheduled."""
    names_ = [d.name("m", i) for i in range(count)]
    bodies = [load.region_env_placement(n, i, d.args.pick_n) for i, n in enumerate(names_)]
    before = await d.cycles.count()
    started = time.monotonic()
    await each(bodies, d.create, CREATE_CONCURRENCY)
    created = time.monotonic()
    last = await d.wait_scheduled(names_, f"{prefix}: every placement scheduled")
    report(f"{prefix}.placements", count)
    report(f"{prefix}.create_s", created - started)
    report(f"{prefix}.scheduled_s", last - started)
    report(f"{prefix}.placements_per_s", count / (last - started))
    report(f"{prefix}.bindings", sum(len(d.tracker.placements[n].bindings) for n in names_))
    await d.cycles.quiet()
    report(f"{prefix}.cycles", await d.cycles.count() - before)
    return names_


async def arrivals(d: Deployment, label: str) -> None:
    """ARRIVALS PickN placements of `wide_n` clusters, one every ARRIVAL_GAP_S: each one's
    create to its wide_n-th binding, and to fully scheduled."""
    count = d.args.wide_n_clamped
    names_ = [d.name(label, i) for i in range(ARRIVALS)]
    created: dict[str, float] = {}
    tasks = []
    started = time.monotonic()
    for index, name in enumerate(names_):
        await asyncio.sleep(max(0.0, started + index * ARRIVAL_GAP_S - time.monotonic()))
        created[name] = time.monotonic()
        tasks.append(asyncio.create_task(d.create(load.wide_pick_n(name, count))))
    await asyncio.gather(*tasks)
    await d.tracker.wait(
        lambda n: d.tracker.bound_at(n, count) is not None,
        names_,
        d.args.timeout,
        f"{label}: {count} bindings each",
    )
    await d.wait_scheduled(names_, f"{label}: fully scheduled")
    bound = [(d.tracker.bound_at(n, count) or 0.0) - created[n] for n in names_]
    scheduled = [(d.tracker.scheduled_at(n) or 0.0) - created[n] for n in names_]
    report(f"{label}.placements", ARRIVALS)
    report(f"{label}.clusters_each", count)
    report(f"{label}.p50_s", percentile(bound, 0.50))
    report(f"{label}.p90_s", percentile(bound, 0.90))
    report(f"{label}.max_s", max(bound))
    report(f"{label}.scheduled_p90_s", percentile(scheduled, 0.90))


async def pickn100(d: Deployment, _: list[str]) -> None:
    await arrivals(d, "pickn100")


async def churn(d: Deployment, setup_names: list[str]) -> None:
    chosen = setup_names[:CHURN_PLACEMENTS]
    stop = asyncio.Event()
    edits = 0
    first_round = asyncio.Event()

    async def editor(name: str) -> None:
        nonlocal edits
        policy = d.bodies[name]["spec"]["policy"]
        edit, generation = 0, 1
        while not stop.is_set():
            patch = churn_edit(policy, edit, d.args.pick_n)
            patched = await d.hub.patch(load.PLACEMENTS_PATH, name, patch)
            new = int(patched["metadata"]["generation"])
            if new <= generation:
                raise RuntimeError(f"churn: edit {edit} of {name} left generation {generation}")
            generation = new
            edit += 1
            edits += 1
            if edits >= len(chosen):
                first_round.set()
            await d.wait_scheduled([name], f"churn: {name} generation {new}", new)
            await asyncio.sleep(d.args.churn_pause)

    editors = [asyncio.create_task(editor(n)) for n in chosen]
    try:
        # Every editor has its first edit out before the arrivals start.
        waiting = asyncio.create_task(first_round.wait())
        done, _ = await asyncio.wait(
            [waiting, *editors], timeout=d.args.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if waiting not in done:
            waiting.cancel()
            for task in done:
                task.result()  # an editor that failed says why
            raise TimeoutError("churn: the editors' first round did not go out")
        before, began = edits, time.monotonic()
        await arrivals(d, "churn")
        report("churn.edits", edits - before)
        report("churn.edits_per_s", (edits - before) / (time.monotonic() - began))
        report("churn.editing_placements", len(chosen))
        stop.set()
        await asyncio.gather(*editors)  # each waits for its last edit to be scheduled
    finally:
        stop.set()
        for task in editors:
            task.cancel()
        await asyncio.gather(*editors, return_exceptions=True)


async def resync(d: Deployment, _: list[str]) -> None:
    placements = sorted(d.bodies)
    before: dict[str, int] = {}
    for attempt in range(3):
        found = await statuses(d.client, placements)
        before = {n: s.cycles for n, s in zip(placements, found, strict=True) if s is not None}
        if len(before) == len(placements):
            break
        await asyncio.sleep(STATUS_ROUND_S * (attempt + 1))
    else:
        missing = sorted(set(placements) - set(before))[:5]
        raise RuntimeError(f"resync: no status from {missing} ...")
    await d.cycles.quiet()
    count_before = await d.cycles.count()
    newcomer = d.name("resync-new", 0)
    created_at: list[float] = []
    wall: dict[str, float] = {}  # for --trace: when each workflow was signalled, or created

    async def create_newcomer() -> None:
        await asyncio.sleep(d.args.new_after)
        created_at.append(time.monotonic())
        wall[newcomer] = time.time()
        await d.create(load.region_env_placement(newcomer, 0, d.args.pick_n))

    # Our own full resyncs (a watcher's start-up signals, the reconcile) ask at the fan-out key,
    # one below a placement's own (scheduler.framework.queue_sort.TurnCause.FAN_OUT); a person's
    # `requeue` asks at the placement's own key (--resync-key own).
    key = FAN_OUT_KEY if d.args.resync_key == "fanout" else None
    request = RequeueRequest(reason="bench: full resync", priority=key)
    report("resync.key", d.args.resync_key)

    async def requeue(name: str) -> None:
        wall[name] = time.time()
        await d.client.get_workflow_handle(names.workflow_id(name)).signal(
            names.SIGNAL_REQUEUE, request
        )

    started = time.monotonic()
    creating = asyncio.create_task(create_newcomer())
    await each(placements, requeue, SIGNAL_CONCURRENCY)
    report("resync.placements", len(placements))
    report("resync.signalled_s", time.monotonic() - started)
    deadline = started + d.args.timeout
    while await d.cycles.count() - count_before < len(placements):
        if time.monotonic() > deadline:
            raise TimeoutError("resync: the worker's cycles did not rise by P")
        await asyncio.sleep(METRICS_POLL_S)
    report("resync.counted_s", time.monotonic() - started)
    pending = placements
    while True:
        found = await statuses(d.client, pending)
        pending = [
            n for n, s in zip(pending, found, strict=True) if s is None or s.cycles <= before[n]
        ]
        if not pending:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"resync: {len(pending)} placements ran no new cycle")
        await asyncio.sleep(STATUS_ROUND_S)
    report("resync.redecided_s", time.monotonic() - started)
    await creating
    scheduled = await d.wait_scheduled([newcomer], "resync: the new placement")
    report("resync.new_placement_s", scheduled - created_at[0])
    await d.cycles.quiet()
    report("resync.cycles", await d.cycles.count() - count_before)
    if d.args.trace:
        first, middle, last = placements[0], placements[len(placements) // 2], placements[-1]
        for who, name in (("new", newcomer), ("first", first), ("middle", middle), ("last", last)):
            await trace(d, f"resync.trace.{who}", name, wall[name])


async def trace(d: Deployment, label: str, name: str, since: float) -> None:
    """`name`'s workflow history from wall-clock `since` (its create, or its requeue sent): each
    event's type and seconds after `since`, then when the bench saw it fully scheduled."""
    handle = d.client.get_workflow_handle(names.workflow_id(name))
    events = [e async for e in handle.fetch_history_events()]
    shown = 0
    for event in events:
        at = event.event_time.ToDatetime(UTC).timestamp()
        if at < since - 0.001 or shown >= TRACE_EVENTS:
            continue
        kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()
        report(f"{label}.{shown:02d}.{kind}", at - since)
        shown += 1


async def storm(d: Deployment, setup_names: list[str]) -> None:
    anchor = d.fleet[0]
    assert anchor["metadata"]["name"] == load.ANCHOR
    labels = dict(anchor["metadata"]["labels"])
    taints = anchor["spec"].get("taints") or []
    bodies = [d.bodies[n] for n in setup_names]

    flipped = {**labels, STORM_KEY: STORM_VALUE}
    reading, admitting = changeable(bodies, STORM_KEY, labels, flipped, taints)
    report("storm.label.change", f"{load.ANCHOR}:{STORM_KEY}={labels[STORM_KEY]}->{STORM_VALUE}")
    report("storm.label.reading_placements", reading)
    report("storm.label.changeable_placements", admitting)
    report(
        "storm.label.kubefleet_rule_placements",
        sum(1 for b in bodies if b["spec"]["policy"]["placementType"] == "PickAll"),
    )
    await label_change(d, "storm.label", {STORM_KEY: STORM_VALUE}, routed=admitting > 0)

    unread = {**flipped, UNREAD_LABEL: d.run_id}
    _, admitting = changeable(bodies, UNREAD_LABEL, flipped, unread, taints)
    report("storm.unread.changeable_placements", admitting)
    await label_change(d, "storm.unread", {UNREAD_LABEL: d.run_id})


async def label_change(
    d: Deployment, prefix: str, labels: dict[str, str], *, routed: bool = False
) -> None:
    """The anchor cluster's `labels` changed: cycles, until quiet. With `routed` (the change
    reaches placements), quiet is counted only once the watcher has routed the change: at
    10,000 placements that takes it seconds, and a quiet of 3 s measured from the patch could
    end before the first signal went out (`{prefix}.routed_s` says how long it took)."""
    await d.cycles.quiet()
    before = await d.cycles.count()
    reconciled = await completed_reconciles(d)
    signalled = await d.clusters_routed()
    started = time.monotonic()
    await d.hub.patch(load.CLUSTERS_PATH, load.ANCHOR, {"metadata": {"labels": labels}})
    if routed:
        # bounded by: the phase's --timeout
        while await d.clusters_routed() == signalled:
            if time.monotonic() - started > d.args.timeout:
                raise TimeoutError(f"{prefix}: the watcher routed no cluster update")
            await asyncio.sleep(METRICS_POLL_S)
        report(f"{prefix}.routed_s", time.monotonic() - started)
    routed_at = time.monotonic()
    if d.args.storm_reconcile_after is not None:
        await asyncio.sleep(d.args.storm_reconcile_after)
        schedule = d.client.get_schedule_handle(names.reconcile_schedule_id(TASK_QUEUE))
        await schedule.trigger()
    last = await d.cycles.quiet(since=routed_at)
    report(f"{prefix}.cycles", await d.cycles.count() - before)
    report(f"{prefix}.quiet_s", max(0.0, last - started))
    # A reconcile run (its Schedule, every 5 minutes) that lands inside the storm also judges
    # the change: counted, so a run that met one says so.
    report(f"{prefix}.reconciles", await completed_reconciles(d) - reconciled)


async def restart(d: Deployment, _: list[str]) -> None:
    """The watcher restart, right after the storm: the reconcile its start triggers also sees
    the storm's cluster changes since the previous run (and judges them with the profile's
    requeue hints, as the watcher did)."""
    await d.cycles.quiet()
    reconciled_before = await completed_reconciles(d)
    before = await d.cycles.count()
    d.watcher.stop()
    report("restart.old_watcher_rss_peak_mb", d.watcher.peak_mb or float("nan"))
    watcher = d.stack.spawn("watcher-restarted", d.watcher_argv)
    began = time.monotonic()
    watcher.start(ready=READY)
    d.watcher = watcher
    d.watcher_metrics = _metrics_url(await asyncio.to_thread(watcher.wait_ready))
    ready = time.monotonic()
    report("restart.ready_s", ready - began)
    reconciled = await reconcile_done(d, reconciled_before, ready)
    report("restart.reconcile_s", float("nan") if reconciled is None else reconciled - began)
    last = await d.cycles.quiet(since=reconciled or ready)
    report("restart.cycles", await d.cycles.count() - before)
    report("restart.quiet_s", last - began)


def _reconciles_query() -> str:
    return (
        f"WorkflowType = '{names.RECONCILE_WORKFLOW}' AND TaskQueue = '{TASK_QUEUE}' "
        "AND ExecutionStatus = 'Completed'"
    )


async def completed_reconciles(d: Deployment) -> int:
    return (await d.client.count_workflows(_reconciles_query())).count


async def reconcile_done(d: Deployment, completed_before: int, since: float) -> float | None:
    """When (monotonic) a reconcile run beyond `completed_before` was seen completed; None if
    none has within RECONCILE_WAIT_S of `since` (the Schedule turned off with a flag)."""
    while await completed_reconciles(d) <= completed_before:
        if time.monotonic() - since > RECONCILE_WAIT_S:
            print("# restart: no reconcile run seen; quiet by cycles alone", file=sys.stderr)
            return None
        await asyncio.sleep(METRICS_POLL_S)
    return time.monotonic()


Phase = Callable[[Deployment, list[str]], Awaitable[None]]


async def run_stack(
    args: argparse.Namespace,
    workdir: Path,
    label: str,
    clusters: int,
    placements: int,
    phases: list[tuple[str, Phase]],
) -> bool:
    """One stack (`label`: "fleet" or "storm"): its setup, then `phases` in order. The first
    failure ends the stack (its state is then unknown), is reported as `<phase>.failed 1`, and
    the run goes on to the next stack."""
    logs = workdir / label
    logs.mkdir()
    stack = Stack(logs, temporal_db=args.temporal_db, server_args=[])
    deployment: Deployment | None = None
    beats: asyncio.Task[None] | None = None
    setup_prefix = "setup" if label == "fleet" else f"{label}.setup"
    current = f"{label}.start"
    began = time.monotonic()
    try:
        deployment = await start_deployment(args, stack, clusters, setup_prefix)
        beats = asyncio.create_task(heartbeats(deployment.hub, clusters))
        report(f"{label}.run_id", deployment.run_id)
        current = setup_prefix
        report(f"machine.load1.before_{current}", os.getloadavg()[0])
        setup_names = await setup(deployment, current, placements)
        report(f"phase.{current}_s", time.monotonic() - began)
        for name, phase in phases:
            current = name
            began = time.monotonic()
            report(f"machine.load1.before_{name}", os.getloadavg()[0])
            await phase(deployment, setup_names)
            report(f"phase.{name}_s", time.monotonic() - began)
    except Exception as exc:
        report(f"{current}.failed", 1)
        print(f"# {current} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return False
    finally:
        if beats is not None:
            beats.cancel()
        await stop_deployment(deployment, stack, label)
    return True


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    compile_bytecode()
    worker_flags, watcher_flags = part_flags(args)
    report("config.commit", git_commit())
    report("config.worker_flags", " ".join(worker_flags))
    report("config.watcher_flags", " ".join(watcher_flags))
    report("config.temporal_db", args.temporal_db)
    report("config.phases", ",".join(p for p in PHASES if p in args.phases))
    report("config.pick_n", args.pick_n)
    ok = True
    fleet_phases: list[tuple[str, Phase]] = [
        (name, phase)
        for name, phase in (("pickn100", pickn100), ("churn", churn), ("resync", resync))
        if name in args.phases
    ]
    if args.phases & set(FLEET_PHASES):
        report("config.clusters", args.clusters)
        report("config.placements", args.placements)
        report("config.wide_n", args.wide_n_clamped)
        ok &= await run_stack(
            args, workdir, "fleet", args.clusters, args.placements, fleet_phases
        )
    if args.phases & set(STORM_PHASES):
        report("config.storm_clusters", args.storm_clusters)
        report("config.storm_placements", args.storm_placements)
        storm_phases: list[tuple[str, Phase]] = [
            (name, phase)
            for name, phase in (("storm", storm), ("restart", restart))
            if name in args.phases
        ]
        ok &= await run_stack(
            args, workdir, "storm", args.storm_clusters, args.storm_placements, storm_phases
        )
    report("machine.load1.end", os.getloadavg()[0])
    report("rss.bench.peak_mb", self_peak_rss_mb())
    return ok


def check_fleet(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every PickN of the mix must find N+1 candidates (the churn raises N by one), or it would
    never be fully scheduled; the arrivals' N is clamped to the untainted clusters."""
    sizes = []
    if args.phases & set(FLEET_PHASES):
        sizes.append(("--clusters", args.clusters, args.placements))
    if args.phases & set(STORM_PHASES):
        sizes.append(("--storm-clusters", args.storm_clusters, args.storm_placements))
    for flag, clusters, placements in sizes:
        fleet = load.fleet(clusters)
        for index in range(min(placements, 300)):  # the mix repeats within 300
            policy = load.region_env_placement("x", index, args.pick_n)["spec"]["policy"]
            if policy["placementType"] != "PickN":
                continue
            found = eligible(policy, fleet)
            if found < args.pick_n + 1:
                parser.error(
                    f"{flag} {clusters}: placement {index} of the mix has {found} candidate "
                    f"clusters, fewer than --pick-n + 1 = {args.pick_n + 1}; use more clusters"
                )
    args.wide_n_clamped = args.wide_n
    if args.phases & {"pickn100", "churn"}:
        untainted = eligible(load.wide_pick_n("x", 1)["spec"]["policy"], load.fleet(args.clusters))
        if untainted < args.wide_n:
            print(
                f"# --wide-n {args.wide_n} clamped to {untainted}: the untainted clusters of "
                f"--clusters {args.clusters}",
                file=sys.stderr,
            )
            args.wide_n_clamped = untainted


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000, metavar="K")
    parser.add_argument("--placements", type=int, default=1000, metavar="P")
    parser.add_argument("--storm-clusters", type=int, default=100, metavar="K")
    parser.add_argument("--storm-placements", type=int, default=10000, metavar="P")
    parser.add_argument("--pick-n", type=int, default=10, metavar="N",
                        help="numberOfClusters of the mix's PickN placements (default 10)")
    parser.add_argument("--wide-n", type=int, default=100, metavar="N",
                        help="numberOfClusters of the pickn100 and churn arrivals (default 100; "
                             "clamped to the untainted clusters)")
    parser.add_argument("--resync-key", choices=("fanout", "own"), default="fanout",
                        help="the key the resync's requeues ask for: the fan-out key our own "
                             "resyncs use (default), or each placement's own")
    parser.add_argument("--new-after", type=float, default=RESYNC_NEW_AFTER_S, metavar="S",
                        help="resync: create the new placement S seconds after the first "
                             "requeue (default %(default)s)")
    parser.add_argument("--churn-pause", type=float, default=0.0, metavar="S",
                        help="churn: each editor's pause between one edit scheduled and the "
                             "next (default 0: 100 edits always in flight)")
    parser.add_argument("--only", default="", help=f"comma-separated phases to run: {PHASES}")
    parser.add_argument("--skip", default="", help="comma-separated phases to skip")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds any one wait may take (default 1800)")
    parser.add_argument("--temporal-db", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--scheduler-flag", action="append", default=[], metavar="FLAG",
                        help="one more `fleet-scheduler run` flag for the worker and the "
                             "watcher (repeatable), e.g. --scheduler-flag=--local-cycles-up-to=200")
    parser.add_argument("--worker-flag", action="append", default=[], metavar="FLAG",
                        help="one more flag for the worker only (repeatable)")
    parser.add_argument("--watcher-flag", action="append", default=[], metavar="FLAG",
                        help="one more flag for the watcher only (repeatable)")
    parser.add_argument("--storm-reconcile-after", type=float, default=None, metavar="S",
                        help="storm: trigger the reconcile Schedule S seconds after each label "
                             "change, as its 5-minute run may land inside a storm")
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    parser.add_argument("--trace", action="store_true",
                        help="resync: print the history events of the new placement and of three "
                             "resynced ones, as seconds after their create or requeue signal")
    args = parser.parse_args(argv)
    only = {p for p in args.only.split(",") if p}
    skip = {p for p in args.skip.split(",") if p}
    unknown = (only | skip) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; choose from {PHASES}")
    args.phases = (only or set(PHASES)) - skip
    if not args.phases:
        parser.error("no phase left to run")
    if min(args.clusters, args.placements, args.storm_clusters, args.storm_placements) < 1:
        parser.error("cluster and placement counts must be at least 1")
    if args.pick_n < 1 or args.wide_n < 1:
        parser.error("--pick-n and --wide-n must be at least 1")
    check_fleet(parser, args)
    return args


def main() -> int:
    args = parse_args()
    return run_bench('kubefleet_report', functools.partial(run, args), keep=args.keep)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip finalisation (temporalio/sdk-python#300), as fleet-scheduler does
