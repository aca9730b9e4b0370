"""Filter and score results shared between placements of one policy (kube-scheduler's
opportunistic batching, KEP-5598, applied to placements).

KubeFleet's report mix has 1,000 placements built from a few selectors: a few dozen distinct
policies. Placements with the same policy, against the same clusters and the same profile, get
the same answer from every plugin whose answer depends only on the policy and the clusters. A
plugin says so by declaring, per stage, what its per-cluster answer depends on (`sharing`) and
by signing a snapshot (`signature`): the parts of the policy it reads, as a hashable value.

- `CLUSTER`: a cluster's answer depends on the signature and that cluster alone (its labels,
  taints, properties, conditions). Entries survive fleet changes: a cluster whose object is the
  same keeps its answer, a changed, new or re-joined cluster is computed again.
- `FLEET`: it depends on the signature and every cluster of the fleet (ClusterAffinity's
  property sorters interpolate between the fleet's smallest and largest value). Entries hold
  for one fleet, every cluster object the same; any change computes them again.

A plugin that reads anything else (the placement's bindings, other placements, reservations of
room, our annotations, the cycle's clock) declares nothing and runs as before in every cycle.
A declaration covers the methods of the class that makes it: a subclass that overrides a
stage's method (an out-of-tree plugin built on an in-tree one) is not shared there until it
declares again (`sharing_of`).

A cluster's version is its object: the worker's cluster cache hands out frozen models and
replaces one when the cluster changes (scheduler.clusters.facts relies on the same). An entry
keeps the objects it was computed for, so an identity seen again is the same cluster, not a
reused address.

Results are exactly the plugin's: a shared answer is one the plugin gave for the same cluster
object and signature, computed over the whole fleet (a batch answer for one cluster does not
depend on which other clusters were asked, interfaces' contract). A plugin that raises or
answers in an unexpected shape while shared is simply asked as before.

Pure and bounded: no clock, no I/O; entries are kept least recently used first out, within a
budget of cells (one per cluster per entry). Thread-safe: the worker runs cycles in threads."""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, runtime_checkable

from hub.types import ClusterSchedulingPolicySnapshot, MemberCluster
from scheduler.clusters.facts import ClusterFacts, facts_of
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.score import ClusterScore
from scheduler.framework.status import Status

__all__ = [
    "CLUSTER",
    "DEFAULT_MAX_CELLS",
    "FILTER",
    "FLEET",
    "NOT_SHARED",
    "SCORE",
    "Scope",
    "Shareable",
    "SharedResults",
    "canonical",
    "sharing_of",
]

Scope = Literal["cluster", "fleet"]
CLUSTER: Final = "cluster"
FLEET: Final = "fleet"
FILTER: Final = "filter"
SCORE: Final = "score"
"""Stages a plugin may share (PreScore is shared with its Score: see `SharedResults`)."""

NOT_SHARED: Final[Mapping[str, Scope]] = MappingProxyType({})
"""The declaration of a plugin whose answers read more than the policy and the clusters."""

DEFAULT_MAX_CELLS: Final = 400_000
"""About 80 entries at 5,000 clusters (a few dozen policies, filter and score), ~30 MB."""
FLEETS_KEPT: Final = 8
"""Fleets kept: entries of an older fleet are dropped (a heartbeat makes a new fleet)."""


@runtime_checkable
class Shareable(Protocol):
    sharing: Mapping[str, Scope]
    """Stage (FILTER, SCORE) -> what a cluster's answer there depends on besides the policy."""

    def signature(self, stage: str, snapshot: ClusterSchedulingPolicySnapshot) -> Hashable: ...


_STAGE_METHODS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        FILTER: ("pre_filter", "filter", "filter_all", "signature"),
        SCORE: ("pre_score", "score", "score_all", "signature"),
    }
)


