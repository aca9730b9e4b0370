"""KubeFleet's scheduler integration suite (kubefleet-dev/kubefleet `test/scheduler`) rebuilt on our
hub API, so that its ResourcePlacement scenarios run against `fleet-scheduler dev` as a black box.

What KubeFleet's suite_test.go, utils_test.go and actuals_test.go provide, this module provides:

- `Fleet.start`: a `fleet-scheduler dev` process (real devhub, real Temporal dev server) with
  KubeFleet's fleet: nine member clusters with region/env labels and properties, cluster 8
  unhealthy (heartbeat and agent conditions 25 h old), cluster 9 left (deleted while a finalizer
  holds it), and the test namespace. The scheduler runs with `--no-snapshotter` and KubeFleet's
  24 h eligibility timeouts, as the suite runs its scheduler, since no agent sends heartbeats,
  and without the reconcile safety net (`--reconcile-every 0`): KubeFleet's scheduler has none,
  and builds its fleet before it starts. Ours starts first, so a reconcile run recorded the fleet
  half built, and the next one (on a five-minute wall-clock boundary, whenever it fell in a
  test) requeued the placement of the moment for the unhealthy cluster, whose change since no
  cycle's version makes moot (scheduler.requeue.decided): a second cycle of a fulfilled PickN
  writes decisions from its bindings only, and a "Consistently" on its status failed.
- placements and policy snapshots made and edited by hand, as KubeFleet's helpers make them in
  place of its placement controller;
- the checks ("actuals"): `Fleet.expect_*` raise AssertionError saying what differs, and
  `eventually`, `consistently` and `settles` poll them as Gomega's Eventually/Consistently do.

Only the hub API is used: HubClient over HTTP, and the official client for core Namespaces."""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

import kubernetes.client
import kubernetes.config
import pytest

from hub import names
from hub.client import HubClient
from hub.errors import ConflictError, NotFoundError
from hub.kinds import PlacementKinds, kinds_for, placement_key
from hub.types import (
    Affinity,
    AgentStatus,
    ClusterAffinity,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementSpec,
    ClusterSchedulingPolicySnapshot,
    ClusterScore,
    ClusterSelector,
    ClusterSelectorTerm,
    Condition,
    LabelSelector,
    LabelSelectorRequirement,
    MemberCluster,
    MemberClusterSpec,
    ObjectMeta,
    PlacementPolicy,
    PreferredClusterSelector,
    PropertyValue,
    ResourceSelector,
    ResourceUsage,
    SchedulingPolicySnapshotSpec,
)
from hub.types.meta import HubObject
from tests.support.cli import DevProcess
from tests.support.waits import consistently, passes

T = TypeVar("T")

# Gomega's timings in KubeFleet's suite, except the Eventually poll (2 s there): a tenth of a
# second keeps a scenario at the speed of the scheduler rather than of the poll.
EVENTUALLY_S: Final = 30.0
POLL_S: Final = 0.1
CONSISTENTLY_S: Final = 1.0
CONSISTENTLY_POLL_S: Final = 0.2

BLOCKER_FINALIZER: Final = "custom-deletion-blocker"
ADMIN_IDENTITY: Final = {"kind": "ServiceAccount", "apiGroup": "", "name": "admin"}
UNHEALTHY_AGE: Final = timedelta(hours=25)
DUMMY_REASON: Final = "dummyReason"
TEST_NAMESPACE: Final = "test-namespace"
# Go's []byte("policy-hash") on the wire.
POLICY_HASH: Final = base64.b64encode(b"policy-hash").decode()
# Nothing collects resources here, so every placement selects the same (absent) namespace.
RESOURCE_SELECTORS: Final = (
    ResourceSelector(group="core", version="v1", kind="Namespace", name="work"),
)
# KubeFleet's suite gives its eligibility checker 24 h timeouts: no agent sends heartbeats here.
PROFILE: Final = """\
pluginConfig:
  - name: ClusterEligibility
    args: {heartbeat_timeout_minutes: 1440, health_timeout_minutes: 1440}
"""

