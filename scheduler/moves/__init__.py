"""Moves: which bound placements should move, where to, and how many moves a budget lets go.

It decides which bindings a rebalance moves to pack or spread the fleet (`rebalance`), which
bindings of a placement that enforces its affinity during execution sit on clusters that no
longer pass its required filters (`enforcement`), and, move by move, how many disruptions
KubeFleet's ClusterResourcePlacementDisruptionBudget arithmetic still allows (`budgets`).
The activities make the moves, new binding first (activities/moves.py). Pure."""