def sharing_of(plugin: object, stage: str) -> Scope | None:
    """The plugin's declared scope for `stage`, or None: not shared. A declaration speaks for
    the methods of the class that makes it: a subclass (an out-of-tree plugin built on an
    in-tree one) that overrides a stage's method without declaring again is not shared there,
    as its answers may read more than its base's."""
    declared = getattr(plugin, "sharing", None)
    if not isinstance(declared, Mapping) or not callable(getattr(plugin, "signature", None)):
        return None
    found = declared.get(stage)
    if found not in (CLUSTER, FLEET):
        return None
    scope: Scope = CLUSTER if found == CLUSTER else FLEET
    if "sharing" in getattr(plugin, "__dict__", {}):
        return scope  # declared by the instance itself
    mro = type(plugin).__mro__
    declarer = next((c for c in mro if "sharing" in vars(c)), None)
    if declarer is None:
        return None
    for method in _STAGE_METHODS.get(stage, ()):
        definer = next((c for c in mro if method in vars(c)), None)
        if definer is not None and not issubclass(declarer, definer):
            return None
    return scope


def canonical(value: Any) -> str:
    """A policy part as text that is equal exactly when the parts are: API models as their JSON
    (every field, nulls included), lists of them item by item."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    dump = getattr(value, "model_dump_json", None)
    return dump() if dump is not None else repr(value)


@dataclass(frozen=True, slots=True, eq=False)
class _Fleet:
    """One fleet: its cluster objects in order, and each object's position."""

    version: int
    clusters: tuple[MemberCluster, ...]
    position: dict[int, int]
    base: _Fleet | None = None
    """The fleet this one followed when both list the same names in the same order (a cluster
    changed, none joined or left); `changed` are the positions whose object differs."""
    changed: tuple[int, ...] = ()

    def changed_since(self, older: _Fleet) -> set[int] | None:
        """Positions that differ from `older` when it is an ancestor of the same shape."""
        changed: set[int] = set()
        fleet: _Fleet | None = self
        while fleet is not None and fleet is not older:
            changed.update(fleet.changed)
            fleet = fleet.base
        return changed if fleet is older else None

    def same(self, clusters: Sequence[MemberCluster]) -> bool:
        return len(clusters) == len(self.clusters) and all(
            map(operator.is_, clusters, self.clusters)
        )

    def positions(
        self, clusters: Sequence[MemberCluster], state: CycleState
    ) -> Sequence[int] | None:
        """Where each of `clusters` sits in this fleet (None if one is not of it)."""
        if clusters is state.clusters:  # the cycle's fleet, this one (`_fleet_of`)
            return range(len(clusters))
        position, mine = self.position, self.clusters
        out = []
        for cluster in clusters:
            at = position.get(id(cluster))
            if at is None or mine[at] is not cluster:
                return None
            out.append(at)
        return out


@dataclass(slots=True, eq=False)
class _Entry:
    fleet: _Fleet
    answers: list[Any]
    """One answer per cluster of `fleet`, in its order."""
    pre_score: Status | None = None
    """FLEET score entries: the plugin's PreScore status for this signature and fleet."""


@dataclass(slots=True)
class _PendingScore:
    """Pinned in a cycle's state by PreScore: what Score stores or reuses for the plugin."""

    key: tuple[Any, ...]
    fleet: _Fleet
    status: Status | None = None
    entry: _Entry | None = None


@dataclass(slots=True)
class Counters:
    hits: int = 0
    misses: int = 0
    cells_computed: int = 0
    """Clusters a shared plugin was asked about (what a cold entry, or a changed cluster, cost)."""
    cells_reused: int = 0
    evictions: int = 0

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0