CLUSTER_1: Final = "cluster-1-east-prod"
CLUSTER_2: Final = "cluster-2-east-prod"
CLUSTER_3: Final = "cluster-3-east-canary"
CLUSTER_4: Final = "cluster-4-central-prod"
CLUSTER_5: Final = "cluster-5-central-prod"
CLUSTER_6: Final = "cluster-6-west-prod"
CLUSTER_7: Final = "cluster-7-west-canary"
CLUSTER_8_UNHEALTHY: Final = "unhealthy-cluster-east-prod"
CLUSTER_9_LEFT: Final = "left-cluster-central-prod"
CLUSTER_10_NON_EXISTENT: Final = "non-existent-cluster"

ALL_CLUSTERS: Final = (
    CLUSTER_1, CLUSTER_2, CLUSTER_3, CLUSTER_4, CLUSTER_5, CLUSTER_6, CLUSTER_7,
    CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT,
)  # fmt: skip
HEALTHY: Final = ALL_CLUSTERS[:7]
UNHEALTHY: Final = (CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT)

REGION: Final = "region"
ENV: Final = "env"
LABELS: Final[Mapping[str, Mapping[str, str]]] = {
    CLUSTER_1: {REGION: "east", ENV: "prod"},
    CLUSTER_2: {REGION: "east", ENV: "prod"},
    CLUSTER_3: {REGION: "east", ENV: "canary"},
    CLUSTER_4: {REGION: "central", ENV: "prod"},
    CLUSTER_5: {REGION: "central", ENV: "prod"},
    CLUSTER_6: {REGION: "west", ENV: "prod"},
    CLUSTER_7: {REGION: "west", ENV: "canary"},
    CLUSTER_8_UNHEALTHY: {REGION: "east", ENV: "prod"},
    CLUSTER_9_LEFT: {REGION: "central", ENV: "prod"},
}

ENERGY_RATING: Final = "test.only/energy-efficiency-rating"


@dataclass(frozen=True)
class Usage:
    """A cluster's CPU and memory: (cpu, memory) quantities, total / allocatable / available."""

    capacity: tuple[str, str]
    allocatable: tuple[str, str]
    available: tuple[str, str]


# (node count, energy-efficiency rating, usage); the left cluster 9 has none.
PROPERTIES: Final[Mapping[str, tuple[str, str, Usage]]] = {
    CLUSTER_1: ("2", "100", Usage(("4", "4Gi"), ("3", "3Gi"), ("2", "2Gi"))),
    CLUSTER_2: ("4", "60", Usage(("8", "8Gi"), ("7", "7Gi"), ("4", "4Gi"))),
    CLUSTER_3: ("6", "40", Usage(("12", "12Gi"), ("11", "11Gi"), ("6", "6Gi"))),
    CLUSTER_4: ("2", "80", Usage(("8", "4Gi"), ("6", "2Gi"), ("2", "1Gi"))),
    CLUSTER_5: ("8", "40", Usage(("32", "16Gi"), ("30", "14Gi"), ("8", "4Gi"))),
    CLUSTER_6: ("2", "60", Usage(("4", "8Gi"), ("2", "6Gi"), ("1", "4Gi"))),
    CLUSTER_7: ("8", "20", Usage(("16", "32Gi"), ("14", "30Gi"), ("4", "16Gi"))),
    CLUSTER_8_UNHEALTHY: ("1", "100", Usage(("8", "8Gi"), ("6", "6Gi"), ("0", "0"))),
}

# A decision's score: PickAll and PickN decisions carry one, PickFixed decisions none.
Score = ClusterScore | None


def score(affinity: int, topology_spread: int = 0) -> ClusterScore:
    return ClusterScore(affinity_score=affinity, priority_score=topology_spread)


ZERO: Final = score(0, 0)
ZERO_SCORES: Final[Mapping[str, Score]] = dict.fromkeys(ALL_CLUSTERS, ZERO)
NO_SCORES: Final[Mapping[str, Score]] = {}


