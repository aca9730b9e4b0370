"""Temporal wire names of fleet-scheduler: workflow type, ids, task queue, signals, query, search
attributes.

Every string here is stored in event histories or typed by users and tools (`temporal workflow
signal --name requeue`, the UI's list filter), so a rename breaks running workflows and scripts.
Each is declared once, here, and imported by the workflow, the watcher, the CLI and the tests."""

from __future__ import annotations

from typing import Final

from temporalio.common import SearchAttributeKey

__all__ = [
    "ACTIVITY_CLEANUP_PLACEMENT",
    "ACTIVITY_CLEANUP_PLACEMENT_RP",
    "ACTIVITY_REBALANCE_FLEET",
    "ACTIVITY_RECONCILE_FLEET",
    "ACTIVITY_REPORT_DEADLINE_MISS",
    "ACTIVITY_SCHEDULE_ONCE",
    "ACTIVITY_SCHEDULE_ONCE_RP",
    "ACTIVITY_TASK_QUEUE_SUFFIX",
    "DEFAULT_TASK_QUEUE",
    "KIND_CLUSTER_RESOURCE_PLACEMENT",
    "KIND_RESOURCE_PLACEMENT",
    "PLACEMENT_WORKFLOW",
    "PLACEMENT_WORKFLOWS",
    "PLACEMENT_WORKFLOWS_QUERY",
    "QUERY_EXPLANATION",
    "QUERY_STATUS",
    "REBALANCE_SCHEDULE_ID",
    "REBALANCE_WORKFLOW",
    "RECONCILE_SCHEDULE_ID",
    "RECONCILE_WORKFLOW",
    "RP_PLACEMENT_WORKFLOW",
    "RP_WORKFLOW_ID_PREFIX",
    "SA_CLUSTERS_VERSION",
    "SA_FULLY_SCHEDULED",
    "SA_PATCH_GENERATION",
    "SA_PLACEMENT_KIND",
    "SA_PLACEMENT_NAME",
    "SA_PLACEMENT_NAMESPACE",
    "SA_PLACEMENT_TYPE",
    "SA_PRIORITY",
    "SA_TENANT",
    "SEARCH_ATTRIBUTES",
    "SIGNAL_BINDING_DELETING",
    "SIGNAL_CLUSTER_CHANGED",
    "SIGNAL_MOVE",
    "SIGNAL_PLACEMENT_CHANGED",
    "SIGNAL_PLACEMENT_DELETING",
    "SIGNAL_PRIORITY_CHANGED",
    "SIGNAL_RENEW_RUN",
    "SIGNAL_REQUEUE",
    "SIGNAL_SNAPSHOT_CHANGED",
    "UPDATE_REQUEUE_AND_WAIT",
    "WATCHER_SIGNALS",
    "WORKFLOW_ID_PREFIX",
    "activity_task_queue",
    "cleanup_activity",
    "placement_name",
    "placement_of",
    "placement_workflow",
    "rebalance_schedule_id",
    "reconcile_schedule_id",
    "schedule_once_activity",
    "workflow_id",
    "workflow_id_for_key",
]

# The workflow type: one durable run per ClusterResourcePlacement.
PLACEMENT_WORKFLOW: Final = "PlacementWorkflow"
# ... and per ResourcePlacement: the same workflow under its own type, so that a worker from
# before ResourcePlacements (which would take an RP for the ClusterResourcePlacement of the same
# name) fails its tasks, retried until a worker that knows the type takes them.
RP_PLACEMENT_WORKFLOW: Final = "ResourcePlacementWorkflow"
PLACEMENT_WORKFLOWS: Final = (PLACEMENT_WORKFLOW, RP_PLACEMENT_WORKFLOW)
# The visibility filter of every placement workflow, of both types.
PLACEMENT_WORKFLOWS_QUERY: Final = (
    f"WorkflowType IN ('{PLACEMENT_WORKFLOW}', '{RP_PLACEMENT_WORKFLOW}')"
)

