"""Inputs and results of the fleet-wide workflows: the reconcile safety net and rebalancing,
each started by its Temporal Schedule (control/schedules.py). Results are read back by the next
run, so fields are only ever added, with defaults."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.wire import WireModel

__all__ = ["RebalanceInput", "RebalanceReport", "ReconcileInput", "ReconcileReport"]


class ReconcileInput(WireModel):
    """The reconcile Schedule's workflow input (and its activity's request)."""

    task_queue: str
    standalone: bool = True
    # `run --local-cycles-up-to` (workflows.starts.turn_execution_for): None, the default, lets
    # the workers choose where turns run; N forces local turns for fleets of at most N member
    # clusters and queue turns above.
    local_cycles_up_to: int | None = Field(default=None, ge=0)
    # Namespaced ResourcePlacements too (False: `--no-resource-placements`).
    resource_placements: bool = True
    # The previous run's cluster digests (the activity's request only; the workflow reads them
    # from the last completed run).
    previous_clusters: dict[str, str] | None = None
    # ... and its digests of the placements' decision annotations and priorities.
    previous_annotations: dict[str, str] | None = None
    previous_priorities: dict[str, str] | None = None
    # ... and the placements it asked to renew (not asked again: they renew when next idle).
    previous_renewed: list[str] | None = None


class ReconcileReport(WireModel):
    """What one reconcile run did. `clusters` maps each member cluster to a record of what
    scheduling reads of it, hashed part by part (scheduler.requeue.requeue_hints.record_of), for the
    next run to compare: about 130 bytes a cluster with its name, whatever the cluster holds."""

    placements: int = 0
    running: int = 0
    started: list[str] = Field(default_factory=list)
    finished: list[str] = Field(default_factory=list)
    requeued: list[str] = Field(default_factory=list)
    reasons: dict[str, str] = Field(default_factory=dict)  # placement -> why it was acted on
    clusters: dict[str, str] = Field(default_factory=dict)
    summary: str = ""
    # Capacity reservations the sweep released (docs/capacity.md): stale, or of placements
    # that are gone or no longer capacity-aware.
    reservations_released: int = 0
    # Placement -> digest of its fleet-scheduler.io/ decision annotations, for the next run.
    annotations: dict[str, str] = Field(default_factory=dict)
    # Placement -> digest of its priority (placements with a non-default one), for the next run,
    # and the placements told their new priority (priority_changed, no turn).
    priorities: dict[str, str] = Field(default_factory=dict)
    reprioritised: list[str] = Field(default_factory=list)
    # Placements whose run an older patch generation began, asked to renew (workflows.renewal).
    renewed: list[str] = Field(default_factory=list)
    # Broken invariants (scheduler.invariants): how many of each, and the first ones in words.
    violations: dict[str, int] = Field(default_factory=dict)
    violation_messages: list[str] = Field(default_factory=list)


class RebalanceInput(WireModel):
    """The fleet-rebalance Schedule's workflow input (docs/capacity.md)."""

    strategy: Literal["pack", "spread"] = "pack"


class RebalanceReport(WireModel):
    """What one rebalance proposed: each move with its reason, and what was left alone."""

    moves: list[str] = Field(default_factory=list)
    not_reached: dict[str, str] = Field(default_factory=dict)
    skipped: dict[str, str] = Field(default_factory=dict)
    clusters_before: int = 0
    clusters_after: int = 0
    summary: str = ""