@dataclass
class SharedResults:
    """The shared answers of one profile's plugins (one store per profile per process).

    Keys: (plugin instance, stage, signature), plus the fleet for FLEET entries. The plugin
    instance stands for the profile's arguments to it: one instance serves one profile."""

    max_cells: int = DEFAULT_MAX_CELLS
    counters: Counters = field(default_factory=Counters)
    _entries: OrderedDict[tuple[Any, ...], _Entry] = field(default_factory=OrderedDict)
    _cells: int = 0
    _fleets: list[_Fleet] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def cells(self) -> int:
        return self._cells

    # -- fleets ---------------------------------------------------------------------------

    def _fleet_of(self, state: CycleState) -> _Fleet:
        """The cycle's fleet, found once per cycle (and kept in its state)."""
        fleet = state.read(_FLEET)
        if fleet is None or fleet.store is not self:
            fleet = _CycleFleet(self, self._fleet(state.clusters))
            state.write(_FLEET, fleet)
        return fleet.fleet

    def _fleet(self, clusters: Sequence[MemberCluster]) -> _Fleet:
        with self._lock:
            for fleet in self._fleets:
                if fleet.same(clusters):
                    return fleet
            objects = tuple(clusters)
            position = {id(c): i for i, c in enumerate(objects)}
            last = self._fleets[0] if self._fleets else None
            if last is not None and _same_names(last.clusters, objects):
                changed = tuple(i for i, c in enumerate(objects) if c is not last.clusters[i])
                fleet = _Fleet(last.version + 1, objects, position, last, changed)
            else:
                version = last.version + 1 if last is not None else 1
                fleet = _Fleet(version, objects, position)
            self._fleets = [fleet, *self._fleets][:FLEETS_KEPT]
            oldest = self._fleets[-1]
            if oldest.base is not None:  # no fleet outlives the kept ones
                object.__setattr__(oldest, "base", None)
            kept = {id(f) for f in self._fleets}
            for key in [k for k, e in self._entries.items() if id(e.fleet) not in kept]:
                self._cells -= len(self._entries.pop(key).answers)
            return fleet

    # -- entries --------------------------------------------------------------------------

    def _get(self, key: tuple[Any, ...]) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def _put(self, key: tuple[Any, ...], entry: _Entry) -> None:
        size = len(entry.answers)
        if size > self.max_cells:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._cells -= len(old.answers)
            self._entries[key] = entry
            self._cells += size
            while self._cells > self.max_cells:
                _, evicted = self._entries.popitem(last=False)
                self._cells -= len(evicted.answers)
                self.counters.evictions += 1

    def _count(self, hit: bool, computed: int = 0, reused: int = 0) -> None:
        with self._lock:
            c = self.counters
            if hit:
                c.hits += 1
            else:
                c.misses += 1
            c.cells_computed += computed
            c.cells_reused += reused

    # -- Filter ---------------------------------------------------------------------------

    def filter_all(
        self,
        plugin: Any,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        clusters: Sequence[MemberCluster],
        remaining: Sequence[int],
    ) -> list[Status | None] | None:
        """The plugin's batch Filter answers for `clusters[i]`, i in `remaining`, shared when
        it declares FILTER; None when it does not (or cannot answer): ask it as before."""
        scope = sharing_of(plugin, FILTER)
        if scope is None:
            return None
        try:
            signature = plugin.signature(FILTER, snapshot)
            fleet = self._fleet_of(state)
            positions = fleet.positions(clusters, state)
            if positions is None:
                return None
            key: tuple[Any, ...] = (plugin, FILTER, signature)
            if scope == FLEET:
                key = (*key, fleet.version)
            entry = self._answers(plugin, state, snapshot, fleet, key, scope)
        except Exception:  # the plain call names the failure, as before
            return None
        if entry is None:
            return None
        answers = entry.answers
        return [answers[positions[i]] for i in remaining]

    def _answers(
        self,
        plugin: Any,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        fleet: _Fleet,
        key: tuple[Any, ...],
        scope: Scope,
    ) -> _Entry | None:
        """The FILTER entry for `fleet`: as stored, carried from an older fleet (CLUSTER scope:
        only changed clusters asked again), or computed over the whole fleet."""
        entry = self._get(key)
        if entry is not None and entry.fleet is fleet:
            self._count(hit=True)
            return entry
        clusters = fleet.clusters
        answers: list[Any] = [None] * len(clusters)
        ask: list[int] = list(range(len(clusters)))
        changed = fleet.changed_since(entry.fleet) if entry is not None else None
        if entry is not None and scope == CLUSTER and changed is not None:
            answers, ask = list(entry.answers), sorted(changed)
        elif entry is not None and scope == CLUSTER:
            old, old_answers, ask = entry.fleet, entry.answers, []
            for i, cluster in enumerate(clusters):
                at = old.position.get(id(cluster))
                if at is not None and old.clusters[at] is cluster:
                    answers[i] = old_answers[at]
                else:
                    ask.append(i)
        facts = [facts_of(clusters[i]) for i in ask]
        got = plugin.filter_all(state, snapshot, facts) if facts else []
        if len(got) != len(ask):
            return None
        for i, answer in zip(ask, got, strict=True):
            answers[i] = answer
        entry = _Entry(fleet, answers)
        self._put(key, entry)
        self._count(
            hit=len(ask) < len(clusters), computed=len(ask), reused=len(clusters) - len(ask)
        )
        return entry

    # -- PreScore and Score ---------------------------------------------------------------

    def pre_score(
        self, plugin: Any
    ) -> Callable[[CycleState, ClusterSchedulingPolicySnapshot], Status]:
        """The plugin's PreScore, answered from a FLEET score entry when one is stored (the
        plugin's Score then reads the entry, not the state PreScore would have written)."""
        if sharing_of(plugin, SCORE) != FLEET:
            return plugin.pre_score  # type: ignore[no-any-return]

        def pre_score(state: CycleState, snapshot: ClusterSchedulingPolicySnapshot) -> Status:
            try:
                fleet = self._fleet_of(state)
                key = (plugin, SCORE, plugin.signature(SCORE, snapshot), fleet.version)
            except Exception:
                return plugin.pre_score(state, snapshot)  # type: ignore[no-any-return]
            entry = self._get(key)
            pending = _PendingScore(key, fleet, entry=entry)
            state.write(_pending_key(plugin), pending)
            if entry is not None and entry.pre_score is not None:
                return entry.pre_score
            pending.entry = None
            pending.status = status = plugin.pre_score(state, snapshot)
            return status  # type: ignore[no-any-return]

        return pre_score

    def score_all(
        self,
        plugin: Any,
        state: CycleState,
        snapshot: ClusterSchedulingPolicySnapshot,
        clusters: Sequence[MemberCluster],
        facts: Sequence[ClusterFacts],
    ) -> list[ClusterScore | None] | None:
        """The plugin's batch Score answers for `clusters`, shared when it declares SCORE with
        FLEET scope; None when not (ask it as before)."""
        if sharing_of(plugin, SCORE) != FLEET:
            return None
        pending = state.read(_pending_key(plugin))
        try:
            if pending is None:  # a profile without its PreScore: Score alone is shared
                fleet = self._fleet_of(state)
                key = (plugin, SCORE, plugin.signature(SCORE, snapshot), fleet.version)
                pending = _PendingScore(key, fleet, entry=self._get(key))
            fleet = pending.fleet
            positions = fleet.positions(clusters, state)
            if positions is None:
                if pending.entry is not None and pending.status is None:
                    plugin.pre_score(state, snapshot)  # the plain Score reads what it writes
                return None
            entry = pending.entry
            if entry is not None:
                self._count(hit=True)
            else:
                every = [facts_of(c) for c in fleet.clusters]
                answers = list(plugin.score_all(state, snapshot, every))
                if len(answers) != len(every):
                    return None
                entry = _Entry(fleet, answers, pending.status)
                self._put(pending.key, entry)
                self._count(hit=False, computed=len(every))
        except Exception:  # the plain call names the failure, as before
            return None
        answers = entry.answers
        return [answers[at] for at in positions]


def _same_names(old: Sequence[MemberCluster], new: Sequence[MemberCluster]) -> bool:
    return len(old) == len(new) and all(
        a is b or a.metadata.name == b.metadata.name for a, b in zip(old, new, strict=True)
    )


@dataclass(frozen=True, slots=True)
class _CycleFleet:
    store: SharedResults
    fleet: _Fleet


_FLEET: StateKey[_CycleFleet] = StateKey("sharing/fleet")


def _pending_key(plugin: Any) -> StateKey[_PendingScore]:
    return StateKey(f"sharing/{plugin.name}")
