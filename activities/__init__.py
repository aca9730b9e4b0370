"""Temporal activities: thin, idempotent I/O around hub.HubClient and the scheduler.

hub.py          HubActivities: prepare_cycle, run_cycle, cleanup_placement (the type names)
models.py       their requests and reports, as recorded in each placement's history
failures.py     failure type strings shared with the workflow's RetryPolicy
translate.py    hub and scheduler errors -> those failure types, in one place
bindings.py     applying a BindingPlan step by step (create-or-adopt, versioned patches)
snapshotter.py  standalone mode's policy snapshot sync (scheduler.snapshots decides)
conditions.py   standalone mode's ClusterResourcePlacementScheduled condition"""
