"""Temporal activities: thin, idempotent I/O around hub.HubClient and the scheduler.

turn.py         ScheduleOnce.schedule_once: one loop turn (prepare, then the cycle)
cycle.py        the cycle itself: read the fleet, schedule, write bindings and status
cleanup.py      CleanupPlacement.cleanup_placement: a deleted placement's bindings and finalizer
plumbing.py     ActivitySettings, metering, spans and heartbeats shared by all of them
models.py       requests, results and registered names, as recorded in each placement's history
failures.py     failure type strings shared with the workflow's RetryPolicy
translate.py    hub and scheduler errors -> those failure types, in one place
bindings.py     applying a BindingPlan step by step (create-or-adopt, versioned patches)
clusters.py     the worker's MemberCluster cache (KubeFleet's cycles read an informer)
snapshotter.py  standalone mode's policy snapshot sync (scheduler.snapshots decides)
conditions.py   standalone mode's ClusterResourcePlacementScheduled condition

Nothing is imported here: workflow code imports `activities.models` inside Temporal's sandbox,
which runs this package's __init__ too, and must not pull in the Kubernetes client with it."""
