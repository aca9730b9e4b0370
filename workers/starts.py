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

__all__ = ["start_options"]


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
