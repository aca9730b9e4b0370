"""PickFixed lists that name unknown, duplicate or ineligible clusters, and tolerations that
tolerate nothing.

PickFixed runs no plugin: each distinct listed name is valid, invalid (the eligibility reason)
or not found, in list order, and a name listed twice counts once (KubeFleet's webhook refuses
duplicates; without it KubeFleet would bind the cluster twice). The placement says False until
every listed cluster is placed, and a cluster that joins later is placed on that event.

Tolerations that match no taint are not an error: tainted clusters are filtered with the taint
named, the others are scheduled, and a PickN short of clusters says how many it found."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from temporalio.client import Client

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import MemberCluster, Taint
from scheduler.clusters.eligibility import REASON_AGENT_NOT_JOINED
from scheduler.cycles.decisions import FIXED_INVALID, FIXED_NOT_FOUND, SELECTED_FIXED
from scheduler.cycles.pick_fixed import NOTE_DUPLICATES
from scheduler.plugins.taint_toleration import REASON_UNTOLERATED, render_taint
from scheduler.testing import member_cluster
from tests.integration.bad_input.outcome import (
    assert_no_retries,
    decisions,
    filtered,
    finished,
    placement_condition,
    policy_condition,
)
from tests.support.fleet import add_cluster, add_placement, live_targets, unique
from tests.support.waits import until_async
from workflows import names as wf_names
from workflows.models import PlacementExplanation

pytestmark = pytest.mark.asyncio(loop_scope="session")


def join(hub: HubClient, cluster: str) -> None:
    """The member agent joins: its status now says joined and healthy."""
    current = hub.get(MemberCluster, cluster)
    joined = member_cluster(cluster, datetime.now(UTC)).status
    hub.update_status(current.model_copy(update={"status": joined}))


async def test_pick_fixed_with_unknown_duplicate_and_ineligible_clusters_says_which_is_which(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    add_cluster(hub, "member-a")
    add_cluster(hub, "member-new", joined=False)
    web = unique("web")
    listed = ["member-a", "ghost", "member-a", "member-new"]
    add_placement(hub, web, {"placementType": "PickFixed", "clusterNames": listed})

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is None
    assert live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}
    decided = decisions(hub, web)
    assert decided["member-a"].selected
    assert decided["member-a"].reason == SELECTED_FIXED.format(cluster="member-a")
    assert not decided["ghost"].selected
    assert decided["ghost"].reason == FIXED_NOT_FOUND.format(cluster="ghost")
    assert not decided["member-new"].selected
    assert decided["member-new"].reason == FIXED_INVALID.format(
        cluster="member-new", reason=REASON_AGENT_NOT_JOINED
    )
    assert len(decided) == 3  # member-a once
    condition = policy_condition(hub, web)
    assert condition is not None and condition.status == names.FALSE
    assert condition.message == names.POLICY_UNFULFILLED_MESSAGE.format(count=1)
    shown = placement_condition(hub, web)
    assert shown is not None and (shown.reason, shown.message) == (
        names.POLICY_UNFULFILLED_REASON,
        condition.message,
    )
    report = done.status.last
    assert report is not None and report.outcome.wanted == 3
    explained = await temporal_client.get_workflow_handle(wf_names.workflow_id(web)).query(
        wf_names.QUERY_EXPLANATION, result_type=PlacementExplanation
    )
    assert explained.last is not None and explained.last.cycle == report.cycle
    explanation = explained.last.full_explanation()
    assert explanation is not None
    assert NOTE_DUPLICATES.format(count=1) in explanation.notes

    # The missing clusters turn up: each is placed on its own event, and the placement is done.
    add_cluster(hub, "ghost")
    join(hub, "member-new")
    await until_async(
        lambda: (
            live_targets(hub, web)
            == {name: names.STATE_SCHEDULED for name in ("member-a", "ghost", "member-new")}
        ),
        blocking=True,
    )
    await until_async(
        lambda: (c := placement_condition(hub, web)) and c.status == names.TRUE and c, blocking=True
    )


async def test_tolerations_that_match_no_taint_leave_tainted_clusters_filtered(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    add_cluster(hub, "member-a")
    add_cluster(hub, "member-b", taints=[("dedicated", "gpu")])
    add_cluster(hub, "member-c", taints=[("dedicated", None)])
    web = unique("web")
    tolerations = [
        {"key": "dedicated", "operator": "Equal", "value": "tpu", "effect": "NoSchedule"},
        {"key": "other", "operator": "Exists"},
    ]
    add_placement(
        hub, web, {"placementType": "PickN", "numberOfClusters": 2, "tolerations": tolerations}
    )

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is None
    assert live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}
    decided = decisions(hub, web)
    for cluster, value in (("member-b", "gpu"), ("member-c", None)):
        taint = Taint(key="dedicated", value=value, effect=names.EFFECT_NO_SCHEDULE)
        assert decided[cluster].reason == filtered(
            REASON_UNTOLERATED.format(taint=render_taint(taint))
        )
    condition = policy_condition(hub, web)
    assert condition is not None and condition.status == names.FALSE
    assert condition.message == names.POLICY_UNFULFILLED_MESSAGE.format(count=1)
    shown = placement_condition(hub, web)
    assert shown is not None and shown.status == names.FALSE
