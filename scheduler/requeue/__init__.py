"""Which placements an event or a reconcile run sends another turn."""
