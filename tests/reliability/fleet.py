"""A fleet under churn, and the model of what the scheduler must end up with.

`Fleet` creates member clusters and placements in the hub, then changes them the way users do
(new placements, policy and numberOfClusters edits, deletions, cluster label changes, new
clusters) from a seeded random generator, so a failing run can be replayed. Beside every
change it keeps a model: per placement, which bindings a correct scheduler must hold once
things settle (`Expectation`), from the final cluster labels alone.

The changes are chosen so that the expectation is exact under KubeFleet's rules:
- PickAll placements select on `env` (never changed) or on `gold=true`, a label clusters only
  ever gain, so the matching set only grows and IgnoredDuringExecution never leaves a binding
  on a cluster that no longer matches (kubefleet-rules 4.5);
- PickN placements only prefer (weights), never require, so N is always reachable: exactly N
  live bindings;
- PickFixed placements name existing, eligible clusters: exactly those.
Cluster heartbeats are refreshed by `refresh_heartbeats`, so nothing goes ineligible during a
long soak (KubeFleet's five-minute heartbeat timeout).

Every write retries through injected faults (500/503/429/409) and a devhub that is restarting:
the test's own writes must land, whatever the hub does to the scheduler's."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from hub import names
from hub.client import HubClient
from hub.errors import (
    AlreadyExistsError,
    ConflictError,
    HubUnavailableError,
    NotFoundError,
)
from hub.types import ClusterResourcePlacement, MemberCluster, ObjectMeta
from scheduler.testing import member_cluster

__all__ = ["Expectation", "Fleet", "PlacementModel", "retrying"]

T = TypeVar("T")

ENVS: Final = ("prod", "dev", "staging")
ZONES: Final = ("1", "2", "3", "4")
GOLD: Final = "gold"
MAX_PICK_N: Final = 5
# The test's own writes keep trying this long through faults and restarts.
WRITE_DEADLINE_S: Final = 90.0
WRITE_RETRY_S: Final = 0.3
WRITE_PARALLELISM: Final = 6
HEARTBEAT_AGE: Final = timedelta(seconds=5)
# Every cluster reports room enough for every capacity-aware placement (a share of them asks
# REQUESTS per binding): their decisions are those of the model, and the ledgers, the
# reservations and `fleet-scheduler check` are exercised under the same chaos.
ALLOCATABLE: Final = {"cpu": "1000", "memory": "4Ti"}
REQUESTS: Final = "cpu=1,memory=1Gi"
CAPACITY_AWARE_SHARE: Final = 0.3


def retrying(write: Callable[[], T], *, deadline_s: float = WRITE_DEADLINE_S) -> T:
    """Run `write` until it stops failing transiently (injected faults, a restarting hub)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return write()
        except (HubUnavailableError, ConflictError):
            if time.monotonic() > deadline:
                raise
            time.sleep(WRITE_RETRY_S)


@dataclass(frozen=True)
class Expectation:
    """Live bindings (not Unscheduled, not deleting) a settled placement must have: exactly the
    clusters in `exact`, or, when `exact` is None, `count` distinct clusters."""

    exact: frozenset[str] | None = None
    count: int | None = None

    def violations(self, targets: list[str]) -> list[str]:
        if self.exact is not None and set(targets) != self.exact:
            missing = sorted(self.exact - set(targets))
            extra = sorted(set(targets) - self.exact)
            return [f"bindings differ: missing {missing}, unexpected {extra}"]
        if self.count is not None and len(set(targets)) != self.count:
            return [f"{len(set(targets))} live bindings, expected {self.count}"]
        return []


@dataclass
class PlacementModel:
    name: str
    placement_type: str
    number: int = 0  # PickN
    require: dict[str, str] = field(default_factory=dict)  # PickAll matchLabels
    prefer: dict[str, str] = field(default_factory=dict)  # PickN preferred matchLabels
    weight: int = 0
    fixed: list[str] = field(default_factory=list)  # PickFixed
    requests: str | None = None  # capacity-aware: what one binding asks for

    def policy(self) -> dict[str, Any]:
        policy: dict[str, Any] = {"placementType": self.placement_type}
        if self.placement_type == names.PICK_N:
            policy["numberOfClusters"] = self.number
            if self.prefer:
                term = {"labelSelector": {"matchLabels": dict(self.prefer)}}
                policy["affinity"] = {
                    "clusterAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": self.weight, "preference": term}
                        ]
                    }
                }
        elif self.placement_type == names.PICK_ALL:
            if self.require:
                terms = [{"labelSelector": {"matchLabels": dict(self.require)}}]
                policy["affinity"] = {
                    "clusterAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "clusterSelectorTerms": terms
                        }
                    }
                }
        else:
            policy["clusterNames"] = list(self.fixed)
        return policy

    def expectation(self, clusters: dict[str, dict[str, str]]) -> Expectation:
        if self.placement_type == names.PICK_N:
            return Expectation(count=self.number)
        if self.placement_type == names.PICK_FIXED:
            return Expectation(exact=frozenset(self.fixed))
        return Expectation(
            exact=frozenset(
                name
                for name, labels in clusters.items()
                if all(labels.get(k) == v for k, v in self.require.items())
            )
        )


