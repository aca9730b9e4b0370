"""`fleet-scheduler run`: the worker, the watcher and the activity processes against a real hub
and Temporal, as the components of one RunConfig (control.config).

Which parts run is one flag, `--components` (workflows, activities, watcher; all three by
default), and where the activities run follows from it: beside another component they run in
`--processes` child processes, one per core by default, so cycles (pure Python) use every core;
alone (an activity Deployment's pod, scaled by pods) they run in this process. The children are
this RunConfig made a child's (`RunConfig.for_child`) and written back as flags (`run_argv`,
the inverse of `run_config`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Final

from temporalio.client import Client

from control.config import (
    ALL_COMPONENTS,
    DEFAULT_DEPLOYMENT_NAME,
    Component,
    HubFlags,
    RunConfig,
    VersionFlags,
)
from control.schedules import ensure_rebalance_schedule, ensure_reconcile_schedule
from control.telemetry import setup_tracing
from scheduler.moves.rebalance import PACK, STRATEGIES
from workers.cli.common import (
    BUILD_ID_ENV,
    EXIT_OK,
    PROG,
    CliError,
    activity_settings,
    add_reconcile_argument,
    add_scheduler_arguments,
    add_temporal_arguments,
    deprecated,
    hub_client,
    install_stop_handlers,
    interval_seconds,
    scheduler_fields,
    temporal_flags,
)
from workers.devserver import ensure_search_attributes
from workers.metrics import SchedulerMetrics, sdk_metrics_runtime
from workers.processes import ActivityProcesses, available_cpus, exit_with_parent
from workers.temporal_client import connect, load_target
from workers.versioning import worker_version
from workers.worker import serve
from workflows import names

DEFAULT_METRICS_PORT: Final = 8080  # `run` in a pod: the port the probes and Prometheus use
ALL_INTERFACES: Final = "0.0.0.0"  # a pod's probes and Prometheus come from outside loopback
# The switches `--components` replaced, and the components each leaves out or keeps.
_LEAVES_OUT: Final = {
    "no_watcher": ("--no-watcher", frozenset({Component.WATCHER})),
    "no_activities": ("--no-activities", frozenset({Component.ACTIVITIES})),
}
_KEEPS_ONLY: Final = {
    "no_worker": ("--no-worker", frozenset({Component.WATCHER})),
    "activities_only": ("--activities-only", frozenset({Component.ACTIVITIES})),
}


def _components(value: str) -> frozenset[Component]:
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    known = {c.value for c in Component}
    unknown = [part for part in chosen if part not in known]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(sorted(known))}, got {value!r}"
        )
    return frozenset(Component(part) for part in chosen)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, default=None, metavar="PATH",
                        help="the hub's kubeconfig (default: $KUBECONFIG, the pod's service "
                             "account, or ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    add_temporal_arguments(parser)
    parser.add_argument("--components", type=_components, default=None, metavar="LIST",
                        help="the parts to run, comma-separated: workflows (the workflow "
                             "worker), activities (turns and cleanups), watcher (default: all "
                             "three)")
    parser.add_argument("--processes", type=int, default=None, metavar="N",
                        help="activity-worker processes to start, each with its own cluster "
                             "cache (default: when activities run beside another component, "
                             "the cores this process may use, its container's CPU limit "
                             f"included, here {available_cpus()}; when they run alone or not "
                             "at all, 0); 0: run the activities in this process")
    add_scheduler_arguments(parser, metrics_port=DEFAULT_METRICS_PORT)
    parser.add_argument("--fairness", action="store_true",
                        help="share turns fairly between tenants: without --config, "
                             "PrioritySort sends fairness keys (docs/priority.md); the Temporal "
                             "server needs matching.enableFairness")
    parser.add_argument("--metrics-host", default=ALL_INTERFACES,
                        help=f"interface for /metrics and the probes (default {ALL_INTERFACES})")
    add_reconcile_argument(parser, off="do not manage it")
    parser.add_argument("--rebalance-every", type=interval_seconds, metavar="SECONDS", default=0.0,
                        help="propose rebalance moves this often, as the Temporal Schedule "
                             f"{names.REBALANCE_SCHEDULE_ID} (docs/capacity.md; created or "
                             "updated); default 0: off, the Schedule is not managed")
    parser.add_argument("--rebalance-strategy", choices=STRATEGIES, default=PACK,
                        help="what the Schedule's runs do: pack (free whole clusters, the "
                             "default) or spread (even out utilisation)")
    versioning = parser.add_argument_group(
        "worker versioning (docs/operations.md, Upgrades with running workflows)")
    versioning.add_argument("--build-id", default=os.environ.get(BUILD_ID_ENV) or None,
                            metavar="ID",
                            help="poll as this version of a Temporal Worker Deployment "
                                 f"(default: ${BUILD_ID_ENV}; unset: an unversioned worker)")
    versioning.add_argument("--deployment-name", default=DEFAULT_DEPLOYMENT_NAME, metavar="NAME",
                            help=f"the Worker Deployment (default {DEFAULT_DEPLOYMENT_NAME})")
    versioning.add_argument("--no-promote", action="store_true",
                            help="do not make this version current when it is up (you ramp "
                                 "and promote with `temporal worker deployment ...`)")
    old = parser.add_argument_group("deprecated spellings of --components")
    old.add_argument("--no-watcher", action="store_true",
                     help="deprecated: --components workflows,activities")
    old.add_argument("--no-worker", action="store_true", help="deprecated: --components watcher")
    old.add_argument("--activities-only", action="store_true",
                     help="deprecated: --components activities")
    old.add_argument("--no-activities", action="store_true",
                     help="deprecated: leave activities out of --components")


def _chosen_components(args: argparse.Namespace) -> frozenset[Component]:
    used = [flag for dest, (flag, _) in (_LEAVES_OUT | _KEEPS_ONLY).items() if getattr(args, dest)]
    if args.components is not None:
        if used:
            raise CliError(f"--components and {used[0]} both choose the components; "
                           "give --components alone")
        return frozenset(args.components)
    components = ALL_COMPONENTS
    keeps = [entry for dest, entry in _KEEPS_ONLY.items() if getattr(args, dest)]
    if len(keeps) > 1:
        raise CliError(f"{keeps[0][0]} and {keeps[1][0]} leave nothing to run")
    if keeps:
        components = keeps[0][1]
    for dest, (_, left_out) in _LEAVES_OUT.items():
        if getattr(args, dest):
            components = components - left_out
    if used and components:
        deprecated(" ".join(used), f"--components {','.join(sorted(c.value for c in components))}")
    if not components:
        raise CliError(f"{' and '.join(used)} leave nothing to run")
    return components


def run_config(args: argparse.Namespace) -> RunConfig:
    """`run`'s flags, checked, as the RunConfig every part of the process receives."""
    components = _chosen_components(args)
    activities = Component.ACTIVITIES in components
    processes = args.processes
    if processes is None:
        processes = available_cpus() if activities and len(components) > 1 else 0
    if processes < 0:
        raise CliError(f"--processes must be 0 or more, got {processes}")
    if processes and not activities:
        raise CliError(f"--processes starts activity workers; --components "
                       f"{','.join(sorted(c.value for c in components))} runs none")
    config = RunConfig(
        components=components,
        processes=processes,
        metrics_host=args.metrics_host,
        rebalance_every_s=args.rebalance_every,
        rebalance_strategy=args.rebalance_strategy,
        hub=HubFlags(args.kubeconfig, args.context),
        temporal=temporal_flags(args),
        version=VersionFlags(args.build_id, args.deployment_name, not args.no_promote),
        **scheduler_fields(args),
    )
    try:
        worker_version(config.version)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    return config


