"""The processes that watch the hub and decide what to send Temporal: the watcher (its caches and
routes) and its sender (outbox, admission window), the Temporal Schedules it relies on, and
`check`. Above the workflows and
activities, below the entry points (workers)."""

from control.check import check_fleet, render_check
from control.schedules import (
    ensure_rebalance_schedule,
    ensure_reconcile_schedule,
    trigger_reconcile,
)
from control.watcher import Watcher

__all__ = [
    "Watcher",
    "check_fleet",
    "ensure_rebalance_schedule",
    "ensure_reconcile_schedule",
    "render_check",
    "trigger_reconcile",
]