# --- placements and policies -------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """A placement: a ResourcePlacement in `namespace`, or a ClusterResourcePlacement (None)."""

    namespace: str | None
    name: str

    @property
    def kinds(self) -> PlacementKinds:
        return kinds_for(self.namespace)

    def __str__(self) -> str:
        return placement_key(self.namespace, self.name)


def rp(name: str, namespace: str = TEST_NAMESPACE) -> Key:
    return Key(namespace, name)


def crp(name: str) -> Key:
    return Key(None, name)


def snapshot_name(key: Key, index: int) -> str:
    """KubeFleet's suite names snapshots `<placement>-policy-snapshot-<index>`."""
    return f"{key.name}-policy-snapshot-{index}"


def term(
    match_labels: Mapping[str, str] | None = None, *expressions: tuple[str, str, Sequence[str]]
) -> ClusterSelectorTerm:
    """A cluster selector term with a label selector: matchLabels and (key, operator, values)."""
    return ClusterSelectorTerm(
        label_selector=LabelSelector(
            match_labels=dict(match_labels or {}),
            match_expressions=[
                LabelSelectorRequirement(key=key, operator=operator, values=list(values))
                for key, operator, values in expressions
            ],
        )
    )


def required(*terms: ClusterSelectorTerm) -> Affinity:
    return Affinity(
        cluster_affinity=ClusterAffinity(
            required_during_scheduling_ignored_during_execution=ClusterSelector(
                cluster_selector_terms=list(terms)
            )
        )
    )


def preferred(*weighted: tuple[int, ClusterSelectorTerm]) -> Affinity:
    return Affinity(
        cluster_affinity=ClusterAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                PreferredClusterSelector(weight=weight, preference=preference)
                for weight, preference in weighted
            ]
        )
    )


def pick_all(affinity: Affinity | None = None) -> PlacementPolicy:
    return PlacementPolicy(placement_type=names.PICK_ALL, affinity=affinity)


def pick_n(count: int, affinity: Affinity | None = None) -> PlacementPolicy:
    return PlacementPolicy(placement_type=names.PICK_N, number_of_clusters=count, affinity=affinity)


def pick_fixed(*clusters: str) -> PlacementPolicy:
    return PlacementPolicy(placement_type=names.PICK_FIXED, cluster_names=list(clusters))


# --- polling -----------------------------------------------------------------------------------


def settles(check: Callable[[], object]) -> None:
    """Eventually, then Consistently: the pair every KubeFleet binding and status check uses."""
    passes(check)
    consistently(check, duration=CONSISTENTLY_S)


def _retry_conflicts(write: Callable[[], T]) -> T:
    """Re-run a read-modify-write that lost a race with the scheduler (Conflict)."""

    def attempt() -> T:
        try:
            return write()
        except ConflictError as exc:
            raise AssertionError(f"conflict: {exc}") from exc

    return passes(attempt)


# --- the fleet ---------------------------------------------------------------------------------


def _agent(at: datetime) -> AgentStatus:
    """A member agent that joined, is healthy and sent a heartbeat, all at `at`."""
    return AgentStatus(
        type=names.MEMBER_AGENT,
        conditions=[
            Condition(type=kind, status=names.TRUE, last_transition_time=at, reason=DUMMY_REASON)
            for kind in (names.AGENT_JOINED_CONDITION, names.AGENT_HEALTHY_CONDITION)
        ],
        last_received_heartbeat=at,
    )


def _score_row(value: Score) -> dict[str, Any] | None:
    return None if value is None else value.to_wire()


def _binding_row(binding: ClusterResourceBinding) -> tuple[Any, ...]:
    decision = binding.spec.cluster_decision
    return (
        binding.spec.target_cluster,
        binding.metadata.namespace,
        dict(binding.metadata.labels),
        list(binding.metadata.finalizers),
        binding.metadata.deleting,
        binding.spec.state,
        binding.spec.scheduling_policy_snapshot_name,
        binding.spec.resource_snapshot_name,
        (decision.cluster_name, decision.selected, _score_row(decision.cluster_score)),
    )


