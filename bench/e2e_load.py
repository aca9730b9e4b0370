"""The load of the end-to-end bench: a fleet, a mix of placements, and a tracker that sees them
scheduled. Used by bench/e2e.py; talks to devhub over plain HTTP (aiohttp), like any client.

The fleet and the placements are built so that every size does the same kind of work and only
the number of clusters and placements changes:

- Clusters `member-00000`.. carry env (prod/staging/dev), region (10, each with its share of
  every env and of the tainted clusters), zone (5), tier (gold on every 4th), a `bench/shard`
  label shared by exactly two clusters at any fleet size, a node-count property, and every 10th
  one (index 7 mod 10) a NoSchedule taint the placements do not tolerate.
  `member-00000` is the anchor: it has `bench/anchor=true` and the most nodes, so every
  placement below picks it (the "cluster shared by all placements" of the churn test).
- Placements are 70% PickN (3 of the prod/staging clusters, preferring the anchor, gold and big
  clusters; one in seven also spreads over zones, and KubeFleet's topology-spread plugin then
  limits each cycle to one new cluster, so those take three cycles), 20% PickAll (the anchor
  plus one shard: at most 3 clusters), 10% PickFixed (the anchor plus one other). About three
  bindings each, whatever the fleet size, so the fleet size shows what reading and evaluating
  clusters costs, not what writing does.
- `region_env_placement` is another mix, by region and environment (bench/kubefleet_report.py),
  with PickAll placements of a whole region or env: bindings grow with the fleet.

`Tracker` watches ClusterResourcePlacements and ClusterResourceBindings and records, per
placement, when its Scheduled condition turned True for each generation (KubeFleet's "fully
scheduled") and when its last binding write arrived."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import aiohttp

from hub import names
from hub.types import ClusterResourceBinding, ClusterResourcePlacement, MemberCluster
from scheduler.testing import member_cluster

__all__ = [
    "ANCHOR",
    "Hub",
    "Tracker",
    "cluster_name",
    "fleet",
    "placement",
    "policy_change",
    "region_env_placement",
    "wide_pick_n",
]

ZONES: Final = ("zone-a", "zone-b", "zone-c", "zone-d", "zone-e")
REGIONS: Final = (
    "eastus", "eastus2", "westus", "westus2", "centralus",
    "northeurope", "westeurope", "uksouth", "japaneast", "australiaeast",
)  # fmt: skip
ENVS: Final = ("prod", "staging", "dev")
SHARD_LABEL: Final = "bench/shard"
ANCHOR_LABEL: Final = "bench/anchor"
CHURN_LABEL: Final = "bench/churn"
ANCHOR: Final = "member-00000"
PICK_N_CLUSTERS: Final = 3
# Concurrent writes the bench sends while creating objects, like a busy controller would.
WRITE_CONCURRENCY: Final = 16
WATCH_SECONDS: Final = 300
# A watch that broke is reopened after this pause.
REWATCH_PAUSE_S: Final = 0.2
POLL_S: Final = 0.05

CLUSTERS_PATH: Final = MemberCluster.api_path()
PLACEMENTS_PATH: Final = ClusterResourcePlacement.api_path()
BINDINGS_PATH: Final = ClusterResourceBinding.api_path()
MERGE_PATCH: Final = {"Content-Type": "application/merge-patch+json"}


def cluster_name(index: int) -> str:
    return f"member-{index:05d}"


def region_of(index: int) -> str:
    """Cluster `index`'s region: consecutive clusters go round the regions, shifted by one every
    ten, so the tainted ones (index 7 mod 10) fall in every region alike."""
    return REGIONS[(index + index // 10) % len(REGIONS)]


def fleet(size: int) -> list[dict[str, Any]]:
    """The wire form of `size` MemberClusters with a joined, healthy member agent's status."""
    now = datetime.now(UTC)
    shards = max(size // 2, 1)
    clusters = []
    for i in range(size):
        labels = {
            "env": ENVS[i % len(ENVS)],
            "region": region_of(i),
            "zone": ZONES[i % len(ZONES)],
            SHARD_LABEL: str(i % shards),
        }
        if i % 4 == 0:
            labels["tier"] = "gold"
        if i == 0:
            labels[ANCHOR_LABEL] = "true"
        nodes = 1000 if i == 0 else 10 + (i * 37) % 90
        cluster = member_cluster(
            cluster_name(i),
            now,
            labels=labels,
            taints=[("gpu", "true")] if i % 10 == 7 else [],
            properties={names.NODE_COUNT_PROPERTY: str(nodes)},
            capacity={"cpu": f"{nodes * 4}", "memory": f"{nodes * 16}Gi"},
            allocatable={"cpu": f"{nodes * 4}", "memory": f"{nodes * 16}Gi"},
            available={"cpu": f"{nodes * 2}", "memory": f"{nodes * 8}Gi"},
            heartbeat_age=timedelta(0),
        )
        clusters.append(cluster.to_wire())
    return clusters


def _pick_n(spread: bool) -> dict[str, Any]:
    policy: dict[str, Any] = {
        "placementType": "PickN",
        "numberOfClusters": PICK_N_CLUSTERS,
        "affinity": {
            "clusterAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "clusterSelectorTerms": [
                        {
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "env", "operator": "In", "values": ["prod", "staging"]}
                                ]
                            }
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {"labelSelector": {"matchLabels": {ANCHOR_LABEL: "true"}}},
                    },
                    {
                        "weight": 30,
                        "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}},
                    },
                    {
                        "weight": 60,
                        "preference": {
                            "propertySorter": {
                                "name": names.NODE_COUNT_PROPERTY,
                                "sortOrder": names.SORT_DESCENDING,
                            }
                        },
                    },
                ],
            }
        },
    }
    if spread:
        policy["topologySpreadConstraints"] = [
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": names.SCHEDULE_ANYWAY}
        ]
    return policy


