"""Placements and policy snapshots the scheduler cannot use as they are.

- A placement name longer than 63 characters cannot be the `parent-CRP` label value of its
  snapshots and bindings (KubeFleet's webhook refuses such names; devhub has no webhook).
  Standalone, the placement says so in its Scheduled condition and the workflow waits.
- Beside KubeFleet the test writes snapshots directly, as its placement controller would, but
  with a missing or garbage `number-of-clusters` or `CRP-generation` annotation, or without the
  `parent-CRP` label, which our snapshotter never produces.

Each ends in one finished turn with the reason on the snapshot or in the workflow's status, no
retries, and the next event after a fix schedules the placement."""

from __future__ import annotations

import logging

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from activities.conditions import (
    INVALID_PLACEMENT_MESSAGE,
    INVALID_PLACEMENT_REASON,
)
from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot
from scheduler.cycles.schedule import ERROR_CONDITION_MESSAGE
from tests.integration.bad_input.outcome import (
    add_snapshot,
    assert_no_retries,
    finished,
    placement_condition,
    policy_condition,
)
from tests.support.fleet import add_cluster, add_placement, bindings, live_targets, unique
from tests.support.stacks import fleet_scheduler
from tests.support.waits import until_async, within
from workflows.models import PlacementStatus, RequeueRequest
from workflows.names import SIGNAL_REQUEUE, workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")

PICK_ONE = {"placementType": "PickN", "numberOfClusters": 1}


async def test_a_placement_name_too_long_for_its_label_is_shown_on_the_placement(
    ruleless_hub: HubClient, temporal_client: Client, ruleless_system: Watcher
) -> None:
    """Our CRD's CEL rule refuses a name over 63 characters; a hub whose CRD predates the rule
    stores it, and the snapshotter refuses it on the placement instead."""
    hub = ruleless_hub
    add_cluster(hub, "member-a")
    long_name = unique("p" * 57)  # 64 characters
    assert len(long_name) == 64
    add_placement(hub, long_name, PICK_ONE)

    done = await finished(temporal_client, long_name, cycles=0)
    assert_no_retries(done)
    assert done.status.cycles == 0  # nothing to schedule: no snapshot can be labelled
    assert f"placement name {long_name!r} is 64 characters long" in done.status.waiting_for
    shown = placement_condition(hub, long_name)
    assert shown is not None and shown.status == names.FALSE
    assert shown.reason == INVALID_PLACEMENT_REASON
    assert shown.message.startswith(INVALID_PLACEMENT_MESSAGE.format(error=""))
    assert "recreate the placement with a shorter name" in shown.message
    assert not hub.list(ClusterSchedulingPolicySnapshot).items
    assert not bindings(hub, long_name[:63])
    placement = hub.get(ClusterResourcePlacement, long_name)
    assert names.SCHEDULER_CLEANUP_FINALIZER not in placement.metadata.finalizers

    # Deleting it needs nothing from the scheduler; its workflow sees it gone and completes.
    hub.delete(ClusterResourcePlacement, long_name)
    handle = temporal_client.get_workflow_handle(
        workflow_id(long_name), result_type=PlacementStatus
    )
    result = await within(handle.result(), what=f"{long_name}'s workflow to complete")
    assert result.waiting_for == "nothing: the placement is gone"
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        pytest.param(None, "has no {key} annotation", id="missing"),
        pytest.param("three", "annotation {key}='three' is not an integer", id="not-a-number"),
        pytest.param("", "annotation {key}='' is not an integer", id="empty"),
        pytest.param("-1", "annotation {key}='-1' is negative", id="negative"),
    ],
)
async def test_a_bad_number_of_clusters_annotation_fails_the_cycle_until_it_is_fixed(
    hub: HubClient,
    temporal_client: Client,
    beside_kubefleet: Watcher,
    annotation: str | None,
    problem: str,
) -> None:
    add_cluster(hub, "member-a")
    web = unique("web")
    add_placement(hub, web, PICK_ONE)
    add_snapshot(hub, web, PICK_ONE, annotations={names.NUMBER_OF_CLUSTERS_ANNOTATION: annotation})

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    key = names.NUMBER_OF_CLUSTERS_ANNOTATION
    assert (
        done.error
        == f"policy snapshot '{web}-0'"
        + (" " if annotation is None else ": ")
        + problem.format(key=key)
        + "; fix the annotation or delete the snapshot"
    )
    assert live_targets(hub, web) == {}
    condition = policy_condition(hub, web)
    assert condition is not None and condition.status == names.FALSE
    assert condition.reason == names.POLICY_UNFULFILLED_REASON
    assert condition.message == ERROR_CONDITION_MESSAGE.format(error=done.error)
    # The placement's condition is KubeFleet's to write: it copies the snapshot's (2.7).
    assert placement_condition(hub, web) is None

    # KubeFleet's controller fixes the annotation: that change is an event, the cycle runs.
    hub.patch(
        ClusterSchedulingPolicySnapshot, f"{web}-0", {"metadata": {"annotations": {key: "1"}}}
    )
    await until_async(
        lambda: live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}, blocking=True
    )
    await until_async(
        lambda: (c := policy_condition(hub, web)) and c.reason == names.POLICY_FULFILLED_REASON,
        blocking=True,
    )


