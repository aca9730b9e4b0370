"""How a placement workflow is started, by whoever starts it (the watcher's signal-with-start,
`fleet-scheduler requeue --wait`'s update-with-start): one id, one set of policies."""

from __future__ import annotations

from typing import Any

from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from hub.kinds import placement_key
from scheduler.framework.queue_sort import QueuePriority
from workflows import names
from workflows.models import TurnExecutionMode, TurnPriority

__all__ = ["start_options", "turn_execution_for", "turn_priority"]


def start_options(
    placement: str,
    task_queue: str,
    namespace: str | None = None,
    priority: TurnPriority | None = None,
) -> dict[str, Any]:
    """Keyword arguments of a start of `placement`'s workflow on `task_queue` (the
    ResourcePlacement `placement` in `namespace` when one is given).

    A running workflow is used as it is; a closed one (the placement was deleted, then created
    again under the same name) starts anew. The name, kind and namespace are set as search
    attributes at start, so the UI lists the workflow by placement before its first turn; with
    a `priority`, so are its priority and tenant, and the workflow's own tasks take the
    placement's key and fairness key (docs/priority.md)."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(names.SA_PLACEMENT_NAME, placement)
    ]
    if namespace:
        pairs += [
            SearchAttributePair(names.SA_PLACEMENT_KIND, names.KIND_RESOURCE_PLACEMENT),
            SearchAttributePair(names.SA_PLACEMENT_NAMESPACE, namespace),
        ]
    else:
        pairs.append(
            SearchAttributePair(names.SA_PLACEMENT_KIND, names.KIND_CLUSTER_RESOURCE_PLACEMENT)
        )
    options: dict[str, Any] = {}
    if priority is not None:
        pairs.append(SearchAttributePair(names.SA_PRIORITY, priority.value))
        if priority.tenant:
            pairs.append(SearchAttributePair(names.SA_TENANT, priority.tenant))
        options["priority"] = TurnPriority.temporal(priority, priority.own_priority_key)
    return options | {
        "id": names.workflow_id(placement, namespace),
        "task_queue": task_queue,
        "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
        "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        "search_attributes": TypedSearchAttributes(pairs),
        "static_summary": f"placement {placement_key(namespace, placement)}",
    }


def turn_priority(own: QueuePriority, turn: QueuePriority | None = None) -> TurnPriority:
    """What a signal tells the workflow of its placement's priority: the key of the turn it
    asks for (`turn`, e.g. a fan-out one key lower; default the placement's `own`), the
    placement's own key (for a person's requeue), fairness, and where the priority came from."""
    asked = own if turn is None else turn
    return TurnPriority(
        priority_key=asked.priority_key,
        own_priority_key=own.priority_key,
        fairness_key=own.fairness_key,
        fairness_weight=own.fairness_weight,
        value=own.value,
        priority_class=own.priority_class,
        tenant=own.tenant,
        problem=own.problem,
        aging_limit=own.aging_limit,
        within_key=asked.within_key or None,
    )


def turn_execution_for(clusters: int | None, up_to: int | None) -> TurnExecutionMode | None:
    """The word a starter or signaller sends (HubEvent.turn_execution): "auto" (the worker
    decides turn by turn) unless `run --local-cycles-up-to N` forces the choice for
    experiments: then "local" for a fleet of at most N member clusters, "queue" above (or with
    N = 0), and no word while the fleet's size is not known (`clusters` None)."""
    if up_to is None:
        return "auto"
    if up_to < 0:
        raise ValueError(f"up_to must not be negative, got {up_to}")
    if clusters is None:
        return None
    return "local" if up_to and clusters <= up_to else "queue"