# Activity types: one loop turn, and the cleanup of a deleted placement. The same two for a
# ResourcePlacement, under their own names, so that a worker from before ResourcePlacements
# (which would ignore the request's namespace and act on the ClusterResourcePlacement of the
# same name) refuses the task instead of misreading it.
ACTIVITY_SCHEDULE_ONCE: Final = "schedule_once"
ACTIVITY_CLEANUP_PLACEMENT: Final = "cleanup_placement"
ACTIVITY_SCHEDULE_ONCE_RP: Final = "schedule_once_rp"
ACTIVITY_CLEANUP_PLACEMENT_RP: Final = "cleanup_placement_rp"
# A scheduling deadline's miss reported without a cycle (workflows.deadline); new, so one name
# serves both kinds: a worker from before it refuses the task rather than misreads it.
ACTIVITY_REPORT_DEADLINE_MISS: Final = "report_deadline_miss"


def schedule_once_activity(namespace: str | None) -> str:
    """The turn's activity for a placement: a ResourcePlacement's (namespaced) or a CRP's."""
    return ACTIVITY_SCHEDULE_ONCE_RP if namespace else ACTIVITY_SCHEDULE_ONCE


def cleanup_activity(namespace: str | None) -> str:
    """The cleanup activity for a placement: a ResourcePlacement's or a CRP's."""
    return ACTIVITY_CLEANUP_PLACEMENT_RP if namespace else ACTIVITY_CLEANUP_PLACEMENT


# The reconcile safety net (workers/reconcile.py): a Schedule starts this workflow every few
# minutes; it runs one activity. Its name is ours, so declared here rather than beside it.
RECONCILE_WORKFLOW: Final = "FleetReconcile"
ACTIVITY_RECONCILE_FLEET: Final = "reconcile_fleet"
RECONCILE_SCHEDULE_ID: Final = "fleet-reconcile"
# Rebalancing (docs/capacity.md): the fleet-rebalance Schedule's workflow and activity.
REBALANCE_WORKFLOW: Final = "FleetRebalance"
ACTIVITY_REBALANCE_FLEET: Final = "rebalance_fleet"
REBALANCE_SCHEDULE_ID: Final = "fleet-rebalance"

# Configurable per deployment (`--task-queue`); this is the default of every command.
DEFAULT_TASK_QUEUE: Final = "fleet-scheduler"
# A placement's activities (its cycles and its cleanup) go to a task queue of their own, so that
# they spread over activity-worker processes and hosts while the workflows stay on the workers
# of the workflow task queue: "<task queue>-activities" (`activity_task_queue`).
ACTIVITY_TASK_QUEUE_SUFFIX: Final = "-activities"

# Workflow id = "crp/<placement name>", or "rp/<namespace>/<name>" for a namespaced
# ResourcePlacement. The id is the queue key: Temporal allows one running workflow per id, which
# gives KubeFleet's "a key is never processed twice at once".
WORKFLOW_ID_PREFIX: Final = "crp/"
RP_WORKFLOW_ID_PREFIX: Final = "rp/"

