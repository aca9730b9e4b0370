"""What the `fleet-scheduler` subcommands share: exit codes, one-line errors, stop signals, and
the flags every command spells the same way (hub, Temporal, placement, scheduler)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any, Final

from temporalio.client import (
    Client,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.plumbing import ActivitySettings
from control.admission import TARGET_WAIT_S
from control.config import (
    ADMISSION_AUTO,
    DEFAULT_ADMISSION_WINDOW,
    DEFAULT_MAX_CACHED_WORKFLOWS,
    DEFAULT_MAX_CONCURRENT_ACTIVITIES,
    AdmissionWindowSetting,
    RunConfig,
    TemporalFlags,
    parse_admission_window,
)
from control.schedules import (
    DEFAULT_RECONCILE_EVERY,
)
from hub.client import HubClient
from hub.names import FLEET_SYSTEM_NAMESPACE
from hub.validation import is_dns1123_label
from scheduler import Profile, ProfileError, load_profile
from workers.devserver import (
    DEFAULT_NAMESPACE,
)
from workers.metrics import SchedulerMetrics
from workers.temporal_client import (
    DEFAULT_TEMPORAL_ADDRESS,
    TemporalTarget,
    load_target,
)
from workers.versioning import WorkerVersion
from workflows import names
from workflows.models import (
    PlacementStatus,
)

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


# A signal or query is one round trip; a query also waits for a worker to answer it.
RPC_TIMEOUT: Final = timedelta(seconds=10)
BUILD_ID_ENV: Final = "FLEET_BUILD_ID"  # `run --build-id`


# What the server says when a signal reaches a workflow that has completed.
COMPLETED_MESSAGE: Final = "already completed"


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


class CliError(Exception):
    """A problem the user can fix (bad input, nothing listening, no such placement): printed as
    one line, exit code 2, no traceback."""


def one_line(exc: BaseException) -> str:
    # An OSError built as OSError(errno, message) prints "[Errno 98] message": the number says
    # nothing to a person that the message does not.
    shown = str(exc)
    if isinstance(exc, OSError) and exc.strerror and exc.filename is None:
        shown = exc.strerror
    return " ".join(shown.split()) or type(exc).__name__


def self_command() -> str:
    """How the user ran us, for the hints we print (e.g. `.venv/bin/fleet-scheduler`)."""
    invoked = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if invoked is None or invoked.name != PROG:
        return PROG
    with contextlib.suppress(ValueError):
        return str(invoked.resolve().relative_to(Path.cwd()))
    return str(invoked)


def install_stop_handlers(stop: asyncio.Event) -> Callable[[], None]:
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


def profile_from_file(path: Path | None) -> Profile | None:
    if path is None:
        return None
    if not path.is_file():
        raise CliError(f"scheduler config (--config) {str(path)!r} does not exist")
    try:
        return load_profile(path)
    except ProfileError as exc:
        raise CliError(f"scheduler config (--config) {str(path)!r}: {one_line(exc)}") from exc


# Where a parse records which spelling of a flag set each destination (Spelled, DeprecatedAlias).
_SPELLINGS = "_flag_spellings"

def _record_spelling(
    parser: argparse.ArgumentParser, namespace: argparse.Namespace, dest: str, spelling: str
) -> bool:
    """Whether this is the first time the command line sets `dest`. Two spellings of one flag
    in one command line are refused, whichever comes first: the last would win silently, and a
    script mixing them may not mean what it gets."""
    spellings: dict[str, str] = getattr(namespace, _SPELLINGS, None) or {}
    earlier = spellings.get(dest)
    if earlier is not None and earlier != spelling:
        parser.error(f"{earlier} and {spelling} are the same flag; give it once")
    spellings[dest] = spelling
    setattr(namespace, _SPELLINGS, spellings)
    return earlier is None


class Spelled(argparse._StoreAction):
    """The current spelling of a flag that has a DeprecatedAlias: stores as usual, and refuses
    the alias in the same command line."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _record_spelling(parser, namespace, self.dest, self.option_strings[0])
        super().__call__(parser, namespace, values, option_string)


