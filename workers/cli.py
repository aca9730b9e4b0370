"""The `fleet-scheduler` command line: one function per subcommand, registered in COMMANDS.

Each subcommand is a pair: `add_<name>_arguments(parser)` declares its flags and `run_<name>(args)`
runs it and returns the exit code. Adding a subcommand is adding one pair and one COMMANDS row;
`main` knows nothing else. Long-running subcommands run until SIGINT/SIGTERM and then stop what
they started."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

__all__ = ["COMMANDS", "Command", "main", "wait_for_signal"]

log = logging.getLogger("fleet_scheduler.cli")

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 1
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def wait_for_signal(signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> str:
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
                        help="load deploy/samples/fleet.yaml and keep its heartbeats fresh")


def run_devhub(args: argparse.Namespace) -> int:
    from devhub import DevHub

    hub = DevHub(host=args.host, port=args.port, data_dir=args.data_dir, token=args.token)
    try:
        hub.start()
    except OSError as exc:
        print(f"fleet-scheduler devhub: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        return EXIT_FAILED
    try:
        path = hub.write_kubeconfig(args.kubeconfig_out)
        if args.sample_fleet:
            names = hub.load_sample_fleet()
            print(f"sample fleet: {len(names)} member clusters, heartbeats refreshed every minute")
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


COMMANDS: dict[str, Command] = {
    "devhub": Command(
        help="run devhub, the local hub API server, alone",
        add_arguments=add_devhub_arguments,
        run=run_devhub,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleet-scheduler",
        description="KubeFleet's hub scheduler on Temporal: one durable workflow per placement.",
    )
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    return COMMANDS[args.command].run(args)


if __name__ == "__main__":
    sys.exit(main())
