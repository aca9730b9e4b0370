"""Activities that read and write hub objects for one placement's cycle.

Thin, idempotent adapters: hub errors in, Temporal failure types out. Settings come from the
worker (`ActivitySettings`), never from inputs (inputs are stored in history)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from activities.models import (
    CleanupReport,
    CleanupRequest,
    CycleReport,
    CycleRequest,
    PrepareRequest,
    PrepareResult,
)
from hub.client import HubClient
from scheduler import Profile

__all__ = ["ActivitySettings", "HubActivities"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ActivitySettings:
    """Per-worker configuration of the activities."""

    # Standalone mode: the worker plays KubeFleet's placement controller too (policy snapshots,
    # the placement's Scheduled condition). Off beside KubeFleet's hub agent (--no-snapshotter).
    snapshotter: bool = True
    profile: Profile | None = None  # None: KubeFleet's default profile
    metrics: Any = None  # workers.metrics.SchedulerMetrics, when the worker exports metrics
    clock: Callable[[], datetime] = field(default=_utcnow)


class HubActivities:
    """One instance per worker process, holding that process's HubClient."""

    def __init__(self, client: HubClient, settings: ActivitySettings | None = None) -> None:
        self._client = client
        self._settings = settings or ActivitySettings()

    @activity.defn
    def prepare_cycle(self, request: PrepareRequest) -> PrepareResult:
        raise NotImplementedError

    @activity.defn
    def run_cycle(self, request: CycleRequest) -> CycleReport:
        raise NotImplementedError

    @activity.defn
    def cleanup_placement(self, request: CleanupRequest) -> CleanupReport:
        raise NotImplementedError