class DeprecatedAlias(argparse.Action):
    """An old spelling of a flag, kept for the deploy manifests and scripts that use it: it
    stores into the new flag's destination and says once on stderr what to write instead.
    Given together with the new spelling (action=Spelled), it is a usage error."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, instead: str,
                 **kwargs: Any) -> None:
        self.instead = instead
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        spelling = option_string or self.option_strings[0]
        if _record_spelling(parser, namespace, self.dest, spelling):
            deprecated(spelling, self.instead)  # once, however often it is repeated
        setattr(namespace, self.dest, values if self.nargs != 0 else self.const)


def deprecated(old: str, instead: str) -> None:
    """One line on stderr: `old` (a flag, or flags) still works; `instead` is how to say it."""
    verb = "are" if " " in old.strip() and old.startswith("-") and " -" in old else "is"
    print(f"{PROG}: {old} {verb} deprecated; use {instead}", file=sys.stderr, flush=True)


def add_temporal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--temporal-address", default=None, metavar="HOST:PORT",
        help="Temporal frontend (default: $TEMPORAL_ADDRESS, the Temporal config profile, or "
             f"{DEFAULT_TEMPORAL_ADDRESS})",
    )
    parser.add_argument(
        "--temporal-namespace", default=None, metavar="NAMESPACE", action=Spelled,
        help="Temporal namespace (default: $TEMPORAL_NAMESPACE, the Temporal config profile, or "
             f"{DEFAULT_NAMESPACE})",
    )
    parser.add_argument(
        "--namespace", dest="temporal_namespace", action=DeprecatedAlias,
        instead="--temporal-namespace", metavar="NAMESPACE",
        help="deprecated spelling of --temporal-namespace",
    )
    parser.add_argument(
        "--temporal-profile", default=None, metavar="NAME",
        help="profile of the Temporal config file (default: $TEMPORAL_PROFILE or \"default\"); "
             "TLS, mTLS and API keys come from there or from TEMPORAL_* variables",
    )


def temporal_flags(args: argparse.Namespace) -> TemporalFlags:
    return TemporalFlags(
        address=args.temporal_address,
        namespace=args.temporal_namespace,
        profile=args.temporal_profile,
    )


def temporal_target(args: argparse.Namespace) -> TemporalTarget:
    flags = temporal_flags(args)
    return load_target(address=flags.address, namespace=flags.namespace, profile=flags.profile)


def add_scheduler_arguments(parser: argparse.ArgumentParser, *, metrics_port: int) -> None:
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
    parser.add_argument("--local-cycles-up-to", type=int, default=None, metavar="CLUSTERS",
                        help="for experiments: force where placement turns run, as local "
                             "activities in the workflow worker while the fleet has at most this "
                             "many member clusters, on the activity queue above (0: always on "
                             "the queue). Default: the workers choose turn by turn from the "
                             "fleet's size and the turn times they measure "
                             "(docs/operations.md, \"Where turns run\")")
    parser.add_argument("--admission-window", type=admission_window,
                        default=DEFAULT_ADMISSION_WINDOW, metavar="auto|off|N",
                        help="turns of placements not yet scheduled that the watcher lets into "
                             "Temporal at once, per priority key and better; the rest wait in "
                             "its outbox in priority and fairness order (docs/priority.md, "
                             "\"Admission\"). auto: as many as Temporal drains in "
                             f"{TARGET_WAIT_S:g} s at the rate measured; off or 0: no limit; N: "
                             "at most N. Standalone only: "
                             "beside KubeFleet (--no-snapshotter) auto is no limit and N is "
                             f"refused (default {DEFAULT_ADMISSION_WINDOW})")
    add_decisions_arguments(
        parser,
        "publish each placement's decisions as KEP-5313 PlacementDecisions (docs/decisions.md; "
        "default: on standalone, off with --no-snapshotter)",
    )
    parser.add_argument("--no-resource-placements", action="store_true",
                        help="do not schedule namespaced ResourcePlacements (KubeFleet's "
                             "--enable-resource-placement=false); for a hub without their CRDs")


# A Schedule's interval: Temporal counts whole seconds, and a year is longer than anyone means.
MIN_INTERVAL_S: Final = 1.0
MAX_INTERVAL_S: Final = 365 * 24 * 3600.0


def admission_window(value: str) -> AdmissionWindowSetting:
    """`--admission-window`: auto, off, or a whole number (a negative one is refused, with the
    other scheduler flags, by `check_scheduler_arguments`); anything else is a usage error."""
    try:
        return parse_admission_window(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_decisions_arguments(parser: argparse.ArgumentParser, switch_help: str) -> None:
    """`--placement-decisions` (its help says what on means to the command) and where they go:
    `run`, `dev` and `check` take the same three flags."""
    parser.add_argument("--placement-decisions", type=on_off, default=None, metavar="on|off",
                        help=switch_help)
    parser.add_argument("--placement-decisions-namespace", type=namespace_name,
                        default=FLEET_SYSTEM_NAMESPACE, metavar="NS",
                        help="where a ClusterResourcePlacement's PlacementDecisions go (a "
                             "ResourcePlacement's go in its own namespace; default "
                             f"{FLEET_SYSTEM_NAMESPACE})")
    parser.add_argument("--cluster-profile-namespace", type=namespace_name,
                        default=FLEET_SYSTEM_NAMESPACE, metavar="NS",
                        help="the namespace of the ClusterProfiles the decisions reference, one "
                             "per member cluster, of its name (KubeFleet's hub agent keeps them "
                             f"in {FLEET_SYSTEM_NAMESPACE}, the default)")


def on_off(value: str) -> bool:
    """A switch given as on or off (also true/false, yes/no, 1/0), case aside."""
    word = value.strip().lower()
    if word in ("on", "true", "yes", "1"):
        return True
    if word in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {value!r}")


def namespace_name(value: str) -> str:
    """A Kubernetes namespace name (a DNS-1123 label), else a usage error."""
    if not is_dns1123_label(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a namespace name: at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


def interval_seconds(value: str) -> float:
    """A Schedule's interval flag: 0 (off), or 1 second to a year; anything else (negative,
    NaN, infinite, a fraction of a second, centuries) is a usage error before anything starts."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if seconds == 0 or MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        return seconds
    raise argparse.ArgumentTypeError(
        f"expected a number of seconds, 0 or more (0: off; else {MIN_INTERVAL_S:g} to "
        f"{MAX_INTERVAL_S:.0f}, a year), got {value!r}"
    )