async def test_a_snapshot_without_the_parent_label_is_reported_and_never_scheduled(
    hub: HubClient,
    temporal_client: Client,
    task_queue: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_cluster(hub, "member-a")
    web = unique("web")
    add_placement(hub, web, PICK_ONE)
    add_snapshot(hub, web, PICK_ONE, labels={names.PARENT_PLACEMENT_LABEL: None})

    # The scheduler starts on a hub that already holds both: the placement gets its workflow
    # from the watcher's start-up signals, the orphan snapshot reaches nobody.
    with caplog.at_level(logging.WARNING, logger="control.watcher"):
        async with fleet_scheduler(temporal_client, hub, task_queue, snapshotter=False):
            done = await finished(temporal_client, web, cycles=0)
            assert_no_retries(done)
            assert done.status.cycles == 0
            waiting = done.status.waiting_for
            assert f"{names.PARENT_PLACEMENT_LABEL}={web}" in waiting, waiting
            assert f"{names.IS_LATEST_SNAPSHOT_LABEL}=true" in waiting, waiting
            assert live_targets(hub, web) == {}
            orphan = hub.get(ClusterSchedulingPolicySnapshot, f"{web}-0")
            assert not orphan.status.conditions  # nobody can claim it, nobody writes to it

            # Labelled, then requeued (a label is not an event KubeFleet's watcher routes).
            hub.patch(
                ClusterSchedulingPolicySnapshot,
                f"{web}-0",
                {"metadata": {"labels": {names.PARENT_PLACEMENT_LABEL: web}}},
            )
            await temporal_client.get_workflow_handle(workflow_id(web)).signal(
                SIGNAL_REQUEUE, RequeueRequest(reason="labelled the snapshot")
            )
            await until_async(
                lambda: live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}, blocking=True
            )
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(
        f"{web}-0" in message and names.PARENT_PLACEMENT_LABEL in message for message in warnings
    ), warnings


async def test_a_garbage_crp_generation_is_reported_by_the_workflow_and_nothing_is_written(
    hub: HubClient, temporal_client: Client, beside_kubefleet: Watcher
) -> None:
    add_cluster(hub, "member-a")
    web = unique("web")
    add_placement(hub, web, PICK_ONE)
    add_snapshot(hub, web, PICK_ONE, annotations={names.CRP_GENERATION_ANNOTATION: "latest"})

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    key = names.CRP_GENERATION_ANNOTATION
    assert done.error == (
        f"policy snapshot '{web}-0': annotation {key}='latest' is not an integer; "
        "fix the annotation or delete the snapshot"
    )
    last = done.status.last
    assert last is not None and last.summary.endswith(f"error: {done.error}")
    assert last.writes.bindings == 0 and not last.writes.status_written
    # observedCRPGeneration must say which placement generation the status reflects, and the
    # snapshot does not say it: there is no truthful status to write (scheduler/README.md), so
    # the snapshot stays as KubeFleet wrote it and the error lives in the workflow's status.
    assert hub.get(ClusterSchedulingPolicySnapshot, f"{web}-0").status.conditions == []
    assert live_targets(hub, web) == {}

    hub.patch(
        ClusterSchedulingPolicySnapshot, f"{web}-0", {"metadata": {"annotations": {key: "1"}}}
    )
    await until_async(
        lambda: live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}, blocking=True
    )
