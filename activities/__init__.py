"""Temporal activities, every one of them: thin, idempotent I/O around hub.HubClient and the
scheduler. Their names and payloads are wire contracts declared in workflows (names, models).

turn/           ScheduleOnce.schedule_once: one loop turn (prepare; the cycle in turn/cycle.py)
cleanup.py      CleanupPlacement.cleanup_placement: a deleted placement's bindings and finalizer
reconcile.py    ReconcileFleet.reconcile_fleet: the safety net (scheduler/requeue/reconcile.py
                decides)
rebalance.py    RebalanceFleet.rebalance_fleet: plan moves from the hub and propose them
moves.py        the moves a placement's turn makes (within its disruption budget)
capacity.py     reservations on the CapacityLedgers around binding writes, and the sweeps
fleet_state.py  one reading of the hub for the invariants (scheduler/invariants.py)
bindings.py     applying a BindingPlan step by step (create-or-adopt, versioned patches)
plumbing.py     ActivitySettings, metering, spans and heartbeats shared by all of them
translate.py    hub and scheduler errors -> the failure types of workflows/failures.py
outage.py       waiting out a hub outage at the worker's gate
clusters.py     the worker's MemberCluster cache (KubeFleet's cycles read an informer)
snapshotter.py  standalone mode's policy snapshot sync (scheduler.snapshots decides)
conditions.py   standalone mode's ClusterResourcePlacementScheduled condition

Nothing is imported here: importing a module of this package must not pull in the others."""
