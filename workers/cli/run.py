"""`fleet-scheduler run`: the worker, the watcher and the activity processes against a real hub
and Temporal, as the components of one RunConfig (workers.config)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Final

from control.schedules import (
    ensure_rebalance_schedule,
    ensure_reconcile_schedule,
)
from control.telemetry import setup_tracing
from scheduler.rebalance import PACK, STRATEGIES
from workers.cli.common import (
    BUILD_ID_ENV,
    EXIT_OK,
    PROG,
    CliError,
    activity_settings,
    add_reconcile_argument,
    add_scheduler_arguments,
    add_temporal_arguments,
    check_scheduler_arguments,
    hub_client,
    install_stop_handlers,
    temporal_target,
    worker_version,
)
from workers.devserver import (
    LOOPBACK,
    ensure_search_attributes,
)
from workers.metrics import SchedulerMetrics, sdk_metrics_runtime
from workers.processes import ActivityProcesses, available_cpus, exit_with_parent
from workers.temporal_client import (
    connect,
)
from workers.versioning import DEFAULT_DEPLOYMENT_NAME
from workers.worker import (
    serve,
)
from workflows import names

DEFAULT_METRICS_PORT: Final = 8080  # `run` in a pod: the port the probes and Prometheus use


ALL_INTERFACES: Final = "0.0.0.0"  # a pod's probes and Prometheus come from outside loopback


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, default=None, metavar="PATH",
                        help="the hub's kubeconfig (default: $KUBECONFIG, the pod's service "
                             "account, or ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    add_temporal_arguments(parser)
    add_scheduler_arguments(parser, metrics_port=DEFAULT_METRICS_PORT)
    parser.add_argument("--metrics-host", default=ALL_INTERFACES,
                        help=f"interface for /metrics and the probes (default {ALL_INTERFACES})")
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument("--no-watcher", action="store_true",
                       help="run only the worker (the watcher runs elsewhere)")
    parts.add_argument("--no-worker", action="store_true",
                       help="run only the watcher (workers run elsewhere)")
    parts.add_argument("--activities-only", action="store_true",
                       help="run only activities (cycles and cleanups): a worker of the "
                            "activity task queue, beside workflow workers that run elsewhere")
    parser.add_argument("--no-activities", action="store_true",
                        help="run no activities here: the workflow worker only, beside activity "
                             "workers that run elsewhere (`--activities-only`)")
    parser.add_argument("--processes", type=int, default=None, metavar="N",
                        help="activity-worker processes to start, each with its own cluster "
                             "cache (default: the cores this process may use, its container's "
                             f"CPU limit included, here {available_cpus()}); 0: run the "
                             "activities in this process")
    add_reconcile_argument(parser, off="do not manage it")
    parser.add_argument("--rebalance-every", type=float, metavar="SECONDS", default=0.0,
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


async def _run(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    remove_handlers = install_stop_handlers(stop)
    orphaned = asyncio.create_task(exit_with_parent(stop))
    metrics = SchedulerMetrics()
    try:
        settings = activity_settings(args, metrics)
        target = temporal_target(args)
        version = worker_version(args)
        hub = hub_client(args.kubeconfig, args.context)
        try:
            runtime, metrics.sdk_metrics_url = sdk_metrics_runtime()
            client = await connect(target, runtime=runtime)
            # Workflows and the watcher use the search attributes; activity workers (every
            # child of --processes among them) neither need them nor register them again.
            if not args.activities_only:
                added = await ensure_search_attributes(client, target.namespace)
                if added:
                    print(f"registered search attributes {', '.join(added)} in Temporal "
                          f"namespace {target.namespace}", flush=True)
            reconcile = args.reconcile_every > 0 and not args.activities_only
            if reconcile:
                schedule_id = await ensure_reconcile_schedule(
                    client, args.task_queue, timedelta(seconds=args.reconcile_every),
                    standalone=settings.snapshotter,
                    local_cycles_up_to=args.local_cycles_up_to,
                    resource_placements=not args.no_resource_placements,
                )
                print(f"reconcile Schedule {schedule_id}: every {args.reconcile_every:g}s",
                      flush=True)
            if args.rebalance_every > 0 and not args.activities_only:
                schedule_id = await ensure_rebalance_schedule(
                    client, args.task_queue, timedelta(seconds=args.rebalance_every),
                    args.rebalance_strategy,
                )
                print(f"rebalance Schedule {schedule_id}: {args.rebalance_strategy} every "
                      f"{args.rebalance_every:g}s", flush=True)
            children = _activity_processes(args)
            await serve(
                client,
                hub,
                stop,
                task_queue=args.task_queue,
                settings=settings,
                metrics=metrics,
                run_worker=not (args.no_worker or args.activities_only),
                run_watcher=not (args.no_watcher or args.activities_only),
                run_activities=args.processes == 0 and not (args.no_worker or args.no_activities),
                activity_processes=children,
                health_host=args.metrics_host,
                health_port=args.metrics_port,
                max_concurrent_activities=args.max_concurrent_activities,
                max_cached_workflows=args.max_cached_workflows,
                local_cycles_up_to=args.local_cycles_up_to,
                admission_window=args.admission_window,
                resource_placements=not args.no_resource_placements,
                on_ready=lambda serving: print(
                    f"{PROG} run: ready in {serving.ready_after_s:.1f}s; hub {hub.host}, "
                    f"Temporal {target.describe()}, task queue "
                    f"{serving.task_queue}, metrics {serving.metrics_url}, worker version "
                    f"{version.label if version is not None else 'unversioned'}",
                    flush=True,
                ),
                version=version,
                reconcile_at_start=reconcile,
            )
        finally:
            hub.close()
    finally:
        orphaned.cancel()
        remove_handlers()
    print(f"{PROG} run: stopped", flush=True)
    return EXIT_OK


def _activity_processes(args: argparse.Namespace) -> ActivityProcesses | None:
    """The children `run --processes N` starts: each `run --activities-only --processes 0` with
    this command's hub, Temporal and scheduler settings, /metrics on a free loopback port.
    None for `--processes 0` (which `run_run` makes the default of a process running no
    activities)."""
    if args.processes == 0:
        return None
    argv = [sys.executable, "-m", "workers.cli", "--log-level", args.log_level, "run",
            "--activities-only", "--processes", "0", "--reconcile-every", "0",
            "--task-queue", args.task_queue, "--metrics-host", LOOPBACK, "--metrics-port", "0",
            "--max-concurrent-activities", str(args.max_concurrent_activities)]
    flags = {
        "--kubeconfig": args.kubeconfig, "--context": args.context,
        "--temporal-address": args.temporal_address, "--namespace": args.namespace,
        "--temporal-profile": args.temporal_profile, "--config": args.config,
        "--build-id": args.build_id, "--deployment-name": args.deployment_name,
    }
    for flag, value in flags.items():
        if value is not None:
            argv += [flag, str(value)]
    if args.no_snapshotter:
        argv.append("--no-snapshotter")
    return ActivityProcesses(argv, args.processes)


def run_run(args: argparse.Namespace) -> int:
    check_scheduler_arguments(args)
    if args.processes is not None and args.processes < 0:
        raise CliError(f"--processes must be 0 or more, got {args.processes}")
    for flag, on in (("--no-worker", args.no_worker), ("--no-activities", args.no_activities)):
        if on and args.processes:
            raise CliError(f"--processes starts activity workers; {flag} runs none")
    if args.no_activities and args.activities_only:
        raise CliError("--no-activities and --activities-only leave nothing to run")
    if args.processes is None:
        args.processes = 0 if args.no_worker or args.no_activities else available_cpus()
    setup_tracing("worker")
    return asyncio.run(_run(args))