def add_reconcile_argument(parser: argparse.ArgumentParser, *, off: str) -> None:
    parser.add_argument("--reconcile-every", type=interval_seconds, metavar="SECONDS",
                        default=DEFAULT_RECONCILE_EVERY.total_seconds(),
                        help="run the reconcile safety net, which repairs what hub events "
                             "missed, this often, as the Temporal Schedule "
                             f"{names.RECONCILE_SCHEDULE_ID} (created or updated; default "
                             f"{DEFAULT_RECONCILE_EVERY.total_seconds():g}); 0: {off}, and a "
                             "watcher start signals every placement instead")


# `--fairness` without --config: KubeFleet's default profile with PrioritySort's fairness on.
FAIR_PROFILE: Final = (
    "name: DefaultProfileFair\n"
    "pluginConfig: [{name: PrioritySort, args: {fairness: {enabled: true}}}]\n"
)


def scheduler_profile(config: RunConfig) -> Profile | None:
    """The profile the config names: its file, else the fair profile with `fairness`, else None
    (KubeFleet's default)."""
    profile = profile_from_file(config.profile_file)
    if profile is None and config.fairness:
        return load_profile(FAIR_PROFILE)
    return profile


def activity_settings(config: RunConfig, metrics: SchedulerMetrics) -> ActivitySettings:
    return ActivitySettings(
        snapshotter=config.snapshotter,
        profile=scheduler_profile(config),
        metrics=metrics,
        decisions=config.decisions,
    )


