"""`fleet-scheduler requeue`: one more turn for a placement now; with `--wait`, the turn's
result."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any, Final

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from hub.errors import (
    HubConfigError,
    HubError,
    NotFoundError,
)
from hub.kinds import kinds_for
from workers.cli.common import (
    COMPLETED_MESSAGE,
    EXIT_FAILED,
    EXIT_OK,
    PROG,
    RPC_TIMEOUT,
    CliError,
    add_local_hub_arguments,
    add_placement_argument,
    add_temporal_arguments,
    described,
    hub_client,
    one_line,
    placement_args,
    placement_workflow_id,
    positive_seconds,
    rpc_problem,
    self_command,
    temporal_target,
)
from workers.temporal_client import (
    connect,
)
from workflows import names
from workflows.models import (
    PlacementInput,
    RequeueRequest,
    RequeueResult,
)
from workflows.placement import CLOSING_ERROR
from workflows.starts import start_options

WAIT_TIMEOUT_S: Final = 60.0  # `requeue --wait`
CLOSING_RETRY_S: Final = 0.2  # `requeue --wait` reached a run that is ending: send again




def add_requeue_arguments(parser: argparse.ArgumentParser) -> None:
    add_placement_argument(parser)
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
    parser.add_argument("--timeout", type=positive_seconds, default=WAIT_TIMEOUT_S,
                        help=f"--wait: give up after this many seconds "
                             f"(default {WAIT_TIMEOUT_S:g})")
    parser.add_argument("--task-queue", default=names.DEFAULT_TASK_QUEUE,
                        help="--wait: where a workflow it has to start runs "
                             f"(default {names.DEFAULT_TASK_QUEUE})")
    add_local_hub_arguments(parser)
    add_temporal_arguments(parser)


async def _requeue(args: argparse.Namespace) -> int:
    workflow_id = placement_workflow_id(args.name, args.placement_namespace)
    client = await connect(temporal_target(args))
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
                f"the hub at {unknown} has no {described(workflow_id)}: nothing was requeued "
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
        raise rpc_problem(exc, workflow_id, client.namespace) from exc
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
        hub = hub_client(args.kubeconfig, args.context, local_default=True)
    except (CliError, HubConfigError) as exc:
        return None, one_line(exc)
    try:
        hub.get(
            kinds_for(args.placement_namespace).placement, args.name,
            namespace=args.placement_namespace,
        )
    except NotFoundError:
        return False, hub.host
    except (HubError, OSError) as exc:
        return None, f"{hub.host}: {one_line(exc)}"
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
    workflow_id = placement_workflow_id(args.name, namespace)
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
                f"running?); `{self_command()} explain {placement_args(workflow_id)}` shows "
                "where it is"
            ) from None
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            closing = isinstance(cause, ApplicationError) and cause.type == CLOSING_ERROR
            if not closing or time.monotonic() >= deadline:
                raise CliError(f"the requeue of {workflow_id} failed: {one_line(exc)}") from exc
            await asyncio.sleep(CLOSING_RETRY_S)
        except RPCError as exc:
            problem = rpc_problem(exc, workflow_id, client.namespace)
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
