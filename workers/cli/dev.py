"""`fleet-scheduler dev` (`make run`): devhub, the Temporal dev server with its UI, the worker and
the watcher, locally, until SIGINT/SIGTERM/SIGHUP; then everything it started is stopped."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final

import yaml
from temporalio.client import (
    Client,
)
from temporalio.runtime import Runtime

from control.config import LOOPBACK, HubFlags, RunConfig
from control.schedules import (
    ensure_reconcile_schedule,
    remove_reconcile_schedule,
)
from control.telemetry import setup_tracing
from hub.client import HubClient
from hub.errors import (
    AlreadyExistsError,
)
from hub.kinds import placement_key, split_key
from hub.types import ClusterResourcePlacement, Namespace, ResourcePlacement
from hub.types.meta import HubObject
from workers.cli.common import (
    DEV_RUN_DIR,
    DEVHUB_DIR,
    EXIT_FAILED,
    EXIT_OK,
    PROG,
    CliError,
    activity_settings,
    add_reconcile_argument,
    add_scheduler_arguments,
    check_port,
    install_stop_handlers,
    one_line,
    scheduler_fields,
    self_command,
)
from workers.cli.devhub import DEV_HUB_PORT, local_stack
from workers.devserver import (
    FAIRNESS_DYNAMIC_CONFIG,
    DevServer,
    DevServerExited,
    port_is_free,
)
from workers.metrics import SchedulerMetrics, sdk_metrics_runtime
from workers.temporal_client import (
    DEFAULT_TEMPORAL_ADDRESS,
    TemporalTarget,
    connect,
)
from workers.worker import (
    Serving,
    serve,
)

if TYPE_CHECKING:
    from devhub import DevHub

log = logging.getLogger(__name__)



# `dev` on a laptop: a fixed port (the OpenTelemetry Prometheus exporter's), so a bookmark or a
# local Prometheus scrape config keeps working from one run to the next.
DEV_METRICS_PORT: Final = 9464
DEV_TEMPORAL_PORT: Final = 7233
DEV_UI_PORT: Final = 8233
# The Temporal dev server exited under a running dev: how long a worker error waits for that
# exit to show (the error is then the exit's), and how long the worker and watcher then get to
# stop before they are cancelled.
SERVER_EXIT_GRACE_S: Final = 2.0
SERVE_STOP_S: Final = 15.0




def add_dev_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig-out", type=Path, default=DEV_RUN_DIR / "kubeconfig",
                        metavar="PATH",
                        help="where to write a kubeconfig for the devhub "
                             f"(default {DEV_RUN_DIR / 'kubeconfig'})")
    parser.add_argument("--hub-port", type=int, default=DEV_HUB_PORT, metavar="N",
                        help=f"devhub port, HTTP and HTTPS on one port (default {DEV_HUB_PORT})")
    parser.add_argument("--temporal-port", type=int, default=DEV_TEMPORAL_PORT, metavar="N",
                        help="Temporal dev server frontend (gRPC) port, 0: a free one "
                             f"(default {DEV_TEMPORAL_PORT})")
    parser.add_argument("--ui-port", type=int, default=DEV_UI_PORT, metavar="N",
                        help=f"Temporal web UI port, 0: a free one (default {DEV_UI_PORT})")
    keep = parser.add_mutually_exclusive_group()
    keep.add_argument("--data-dir", type=Path, default=DEV_RUN_DIR, metavar="DIR",
                      help="keep state across restarts: DIR/devhub for the hub, "
                           f"DIR/temporal.db for Temporal (default {DEV_RUN_DIR})")
    keep.add_argument("--in-memory", dest="data_dir", action="store_const", const=None,
                      help="keep nothing: every start is a new hub and a new Temporal")
    parser.add_argument("--sample-fleet", action=argparse.BooleanOptionalAction, default=True,
                        help="load the sample fleet (devhub/samples/fleet.yaml) and keep its "
                             "heartbeats fresh (default on)")
    parser.add_argument("--sample-placements", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="apply the sample placements (devhub/samples/placements.yaml; "
                             "skips existing ones; default on)")
    parser.add_argument("--fairness", action="store_true",
                        help="share turns fairly between tenants: the Temporal server runs "
                             f"with {FAIRNESS_DYNAMIC_CONFIG}=true, and without --config "
                             "PrioritySort sends fairness keys (docs/priority.md)")
    add_reconcile_argument(parser, off="no Schedule (one an earlier dev left is deleted)")
    add_scheduler_arguments(parser, metrics_port=DEV_METRICS_PORT)


# What a placements file may hold: the placements, and namespaces for ResourcePlacements.
SAMPLE_KINDS: Final[tuple[type[HubObject], ...]] = (
    Namespace,
    ClusterResourcePlacement,
    ResourcePlacement,
)


def read_placements(path: Path | None = None) -> list[HubObject]:
    """The placements (ClusterResourcePlacements, ResourcePlacements) and namespaces in a YAML
    file, in its order (other kinds are an error); by default the sample placements."""
    path = path or local_stack().sample.SAMPLE_PLACEMENTS
    try:
        documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"cannot read placements from {str(path)!r}: {one_line(exc)}") from exc
    objects: list[HubObject] = []
    by_kind = {kind.KIND: kind for kind in SAMPLE_KINDS}
    for doc in documents:
        kind = by_kind.get(str(doc.get("kind"))) if isinstance(doc, dict) else None
        if kind is None:
            found = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            raise CliError(f"{path}: only {', '.join(by_kind)} documents are supported, "
                           f"found {found!r}")
        objects.append(kind.from_wire(doc))
    return objects


def placement_keys(objects: Sequence[HubObject]) -> list[str]:
    """The keys of the placements among `objects` (`<name>`, `<namespace>/<name>`)."""
    return [
        placement_key(o.metadata.namespace, o.name)
        for o in objects
        if isinstance(o, ClusterResourcePlacement)
    ]


def apply_placements(hub: HubClient, objects: Sequence[HubObject]) -> list[str]:
    """Create each object unless one of that name exists; returns the keys of the placements
    created."""
    created = []
    for obj in objects:
        try:
            hub.create(obj)
        except AlreadyExistsError:
            continue  # a restarted `dev --data-dir` keeps what the user changed
        created += placement_keys([obj])
    return created


@dataclass
class _DevStack:
    hub: DevHub
    server: DevServer
    client: Client
    hub_client: HubClient
    kubeconfig: Path
    fleet: list[str]
    placements: list[str]  # created now
    samples: list[str]  # every sample placement's name (created now or before)
    # Where each part is, said once everything is ready, in one block with the rest of the
    # ready banner: the log lines of the worker's and watcher's start come before it, not
    # between its lines.
    banner: list[str]


# Every port `dev` listens on: (argument, what listens there, its flag).
DEV_PORTS: Final = (
    ("hub_port", "devhub", "--hub-port"),
    ("temporal_port", "the Temporal dev server", "--temporal-port"),
    ("ui_port", "the Temporal UI", "--ui-port"),
    ("metrics_port", "health and metrics", "--metrics-port"),
)


def _check_dev_ports(args: argparse.Namespace) -> None:
    """Every port `dev` will listen on is free, before it writes anything (a kubeconfig, the
    data dir, devhub's token and certificate): a busy port is then an error that changed
    nothing. Port 0 means any free port; a port taken between this check and the bind is
    still reported by whatever binds it."""
    seen: dict[int, str] = {}
    for name, what, flag in DEV_PORTS:
        port = getattr(args, name)
        if not port:
            continue
        if port in seen:
            raise CliError(f"{seen[port]} and {flag} are both {port}; give each its own port")
        seen[port] = flag
        if not port_is_free(LOOPBACK, port):
            raise CliError(
                f"{what} cannot listen on {LOOPBACK}:{port}: the port is in use; choose another "
                f"{flag} or stop whatever is listening there"
            )


def _dev_server(args: argparse.Namespace) -> DevServer:
    return DevServer(
        port=args.temporal_port,
        ui_port=args.ui_port,
        data_dir=args.data_dir,
        fairness=args.fairness,
    )


async def _start_dev(
    args: argparse.Namespace,
    server: DevServer,
    stack: contextlib.AsyncExitStack,
    runtime: Runtime,
) -> _DevStack:
    data_dir: Path | None = args.data_dir
    local = local_stack()
    # A server an earlier `dev` left on this data dir holds its ports: stop it, then check them
    # all before anything is written.
    await server.stop_stale()
    _check_dev_ports(args)
    hub = local.DevHub(port=args.hub_port, data_dir=data_dir / DEVHUB_DIR if data_dir else None)

    async def start_hub() -> None:
        try:
            await asyncio.to_thread(hub.start)
        except OSError as exc:
            raise CliError(
                f"devhub cannot listen on 127.0.0.1:{args.hub_port}: {exc.strerror or exc}; "
                "choose another --hub-port or stop whatever is listening there"
            ) from exc

    # Undone in reverse order on the way out, whether starting succeeded or not (both stops
    # are safe on something that never started).
    stack.callback(hub.stop)
    stack.push_async_callback(server.stop)
    # The hub is up in a fraction of a second; Temporal takes a few: start both at once.
    results = await asyncio.gather(start_hub(), server.start(), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    kubeconfig = hub.write_kubeconfig(args.kubeconfig_out)
    where = f"data in {data_dir / DEVHUB_DIR}" if data_dir else "in memory"
    banner = [f"devhub:       {hub.tls_url} ({where})", f"kubeconfig:   {kubeconfig}"]
    fleet = hub.load_sample_fleet() if args.sample_fleet else []
    hub_client = HubClient.from_kubeconfig(kubeconfig)
    stack.callback(hub_client.close)
    placements: list[str] = []
    samples: list[str] = []
    if args.sample_placements:
        wanted = read_placements()
        samples = placement_keys(wanted)
        placements = await asyncio.to_thread(apply_placements, hub_client, wanted)
    stored = f"data in {server.db_path}" if server.db_path else "in memory"
    banner.append(f"Temporal:     {server.target}, namespace {server.namespace} ({stored})")
    banner.append(f"Temporal UI:  {server.ui_url}/namespaces/{server.namespace}/workflows")
    client = await connect(TemporalTarget(server.target, server.namespace), runtime=runtime)
    banner.append(await _dev_reconcile_schedule(dev_config(args), client))
    return _DevStack(
        hub, server, client, hub_client, kubeconfig, fleet, placements, samples, banner
    )


async def _dev_reconcile_schedule(config: RunConfig, client: Client) -> str:
    """The reconcile Schedule `run` makes, so missed events are repaired locally too; with
    --reconcile-every 0, none (dev's Temporal is its own: one a previous start made goes).
    Returns the banner's line about it."""
    if config.reconciles:
        schedule_id = await ensure_reconcile_schedule(
            client, config.task_queue, timedelta(seconds=config.reconcile_every_s),
            standalone=config.snapshotter,
            local_cycles_up_to=config.local_cycles_up_to,
            resource_placements=config.resource_placements,
        )
        return f"reconcile:    Temporal Schedule {schedule_id}, every {config.reconcile_every_s:g}s"
    removed = await remove_reconcile_schedule(client, config.task_queue)
    return "reconcile:    off" + (" (the earlier Schedule was deleted)" if removed else "")


def _print_dev_ready(args: argparse.Namespace, dev: _DevStack, serving: Serving) -> None:
    me = self_command()
    temporal = (
        "" if dev.server.target == DEFAULT_TEMPORAL_ADDRESS
        else f" --temporal-address {dev.server.target}"
    )
    namespace, name = split_key(next(iter(dev.placements or dev.samples), "NAME"))
    example = f"-n {namespace} {name}" if namespace else name
    lines = [
        *dev.banner,
        f"metrics:      {serving.metrics_url} (health: {serving.health_url}/healthz, /readyz)",
    ]
    if dev.fleet:
        lines.append(f"sample fleet: {len(dev.fleet)} member clusters")
    if args.sample_placements:
        lines.append(
            f"placements:   {len(dev.placements)} applied from placements.yaml"
            + (f" ({', '.join(dev.placements)})" if dev.placements else " (all existed)")
        )
    lines += [
        f"{PROG} dev: ready in {time.monotonic() - args.started:.1f}s "
        f"(task queue {serving.task_queue}); try:",
        f"  kubectl --kubeconfig {dev.kubeconfig} get crp,crb",
        f"  kubectl --kubeconfig {dev.kubeconfig} get rp,rb -A",
        f"  {me} explain {example}{temporal}",
        f"  {me} requeue {example}{temporal}",
        f"  {me} status{temporal}",
        "Ctrl-C stops everything.",
    ]
    # One write: a log line from another thread cannot land between two of its lines.
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def dev_config(args: argparse.Namespace) -> RunConfig:
    """`dev`'s flags as the RunConfig of its one process: every component, activities in it,
    /metrics on loopback."""
    return RunConfig(
        metrics_host=LOOPBACK,
        hub=HubFlags(args.kubeconfig_out),
        **scheduler_fields(args),
    )


async def _dev(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    remove_handlers = install_stop_handlers(stop)
    config = dev_config(args)
    settings = activity_settings(config, metrics := SchedulerMetrics())
    server = _dev_server(args)
    # The dev server exiting by itself, at any time: said at once, and dev stops.
    died = asyncio.create_task(server.exited())
    try:
        async with contextlib.AsyncExitStack() as stack:
            runtime, metrics.sdk_metrics_url = sdk_metrics_runtime()
            starting = asyncio.create_task(_start_dev(args, server, stack, runtime))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait([starting, stopping, died], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if died.done() and not starting.done():
                _say_exit(died.result())
                await _cancelled(starting)
                return EXIT_FAILED
            if not starting.done():  # stopped while starting: undo what has started
                await _cancelled(starting)
                print(f"{PROG} dev: stopped while starting", flush=True)
                return EXIT_OK
            if starting.exception() is not None and died.done():
                _say_exit(died.result())
                return EXIT_FAILED
            dev = starting.result()
            sys.stdout.flush()
            serving = asyncio.create_task(
                serve(
                    dev.client,
                    dev.hub_client,
                    stop,
                    config,
                    settings=settings,
                    metrics=metrics,
                    on_ready=lambda serving: _print_dev_ready(args, dev, serving),
                )
            )
            await asyncio.wait([serving, died], return_when=asyncio.FIRST_COMPLETED)
            if not died.done() and serving.exception() is not None:
                # What the worker met may be the server going: give its exit a moment to show.
                await asyncio.wait([died], timeout=SERVER_EXIT_GRACE_S)
            if died.done():
                _say_exit(died.result())
                print(f"{PROG} dev: stopping the worker, watcher and devhub", flush=True)
                stop.set()
                await _stopped(serving)
                return EXIT_FAILED
            serving.result()
            print(f"{PROG} dev: stopping the worker, watcher, Temporal and devhub", flush=True)
    finally:
        died.cancel()
        remove_handlers()
    print(f"{PROG} dev: stopped", flush=True)
    return EXIT_OK


async def _cancelled(task: asyncio.Task[object]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _stopped(serving: asyncio.Task[None]) -> None:
    """`serve` after `stop` was set, with the Temporal server gone: its worker may wait on
    calls that cannot succeed, so it has SERVE_STOP_S, then is cancelled; its errors are the
    server's exit's, which is what is said."""
    done, _ = await asyncio.wait([serving], timeout=SERVE_STOP_S)
    if not done:
        await _cancelled(serving)
    elif serving.exception() is not None:
        log.debug("the worker stopped with an error after the dev server exited",
                  exc_info=serving.exception())


def run_dev(args: argparse.Namespace) -> int:
    args.started = time.monotonic()
    for flag in ("hub_port", "temporal_port", "ui_port"):
        check_port(getattr(args, flag), "--" + flag.replace("_", "-"))
    dev_config(args)  # checks the scheduler flags before anything starts
    setup_tracing("dev")
    try:
        return asyncio.run(_dev(args))
    except DevServerExited as exc:  # before it was ready
        _say_exit(exc)
        return EXIT_FAILED


def _say_exit(exc: DevServerExited) -> None:
    """The dev server's exit, its log's last lines on lines of their own (main's error line
    would put them on one)."""
    print(f"{PROG} dev: error: {exc}", file=sys.stderr, flush=True)