def run_argv(config: RunConfig) -> list[str]:
    """The command line that runs `config`: `run_config` of its parse is `config` again (a
    property test holds it). The health server is always on in `run` (metrics_port not None)."""
    if config.metrics_port is None:
        raise ValueError("`run` always serves /metrics: give a metrics port (0: a free one)")
    values: dict[str, object | None] = {
        "--components": ",".join(sorted(c.value for c in config.components)),
        "--processes": config.processes,
        "--task-queue": config.task_queue,
        "--metrics-host": config.metrics_host,
        "--metrics-port": config.metrics_port,
        "--max-concurrent-activities": config.max_concurrent_activities,
        "--max-cached-workflows": config.max_cached_workflows,
        "--local-cycles-up-to": config.local_cycles_up_to,
        "--admission-window": config.admission_window,
        "--reconcile-every": repr(config.reconcile_every_s),
        "--rebalance-every": repr(config.rebalance_every_s),
        "--rebalance-strategy": config.rebalance_strategy,
        "--deployment-name": config.version.deployment_name,
        "--kubeconfig": config.hub.kubeconfig,
        "--context": config.hub.context,
        "--temporal-address": config.temporal.address,
        "--temporal-namespace": config.temporal.namespace,
        "--temporal-profile": config.temporal.profile,
        "--config": config.profile_file,
        "--build-id": config.version.build_id,
        "--placement-decisions": (
            None
            if config.placement_decisions is None
            else ("on" if config.placement_decisions else "off")
        ),
        "--placement-decisions-namespace": config.decisions_namespace,
        "--cluster-profile-namespace": config.cluster_profile_namespace,
    }
    # flag=value in one word: a value may begin with "-" (a task queue "-blue").
    argv = [sys.executable, "-m", "workers.cli", f"--log-level={config.log_level}", "run"]
    argv += [f"{flag}={value}" for flag, value in values.items() if value is not None]
    switches = {
        "--no-snapshotter": not config.snapshotter,
        "--no-resource-placements": not config.resource_placements,
        "--fairness": config.fairness,
        "--no-promote": not config.version.promote,
    }
    return argv + [flag for flag, on in switches.items() if on]


