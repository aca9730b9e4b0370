"""`fleet-scheduler check`: the invariants on the live hub and Temporal (docs/invariants.md)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from temporalio.service import RPCError

from activities.decisions import DecisionSettings
from control.check import check_fleet, render_check
from hub.errors import HubError
from workers.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    add_decisions_arguments,
    add_hub_and_profile_arguments,
    add_temporal_arguments,
    hub_client,
    one_line,
    profile_from_file,
    temporal_target,
)
from workers.temporal_client import (
    connect,
)
from workflows import names


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    add_hub_and_profile_arguments(parser)
    add_temporal_arguments(parser)
    parser.add_argument("--task-queue", default=names.DEFAULT_TASK_QUEUE,
                        help=f"the placement workflows' task queue (default "
                             f"{names.DEFAULT_TASK_QUEUE})")
    parser.add_argument("--hub-only", action="store_true",
                        help="check the hub alone: not whether every placement has its "
                             "workflow and every workflow its placement")
    parser.add_argument("--no-resource-placements", action="store_true",
                        help="leave namespaced ResourcePlacements out (a hub without them)")
    add_decisions_arguments(
        parser,
        "check that PlacementDecisions say what the bindings say (docs/decisions.md); default: "
        "when the hub holds any of ours. Give the namespaces the scheduler runs with",
    )

def run_check(args: argparse.Namespace) -> int:
    return asyncio.run(_check(args))


async def _check(args: argparse.Namespace) -> int:
    """Exit 0 when every invariant holds, 1 when any is broken; a CliError (exit 2, one line)
    when what they read could not be read."""
    profile = profile_from_file(args.config)
    client = None if args.hub_only else await connect(temporal_target(args))
    hub = hub_client(args.kubeconfig, args.context, local_default=True)
    try:
        state, violations = await check_fleet(
            hub,
            client,
            args.task_queue,
            profile=profile,
            resource_placements=not args.no_resource_placements,
            decisions=DecisionSettings(
                namespace=args.placement_decisions_namespace,
                profile_namespace=args.cluster_profile_namespace,
            ),
            decisions_checked=args.placement_decisions,
        )
    except HubError as exc:
        # Unreachable, refused, a kind it does not serve, an object our model cannot read: the
        # invariants were not checked, which is not a violation (exit 2, not 1).
        raise CliError(f"cannot read the hub at {hub.host}: {one_line(exc)}") from exc
    except RPCError as exc:
        namespace = client.namespace if client is not None else ""
        raise CliError(
            f"cannot list workflows in Temporal namespace {namespace}: {exc.message}"
        ) from exc
    except Exception as exc:
        # Exit 1 says "violations" and nothing else: whatever else stops the check is said
        # as not checked (the traceback with --log-level DEBUG).
        raise CliError(f"could not check: {type(exc).__name__}: {one_line(exc)}") from exc
    finally:
        hub.close()
    sys.stdout.write(render_check(state, violations))
    return EXIT_FAILED if violations else EXIT_OK