# Signals. `requeue` is the manual one (payload: optional {"fresh": bool, "reason": str}); the
# others are sent by the watcher, one per kind of hub event that reaches a placement
# (kubefleet-rules
# section 7). They are distinct names so a placement's history says why each cycle ran.
SIGNAL_REQUEUE: Final = "requeue"
SIGNAL_SNAPSHOT_CHANGED: Final = "snapshot_changed"  # latest snapshot created or re-annotated
SIGNAL_CLUSTER_CHANGED: Final = "cluster_changed"  # a member cluster changed or left the fleet
SIGNAL_BINDING_DELETING: Final = "binding_deleting"  # a binding got a deletionTimestamp
SIGNAL_PLACEMENT_DELETING: Final = "placement_deleting"  # the placement got a deletionTimestamp
# Standalone mode only: the placement was created or its spec changed, so the snapshotter (which
# runs in the workflow) must look at it; beside KubeFleet this arrives as a snapshot event.
SIGNAL_PLACEMENT_CHANGED: Final = "placement_changed"
# The placement's priority changed (its PriorityClass annotation, a label, a PriorityClass's
# value: docs/priority.md): the workflow records it for its next turn; no turn of its own.
SIGNAL_PRIORITY_CHANGED: Final = "priority_changed"
# Rebalance moves proposed for the placement (`fleet-scheduler rebalance`, the fleet-rebalance
# Schedule; docs/capacity.md): its next turn makes those that still hold.
SIGNAL_MOVE: Final = "move"
# Continue as new at the next idle point, state carried: the reconcile asks it of runs an older
# patch generation began, so that old patches can be retired (workflows.renewal).
SIGNAL_RENEW_RUN: Final = "renew_run"
WATCHER_SIGNALS: Final = (
    SIGNAL_SNAPSHOT_CHANGED,
    SIGNAL_CLUSTER_CHANGED,
    SIGNAL_BINDING_DELETING,
    SIGNAL_PLACEMENT_DELETING,
    SIGNAL_PLACEMENT_CHANGED,
    SIGNAL_PRIORITY_CHANGED,
)

# Query: the last cycle's summary and what the workflow waits for.
QUERY_STATUS: Final = "status"
QUERY_EXPLANATION: Final = "explanation"

# Update: a requeue that returns the turn it caused (`fleet-scheduler requeue --wait`).
UPDATE_REQUEUE_AND_WAIT: Final = "requeue_and_wait"

# Custom search attributes, so the Temporal UI can list placements by name, type and state.
# Prefixed, because custom attributes share one namespace with every other application.
SA_PLACEMENT_NAME: Final = SearchAttributeKey.for_keyword("FleetPlacementName")
SA_PLACEMENT_TYPE: Final = SearchAttributeKey.for_keyword("FleetPlacementType")
SA_FULLY_SCHEDULED: Final = SearchAttributeKey.for_bool("FleetFullyScheduled")
# Which kind the workflow is for (ClusterResourcePlacement or ResourcePlacement), and a
# ResourcePlacement's namespace; set at start (workflows.starts).
SA_PLACEMENT_KIND: Final = SearchAttributeKey.for_keyword("FleetPlacementKind")
SA_PLACEMENT_NAMESPACE: Final = SearchAttributeKey.for_keyword("FleetPlacementNamespace")
# The placement's priority (its PriorityClass value) and tenant (the fairness key's source),
# set at start and upserted when a signal brings new ones (docs/priority.md).
SA_PRIORITY: Final = SearchAttributeKey.for_int("FleetPriority")
SA_TENANT: Final = SearchAttributeKey.for_keyword("FleetTenant")
# The patch generation of the worker that began the run (workflows.renewal), set by the run
# itself at its start; none on a run begun before generations.
SA_PATCH_GENERATION: Final = SearchAttributeKey.for_int("FleetPatchGeneration")
# The largest content version of the member clusters the last completed cycle read (where what
# scheduling reads of one last changed; heartbeats do not move it; scheduler.requeue.decided):
# the reconcile leaves a placement alone for a cluster change that cycle already read.
SA_CLUSTERS_VERSION: Final = SearchAttributeKey.for_int("FleetClustersVersion")
# The values of SA_PLACEMENT_KIND: the hub kinds' names.
KIND_CLUSTER_RESOURCE_PLACEMENT: Final = "ClusterResourcePlacement"
KIND_RESOURCE_PLACEMENT: Final = "ResourcePlacement"
SEARCH_ATTRIBUTES: Final = (
    SA_PLACEMENT_NAME,
    SA_PLACEMENT_TYPE,
    SA_FULLY_SCHEDULED,
    SA_PLACEMENT_KIND,
    SA_PLACEMENT_NAMESPACE,
    SA_PRIORITY,
    SA_TENANT,
    SA_PATCH_GENERATION,
    SA_CLUSTERS_VERSION,
)