async def _keep_schedules(client: Client, config: RunConfig) -> None:
    if config.reconciles:
        schedule_id = await ensure_reconcile_schedule(
            client, config.task_queue, timedelta(seconds=config.reconcile_every_s),
            standalone=config.snapshotter,
            local_cycles_up_to=config.local_cycles_up_to,
            resource_placements=config.resource_placements,
        )
        print(f"reconcile Schedule {schedule_id}: every {config.reconcile_every_s:g}s",
              flush=True)
    if config.rebalance_every_s > 0 and config.manages_schedules:
        schedule_id = await ensure_rebalance_schedule(
            client, config.task_queue, timedelta(seconds=config.rebalance_every_s),
            config.rebalance_strategy,
        )
        print(f"rebalance Schedule {schedule_id}: {config.rebalance_strategy} every "
              f"{config.rebalance_every_s:g}s", flush=True)


async def _run(config: RunConfig) -> int:
    stop = asyncio.Event()
    remove_handlers = install_stop_handlers(stop)
    orphaned = asyncio.create_task(exit_with_parent(stop))
    metrics = SchedulerMetrics()
    try:
        settings = activity_settings(config, metrics)
        target = load_target(
            address=config.temporal.address,
            namespace=config.temporal.namespace,
            profile=config.temporal.profile,
        )
        version = worker_version(config.version)
        hub = hub_client(config.hub.kubeconfig, config.hub.context)
        try:
            runtime, metrics.sdk_metrics_url = sdk_metrics_runtime()
            client = await connect(target, runtime=runtime)
            # Workflows and the watcher use the search attributes; activity workers (every
            # child of --processes among them) neither need them nor register them again.
            if config.manages_schedules:
                added = await ensure_search_attributes(client, target.namespace)
                if added:
                    print(f"registered search attributes {', '.join(added)} in Temporal "
                          f"namespace {target.namespace}", flush=True)
            await _keep_schedules(client, config)
            children = (
                ActivityProcesses(run_argv(config.for_child()), config.processes)
                if config.processes
                else None
            )
            await serve(
                client,
                hub,
                stop,
                config,
                settings=settings,
                metrics=metrics,
                activity_processes=children,
                on_ready=lambda serving: print(
                    f"{PROG} run: ready in {serving.ready_after_s:.1f}s; hub {hub.host}, "
                    f"Temporal {target.describe()}, task queue "
                    f"{serving.task_queue}, metrics {serving.metrics_url}, worker version "
                    f"{version.label if version is not None else 'unversioned'}",
                    flush=True,
                ),
            )
        finally:
            hub.close()
    finally:
        orphaned.cancel()
        remove_handlers()
    print(f"{PROG} run: stopped", flush=True)
    return EXIT_OK


def run_run(args: argparse.Namespace) -> int:
    config = run_config(args)
    setup_tracing("worker")
    return asyncio.run(_run(config))
