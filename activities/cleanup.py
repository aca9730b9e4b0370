"""`cleanup_placement`: the scheduler's part of deleting a placement (kubefleet-rules 3.4).

It deletes the placement's bindings (after dropping the scheduler's finalizer from each) and its
PlacementDecisions (docs/decisions.md), in
standalone mode its policy snapshots too (the placement controller's part, kubefleet-rules 2.6),
then removes the scheduler-cleanup finalizer so the deletion can finish. Every step is safe to
repeat: a retried attempt finds less to do."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.bindings import Pacer
from activities.capacity import release_placement, requests_of
from activities.decisions import target_for, withdraw
from activities.local_slots import local_slot
from activities.outage import through_outages
from activities.plumbing import ActivitySettings, heartbeat, in_local_activity
from activities.translate import hub_failures
from activities.turn import name_too_long
from hub import names
from hub.client import HubClient
from hub.errors import NotFoundError
from hub.kinds import kinds_for, placement_key
from hub.types import ClusterResourceBinding, ClusterResourcePlacement
from workflows import failures
from workflows.models import CleanupReport, CleanupRequest
from workflows.names import ACTIVITY_CLEANUP_PLACEMENT, ACTIVITY_CLEANUP_PLACEMENT_RP

__all__ = ["CleanupPlacement"]


class CleanupPlacement:
    """The cleanup activity; one instance per worker process, like `ScheduleOnce`."""

    def __init__(self, client: HubClient, settings: ActivitySettings | None = None) -> None:
        self._client = client
        self._settings = settings or ActivitySettings()

    @activity.defn(name=ACTIVITY_CLEANUP_PLACEMENT)
    def cleanup_placement(self, request: CleanupRequest) -> CleanupReport:
        """Delete the placement's bindings (and snapshots, standalone), then its finalizer."""

        def cleanup() -> CleanupReport:
            key = placement_key(request.namespace, request.placement)
            with hub_failures(f"cleaning up placement {key!r}"):
                return self._cleanup(request.placement, request.namespace)

        if not in_local_activity():
            return through_outages(self._settings.hub_gate, heartbeat, cleanup)
        # A local cleanup takes a local slot like a turn (a deletion: first within its key).
        with local_slot(self._settings.local_slots, request.order(), "the cleanup"):
            return through_outages(None, heartbeat, cleanup)

    @activity.defn(name=ACTIVITY_CLEANUP_PLACEMENT_RP)
    def cleanup_placement_rp(self, request: CleanupRequest) -> CleanupReport:
        """`cleanup_placement` for a ResourcePlacement, under its own activity type."""
        return self.cleanup_placement(request)

    def _cleanup(self, name: str, namespace: str | None = None) -> CleanupReport:
        client, kinds, key = self._client, kinds_for(namespace), placement_key(namespace, name)
        try:
            placement: ClusterResourcePlacement | None = client.get(
                kinds.placement, name, namespace=namespace
            )
        except NotFoundError:
            placement = None  # gone already: still sweep any bindings it left behind
        if placement is not None and not placement.metadata.deleting:
            raise ApplicationError(
                f"refusing to clean up placement {key!r}: it is not being deleted",
                type=failures.UNEXPECTED,
                non_retryable=True,
            )
        if name_too_long(name):
            # No object can carry the name as a label, so none was ever made; the finalizer
            # was never added either (the turn stops first).
            removed = placement is not None and self._remove_placement_finalizer(placement)
            return CleanupReport(
                finalizer_removed=removed,
                summary=f"placement {key}: nothing to clean up (name too long to label objects)",
            )
        pacer = Pacer(heartbeat)
        selector = {names.PARENT_PLACEMENT_LABEL: name}
        bindings = client.list(kinds.binding, selector, namespace=namespace)
        deleted = 0
        for binding in sorted(bindings, key=lambda b: b.name):
            if self._remove_binding(binding):
                deleted += 1
            pacer.tick(f"cleaned binding {binding.name}")

        # Capacity-aware (docs/capacity.md): the bindings are gone or going, so is their room.
        # A placement that vanished unseen may have been capacity-aware: look too.
        released = 0
        if placement is None or requests_of(placement) is not None:
            released = release_placement(client, key)

        snapshots = 0
        if self._settings.snapshotter:
            snapshots = len(client.list(kinds.snapshot, selector, namespace=namespace))
            if snapshots:
                client.delete_collection(kinds.snapshot, selector, namespace=namespace)

        # Its PlacementDecisions go with its bindings, under the same finalizer; turned off,
        # any left from when they were on go too (activities.decisions.DecisionSettings).
        withdrawn = 0
        decisions = self._settings.decisions
        if decisions is not None:
            target = target_for(decisions, name, namespace)
            withdrawn = withdraw(client, target, quiet=not decisions.publish)

        removed = placement is not None and self._remove_placement_finalizer(placement)
        parts = [f"{deleted} binding(s) deleted"]
        if released:
            parts.append(f"{released} reservation(s) released")
        if self._settings.snapshotter:
            parts.append(f"{snapshots} policy snapshot(s) deleted")
        if withdrawn:
            parts.append(f"{withdrawn} decision slice(s) deleted")
        parts.append("finalizer removed" if removed else "no finalizer to remove")
        return CleanupReport(
            bindings_deleted=deleted,
            snapshots_deleted=snapshots,
            finalizer_removed=removed,
            summary=f"placement {key}: " + ", ".join(parts),
        )

    def _remove_binding(self, binding: ClusterResourceBinding) -> bool:
        """Drop our finalizer, then delete unless deleting already; True if deleted now."""
        client = self._client
        ours = names.SCHEDULER_BINDING_CLEANUP_FINALIZER
        finalizers = binding.metadata.finalizers
        try:
            if ours in finalizers:
                remaining = [f for f in finalizers if f != ours]
                client.patch(
                    type(binding),
                    binding.name,
                    {"metadata": {"finalizers": remaining}},
                    resource_version=binding.metadata.resource_version,
                    namespace=binding.metadata.namespace,
                )
            if binding.metadata.deleting:
                return False
            client.delete(type(binding), binding.name, namespace=binding.metadata.namespace)
        except NotFoundError:
            return False  # gone meanwhile: nothing left to do for it
        return True

    def _remove_placement_finalizer(self, placement: ClusterResourcePlacement) -> bool:
        finalizers = placement.metadata.finalizers
        ours = names.SCHEDULER_CLEANUP_FINALIZER
        if ours not in finalizers:
            return False
        try:
            self._client.patch(
                type(placement),
                placement.name,
                {"metadata": {"finalizers": [f for f in finalizers if f != ours]}},
                resource_version=placement.metadata.resource_version,
                namespace=placement.metadata.namespace,
            )
        except NotFoundError:
            return False  # deleted by another finalizer owner finishing first
        return True
