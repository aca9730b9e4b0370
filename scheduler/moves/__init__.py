"""Moves of bound placements: rebalance, enforcement, disruption budgets."""