class Fleet:
    """The clusters and placements a test drives, and the model of both."""

    def __init__(self, hub: HubClient, *, seed: int, prefix: str = "p") -> None:
        self.hub = hub
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.clusters: dict[str, dict[str, str]] = {}
        self.placements: dict[str, PlacementModel] = {}
        self.deleted: set[str] = set()
        self.changes: dict[str, int] = {}  # counts by kind of change, for the report
        self._next_placement = 0

    def _count(self, kind: str, n: int = 1) -> None:
        self.changes[kind] = self.changes.get(kind, 0) + n

    # --- clusters ----------------------------------------------------------------------------

    def add_clusters(self, count: int) -> list[str]:
        start = len(self.clusters)
        added = []
        for index in range(start, start + count):
            name = f"member-{index:03d}"
            labels = {"env": ENVS[index % len(ENVS)], "zone": ZONES[index % len(ZONES)]}
            self.clusters[name] = labels
            added.append(name)
        self._parallel(added, self._create_cluster)
        self._count("clusters added", count)
        return added

    def _create_cluster(self, name: str) -> None:
        wanted = member_cluster(
            name,
            datetime.now(UTC),
            labels=self.clusters[name],
            heartbeat_age=HEARTBEAT_AGE,
            allocatable=ALLOCATABLE,
        )
        bare = wanted.model_copy(
            update={"metadata": ObjectMeta(name=name, labels=wanted.metadata.labels)}
        )
        # AlreadyExists: an earlier attempt landed before its answer was lost.
        with contextlib.suppress(AlreadyExistsError):
            retrying(lambda: self.hub.create(bare))
        self._write_status(name, wanted)

    def _write_status(self, name: str, wanted: MemberCluster) -> None:
        def write() -> None:
            current = self.hub.get(MemberCluster, name)
            self.hub.update_status(current.model_copy(update={"status": wanted.status}))

        retrying(write)

    def refresh_heartbeats(self) -> None:
        """A fresh member-agent heartbeat on every cluster (status only: the watcher ignores it)."""

        def refresh(name: str) -> None:
            wanted = member_cluster(
                name,
                datetime.now(UTC),
                labels=self.clusters[name],
                heartbeat_age=HEARTBEAT_AGE,
                allocatable=ALLOCATABLE,
            )
            self._write_status(name, wanted)

        self._parallel(list(self.clusters), refresh)

    def relabel(self, count: int) -> list[str]:
        """Make `count` clusters gold (they never lose it) and move `count` to another zone."""
        plain = [name for name, labels in self.clusters.items() if GOLD not in labels]
        golden = self.rng.sample(plain, min(count, len(plain)))
        moved = self.rng.sample(list(self.clusters), min(count, len(self.clusters)))
        patches: dict[str, dict[str, str]] = {}
        for name in golden:
            self.clusters[name][GOLD] = "true"
            patches.setdefault(name, {})[GOLD] = "true"
        for name in moved:
            zone = self.rng.choice([z for z in ZONES if z != self.clusters[name]["zone"]])
            self.clusters[name]["zone"] = zone
            patches.setdefault(name, {})["zone"] = zone

        def patch(name: str) -> None:
            body = {"metadata": {"labels": patches[name]}}
            retrying(lambda: self.hub.patch(MemberCluster, name, body))

        self._parallel(list(patches), patch)
        self._count("cluster label changes", len(patches))
        return list(patches)

    # --- placements --------------------------------------------------------------------------

    def _new_model(self, name: str | None = None) -> PlacementModel:
        if name is None:
            name = f"{self.prefix}-{self._next_placement:04d}"
            self._next_placement += 1
        roll = self.rng.random()
        asks = REQUESTS if self.rng.random() < CAPACITY_AWARE_SHARE else None
        if roll < 0.3:
            require = self.rng.choice([{}, {"env": self.rng.choice(ENVS)}, {GOLD: "true"}])
            return PlacementModel(name, names.PICK_ALL, require=require, requests=asks)
        if roll < 0.8:
            return PlacementModel(
                name,
                names.PICK_N,
                number=self.rng.randint(1, MAX_PICK_N),
                prefer={"env": self.rng.choice(ENVS)},
                weight=self.rng.choice([10, 50, -20]),
                requests=asks,
            )
        fixed = self.rng.sample(sorted(self.clusters), self.rng.randint(1, 3))
        return PlacementModel(name, names.PICK_FIXED, fixed=fixed, requests=asks)

    def add_placements(self, count: int) -> list[str]:
        models = [self._new_model() for _ in range(count)]
        for model in models:
            self.placements[model.name] = model
        self._parallel(models, self._create_placement)
        self._count("placements created", count)
        return [m.name for m in models]

    def add_placement(self, model: PlacementModel) -> str:
        """Create one placement of the caller's choosing."""
        self.placements[model.name] = model
        self._create_placement(model)
        self._count("placements created")
        return model.name

    def _create_placement(self, model: PlacementModel) -> None:
        annotations = {names.REQUESTS_ANNOTATION: model.requests} if model.requests else {}
        placement = ClusterResourcePlacement.from_wire(
            {
                "metadata": {"name": model.name, "annotations": annotations},
                "spec": {
                    "resourceSelectors": [
                        {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                    ],
                    "policy": model.policy(),
                },
            }
        )
        with contextlib.suppress(AlreadyExistsError):
            retrying(lambda: self.hub.create(placement))

    def modify(self, count: int) -> list[str]:
        """Change the policy of `count` placements (numberOfClusters, affinity, cluster names)."""
        chosen = self.rng.sample(sorted(self.placements), min(count, len(self.placements)))
        for name in chosen:
            model = self.placements[name]
            if model.placement_type == names.PICK_N:
                if self.rng.random() < 0.6:
                    model.number = self.rng.choice(
                        [n for n in range(1, MAX_PICK_N + 1) if n != model.number]
                    )
                    self._count("numberOfClusters changes")
                else:
                    model.prefer = {"zone": self.rng.choice(ZONES)}
                    model.weight = self.rng.choice([30, 70])
                    self._count("affinity changes")
            elif model.placement_type == names.PICK_ALL:
                options = [{}, {"env": self.rng.choice(ENVS)}, {GOLD: "true"}]
                model.require = self.rng.choice([o for o in options if o != model.require])
                self._count("affinity changes")
            else:
                model.fixed = self.rng.sample(sorted(self.clusters), self.rng.randint(1, 3))
                self._count("cluster name changes")

        def patch(name: str) -> None:
            # Replace the whole policy: a merge patch would keep keys the new policy dropped.
            policy = self.placements[name].policy()
            body = [{"op": "replace", "path": "/spec/policy", "value": policy}]
            retrying(lambda: self.hub.json_patch(ClusterResourcePlacement, name, body))

        self._parallel(chosen, patch)
        return chosen

    def delete(self, count: int) -> list[str]:
        chosen = self.rng.sample(sorted(self.placements), min(count, len(self.placements)))
        for name in chosen:
            del self.placements[name]
            self.deleted.add(name)

        def delete(name: str) -> None:
            with contextlib.suppress(NotFoundError):  # an earlier attempt landed
                retrying(lambda: self.hub.delete(ClusterResourcePlacement, name))

        self._parallel(chosen, delete)
        self._count("placements deleted", len(chosen))
        return chosen

    def recreate(self, count: int) -> list[str]:
        """Create new placements under the names of deleted ones that are gone from the hub:
        the new one must get a new workflow (the old one completed or is completing)."""
        present = {p.name for p in retrying(lambda: self.hub.list(ClusterResourcePlacement))}
        gone = sorted(self.deleted - present)
        chosen = self.rng.sample(gone, min(count, len(gone)))
        models = [self._new_model(name) for name in chosen]
        for model in models:
            self.deleted.discard(model.name)
            self.placements[model.name] = model
        self._parallel(models, self._create_placement)
        self._count("placements re-created", len(models))
        return chosen

    def churn(self, size: int) -> None:
        """One round of user activity, about `size` changes of each kind."""
        self.add_placements(size)
        self.modify(size)
        self.recreate(max(1, size // 4))
        self.delete(max(1, size // 2))
        self.relabel(max(1, size // 8))

    # --- expectations ------------------------------------------------------------------------

    def expectations(self) -> dict[str, Expectation]:
        return {name: model.expectation(self.clusters) for name, model in self.placements.items()}

    def _parallel(self, items: Iterable[Any], write: Callable[[Any], None]) -> None:
        with ThreadPoolExecutor(max_workers=WRITE_PARALLELISM) as pool:
            for future in [pool.submit(write, item) for item in items]:
                future.result()  # bounded by: each write's own deadline (`retrying`)
