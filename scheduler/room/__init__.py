"""Room: whether a placement's demand fits on a cluster (capacity-aware placement, opt-in;
docs/capacity.md).

It decides what a `fleet-scheduler.io/requests` annotation asks for (`requests`), what a
Kubernetes quantity is worth, exactly as KubeFleet's Go reads it (`quantity`, also the
property values the affinity plugins compare), and, from a cluster's allocatable and the
reservations on its ledger, whether a request fits, by how much it is short, and how the
allocation strategies score the cluster (`capacity`). Pure: exact arithmetic, no I/O."""
