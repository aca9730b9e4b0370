"""Label selectors and operators the CRD schema does not catch.

Two ways a bad selector reaches the scheduler: values the schema allows but Kubernetes cannot
build a selector from (`In` without values, `Exists` with values, a key that is not a label
key), written on the placement by a user; and operators, sort orders and placement types outside
our CRD's enums, stored on a hub whose snapshot CRD comes from another KubeFleet version
(`skewed_hub`), written into a snapshot as KubeFleet's placement controller would copy them.

What the user must see: a placement's bad selector is refused before any snapshot is made, its
Scheduled condition naming the field (KubeFleet's webhook refuses it at admission). A snapshot
written elsewhere is scheduled as KubeFleet's scheduler would: in a required term, each cluster's
decision names the broken term (the term matches nothing, other terms still count); anywhere else
the cycle cannot act, so the snapshot says `scheduling failed: <what is wrong>`. Either way
nothing is retried, and a fixed policy is scheduled on the next event."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import Client

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, ClusterSchedulingPolicySnapshot
from hub.types.meta import HubObject
from scheduler.cycles.schedule import ERROR_CONDITION_MESSAGE, UNKNOWN_PLACEMENT_TYPE
from scheduler.plugins.cluster_affinity.filtering import REASON_INVALID_TERM
from scheduler.snapshots import PREFERRED_TERM_PATH, REQUIRED_TERM_PATH
from tests.integration.bad_input.outcome import (
    add_snapshot,
    assert_no_retries,
    decisions,
    filtered,
    finished,
    placement_condition,
    policy_condition,
    refused,
    snapshot_doc,
)
from tests.support.fleet import add_cluster, add_placement, live_targets, unique
from tests.support.waits import until_async
from workflows.models import RequeueRequest
from workflows.names import SIGNAL_REQUEUE, workflow_id

pytestmark = pytest.mark.asyncio(loop_scope="session")


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": list(terms)}
        }
    }


def preferred(weight: int, preference: dict[str, Any]) -> dict[str, Any]:
    return {
        "clusterAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "preference": preference}
            ]
        }
    }


def pick_n(n: int, affinity: dict[str, Any]) -> dict[str, Any]:
    return {"placementType": "PickN", "numberOfClusters": n, "affinity": affinity}


@pytest.mark.parametrize(
    ("selector", "problem"),
    [
        pytest.param(
            {"matchExpressions": [{"key": "env", "operator": "In", "values": []}]},
            "key 'env': operator In needs at least one value",
            id="in-without-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "env", "operator": "DoesNotExist", "values": ["x"]}]},
            "key 'env': operator DoesNotExist takes no values",
            id="does-not-exist-with-values",
        ),
        pytest.param(
            {"matchLabels": {"team name": "web"}},
            "invalid label key 'team name'",
            id="key-with-a-space",
        ),
        pytest.param(
            {"matchLabels": {"env": "prod/eu"}},
            "invalid value 'prod/eu' for label key 'env'",
            id="value-with-a-slash",
        ),
    ],
)
async def test_an_invalid_required_selector_is_refused_naming_its_field(
    hub: HubClient,
    temporal_client: Client,
    standalone: Watcher,
    selector: dict[str, Any],
    problem: str,
) -> None:
    """KubeFleet's webhook refuses these selectors; standalone, the CRD's CEL rules cannot say
    it (an unbounded label map exceeds kube-apiserver's cost budget), so the snapshotter refuses
    the placement: no snapshot, no binding, and the Scheduled condition names the term's field."""
    add_cluster(hub, "member-a", labels={"env": "prod"})
    add_cluster(hub, "member-b", labels={"env": "dev"})
    web = unique("web")
    add_placement(hub, web, pick_n(1, required({"labelSelector": selector})))

    field = REQUIRED_TERM_PATH.format(index=0) + ".labelSelector.match"
    shown = await refused(hub, web, field)
    assert shown.message.count(problem) == 1, shown.message  # said once
    assert "annotation" not in shown.message and "--fresh" not in shown.message
    assert live_targets(hub, web) == {}

    # Fixed on the placement: the next event schedules it.
    fixed = {"matchLabels": {"env": "prod"}}
    hub.patch(
        ClusterResourcePlacement,
        web,
        {"spec": {"policy": {"affinity": required({"labelSelector": fixed})}}},
    )
    await until_async(
        lambda: live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}, blocking=True
    )
    done = await finished(temporal_client, web)
    assert_no_retries(done)


