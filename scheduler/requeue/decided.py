"""Whether a placement's last cycle already decided on a member cluster as it is now: what lets
the reconcile leave alone a placement the watcher already ran for a cluster's change
(docs/operations.md, "Reconcile safety net").

The measure is the hub's own counter, never a clock. Kubernetes resourceVersions are etcd
revisions, integers that grow with every write (KEP-5504 makes comparing them a supported
contract); one that is not an integer is never compared, and the placement is requeued.

**Content versions.** A member cluster's content is what the reconcile's record of it reads
(`scheduler.requeue.requeue_hints.record_of`: labels, taints, properties, namespaces and
conditions, resources; the eligibility verdict apart) and whether it is being deleted. Its
content version is the resourceVersion of the write at which its current content began. A
member agent's heartbeat is a write that changes no content: at 1,000 clusters one lands every
few hundred milliseconds, so a version that followed every write (the object's own
resourceVersion) would move between any two turns. `ContentVersions` follows a watch stream:
an update whose content differs from the object it replaces sets the version to the update's
resourceVersion, as does one after which the eligibility verdict differs (both judged at the
time it is applied plus CLOCK_MARGIN: the heartbeat that ends a staleness reached with no write
at all is a change, the watcher's "became eligible"); every other update keeps it. A relist
keeps it for an object whose resourceVersion did not change (no write since) and otherwise
takes the object's own resourceVersion (what happened while nobody watched is not known; the
object's version is at least where its content began, so it can only be too high).

**What a cycle records.** A cycle reads every cluster as of one point R of the hub's history
(a cache applies the watch's events in order, so its view is the fleet at its last applied
event; a list is the fleet at the list's version). It records V = the largest content version
among the clusters it read (`view_version`; from a list, which knows no content versions, the
largest resourceVersion). Every content version in a view is at most the resourceVersion of
an object in it, so V <= R whichever process's cache it came from.

**What the reconcile compares.** For a cluster whose record changed since its previous run, X =
the cluster's content version as the reconcile's process knows it (`reconcile_versions`): its
own cache's, when that cache holds the cluster at or past the version the reconcile listed,
else the listed object's resourceVersion. Either is at least C, the version at which the
content the reconcile listed began (a cache past the listed object knows either the same run
of content or a later one, whose start is past the listed object's version; a relist only
raises it). The placement is left alone when X <= V, the cluster is not being deleted, and it
is eligible now plus CLOCK_MARGIN (`decided_on`).

**Why no change is missed.** Content: C <= X <= V <= R, and the cluster's content has not
changed from C to the reconcile's read, so if R is before that read the cycle read the content
the reconcile sees; if R is after it, the cycle read a later state, and a change after the
reconcile's read is the next run's to compare. Eligibility: suppose the cycle judged the
cluster ineligible at its time t. The writes to it after R all have versions above R >= V, so
none was flagged by the reconcile's cache (else X > V): each kept the verdict of the object it
replaced at its apply time plus CLOCK_MARGIN. Ineligibility of one object only grows with time
(a heartbeat ages; conditions do not change without a write), so from the first write after R
(applied no earlier than t - CLOCK_MARGIN, CLOCK_MARGIN covering the clock skew between
processes and how far a cycle's cache may lag behind the hub) to the object the reconcile
listed, each object is ineligible at its apply time plus CLOCK_MARGIN, so the listed one at the
reconcile's now plus CLOCK_MARGIN (with no write after R, the listed object is the one the
cycle read, before the reconcile's now), where `decided_on` found it eligible: a contradiction.
A cycle that judged the cluster eligible and a cluster eligible now agree (KubeFleet keeps
picks on a cluster that turns ineligible, and the reconcile requeues for one that is deleted or
gone). Pure: `now` is passed in."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final

from hub.types import MemberCluster
from scheduler.requeue.requeue_hints import record_of, verdict

__all__ = [
    "CLOCK_MARGIN",
    "ClusterView",
    "ContentVersions",
    "decided_on",
    "moot_from",
    "reconcile_versions",
    "version_of",
    "view_version",
]

# How far ahead of the reconcile's clock a worker's clock may run, and how far behind the hub a
# cycle's cache may be, for the eligibility argument above to hold.
CLOCK_MARGIN: Final = timedelta(minutes=1)

Ineligibility = Callable[[MemberCluster, datetime], str | None]


def version_of(cluster: MemberCluster) -> int | None:
    """The cluster's `resourceVersion` as an integer (None: absent, or not an integer)."""
    text = cluster.metadata.resource_version
    if not text or not text.isdigit():
        return None
    return int(text)


class ClusterView(list[MemberCluster]):
    """A cache's clusters (in its order) with their content versions by name: what a cycle
    reads from a cache that follows them (`ContentVersions`)."""

    def __init__(self, clusters: Iterable[MemberCluster], versions: Mapping[str, int]) -> None:
        super().__init__(clusters)
        self.versions = versions


