"""Whether a placement's last cycle already decided on a member cluster as it is now: what lets
the reconcile leave alone a placement the watcher already ran for a cluster's change
(docs/operations.md, "Reconcile safety net").

The measure is the hub's own counter, never a clock: a cycle records the largest
`resourceVersion` among the MemberClusters it read (`view_version`). The clusters a cycle reads
(the worker's cache, or a list) are the fleet as it stood at one point of the hub's history,
at or after that version, so every cluster write up to it is in what the cycle read. A
cluster whose current `resourceVersion` is at most that number was read by the cycle as it is
now. Kubernetes resourceVersions are etcd revisions, integers that grow with every write
(KEP-5504 makes comparing them a supported contract); one that is not an integer is never
compared, and the placement is requeued.

Time enters once: a cluster's eligibility is judged against the clock (a heartbeat grows
stale with no write at all), by the worker that ran the cycle and by the one that runs the
reconcile. For a given version of a cluster, eligibility can only be lost as time passes,
so a cluster still eligible now, CLOCK_MARGIN later than the reconcile's own clock, was
eligible for a cycle that read the same version on a worker whose clock was at most that far
ahead. Otherwise the placement is requeued. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Final

from hub.types import MemberCluster

__all__ = ["CLOCK_MARGIN", "decided_on", "version_of", "view_version"]

# How far ahead of the reconcile's clock a worker's clock may run for the eligibility check
# above to hold.
CLOCK_MARGIN: Final = timedelta(minutes=1)


def version_of(cluster: MemberCluster) -> int | None:
    """The cluster's `resourceVersion` as an integer (None: absent, or not an integer)."""
    text = cluster.metadata.resource_version
    if not text or not text.isdigit():
        return None
    return int(text)


def view_version(clusters: Iterable[MemberCluster]) -> int | None:
    """What a cycle records of the clusters it read: the largest `resourceVersion` among them;
    None when there are none or one is not an integer (then nothing is taken as read)."""
    found: int | None = None
    for cluster in clusters:
        version = version_of(cluster)
        if version is None:
            return None
        found = version if found is None or version > found else found
    return found


def decided_on(
    decided_at: int | None,
    cluster: MemberCluster,
    ineligibility: Callable[[MemberCluster, datetime], str | None],
    now: datetime,
) -> bool:
    """Whether a placement whose last completed cycle read the fleet at `decided_at`
    (`view_version`; None: not known) decided on `cluster` as it is now, so that a change of it
    since the reconcile's previous run needs no turn of that placement."""
    if decided_at is None or cluster.metadata.deleting:
        return False
    version = version_of(cluster)
    if version is None or version > decided_at:
        return False
    return ineligibility(cluster, now + CLOCK_MARGIN) is None