def scheduler_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunConfig fields of the flags `add_scheduler_arguments`, `add_reconcile_argument`
    and `--fairness` declare, checked."""
    check_scheduler_arguments(args)
    return {
        "task_queue": args.task_queue,
        "snapshotter": not args.no_snapshotter,
        "profile_file": args.config,
        "fairness": args.fairness,
        "resource_placements": not args.no_resource_placements,
        "placement_decisions": args.placement_decisions,
        "decisions_namespace": args.placement_decisions_namespace,
        "cluster_profile_namespace": args.cluster_profile_namespace,
        "local_cycles_up_to": args.local_cycles_up_to,
        "admission_window": args.admission_window,
        "max_concurrent_activities": args.max_concurrent_activities,
        "max_cached_workflows": args.max_cached_workflows,
        "metrics_port": args.metrics_port,
        "reconcile_every_s": args.reconcile_every,
        "log_level": args.log_level,
    }


def check_port(value: int, flag: str) -> None:
    if not 0 <= value <= MAX_PORT:
        raise CliError(f"{flag} {value} is not a port number (0-{MAX_PORT})")


def check_scheduler_arguments(args: argparse.Namespace) -> None:
    check_port(args.metrics_port, "--metrics-port")
    if args.max_cached_workflows < 0:
        raise CliError(
            f"--max-cached-workflows must be 0 or more, got {args.max_cached_workflows}"
        )
    if args.max_concurrent_activities < 1:
        raise CliError(
            f"--max-concurrent-activities must be at least 1, got {args.max_concurrent_activities}"
        )
    if args.local_cycles_up_to is not None and args.local_cycles_up_to < 0:
        raise CliError(f"--local-cycles-up-to must be 0 or more, got {args.local_cycles_up_to}")
    window = args.admission_window
    if window != ADMISSION_AUTO and window < 0:
        raise CliError(
            f"--admission-window must be 0 or more, got {window} (or {ADMISSION_AUTO}; off is 0)"
        )
    # A fixed window needs the Scheduled condition our turns write. `auto` is the watcher's own
    # choice, and beside KubeFleet it chooses no window: were auto the default, a bare
    # --no-snapshotter must not be refused.
    if window != ADMISSION_AUTO and window > 0 and args.no_snapshotter:
        raise CliError(
            "--admission-window needs the Scheduled condition our snapshotter's turns write; "
            "beside KubeFleet (--no-snapshotter) there is no window (docs/priority.md)"
        )


# `fleet-scheduler dev` with no flags is `make run`: these defaults are the Makefile's.
DEV_RUN_DIR: Final = Path(".run")


# Where `make run` writes its kubeconfig, relative to the repository root it runs in.
DEV_KUBECONFIG: Final = DEV_RUN_DIR / "kubeconfig"


def worker_version(args: argparse.Namespace) -> WorkerVersion | None:
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


def hub_client(
    kubeconfig: Path | None, context: str | None, *, local_default: bool = False
) -> HubClient:
    path = hub_kubeconfig(kubeconfig, local_default=local_default)
    if path is None:
        return HubClient.from_env(context)
    if not path.is_file():
        raise CliError(f"kubeconfig {str(path)!r} does not exist; pass the hub's "
                       "kubeconfig with --kubeconfig, or omit it to use in-cluster config")
    return HubClient.from_kubeconfig(path, context)


def add_placement_argument(
    parser: argparse.ArgumentParser, *, optional: str | None = None
) -> None:
    """NAME, with kubectl's `-n NAMESPACE` for a ResourcePlacement (`--temporal-namespace` is
    Temporal's namespace, in every command that talks to Temporal). `optional`: NAME may be
    left out, and this says what the command then covers."""
    what = ("the placement's name: a ClusterResourcePlacement's, or with -n a "
            "ResourcePlacement's")
    if optional is None:
        parser.add_argument("name", help=what)
    else:
        parser.add_argument("name", nargs="?", default=None, help=f"{what} (default: {optional})")
    parser.add_argument(
        "-n", "--placement-namespace", dest="placement_namespace", default=None,
        metavar="NAMESPACE",
        help="the ResourcePlacement NAME in this hub namespace (as kubectl's -n; without it, "
             "NAME is a ClusterResourcePlacement)",
    )


def placement_workflow_id(name: str, namespace: str | None = None) -> str:
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


def placement_args(workflow_id: str) -> str:
    """How a command line names the placement of `workflow_id`: `NAME` or `-n NAMESPACE NAME`."""
    namespace, name = names.placement_of(workflow_id)
    return f"-n {namespace} {name}" if namespace else name


def described(workflow_id: str) -> str:
    namespace, name = names.placement_of(workflow_id)
    if namespace:
        return f"ResourcePlacement named {name!r} in hub namespace {namespace!r}"
    return f"ClusterResourcePlacement named {name!r}"


def rpc_problem(exc: RPCError, workflow_id: str, namespace: str) -> CliError:
    if exc.status == RPCStatusCode.NOT_FOUND and COMPLETED_MESSAGE in exc.message:
        return CliError(
            f"{workflow_id} has finished: its placement was deleted and cleaned up, so there is "
            f"nothing to requeue (`{self_command()} explain "
            f"{placement_args(workflow_id)}` still shows its last cycle)"
        )
    if exc.status == RPCStatusCode.NOT_FOUND:
        return CliError(
            f"no placement workflow {workflow_id} in Temporal namespace {namespace}: is there a "
            f"{described(workflow_id)}, and is the watcher ({PROG} run or dev) running?"
        )
    if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
        return CliError(
            f"no worker answered for {workflow_id} within {RPC_TIMEOUT.total_seconds():g}s: is "
            f"{PROG} run (or dev) running for Temporal namespace {namespace}?"
        )
    return CliError(f"{workflow_id}: {exc.message}")


async def query_status(client: Client, workflow_id: str, namespace: str) -> PlacementStatus:
    handle = client.get_workflow_handle(workflow_id)
    try:
        status: PlacementStatus = await handle.query(
            names.QUERY_STATUS, result_type=PlacementStatus, rpc_timeout=RPC_TIMEOUT
        )
    except RPCError as exc:
        raise rpc_problem(exc, workflow_id, namespace) from exc
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as exc:
        raise CliError(f"the status query of {workflow_id} failed: {one_line(exc)}") from exc
    return status


def positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value!r}")
    return seconds


def add_local_hub_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig and --context of the commands a person runs, which find `make run`'s hub."""
    parser.add_argument("--kubeconfig", type=Path, default=None, metavar="PATH",
                        help="the hub's kubeconfig (default: $KUBECONFIG; else "
                             f"{DEV_KUBECONFIG} when it exists in the current directory, as "
                             "`make run` writes it in the repository root; else the pod's "
                             "service account, or ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")


def add_hub_and_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """What `plan` and `rebalance` read: the hub, and the profile the cycles would use."""
    add_local_hub_arguments(parser)
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="the scheduler's configuration: a profile YAML of plugins and scoring "
                             "(default: KubeFleet's default profile)")