def _pick_all(index: int, clusters: int) -> dict[str, Any]:
    shard = str(index % max(clusters // 2, 1))
    terms = [
        {"labelSelector": {"matchLabels": {SHARD_LABEL: shard}}},
        {"labelSelector": {"matchLabels": {ANCHOR_LABEL: "true"}}},
    ]
    return {
        "placementType": "PickAll",
        "affinity": {
            "clusterAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": terms}
            }
        },
    }


def _pick_fixed(index: int, clusters: int) -> dict[str, Any]:
    other = cluster_name(1 + (index * 7) % max(clusters - 1, 1))
    return {"placementType": "PickFixed", "clusterNames": sorted({ANCHOR, other})}


def placement(name: str, index: int, clusters: int) -> dict[str, Any]:
    """Placement number `index` of the mix (70% PickN, one in seven of them with a topology
    spread constraint; 20% PickAll; 10% PickFixed)."""
    slot = index % 10
    if slot < 7:
        policy = _pick_n(spread=slot == 6)
    elif slot < 9:
        policy = _pick_all(index, clusters)
    else:
        policy = _pick_fixed(index, clusters)
    return crp(name, policy)


def crp(name: str, policy: dict[str, Any]) -> dict[str, Any]:
    """The wire form of a ClusterResourcePlacement of the namespace `name` with `policy`."""
    return {
        "apiVersion": f"{ClusterResourcePlacement.GROUP}/{ClusterResourcePlacement.VERSION}",
        "kind": ClusterResourcePlacement.KIND,
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [
                {"group": "", "version": "v1", "kind": "Namespace", "name": name}
            ],
            "policy": policy,
        },
    }


def _required(*expressions: dict[str, Any]) -> dict[str, Any]:
    """Required cluster affinity: one term, every expression of it must hold."""
    term = {"labelSelector": {"matchExpressions": list(expressions)}}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [term]}}