async def test_an_invalid_preferred_selector_is_refused_naming_its_field(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    add_cluster(hub, "member-a", labels={"env": "prod"})
    web = unique("web")
    bad = {"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["prod"]}]}
    add_placement(hub, web, pick_n(1, preferred(10, {"labelSelector": bad})))

    field = PREFERRED_TERM_PATH.format(index=0) + ".labelSelector.matchExpressions[0]"
    shown = await refused(hub, web, field)
    assert "operator Exists takes no values" in shown.message
    assert live_targets(hub, web) == {}


def _skewed_placement(hub: HubClient, policy: dict[str, Any]) -> str:
    """A placement whose latest snapshot carries `policy`, as another KubeFleet wrote it."""
    web = unique("web")
    add_placement(hub, web, {"placementType": "PickN", "numberOfClusters": 1})
    add_snapshot(hub, web, policy)
    return web


@pytest.mark.parametrize(
    ("term", "problem"),
    [
        pytest.param(
            {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "Matches"}]}},
            "label selector: matchExpressions[0]: 'Matches' is not a valid label selector "
            "operator (want In, NotIn, Exists or DoesNotExist)",
            id="label-operator",
        ),
        pytest.param(
            {
                "propertySelector": {
                    "matchExpressions": [{"name": "cost", "operator": "Approx", "values": ["3"]}]
                }
            },
            'property selector expression 0 ("cost"): unknown operator "Approx" '
            "(want one of Eq, Ne, Gt, Ge, Lt, Le)",
            id="property-operator",
        ),
    ],
)
async def test_an_unknown_operator_in_a_required_term_is_named_in_each_decision(
    skewed_hub: HubClient,
    temporal_client: Client,
    skewed_system: Watcher,
    term: dict[str, Any],
    problem: str,
) -> None:
    hub = skewed_hub
    add_cluster(hub, "member-a", labels={"env": "prod"}, properties={"cost": "3"})
    # The second term is fine, so the cluster is still placed: only the broken term is void.
    policy = pick_n(1, required(term, {"labelSelector": {"matchLabels": {"env": "prod"}}}))
    web = _skewed_placement(hub, policy)
    add_cluster(hub, "member-b", labels={"env": "dev"}, properties={"cost": "3"})

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is None
    assert live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}
    decision = decisions(hub, web)["member-b"]
    assert not decision.selected
    assert decision.reason == filtered(REASON_INVALID_TERM.format(index=0, problem=problem))
    condition = policy_condition(hub, web)
    assert condition is not None and condition.reason == names.POLICY_FULFILLED_REASON
    # Beside KubeFleet the placement's condition is KubeFleet's to write, not ours.
    assert placement_condition(hub, web) is None


@pytest.mark.parametrize(
    ("policy", "error"),
    [
        pytest.param(
            {"placementType": "PickSome"},
            UNKNOWN_PLACEMENT_TYPE.format(type="PickSome"),
            id="placement-type",
        ),
        pytest.param(
            pick_n(
                1,
                preferred(
                    10,
                    {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "Near"}]}},
                ),
            ),
            "'Near' is not a valid label selector operator",
            id="preferred-label-operator",
        ),
        pytest.param(
            pick_n(
                1,
                preferred(10, {"propertySorter": {"name": "cost", "sortOrder": "Sideways"}}),
            ),
            'sort order "Sideways" is not Ascending or Descending',
            id="sort-order",
        ),
    ],
)
async def test_an_unknown_value_outside_required_terms_fails_the_cycle_on_the_snapshot(
    skewed_hub: HubClient,
    temporal_client: Client,
    skewed_system: Watcher,
    policy: dict[str, Any],
    error: str,
) -> None:
    hub = skewed_hub
    add_cluster(hub, "member-a", labels={"env": "prod"}, properties={"cost": "3"})
    add_cluster(hub, "member-b", labels={"env": "dev"}, properties={"cost": "5"})
    web = _skewed_placement(hub, policy)

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is not None and error in done.error, done.error
    assert live_targets(hub, web) == {}
    condition = policy_condition(hub, web)
    assert condition is not None and condition.status == names.FALSE
    assert condition.reason == names.POLICY_UNFULFILLED_REASON
    assert condition.message == ERROR_CONDITION_MESSAGE.format(error=done.error)
    assert done.status.last is not None and done.status.last.error == done.error


async def test_a_snapshot_our_model_cannot_read_is_named_and_blocks_no_other_placement(
    skewed_hub: HubClient,
    temporal_client: Client,
    skewed_system: Watcher,
    raw_create: Callable[[type[HubObject], dict[str, Any]], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = skewed_hub
    add_cluster(hub, "member-a", labels={"env": "prod"})
    web = _skewed_placement(hub, {"placementType": "PickN", "numberOfClusters": 1})
    await until_async(
        lambda: live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}, blocking=True
    )
    before = (await finished(temporal_client, web)).status.cycles

    # Another KubeFleet version allows more than 10 required terms: its next snapshot has 11.
    term = {"labelSelector": {"matchLabels": {"env": "prod"}}}
    eleven = pick_n(1, required(*[term] * 11))
    with caplog.at_level(logging.WARNING, logger="control.watcher"):
        hub.patch(
            ClusterSchedulingPolicySnapshot,
            f"{web}-0",
            {"metadata": {"labels": {names.IS_LATEST_SNAPSHOT_LABEL: "false"}}},
        )
        raw_create(ClusterSchedulingPolicySnapshot, snapshot_doc(web, eleven, index=1))

        # The watch of snapshots goes on: a placement created afterwards is scheduled.
        other = _skewed_placement(hub, {"placementType": "PickN", "numberOfClusters": 1})
        await until_async(
            lambda: live_targets(hub, other) == {"member-a": names.STATE_SCHEDULED}, blocking=True
        )
    assert skewed_system.stats.watch_failures == 0
    warned = [r.getMessage() for r in caplog.records if f"{web}-1" in r.getMessage()]
    assert warned and "does not match our model" in warned[0], warned

    # Asked to look again, the placement's turn ends with the reason, once, and nothing moves.
    await temporal_client.get_workflow_handle(workflow_id(web)).signal(
        SIGNAL_REQUEUE, RequeueRequest(reason="a new snapshot was written")
    )
    done = await finished(temporal_client, web, cycles=before)
    assert done.max_attempt == 1 and len(done.failures) == 1, done.failures
    assert done.error is not None and "(UnexpectedBehavior)" in done.error
    assert f"'{web}-1' does not match our model" in done.error
    assert "clusterSelectorTerms" in done.error
    assert live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}
