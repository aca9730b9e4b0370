"""The few facts of a member cluster that every cycle reads, kept compact and built once per
cluster object.

A cycle reads a handful of fields of every MemberCluster: its name, labels, taints, the member
agent's heartbeat and conditions, its properties. Each model is about 7 KB of Python objects
spread over the heap, so at 5,000 clusters (35 MB) nearly every read misses the CPU caches:
reading three fields costs ~1.5 us per cluster there against ~0.2 us at 1,000 clusters. The facts
are a few hundred bytes per cluster, their label keys and values interned, and are built the
first time a cycle meets a cluster object, then reused while it lives: the worker's MemberCluster
cache hands every cycle the same object until the cluster changes, and models are frozen, so
facts never go stale.

The cache is keyed by object identity and holds the object itself, so an id cannot be reused
while its entry exists; `prepare` (called once per cycle with the cycle's clusters) drops
entries of objects no longer in use once the cache is twice the fleet. Results never depend on
the cache: `facts_of` answers the same with an empty one."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from hub import names
from hub.types import MemberCluster, Taint

__all__ = ["ClusterFacts", "aware", "build", "cached", "facts_of", "forget", "prepare"]

_intern = sys.intern
_JOINED = names.AGENT_JOINED_CONDITION
_HEALTHY = names.AGENT_HEALTHY_CONDITION


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    cluster: MemberCluster
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    deleting: bool
    has_agent: bool
    """A member agent status is reported (KubeFleet: else "not online")."""
    heartbeat: datetime | None
    joined: bool
    """The agent's first Joined condition is True."""
    healthy: str | None
    """The status of the agent's first Healthy condition; None when there is none."""
    healthy_since: datetime | None
    properties: Mapping[str, str]
    """Reported property values, as their text."""
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    available: Mapping[str, str]
    derived: dict[str, object] = field(default_factory=dict, compare=False, repr=False)
    """What plugins derive from these facts alone (a property's parsed value, say), kept for
    the next cycle that meets the same cluster object. A key names its owner and what it holds
    (`"<plugin>/<what>:<argument>"`); a value must depend on nothing but the facts, so it can
    never go stale."""


_CACHE: dict[int, ClusterFacts] = {}


def facts_of(cluster: MemberCluster) -> ClusterFacts:
    """The cluster's facts, from the cache when this object has been seen (by a cycle)."""
    cache = _CACHE
    facts = cache.get(id(cluster))
    if facts is not None and facts.cluster is cluster:
        return facts
    facts = cache[id(cluster)] = build(cluster)
    return facts


def prepare(clusters: Sequence[MemberCluster]) -> list[ClusterFacts]:
    """The facts a cycle will read, in the clusters' order; forgets those of objects gone from
    the fleet once the cache holds more than twice what the fleet needs. Safe with cycles in
    other threads: the cache is replaced, never emptied in place."""
    global _CACHE
    facts = [facts_of(cluster) for cluster in clusters]
    if len(_CACHE) > 2 * len(clusters) + 64:
        _CACHE = {id(f.cluster): f for f in facts}
    return facts


def forget() -> None:
    """Empties the cache (benches measuring a cold cycle, tests)."""
    global _CACHE
    _CACHE = {}


def cached() -> int:
    """How many clusters' facts the cache holds."""
    return len(_CACHE)


def aware(moment: datetime) -> datetime:
    """Hub timestamps carry a zone; a naive one can only come from a caller: Kubernetes is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else aware(moment)


def build(cluster: MemberCluster) -> ClusterFacts:
    """The facts of `cluster`, without the cache (for callers outside a cycle)."""
    meta, status = cluster.metadata, cluster.status
    agent = status.agent(names.MEMBER_AGENT)
    joined = healthy = None
    if agent is not None:
        for condition in agent.conditions:
            if condition.type == _JOINED and joined is None:
                joined = condition
            elif condition.type == _HEALTHY and healthy is None:
                healthy = condition
    usage = status.resource_usage
    return ClusterFacts(
        cluster=cluster,
        name=_intern(meta.name),
        labels={_intern(k): _intern(v) for k, v in meta.labels.items()},
        taints=tuple(cluster.spec.taints),
        deleting=meta.deletion_timestamp is not None,
        has_agent=agent is not None,
        heartbeat=None if agent is None else _aware(agent.last_received_heartbeat),
        joined=joined is not None and joined.status == names.TRUE,
        healthy=None if healthy is None else healthy.status,
        healthy_since=None if healthy is None else _aware(healthy.last_transition_time),
        properties={_intern(k): v.value for k, v in status.properties.items()},
        capacity=dict(usage.capacity),
        allocatable=dict(usage.allocatable),
        available=dict(usage.available),
    )