def _label_in(key: str, values: Iterable[str]) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": sorted(values)}


# Preferences of the mix's PickN placements: gold clusters, then the biggest ones.
_PREFERRED: Final = [
    {"weight": 30, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}},
    {
        "weight": 60,
        "preference": {
            "propertySorter": {
                "name": names.NODE_COUNT_PROPERTY,
                "sortOrder": names.SORT_DESCENDING,
            }
        },
    },
]


def region_env_placement(name: str, index: int, pick_n: int) -> dict[str, Any]:
    """Placement number `index` of a mix by region and environment, as KubeFleet's scale tests
    use: 70% PickN `pick_n` whose required affinity reads env (prod or staging), region (five of
    the ten, turning with `index`) or both, preferring gold and big clusters; 20% PickAll of one
    region; 10% PickAll of one env. None tolerates the `gpu` taint."""
    slot = index % 10
    turn = index // 10
    if slot < 7:
        regions = {REGIONS[(turn + k) % len(REGIONS)] for k in range(len(REGIONS) // 2)}
        by_env = _label_in("env", ("prod", "staging"))
        by_region = _label_in("region", regions)
        expressions = ((by_env,), (by_region,), (by_env, by_region))[index % 3]
        policy: dict[str, Any] = {
            "placementType": "PickN",
            "numberOfClusters": pick_n,
            "affinity": {
                "clusterAffinity": {
                    **_required(*expressions),
                    "preferredDuringSchedulingIgnoredDuringExecution": _PREFERRED,
                }
            },
        }
    elif slot < 9:
        region = REGIONS[(turn * 2 + slot) % len(REGIONS)]
        policy = {
            "placementType": "PickAll",
            "affinity": {"clusterAffinity": _required(_label_in("region", (region,)))},
        }
    else:
        env = ENVS[turn % len(ENVS)]
        policy = {
            "placementType": "PickAll",
            "affinity": {"clusterAffinity": _required(_label_in("env", (env,)))},
        }
    return crp(name, policy)


def wide_pick_n(name: str, count: int) -> dict[str, Any]:
    """A PickN `count` placement that any untainted cluster may take (no required affinity),
    preferring gold and big clusters."""
    policy = {
        "placementType": "PickN",
        "numberOfClusters": count,
        "affinity": {
            "clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": _PREFERRED}
        },
    }
    return crp(name, policy)


def policy_change(current: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that changes the placement's policy (a new policy snapshot): tolerate the
    `gpu` taint, which lets PickAll and PickN consider the tainted clusters."""
    policy = current["spec"]["policy"]
    tolerations = [{"key": "gpu", "operator": "Exists"}]
    if policy.get("placementType") == "PickFixed":
        # Tolerations mean nothing to PickFixed; changing its clusters is its policy change.
        clusters = set(policy["clusterNames"])
        added = next(cluster_name(i) for i in range(2, 5) if cluster_name(i) not in clusters)
        return {"spec": {"policy": {"clusterNames": sorted({*clusters, added})}}}
    return {"spec": {"policy": {"tolerations": tolerations}}}


class Hub:
    """The bench's own HTTP client of devhub (bearer token, plain HTTP on devhub's port)."""

    def __init__(self, url: str, token: str, connections: int = WRITE_CONCURRENCY * 2 + 8) -> None:
        self.url = url
        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {token}"},
            connector=aiohttp.TCPConnector(limit=connections),
            timeout=aiohttp.ClientTimeout(total=300, sock_read=WATCH_SECONDS + 30),
        )

    async def close(self) -> None:
        await self._session.close()

    async def _call(
        self, method: str, path: str, *, body: Any = None, params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None, ok: Iterable[int] = (200, 201),
    ) -> Any:
        data = None if body is None else json.dumps(body)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        async with self._session.request(
            method, self.url + path, data=data, params=params, headers=hdrs
        ) as response:
            text = await response.read()
            if response.status not in set(ok):
                raise RuntimeError(f"{method} {path}: {response.status} {text[:300]!r}")
            return json.loads(text) if text else None

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self._call("POST", path, body=obj)
        return created

    async def get(self, path: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self._call("GET", f"{path}/{name}")
        return found

    async def patch(self, path: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = await self._call(
            "PATCH", f"{path}/{name}", body=patch, headers=MERGE_PATCH
        )
        return patched

    async def delete(self, path: str, name: str) -> None:
        await self._call("DELETE", f"{path}/{name}", ok=(200, 202, 404))

    async def list(self, path: str, selector: str | None = None) -> dict[str, Any]:
        params = {"labelSelector": selector} if selector else None
        listed: dict[str, Any] = await self._call("GET", path, params=params)
        return listed

    async def put_status(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        updated: dict[str, Any] = await self._call("PUT", f"{path}/{name}/status", body=obj)
        return updated

    async def add_clusters(self, clusters: list[dict[str, Any]]) -> None:
        """Create each cluster, then write its status (a create drops status, as on a hub)."""

        async def add(cluster: dict[str, Any]) -> None:
            body = {k: v for k, v in cluster.items() if k != "status"}
            created = await self.create(CLUSTERS_PATH, body)
            created["status"] = cluster["status"]
            await self.put_status(CLUSTERS_PATH, created)

        await each(clusters, add)

    async def refresh_heartbeats(self, names_: list[str]) -> None:
        """What member agents do every minute: a fresh lastReceivedHeartbeat."""
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        async def beat(name: str) -> None:
            current = await self.get(CLUSTERS_PATH, name)
            for agent in current.get("status", {}).get("agentStatus", []):
                agent["lastReceivedHeartbeat"] = stamp
            await self.put_status(CLUSTERS_PATH, current)

        await each(names_, beat)

    async def resource_version(self, path: str) -> str:
        listed = await self._call("GET", path, params={"limit": "1"})
        return str(listed["metadata"]["resourceVersion"])

    async def watch(
        self, path: str, resource_version: str, on_event: Callable[[str, dict[str, Any]], None]
    ) -> str:
        """Deliver events after `resource_version` until the stream ends; the last version seen.
        Raises GoneError (RuntimeError) when the version is too old."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(WATCH_SECONDS),
            "allowWatchBookmarks": "true",
        }
        async with self._session.get(self.url + path, params=params) as response:
            if response.status == 410:
                raise GoneError(path)
            if response.status != 200:
                raise RuntimeError(f"watch {path}: {response.status} {await response.text()}")
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":
                    if event["object"].get("code") == 410:
                        raise GoneError(path)
                    raise RuntimeError(f"watch {path}: {event['object']}")
                obj = event["object"]
                resource_version = obj["metadata"].get("resourceVersion", resource_version)
                if event["type"] != "BOOKMARK":
                    on_event(event["type"], obj)
        return resource_version


