"""`fleet-scheduler explain`: a placement's last cycle, every cluster's fate."""

from __future__ import annotations

import argparse
import asyncio
import sys

from temporalio.client import (
    Client,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError

from scheduler import SchedulerError
from workers.cli.common import (
    EXIT_OK,
    RPC_TIMEOUT,
    CliError,
    add_placement_argument,
    add_temporal_arguments,
    one_line,
    placement_workflow_id,
    query_status,
    rpc_problem,
    temporal_target,
)
from workers.cli.render import render_explain
from workers.temporal_client import (
    connect,
)
from workflows import names
from workflows.models import (
    PlacementExplanation,
    PlacementStatus,
)


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    add_placement_argument(parser)
    add_temporal_arguments(parser)


async def query_explanation(
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
        raise rpc_problem(exc, workflow_id, client.namespace) from exc
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as exc:
        if f"Query handler for '{names.QUERY_EXPLANATION}' expected but not found" not in str(exc):
            failed = f"the explanation query of {workflow_id} failed: {one_line(exc)}"
            raise CliError(failed) from exc
        return PlacementExplanation(last=status.last)
    return answer


async def _explain(args: argparse.Namespace) -> int:
    workflow_id = placement_workflow_id(args.name, args.placement_namespace)
    client = await connect(temporal_target(args))
    status = await query_status(client, workflow_id, client.namespace)
    answer = await query_explanation(client, workflow_id, status)
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
