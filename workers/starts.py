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

from workflows import names

__all__ = ["local_cycles_for", "start_options"]


def start_options(placement: str, task_queue: str) -> dict[str, Any]:
    """Keyword arguments of a start of `placement`'s workflow on `task_queue`.

    A running workflow is used as it is; a closed one (the placement was deleted, then created
    again under the same name) starts anew. The name is set as a search attribute at start, so
    the UI lists the workflow by placement before its first turn."""
    return {
        "id": names.workflow_id(placement),
        "task_queue": task_queue,
        "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
        "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        "search_attributes": TypedSearchAttributes(
            [SearchAttributePair(names.SA_PLACEMENT_NAME, placement)]
        ),
        "static_summary": f"placement {placement}",
    }


def local_cycles_for(clusters: int, up_to: int) -> bool:
    """The `local_cycles` a starter or signaller sends (workflows.models.HubEvent) for a fleet
    of `clusters` member clusters when local cycles are on for fleets of at most `up_to`
    (docs/operations.md, "Local cycles"). False when they are off (`up_to` 0): turning them
    off moves placements told otherwise back to the activity queue."""
    if up_to < 0:
        raise ValueError(f"up_to must not be negative, got {up_to}")
    return bool(up_to) and clusters <= up_to