def _decision_rows(
    decisions: Iterable[tuple[str, bool, Score]],
) -> list[tuple[str, bool, dict[str, Any] | None]]:
    rows = [(cluster, selected, _score_row(value)) for cluster, selected, value in decisions]
    return sorted(rows, key=lambda row: row[0])


class Fleet:
    """KubeFleet's test environment: the hub of a `fleet-scheduler dev` process and its fleet."""

    def __init__(self, dev: DevProcess) -> None:
        self.dev = dev
        self.hub: HubClient = dev.hub()
        self._core_client = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(dev.kubeconfig)
        )
        self.core = kubernetes.client.CoreV1Api(self._core_client)

    @classmethod
    @contextmanager
    def start(cls, workdir: Path) -> Iterator[Fleet]:
        """A dev process with KubeFleet's fleet and test namespace; stopped (exit 0) at the end."""
        workdir.mkdir(parents=True, exist_ok=True)
        profile = workdir / "profile.yaml"
        profile.write_text(PROFILE)
        dev = DevProcess(
            workdir, "--no-snapshotter", "--config", str(profile), "--reconcile-every", "0"
        ).start()
        try:
            fleet = cls(dev)
            try:
                fleet._set_up()
                yield fleet
            finally:
                fleet.hub.close()
                fleet._core_client.close()
        finally:
            code = dev.stop()
        assert code == 0, f"fleet-scheduler dev exited with {code}:\n{dev.stderr()[-4000:]}"

    def _set_up(self) -> None:
        """KubeFleet's setupResources, step by step."""
        for name in ALL_CLUSTERS:
            self.hub.create(
                MemberCluster(
                    metadata=ObjectMeta(name=name, finalizers=[BLOCKER_FINALIZER]),
                    spec=MemberClusterSpec(identity=ADMIN_IDENTITY),
                )
            )
        now = datetime.now(UTC)
        for name in ALL_CLUSTERS:
            self._set_agent(name, now)
        self.mark_unhealthy(CLUSTER_8_UNHEALTHY)
        for name, labels in LABELS.items():
            cluster = self.hub.get(MemberCluster, name)
            meta = cluster.metadata.model_copy(update={"labels": dict(labels)})
            self.hub.update(cluster.model_copy(update={"metadata": meta}))
        left = self.hub.delete(MemberCluster, CLUSTER_9_LEFT)
        assert left is not None and left.metadata.deleting, "cluster 9 should be held, leaving"
        for name in PROPERTIES:
            self._reset_properties(name)
        self.create_namespace(TEST_NAMESPACE)

    def add_cluster(self, name: str) -> None:
        """KubeFleet's createMemberCluster: a new cluster, labelled with its name, no agent yet."""
        self.hub.create(
            MemberCluster(
                metadata=ObjectMeta(name=name, labels={names.MEMBER_NAME_LABEL: name}),
                spec=MemberClusterSpec(identity=ADMIN_IDENTITY),
            )
        )

    def mark_healthy(self, name: str) -> None:
        self._set_agent(name, datetime.now(UTC))

    def mark_unhealthy(self, name: str) -> None:
        """Agent conditions and heartbeat 25 h old: past the suite's 24 h timeouts."""
        self._set_agent(name, datetime.now(UTC) - UNHEALTHY_AGE)

    def add_labels(self, name: str, labels: Mapping[str, str]) -> None:
        def write() -> None:
            cluster = self.hub.get(MemberCluster, name)
            meta = cluster.metadata.model_copy(
                update={"labels": {**cluster.metadata.labels, **labels}}
            )
            self.hub.update(cluster.model_copy(update={"metadata": meta}))

        _retry_conflicts(write)

    def remove_cluster(self, name: str) -> None:
        """KubeFleet's ensureProvisionalClusterDeletion."""
        self.hub.delete(MemberCluster, name)
        self._wait_gone(lambda: self.hub.get(MemberCluster, name))

    def _set_agent(self, name: str, at: datetime) -> None:
        cluster = self.hub.get(MemberCluster, name)
        status = cluster.status.model_copy(update={"agent_status": [_agent(at)]})
        self.hub.update_status(cluster.model_copy(update={"status": status}))

    def _reset_properties(self, name: str) -> None:
        nodes, energy, usage = PROPERTIES[name]
        now = datetime.now(UTC)

        def resources(pair: tuple[str, str]) -> dict[str, str]:
            return {"cpu": pair[0], "memory": pair[1]}

        cluster = self.hub.get(MemberCluster, name)
        status = cluster.status.model_copy(
            update={
                "properties": {
                    names.NODE_COUNT_PROPERTY: PropertyValue(value=nodes, observation_time=now),
                    ENERGY_RATING: PropertyValue(value=energy, observation_time=now),
                },
                "resource_usage": ResourceUsage(
                    capacity=resources(usage.capacity),
                    allocatable=resources(usage.allocatable),
                    available=resources(usage.available),
                    observation_time=now,
                ),
            }
        )
        self.hub.update_status(cluster.model_copy(update={"status": status}))

    # --- namespaces ----------------------------------------------------------------------------

    def create_namespace(self, name: str) -> None:
        self.core.create_namespace(
            kubernetes.client.V1Namespace(
                api_version="v1",
                kind="Namespace",
                metadata=kubernetes.client.V1ObjectMeta(name=name),
            )
        )

    def delete_namespace(self, name: str) -> None:
        self.core.delete_namespace(name)

    def expect_no_namespace(self, name: str) -> None:
        try:
            found = self.core.read_namespace(name)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return
            raise
        raise AssertionError(f"namespace {name} is still there: {found.status}")

    def set_namespace_collection(
        self, cluster: str, enabled: bool, namespaces: Mapping[str, str] | None
    ) -> None:
        """KubeFleet's setNamespaceCollectionOnCluster: the namespaces the member reports, with
        the NamespaceCollectionSucceeded condition when collection is enabled, none otherwise."""

        def write() -> None:
            current = self.hub.get(MemberCluster, cluster)
            conditions = [
                c
                for c in current.status.conditions
                if c.type != names.NAMESPACE_COLLECTION_CONDITION
            ]
            if enabled:
                conditions.append(
                    Condition(
                        type=names.NAMESPACE_COLLECTION_CONDITION,
                        status=names.TRUE,
                        reason="Succeeded",
                        message="All namespaces have been collected successfully",
                        last_transition_time=datetime.now(UTC),
                    )
                )
            status = current.status.model_copy(
                # Go leaves an empty map out of the JSON (omitempty): it arrives as no map.
                update={"namespaces": dict(namespaces) if namespaces else None,
                        "conditions": conditions}
            )  # fmt: skip
            self.hub.update_status(current.model_copy(update={"status": status}))

        _retry_conflicts(write)

    def clear_namespace_collection(self, cluster: str) -> None:
        self.set_namespace_collection(cluster, False, None)

    # --- placements and snapshots (KubeFleet's create*/update* helpers) ------------------------

    def create_placement(self, key: Key, snapshot: str, policy: PlacementPolicy | None) -> None:
        """The placement (held by KubeFleet's blocking finalizer) and its latest snapshot,
        annotated with the placement's generation (and N for PickN)."""
        created = self.hub.create(
            key.kinds.placement(
                metadata=ObjectMeta(
                    name=key.name, namespace=key.namespace, finalizers=[BLOCKER_FINALIZER]
                ),
                spec=ClusterResourcePlacementSpec(
                    resource_selectors=list(RESOURCE_SELECTORS), policy=policy
                ),
            )
        )
        self._create_snapshot(key, snapshot, policy, created.metadata.generation)

    def refresh_policy(
        self, key: Key, policy: PlacementPolicy, old_snapshot: str, new_snapshot: str
    ) -> None:
        """KubeFleet's update*AndRefreshSnapshots: the placement gets `policy`, the old snapshot
        stops being the latest, and a new one is made for the new generation."""

        def update_placement() -> ClusterResourcePlacement:
            current = self.placement(key)
            spec = current.spec.model_copy(update={"policy": policy})
            return self.hub.update(current.model_copy(update={"spec": spec}))

        updated = _retry_conflicts(update_placement)

        def retire_old() -> None:
            old = self.snapshot(key, old_snapshot)
            labels = {**old.metadata.labels, names.IS_LATEST_SNAPSHOT_LABEL: "false"}
            meta = old.metadata.model_copy(update={"labels": labels})
            self.hub.update(old.model_copy(update={"metadata": meta}))

        _retry_conflicts(retire_old)
        self._create_snapshot(key, new_snapshot, policy, updated.metadata.generation)

    def _create_snapshot(
        self, key: Key, name: str, policy: PlacementPolicy | None, generation: int | None
    ) -> None:
        assert generation is not None, f"{key}: the hub gave the placement no generation"
        annotations = {names.CRP_GENERATION_ANNOTATION: str(generation)}
        if policy is not None and policy.number_of_clusters is not None:
            annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(policy.number_of_clusters)
        self.hub.create(
            key.kinds.snapshot(
                metadata=ObjectMeta(
                    name=name,
                    namespace=key.namespace,
                    labels={
                        names.IS_LATEST_SNAPSHOT_LABEL: "true",
                        names.PARENT_PLACEMENT_LABEL: key.name,
                    },
                    annotations=annotations,
                ),
                spec=SchedulingPolicySnapshotSpec(policy=policy, policy_hash=POLICY_HASH),
            )
        )

    def set_number_of_clusters(self, key: Key, snapshot: str, count: int) -> None:
        """How KubeFleet's suite scales a PickN placement without a placement controller: the
        number-of-clusters annotation of its snapshot."""

        def write() -> None:
            current = self.snapshot(key, snapshot)
            annotations = {
                **current.metadata.annotations,
                names.NUMBER_OF_CLUSTERS_ANNOTATION: str(count),
            }
            meta = current.metadata.model_copy(update={"annotations": annotations})
            self.hub.update(current.model_copy(update={"metadata": meta}))

        _retry_conflicts(write)

    def mark_bound(self, key: Key, clusters: Iterable[str]) -> None:
        """KubeFleet's markBindingsAsBoundForClusters: what its rollout controller would do."""
        wanted = set(clusters)
        for binding in self.bindings(key):
            if (
                binding.spec.target_cluster in wanted
                and binding.spec.state == names.STATE_SCHEDULED
            ):
                spec = binding.spec.model_copy(update={"state": names.STATE_BOUND})
                self.hub.update(binding.model_copy(update={"spec": spec}))

    def delete_and_wait(self, key: Key) -> None:
        """KubeFleet's ensurePlacementAndAllRelatedResourcesDeletion: delete the placement; its
        bindings go, then the scheduler's finalizer; drop the blocking finalizer and see the
        placement gone; then delete its snapshots."""
        self.hub.delete(key.kinds.placement, key.name, namespace=key.namespace)
        self.wait_cleaned_up(key)
        self.release(key)
        for snapshot in self.snapshots(key):
            self.hub.delete(key.kinds.snapshot, snapshot.name, namespace=key.namespace)
            self._wait_gone(functools.partial(self.snapshot, key, snapshot.name))

    def wait_cleaned_up(self, key: Key) -> None:
        """A deleted placement loses its bindings, and only then the scheduler's finalizer."""
        settles(lambda: self._expect_bindings_go_first(key))
        passes(lambda: self.expect_no_finalizer(key))

    def release(self, key: Key) -> None:
        """Drop the finalizers left on a deleted placement (KubeFleet's blocking one) and see
        it gone."""

        def drop_finalizers() -> None:
            current = self.placement(key)
            meta = current.metadata.model_copy(update={"finalizers": []})
            self.hub.update(current.model_copy(update={"metadata": meta}))

        _retry_conflicts(drop_finalizers)
        self._wait_gone(lambda: self.placement(key))

    # --- reads ---------------------------------------------------------------------------------

    def placement(self, key: Key) -> ClusterResourcePlacement:
        return self.hub.get(key.kinds.placement, key.name, namespace=key.namespace)

    def snapshot(self, key: Key, name: str) -> ClusterSchedulingPolicySnapshot:
        return self.hub.get(key.kinds.snapshot, name, namespace=key.namespace)

    def snapshots(self, key: Key) -> list[ClusterSchedulingPolicySnapshot]:
        selector = {names.PARENT_PLACEMENT_LABEL: key.name}
        return list(self.hub.list(key.kinds.snapshot, selector, namespace=key.namespace))

    def bindings(self, key: Key) -> list[ClusterResourceBinding]:
        """KubeFleet's listBindings: by the parent-CRP label, in the placement's namespace."""
        selector = {names.PARENT_PLACEMENT_LABEL: key.name}
        return list(self.hub.list(key.kinds.binding, selector, namespace=key.namespace))

    # --- checks (KubeFleet's actuals) ----------------------------------------------------------

    def expect_no_bindings(self, key: Key) -> None:
        found = [b.name for b in self.bindings(key)]
        assert not found, f"{key}: {len(found)} bindings exist unexpectedly: {found}"

    def expect_no_bindings_for(self, clusters: Iterable[str], key: Key) -> None:
        unwanted = set(clusters)
        found = [
            f"{b.name} -> {b.spec.target_cluster}"
            for b in self.bindings(key)
            if b.spec.target_cluster in unwanted
        ]
        assert not found, f"{key}: unexpected bindings {found}"

    def expect_finalizer(self, key: Key) -> None:
        finalizers = self.placement(key).metadata.finalizers
        assert names.SCHEDULER_CLEANUP_FINALIZER in finalizers, (
            f"{key}: no scheduler cleanup finalizer yet ({finalizers})"
        )

    def expect_no_finalizer(self, key: Key) -> None:
        finalizers = self.placement(key).metadata.finalizers
        assert names.SCHEDULER_CLEANUP_FINALIZER not in finalizers, (
            f"{key}: the scheduler cleanup finalizer is still there ({finalizers})"
        )

    def _expect_bindings_go_first(self, key: Key) -> None:
        """No bindings; and while any remain, the scheduler's finalizer must still hold the
        placement (it is removed only after every binding)."""
        holding = names.SCHEDULER_CLEANUP_FINALIZER in self.placement(key).metadata.finalizers
        remaining = [b.name for b in self.bindings(key)]
        if remaining and not holding:
            pytest.fail(f"{key}: scheduler finalizer removed while bindings remain: {remaining}")
        assert not remaining, f"{key}: bindings not deleted yet: {remaining}"

    @staticmethod
    def _wait_gone(read: Callable[[], HubObject]) -> None:
        def gone() -> None:
            try:
                found = read()
            except NotFoundError:
                return
            raise AssertionError(f"{found.KIND} {found.name} is still there")

        passes(gone)

    def expect_bindings(
        self,
        state: str,
        clusters: Iterable[str],
        scores: Mapping[str, Score],
        key: Key,
        snapshot: str,
    ) -> None:
        """KubeFleet's {scheduled,bound,unscheduled}BindingsCreatedOrUpdatedForClustersActual.

        The bindings in `state` that target `clusters` are exactly one per cluster, each as the
        scheduler writes it: the parent-CRP label, the binding cleanup finalizer, in the
        placement's namespace, from `snapshot`, with a selected decision carrying `scores[c]`
        (reasons not compared). Every binding of the placement is named `<placement>-<cluster>-`."""
        wanted = sorted(set(clusters))
        bindings = self.bindings(key)
        got = sorted(
            (_binding_row(b) for b in bindings
             if b.spec.target_cluster in wanted and b.spec.state == state),
            key=lambda row: row[0],
        )  # fmt: skip
        want = [
            (
                cluster, key.namespace, {names.PARENT_PLACEMENT_LABEL: key.name},
                [names.SCHEDULER_BINDING_CLEANUP_FINALIZER], False, state, snapshot, "",
                (cluster, True, _score_row(scores.get(cluster))),
            )
            for cluster in wanted
        ]  # fmt: skip
        assert got == want, f"{key}: {state} bindings differ\n got: {got}\nwant: {want}"
        for binding in bindings:
            prefix = f"{key.name}-{binding.spec.target_cluster}"
            assert binding.name.startswith(prefix), (
                f"{key}: binding {binding.name} is not named {prefix}-..."
            )

    def expect_scheduled_or_bound(self, key: Key, clusters: Iterable[str]) -> None:
        """KubeFleet's hasNScheduledOrBoundBindingsPresentActual."""
        wanted = set(clusters)
        matched = [
            b.spec.target_cluster
            for b in self.bindings(key)
            if b.spec.target_cluster in wanted
            and b.spec.state in (names.STATE_SCHEDULED, names.STATE_BOUND)
        ]
        assert len(matched) == len(wanted), (
            f"{key}: {len(matched)} scheduled or bound bindings on {sorted(matched)}, "
            f"want {len(wanted)} on {sorted(wanted)}"
        )

    def expect_pick_all_status(
        self, scored: Iterable[str], filtered: Iterable[str], key: Key, snapshot: str
    ) -> None:
        """KubeFleet's pickAllPolicySnapshotStatusUpdatedActual."""
        decisions = [(c, True, ZERO) for c in scored] + [(c, False, None) for c in filtered]
        self._expect_status(key, snapshot, decisions, fulfilled=True)

    def expect_pick_n_status(
        self,
        count: int,
        picked: Sequence[str],
        not_picked: Iterable[str],
        filtered: Iterable[str],
        scores: Mapping[str, Score],
        key: Key,
        snapshot: str,
    ) -> None:
        """KubeFleet's pickNPolicySnapshotStatusUpdatedActual."""
        decisions = (
            [(c, True, scores.get(c)) for c in picked]
            + [(c, False, scores.get(c)) for c in not_picked]
            + [(c, False, None) for c in filtered]
        )
        self._expect_status(key, snapshot, decisions, fulfilled=len(picked) == count)

    def expect_pick_fixed_status(
        self, valid: Iterable[str], invalid: Sequence[str], key: Key, snapshot: str
    ) -> None:
        """KubeFleet's pickFixedPolicySnapshotStatusUpdatedActual."""
        decisions = [(c, True, None) for c in valid] + [(c, False, None) for c in invalid]
        self._expect_status(key, snapshot, decisions, fulfilled=not invalid)

    def _expect_status(
        self,
        key: Key,
        name: str,
        decisions: Iterable[tuple[str, bool, Score]],
        *,
        fulfilled: bool,
    ) -> None:
        """observedCRPGeneration is the snapshot's CRP-generation annotation; the decisions are
        `decisions` in any order (reasons not compared); the Scheduled condition has the wanted
        status and observes the snapshot's generation."""
        snapshot = self.snapshot(key, name)
        status = snapshot.status
        want_generation = snapshot.metadata.annotations.get(names.CRP_GENERATION_ANNOTATION)
        assert str(status.observed_crp_generation) == want_generation, (
            f"{key} {name}: observedCRPGeneration {status.observed_crp_generation}, "
            f"want {want_generation}"
        )
        got = _decision_rows(
            (d.cluster_name, d.selected, d.cluster_score) for d in status.target_clusters
        )
        want = _decision_rows(decisions)
        assert got == want, f"{key} {name}: decisions differ\n got: {got}\nwant: {want}"
        condition = status.condition(names.SCHEDULED_CONDITION)
        got_condition = (
            None if condition is None else (condition.status, condition.observed_generation)
        )
        want_condition = (names.TRUE if fulfilled else names.FALSE, snapshot.metadata.generation)
        assert got_condition == want_condition, (
            f"{key} {name}: Scheduled condition (status, observedGeneration) is "
            f"{got_condition}, want {want_condition}"
        )