class ContentVersions:
    """Each cluster's content version, from a list-then-watch stream (the module docstring)."""

    def __init__(self, ineligibility: Ineligibility) -> None:
        self._ineligibility = ineligibility
        # name -> (the object last applied, its content digest, its content version)
        self._seen: dict[str, tuple[MemberCluster, str, int]] = {}

    def resync(self, clusters: Iterable[MemberCluster]) -> None:
        """A relist: the whole fleet anew."""
        seen: dict[str, tuple[MemberCluster, str, int]] = {}
        for cluster in clusters:
            version = version_of(cluster)
            if version is None:
                continue
            known = self._seen.get(cluster.metadata.name)
            if known is not None and version_of(known[0]) == version:
                seen[cluster.metadata.name] = (cluster, known[1], known[2])
            else:
                seen[cluster.metadata.name] = (cluster, _content(cluster), version)
        self._seen = seen

    def updated(self, cluster: MemberCluster, now: datetime) -> None:
        """A watch's ADDED or MODIFIED event, applied at `now`."""
        name, version = cluster.metadata.name, version_of(cluster)
        if version is None:
            self._seen.pop(name, None)
            return
        content = _content(cluster)
        known = self._seen.get(name)
        if known is not None and known[1] == content:
            judged = now + CLOCK_MARGIN
            before, after = (
                self._ineligibility(known[0], judged),
                self._ineligibility(cluster, judged),
            )
            if verdict(before) == verdict(after):
                self._seen[name] = (cluster, content, known[2])
                return
        self._seen[name] = (cluster, content, version)

    def deleted(self, name: str) -> None:
        self._seen.pop(name, None)

    def versions(self) -> dict[str, int]:
        """Cluster name -> content version."""
        return {name: known[2] for name, known in self._seen.items()}


def _content(cluster: MemberCluster) -> str:
    """What scheduling reads of the cluster, eligibility aside (judged at the time of a write)."""
    return record_of(cluster, None) + (":deleting" if cluster.metadata.deleting else "")


def view_version(clusters: Iterable[MemberCluster]) -> int | None:
    """What a cycle records of the clusters it read: the largest content version among them
    (a `ClusterView`'s), or the largest `resourceVersion` of a plain list; None when there are
    none or one is not known (then nothing is taken as read)."""
    versions = clusters.versions if isinstance(clusters, ClusterView) else None
    found: int | None = None
    for cluster in clusters:
        version = version_of(cluster) if versions is None else versions.get(cluster.metadata.name)
        if version is None:
            return None
        found = version if found is None or version > found else found
    return found


def reconcile_versions(
    listed: Iterable[MemberCluster], cached: ClusterView | None
) -> dict[str, int]:
    """Cluster name -> X, the content version the reconcile compares (the module docstring):
    its process's cache's when that cache holds the cluster at or past the version listed, else
    the listed `resourceVersion`; a cluster whose version is not an integer is left out."""
    held = {c.metadata.name: c for c in cached} if cached is not None else {}
    found: dict[str, int] = {}
    for cluster in listed:
        name, version = cluster.metadata.name, version_of(cluster)
        if version is None:
            continue
        found[name] = version
        there = held.get(name)
        if there is None or cached is None or name not in cached.versions:
            continue
        seen = version_of(there)
        if seen is not None and seen >= version:
            found[name] = cached.versions[name]
    return found


def decided_on(
    decided_at: int | None,
    cluster: MemberCluster,
    ineligibility: Ineligibility,
    now: datetime,
    version: int | None,
) -> bool:
    """Whether a placement whose last completed cycle recorded `decided_at` (`view_version`;
    None: not known) decided on `cluster` as it is now, `version` being the cluster's content
    version as the reconcile knows it (`reconcile_versions`; None: not known), so that a change
    of it since the reconcile's previous run needs no turn of that placement."""
    if decided_at is None:
        return False
    wanted = moot_from(cluster, ineligibility, now, version)
    return wanted is not None and wanted <= decided_at


def moot_from(
    cluster: MemberCluster,
    ineligibility: Ineligibility,
    now: datetime,
    version: int | None,
) -> int | None:
    """The version a placement's cycle must have read for `cluster`'s change, as the reconcile
    sees it now (`version`, as for `decided_on`), to need no turn: a cycle that completed later
    and read the hub at or past it decided on that content too, or on a later one (the module
    docstring's argument, R >= V >= X). None when no cycle's version is enough: the cluster is
    being deleted, is not eligible now plus CLOCK_MARGIN, or its version is not known."""
    if version is None or cluster.metadata.deleting:
        return None
    return version if ineligibility(cluster, now + CLOCK_MARGIN) is None else None
