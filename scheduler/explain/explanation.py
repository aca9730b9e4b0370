"""Explanation: every cluster's fate in one cycle, compact enough for 5,000 clusters.

It is returned by the workflow's `status` query and shown by `fleet-scheduler explain`, so it
must stay small: clusters are grouped by what happened to them (one score per group of equally
scored clusters, one reason string per group of clusters filtered by the same plugin for the
same reason) and listed by name only. A cluster appears in at most one of `picked`,
`not_picked`, `filtered`, `kept`, `already_selected`, PickFixed's `valid` / `invalid` /
`not_found`; binding writes other than creates are listed in `bindings`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from pydantic import Field

from scheduler.wire import WireModel

__all__ = [
    "BEYOND_ROOM_MARKER",
    "MISSING_MARKER",
    "SHORTAGE_MARKER",
    "BeyondRoom",
    "BindingAction",
    "BindingGroup",
    "ClusterRoom",
    "Explanation",
    "FilterGroup",
    "InvalidTarget",
    "ResourceShortage",
    "ScoreGroup",
    "Shortage",
    "beyond_room_message",
]

BindingAction = Literal["patched", "revived", "unscheduled", "finalizerRemoved"]


class ScoreGroup(WireModel):
    """Clusters that got the same score, in rank order; groups are listed best first."""

    topology: int
    affinity: int
    obsolete: int
    total: int | None = None
    """The weighted sum (weightedSum profiles only)."""
    clusters: list[str]

    def describe(self) -> str:
        text = f"affinity {self.affinity}, topology spread {self.topology}"
        if self.obsolete:
            text += ", has an obsolete binding"
        if self.total is not None:
            text += f", weighted total {self.total}"
        return text


class FilterGroup(WireModel):
    """Clusters the same plugin filtered out for the same reason (names ascending)."""

    plugin: str
    reason: str
    """Exactly the decision reason KubeFleet writes, e.g. "ClusterUnschedulable, ..."."""
    clusters: list[str]


class InvalidTarget(WireModel):
    """A PickFixed target that exists but cannot be placed on."""

    cluster: str
    reason: str


class BindingGroup(WireModel):
    """Existing bindings a cycle writes, grouped by action and why (target cluster names)."""

    action: BindingAction
    why: str
    clusters: list[str]


class ResourceShortage(WireModel):
    """One requested resource that kept bindings off clusters that passed every other filter."""

    resource: str
    requested: str
    """What one binding asks for, e.g. "2" or "4Gi"."""
    clusters: int
    """How many of those clusters lacked it."""
    most_free: str | None = None
    """The most any of them had free; None when none of them reports the resource."""
    missing: str
    """`requested` times the bindings left unplaced: the demand a new or grown cluster would
    have to take (an autoscaler's input)."""


class ClusterRoom(WireModel):
    """Capacity-aware placements: one cluster's room as the cycle saw it, in the requested
    resources only (`explain` and `plan` show it beside each cluster's fate)."""

    cluster: str
    allocatable: str
    """What the cluster reports allocatable, e.g. "cpu=8,memory=32Gi" ("" when none of the
    requested resources is reported)."""
    allocated: str
    """What other placements' reservations, and the room nominated for other placements'
    preemptions, held there before this cycle, e.g. "cpu=6"."""


class Shortage(WireModel):
    """Capacity-aware placements only: bindings the cycle could not place for lack of room."""

    unplaced: int
    requests: str
    """What one binding asks for, as the annotation would say it."""
    resources: list[ResourceShortage] = Field(default_factory=list)
    preempted: list[str] = Field(default_factory=list)
    """Who took room this placement's bindings held (docs/priority.md, "Preemption"), e.g.
    "crp/checkout (priority 100000) on member-3"."""

    def message(self) -> str:
        """One sentence for the Scheduled condition, e.g. "not enough room for 2 binding(s) of
        cpu=2,memory=4Gi: cpu short on 3 cluster(s) (at most 1 free); missing cpu=4"."""
        short = "; ".join(
            f"{r.resource} short on {r.clusters} cluster(s) "
            + (f"(at most {r.most_free} free)" if r.most_free is not None else "(not reported)")
            for r in self.resources
        )
        missing = ",".join(f"{r.resource}={r.missing}" for r in self.resources)
        said = "".join(f"; preempted by {who}" for who in self.preempted[:PREEMPTED_SHOWN])
        if len(self.preempted) > PREEMPTED_SHOWN:
            said += f" and {len(self.preempted) - PREEMPTED_SHOWN} more"
        return (
            f"{SHORTAGE_MARKER}{self.unplaced} binding(s) of {self.requests}: {short}"
            f"{MISSING_MARKER}{missing}{said}"
        )


class BeyondRoom(WireModel):
    """Capacity-aware placements only: a cluster where the placement keeps a binding although
    the cluster's reservations, with this binding's, exceed its allocatable (the binding was
    made before its placement declared requests, its ledger was lost, or the cluster shrank)."""

    cluster: str
    reason: str
    """What does not fit, e.g. "cpu: 6 requested, 2 free"."""


def beyond_room_message(items: Sequence[BeyondRoom], shown: int = 3) -> str:
    """One sentence for the Scheduled condition, e.g. "kept beyond the room of 1 cluster(s):
    member-1 (cpu: 6 requested, 2 free)"."""
    listed = ", ".join(f"{b.cluster} ({b.reason})" for b in items[:shown])
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return f"{BEYOND_ROOM_MARKER}{len(items)} cluster(s): {listed}{more}"


# How a Scheduled condition's message says what is short (`Shortage.message`); `/metrics`
# reads the amounts back from placements' conditions (scheduler.room.capacity.missing_of).
SHORTAGE_MARKER: Final = "not enough room for "
MISSING_MARKER: Final = "; missing "
# Who took a placement's room, named in its Scheduled condition: at most this many.
PREEMPTED_SHOWN: Final = 2
BEYOND_ROOM_MARKER: Final = "kept beyond the room of "
# Where the problems of our annotations begin, last in the message (scheduler.cycles.common):
# they quote the author's text, so nothing after it is read back as a shortage.
ANNOTATION_NOTES_MARKER: Final = "; annotation fleet-scheduler.io/"


class Explanation(WireModel):
    placement_type: str
    snapshot: str
    score_mode: str = "lexicographic"
    wanted: int | None = None
    """N for PickN, the number of targets for PickFixed, None for PickAll."""
    branch: str | None = None
    """PickN only: "downscale" (4.6 A), "steady" (B) or "schedule" (C)."""
    picked: list[ScoreGroup] = Field(default_factory=list)
    """Newly picked (or re-picked) clusters, best first."""
    created: int = 0
    """How many picked clusters get a new binding (the rest re-use one, see `bindings`)."""
    not_picked: list[ScoreGroup] = Field(default_factory=list)
    filtered: list[FilterGroup] = Field(default_factory=list)
    kept: list[str] = Field(default_factory=list)
    """Clusters whose Scheduled or Bound binding of this snapshot stays as it is."""
    already_selected: list[str] = Field(default_factory=list)
    """Dropped by ClusterAlreadySelected although not in `kept` (only third-party plugins)."""
    not_evaluated: int = 0
    """Clusters never filtered because enough were found (percentageOfClustersToScore)."""
    valid: list[str] = Field(default_factory=list)
    invalid: list[InvalidTarget] = Field(default_factory=list)
    not_found: list[str] = Field(default_factory=list)
    bindings: list[BindingGroup] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    shortage: Shortage | None = None
    """Capacity-aware placements: bindings left unplaced for lack of room, and what they lack."""
    room: list[ClusterRoom] = Field(default_factory=list)
    """Capacity-aware placements: the room of every cluster the cycle judged, by name."""
    requests: str | None = None
    """Capacity-aware placements: what one binding asks for, e.g. "cpu=4,memory=8Gi"."""
    beyond_room: list[BeyondRoom] = Field(default_factory=list)
    """Capacity-aware placements: clusters where a kept binding exceeds the room."""

    @property
    def evaluated(self) -> bool:
        """Did this cycle judge clusters (filter, score or check targets)? A PickN cycle that
        already had its N clusters only keeps their bindings and looks at no other cluster."""
        return any(
            (self.picked, self.not_picked, self.filtered, self.valid, self.invalid, self.not_found)
        )

    def fates(self) -> list[tuple[str, str]]:
        """(cluster, one line) for every cluster mentioned, sorted by cluster name."""
        out: list[tuple[str, str]] = []
        out += [(c, f"picked ({g.describe()})") for g in self.picked for c in g.clusters]
        out += [(c, f"not picked ({g.describe()})") for g in self.not_picked for c in g.clusters]
        out += [
            (c, f"filtered by {g.plugin}: {g.reason}") for g in self.filtered for c in g.clusters
        ]
        out += [(c, "kept: already has a binding of this snapshot") for c in self.kept]
        out += [(c, "dropped: already selected") for c in self.already_selected]
        out += [(c, "picked: fixed target") for c in self.valid]
        out += [(t.cluster, f"not placed: {t.reason}") for t in self.invalid]
        out += [(c, "not placed: no such member cluster") for c in self.not_found]
        out += [(c, f"binding {g.action}: {g.why}") for g in self.bindings for c in g.clusters]
        return sorted(out)