class GoneError(RuntimeError):
    """The watch's resourceVersion is older than devhub's event window."""


async def each(
    items: Iterable[Any], call: Callable[[Any], Any], limit: int = WRITE_CONCURRENCY
) -> None:
    """Await `call(item)` for every item, `limit` at a time; the first failure is raised."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def worker() -> None:
        while True:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await call(item)

    await asyncio.gather(*(worker() for _ in range(limit)))


@dataclass
class PlacementState:
    generation: int = 0
    # generation -> when its Scheduled condition was first seen True for it (monotonic time)
    scheduled: dict[int, float] = field(default_factory=dict)
    last_binding: float | None = None  # the newest binding write seen for it
    bindings: set[str] = field(default_factory=set)
    # When each binding name was first seen, in order: bound[n - 1] is when it had n bindings.
    bound: list[float] = field(default_factory=list)
    deleted: float | None = None


class Tracker:
    """Watches placements and bindings; keeps, per placement, when it was scheduled and when its
    bindings were written. Times are `time.monotonic()` at arrival in this process."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self.placements: dict[str, PlacementState] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.errors: list[str] = []

    def state(self, name: str) -> PlacementState:
        found = self.placements.get(name)
        if found is None:
            found = self.placements[name] = PlacementState()
        return found

    async def start(self) -> None:
        for path, handler in (
            (PLACEMENTS_PATH, self._on_placement),
            (BINDINGS_PATH, self._on_binding),
        ):
            rv = await self._hub.resource_version(path)
            self._tasks.append(asyncio.create_task(self._watch(path, rv, handler)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _watch(
        self, path: str, rv: str, handler: Callable[[str, dict[str, Any]], None]
    ) -> None:
        while True:
            try:
                rv = await self._hub.watch(path, rv, handler)
            except GoneError:
                # Fell behind devhub's window: take a list (as an informer would) and go on.
                listed = await self._hub.list(path)
                for obj in listed.get("items") or []:
                    handler("MODIFIED", obj)
                rv = str(listed["metadata"]["resourceVersion"])
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.errors.append(f"{path}: {exc!r}")
                await asyncio.sleep(REWATCH_PAUSE_S)

    def _on_placement(self, event: str, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        meta = obj["metadata"]
        state = self.state(meta["name"])
        if event == "DELETED":
            state.deleted = now
            return
        generation = int(meta.get("generation") or 0)
        state.generation = max(state.generation, generation)
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if (
                condition.get("type") == names.PLACEMENT_SCHEDULED_CONDITION
                and condition.get("status") == "True"
                and condition.get("observedGeneration") == generation
            ):
                state.scheduled.setdefault(generation, now)

    def _on_binding(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        parent = (meta.get("labels") or {}).get(names.PARENT_PLACEMENT_LABEL)
        if parent is None:
            return
        state = self.state(parent)
        if event == "DELETED":
            state.bindings.discard(meta["name"])
            return
        now = time.monotonic()
        if meta["name"] not in state.bindings:
            state.bindings.add(meta["name"])
            state.bound.append(now)
        state.last_binding = now

    def bound_at(self, name: str, count: int) -> float | None:
        """When `name` was first seen with `count` bindings (deleted ones included)."""
        state = self.placements.get(name)
        if state is None or len(state.bound) < count:
            return None
        return state.bound[count - 1]

    def scheduled_at(self, name: str, generation: int = 1) -> float | None:
        """When `name` was first seen scheduled at `generation` or later."""
        state = self.placements.get(name)
        if state is None:
            return None
        times = [t for g, t in state.scheduled.items() if g >= generation]
        return min(times) if times else None

    async def wait_scheduled(
        self, names_: Iterable[str], timeout: float, what: str, generation: int = 1
    ) -> float:
        """`wait` until every placement is fully scheduled at `generation` or later; returns
        when the last of them was seen so, however long after that the wait began (a bench
        may wait for a placement only once other work is done)."""
        waited = list(names_)
        await self.wait(
            lambda n: self.scheduled_at(n, generation) is not None, waited, timeout, what
        )
        seen = [self.scheduled_at(n, generation) or 0.0 for n in waited]
        return max(seen, default=time.monotonic())

    async def wait(
        self, done: Callable[[str], bool], names_: Iterable[str], timeout: float, what: str
    ) -> float:
        """Wait until `done(name)` for every name; returns monotonic time when the last was."""
        pending = set(names_)
        deadline = time.monotonic() + timeout
        while pending:
            pending = {n for n in pending if not done(n)}
            if not pending:
                break
            if time.monotonic() > deadline:
                sample = ", ".join(sorted(pending)[:5])
                raise TimeoutError(
                    f"{what}: {len(pending)} not done after {timeout:.0f}s (e.g. {sample})"
                )
            await asyncio.sleep(POLL_S)
        return time.monotonic()