def reconcile_schedule_id(task_queue: str) -> str:
    """`fleet-reconcile` for the default task queue; one per task queue otherwise, so several
    deployments (or tests) can share a namespace."""
    if task_queue == DEFAULT_TASK_QUEUE:
        return RECONCILE_SCHEDULE_ID
    return f"{RECONCILE_SCHEDULE_ID}-{task_queue}"


def rebalance_schedule_id(task_queue: str) -> str:
    """`fleet-rebalance` for the default task queue, one per task queue otherwise."""
    if task_queue == DEFAULT_TASK_QUEUE:
        return REBALANCE_SCHEDULE_ID
    return f"{REBALANCE_SCHEDULE_ID}-{task_queue}"


def activity_task_queue(task_queue: str) -> str:
    """The task queue of the activities of the placement workflows on `task_queue`:
    `fleet-scheduler-activities` for the default one."""
    return task_queue + ACTIVITY_TASK_QUEUE_SUFFIX


def workflow_id(placement_name: str, namespace: str | None = None) -> str:
    """The id of the workflow that schedules `placement_name`: `crp/<name>`, or
    `rp/<namespace>/<name>` for the ResourcePlacement `placement_name` in `namespace`."""
    if not placement_name or "/" in placement_name:
        raise ValueError(f"not a placement name: {placement_name!r}")
    if namespace is None or namespace == "":
        return WORKFLOW_ID_PREFIX + placement_name
    if "/" in namespace:
        raise ValueError(f"not a namespace: {namespace!r}")
    return f"{RP_WORKFLOW_ID_PREFIX}{namespace}/{placement_name}"


def workflow_id_for_key(key: str) -> str:
    """The workflow id of a placement key (`<name>`, or `<namespace>/<name>`: hub.kinds)."""
    namespace, slash, name = key.rpartition("/")
    if slash and not namespace:
        raise ValueError(f"not a placement key (<name> or <namespace>/<name>): {key!r}")
    return workflow_id(name, namespace or None)


def placement_workflow(namespace: str | None) -> str:
    """The workflow type of a placement: PlacementWorkflow, or ResourcePlacementWorkflow for a
    ResourcePlacement (one in a namespace)."""
    return RP_PLACEMENT_WORKFLOW if namespace else PLACEMENT_WORKFLOW


def placement_of(workflow_id: str) -> tuple[str | None, str]:
    """(namespace, name) of the placement a workflow id stands for (namespace None for a
    ClusterResourcePlacement); the inverse of `workflow_id`.

    Raises:
        ValueError: the id is not of the form `crp/<name>` or `rp/<namespace>/<name>`.
    """
    if workflow_id.startswith(RP_WORKFLOW_ID_PREFIX):
        namespace, slash, name = workflow_id.removeprefix(RP_WORKFLOW_ID_PREFIX).partition("/")
        if namespace and slash and name and "/" not in name:
            return namespace, name
    else:
        name = workflow_id.removeprefix(WORKFLOW_ID_PREFIX)
        if name != workflow_id and name and "/" not in name:
            return None, name
    raise ValueError(
        f"workflow id {workflow_id!r} is not a placement workflow id (expected "
        f"{WORKFLOW_ID_PREFIX}<placement name> or {RP_WORKFLOW_ID_PREFIX}<namespace>/<name>)"
    )


def placement_name(workflow_id: str) -> str:
    """The ClusterResourcePlacement a workflow id stands for; the inverse of `workflow_id`.

    Raises:
        ValueError: the id is not of the form `crp/<name>` (not one of our workflows, or a
            ResourcePlacement's: see `placement_of`).
    """
    namespace, name = placement_of(workflow_id)
    if namespace is not None:
        raise ValueError(
            f"workflow id {workflow_id!r} is a ResourcePlacement's, not a "
            f"ClusterResourcePlacement's (expected {WORKFLOW_ID_PREFIX}<placement name>)"
        )
    return name
