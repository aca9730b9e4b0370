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
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from control.telemetry import TelemetryConfigError, shutdown_tracing
from hub.errors import HubConfigError
from scheduler import ProfileError
from workers.cli.check import add_check_arguments, run_check
from workers.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    LOG_FORMAT,
    PROG,
    CliError,
    Command,
    one_line,
)
from workers.cli.dev import add_dev_arguments, run_dev
from workers.cli.devhub import add_devhub_arguments, run_devhub
from workers.cli.explain import add_explain_arguments, run_explain
from workers.cli.plan import PlacementFileError, add_plan_arguments, run_plan
from workers.cli.rebalance import add_rebalance_arguments, run_rebalance
from workers.cli.requeue import add_requeue_arguments, run_requeue
from workers.cli.run import add_run_arguments, run_run
from workers.cli.status import add_status_arguments, run_status
from workers.devserver import DevServerError, SearchAttributeError
from workers.temporal_client import TemporalConfigError, TemporalUnavailableError

__all__ = ["COMMANDS", "build_parser", "execute", "main"]

log = logging.getLogger("fleet_scheduler.cli")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


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
        help="what-if: schedule a placement from a file against the live fleet, or compare a "
             "candidate profile with the current one on every placement (--all); writes nothing",
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
    parser.add_argument("--log-level", default="INFO", choices=LOG_LEVELS, help="default INFO")
    # Also after the command (`fleet-scheduler run ... --log-level DEBUG`, as error lines
    # suggest): there it overrides the one before, and is absent when not given.
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--log-level", default=argparse.SUPPRESS, choices=LOG_LEVELS,
                       help="default INFO (also accepted before the command)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_arguments(
            sub.add_parser(name, help=command.help, description=command.help, parents=[after])
        )
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
        print(f"{PROG} {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        log.debug("%s failed", args.command, exc_info=True)
        print(
            f"{PROG} {args.command}: failed: {type(exc).__name__}: {one_line(exc)} "
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
