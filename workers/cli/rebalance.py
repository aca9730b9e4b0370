"""`fleet-scheduler rebalance`: plan moves that pack or spread capacity-aware placements and
propose them to their workflows (docs/capacity.md)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from activities.rebalance import RebalancePlan, plan_rebalance, propose
from hub import names as hub_names
from hub.errors import (
    HubUnavailableError,
    UnauthorizedError,
)
from scheduler.moves.rebalance import PACK, STRATEGIES
from workers.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    add_hub_and_profile_arguments,
    add_placement_argument,
    add_temporal_arguments,
    deprecated,
    hub_client,
    one_line,
    placement_workflow_id,
    profile_from_file,
    temporal_target,
)
from workers.cli.render import render_rebalance
from workers.temporal_client import (
    connect,
)
from workflows import names


def add_rebalance_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="print every move with the utilisation of both clusters before and "
                             "after, and write nothing")
    add_placement_argument(parser, optional="every capacity-aware placement")
    parser.add_argument("--placement", dest="old_placement", default=None, metavar="NAME",
                        help="deprecated spelling of NAME")
    parser.add_argument("--strategy", choices=STRATEGIES, default=PACK,
                        help="pack: free whole clusters (default); spread: even out utilisation")
    add_hub_and_profile_arguments(parser)
    add_temporal_arguments(parser)


def _placement(args: argparse.Namespace) -> str | None:
    """The one placement the moves are narrowed to, or None for all."""
    name: str | None = args.name
    if args.old_placement is not None:
        deprecated("--placement NAME", "NAME")
        if name is not None and name != args.old_placement:
            raise CliError(f"two placements named: {name!r} and --placement "
                           f"{args.old_placement!r}; give NAME alone")
        name = args.old_placement
    if name is None:
        if args.placement_namespace is not None:
            raise CliError("-n names a ResourcePlacement's namespace: give its NAME too")
        return None
    namespace = args.placement_namespace
    if namespace is None and "/" in name:  # NAMESPACE/NAME: a ResourcePlacement's spelling
        namespace, _, name = name.rpartition("/")
    if namespace is not None:
        raise CliError(
            f"ResourcePlacement {namespace}/{name}: rebalancing moves "
            "ClusterResourcePlacements only (docs/capacity.md, \"Compaction and rebalancing\")"
        )
    placement_workflow_id(name)  # refuses a malformed name
    return name


def run_rebalance(args: argparse.Namespace) -> int:
    placement = _placement(args)
    profile = profile_from_file(args.config)
    hub = hub_client(args.kubeconfig, args.context, local_default=True)
    try:
        plan = plan_rebalance(hub, args.strategy, profile=profile, placement=placement)
    except (HubUnavailableError, UnauthorizedError) as exc:
        raise CliError(f"cannot read the hub at {hub.host}: {one_line(exc)}") from exc
    finally:
        hub.close()
    if placement is not None and not plan.movable and placement not in plan.skipped:
        raise CliError(
            f"placement {placement!r} has no binding that may move: is it a PickN "
            f"ClusterResourcePlacement annotated {hub_names.REBALANCE_ANNOTATION}: "
            f"{hub_names.REBALANCE_ALLOWED} and {hub_names.REQUESTS_ANNOTATION}?"
        )
    sys.stdout.write(render_rebalance(plan, dry_run=args.dry_run))
    if args.dry_run or not plan.moves:
        return EXIT_OK
    return asyncio.run(_send_moves(args, plan))


async def _send_moves(args: argparse.Namespace, plan: RebalancePlan) -> int:
    client = await connect(temporal_target(args))
    reached, missed = await propose(
        client, plan.moves, f"fleet-scheduler rebalance --strategy {args.strategy}"
    )
    for placement in reached:
        print(f"proposed to {names.workflow_id(placement)}: its next turn makes the moves")
    for placement, why in sorted(missed.items()):
        print(f"not proposed to {placement}: {why}", file=sys.stderr)
    return EXIT_OK if not missed else EXIT_FAILED
