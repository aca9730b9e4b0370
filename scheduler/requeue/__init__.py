"""Requeue: which placements a hub event, or a reconcile run, sends another turn.

It decides whether an event matters and which placements it reaches (`watch_rules`,
KubeFleet's watcher filters, kubefleet-rules section 7, plus ours), whether a member cluster's
change could alter a placement's decision (`requeue_hints`, the plugins' QueueingHints), and
what one reconcile run starts, signals and requeues from what it read (`reconcile`). The
watcher's routes and the reconcile's activity call these; they only send. Pure."""
