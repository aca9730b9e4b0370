"""How run_cycle's writes meet a hub that others write too: creates that find an earlier
attempt's binding, a placement condition that raced another writer, policy edits that refresh
or rotate snapshots, and a fresh requeue."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster
from scheduler.bindings.naming import binding_name
from scheduler.testing import binding
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    cycle,
    placement_condition,
    prepare_and_cycle,
    sync_snapshots,
    targets,
)
from tests.support.waits import until
from workflows import failures
from workflows.models import CycleReport

PICK_TWO = {"placementType": "PickN", "numberOfClusters": 2}
HANG_WAIT_S = 5.0


def made_meanwhile(
    hub: HubClient, devhub: DevHub, env: ActivityEnvironment, rig: Rig, made: dict[str, str]
) -> Future[CycleReport]:
    """Start cycle 1 of "web"; while its two creates are held, bindings named as the cycle
    names them appear (`made`: cluster -> the target cluster the squatter points at)."""
    # count=2: the cycle's creates (sent together) are held, not the squatters' creates below.
    held = devhub.faults.inject(
        verb="create", resource="clusterresourcebindings", hang=True, count=2
    )
    pool = ThreadPoolExecutor(1)
    attempt = pool.submit(cycle, env, rig.activities, "web", "web-0", 1)
    until(lambda: held.hits >= 2, what="the cycle's creates sent", timeout=HANG_WAIT_S)
    for cluster, target in made.items():
        squatter = binding("web", target, "web-0", name=binding_name("web", cluster, "web-0", ()))
        metadata = squatter.metadata.model_copy(update={"resource_version": None})
        hub.create(squatter.model_copy(update={"metadata": metadata}))
    held.remove()
    pool.shutdown(wait=False)
    return attempt


def two_of_three(hub: HubClient, env: ActivityEnvironment, rig: Rig) -> None:
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster)
    add_placement(hub, "web", PICK_TWO)
    assert sync_snapshots(hub, "web")[0] == "web-0"


def test_a_create_that_finds_an_earlier_attempts_binding_adopts_it(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    two_of_three(hub, env, rig)

    report = made_meanwhile(hub, devhub, env, rig, {"b": "b", "c": "c"}).result(HANG_WAIT_S)

    assert (report.writes.created, report.writes.adopted) == (0, 2)
    assert targets(bindings_of(hub, "web")) == ["b", "c"]
    assert "2 adopted" in report.summary


def test_a_create_that_finds_someone_elses_binding_is_unexpected_not_retried(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    two_of_three(hub, env, rig)
    attempt = made_meanwhile(hub, devhub, env, rig, {"b": "c", "c": "b"})

    with pytest.raises(ApplicationError) as failed:
        attempt.result(HANG_WAIT_S)

    assert failed.value.type == failures.UNEXPECTED and failed.value.non_retryable
    assert "already exists for placement 'web' and cluster" in failed.value.message
    assert "delete or relabel it" in failed.value.message


def test_a_placement_condition_that_raced_another_writer_is_written_after_one_re_read(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    two_of_three(hub, env, rig)
    devhub.faults.inject(
        verb="patch", resource="clusterresourceplacements/status", status=409, count=1
    )

    report = cycle(env, rig.activities, "web", "web-0")

    assert report.writes.placement_condition_written
    condition = placement_condition(hub, "web")
    assert condition is not None and condition.status == names.TRUE


def test_a_placement_condition_that_keeps_racing_fails_the_cycle_retryably(
    hub: HubClient,
    devhub: DevHub,
    make_activities: Callable[..., Rig],
    env: ActivityEnvironment,
) -> None:
    rig = make_activities()
    two_of_three(hub, env, rig)
    devhub.faults.inject(
        verb="patch", resource="clusterresourceplacements/status", status=409, count=2
    )

    with pytest.raises(ApplicationError) as failed:
        cycle(env, rig.activities, "web", "web-0")
    assert failed.value.type == failures.CONFLICT and not failed.value.non_retryable

    again = cycle(env, rig.activities, "web", "web-0")  # bindings landed the first time
    assert (again.writes.created, again.writes.placement_condition_written) == (0, True)


def test_a_new_number_of_clusters_refreshes_the_snapshot_and_schedules_more(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    two_of_three(hub, env, rig)
    cycle(env, rig.activities, "web", "web-0")
    hub.patch(ClusterResourcePlacement, "web", {"spec": {"policy": {"numberOfClusters": 3}}})

    prepared, report = prepare_and_cycle(env, rig.activities, "web", 2)

    assert (prepared.snapshot, prepared.snapshot_action) == ("web-0", "refreshed web-0")
    assert prepared.placement_generation == 2
    assert report.summary.startswith("cycle 2: PickN 3/3, picked a,b,c; 1 created")
    condition = placement_condition(hub, "web")
    assert condition is not None
    assert (condition.status, condition.observed_generation) == (names.TRUE, 2)


def test_a_new_policy_rotates_snapshots_within_the_revision_history_limit(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    rig = make_activities()
    two_of_three(hub, env, rig)
    cycle(env, rig.activities, "web", "web-0")
    hub.patch(
        ClusterResourcePlacement,
        "web",
        {
            "spec": {
                "revisionHistoryLimit": 1,
                "policy": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
            }
        },
    )

    prepared, report = prepare_and_cycle(env, rig.activities, "web", 2)

    assert prepared.snapshot_action == "demoted web-0, deleted web-0, created web-1"
    assert report.writes.patched == 2  # both bindings re-pointed at web-1
    assert {b.spec.scheduling_policy_snapshot_name for b in bindings_of(hub, "web")} == {"web-1"}


def test_a_fresh_cycle_reschedules_a_pick_n_placement_from_scratch(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    prefer_gold = {
        "clusterAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}}
            ]
        }
    }
    for cluster in ("a", "b", "c"):
        add_cluster(hub, cluster)
    add_placement(hub, "web", {**PICK_TWO, "affinity": prefer_gold})
    rig = make_activities()
    prepare_and_cycle(env, rig.activities, "web")
    assert targets(bindings_of(hub, "web")) == ["b", "c"]
    a = hub.get(MemberCluster, "a")
    hub.patch(MemberCluster, "a", {"metadata": {"labels": {**a.metadata.labels, "tier": "gold"}}})

    steady = cycle(env, rig.activities, "web", "web-0", 2)
    fresh = cycle(env, rig.activities, "web", "web-0", 3, fresh=True)

    assert steady.writes.bindings == 0  # a normal cycle keeps its picks
    assert (fresh.writes.created, fresh.writes.unscheduled) == (1, 1)
    assert targets(bindings_of(hub, "web"), names.STATE_SCHEDULED) == ["a", "c"]
    assert targets(bindings_of(hub, "web"), names.STATE_UNSCHEDULED) == ["b"]
