"""`fleet-scheduler status`: placement workflows and their scheduling state."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
from datetime import UTC, datetime, timedelta
from typing import Final

from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError

from workers.cli.common import EXIT_OK, CliError, add_temporal_arguments, temporal_target
from workers.cli.render import PlacementRow, deadline_text, render_status
from workers.temporal_client import (
    connect,
)
from workflows import names
from workflows.models import (
    PlacementStatus,
)

log = logging.getLogger("fleet_scheduler.cli")


STATUS_LIMIT: Final = 500
STATUS_QUERY_CONCURRENCY: Final = 8
STATUS_QUERY_TIMEOUT: Final = timedelta(seconds=5)


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--placement-namespace", dest="placement_namespace", default=None,
                        metavar="NAMESPACE",
                        help="list only the ResourcePlacements of this hub namespace (default: "
                             "every placement of both kinds)")
    parser.add_argument("--all", action="store_true",
                        help="include finished workflows (deleted placements)")
    parser.add_argument("--limit", type=int, default=STATUS_LIMIT, metavar="N",
                        help=f"list at most N placements (default {STATUS_LIMIT})")
    add_temporal_arguments(parser)


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
    deadline = (
        deadline_text(status.deadline, datetime.now(UTC)) if status.deadline is not None else None
    )
    return dataclasses.replace(
        row, cycles=status.cycles, waiting_for=status.waiting_for, deadline=deadline
    )


async def _status(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit must be at least 1, got {args.limit}")
    client = await connect(temporal_target(args))
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
