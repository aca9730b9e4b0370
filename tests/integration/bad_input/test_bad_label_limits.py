"""Labels at and over Kubernetes' size limits: 63-character values and name parts, 253-character
key prefixes (apimachinery `IsQualifiedName` / `IsValidLabelValue`).

At the limits everything works end to end: the hub stores the labels, selectors match them.
Over the limits the hub refuses the object with 422 and names the label, as kube-apiserver does
(devhub validates metadata labels; tests/integration/devhub/test_validation.py checks it). A
selector is only a spec field, which no CEL rule checks (docs/validation.md); the snapshotter
refuses the placement, naming the field on its Scheduled condition."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

import pytest
from temporalio.client import Client

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.errors import InvalidObjectError
from hub.types import ClusterResourcePlacement, MemberCluster, ObjectMeta
from scheduler.plugins.cluster_affinity.filtering import REASON_NO_MATCH
from scheduler.snapshots import REQUIRED_TERM_PATH
from scheduler.testing import member_cluster
from tests.integration.bad_input.outcome import (
    assert_no_retries,
    decisions,
    filtered,
    finished,
    refused,
)
from tests.support.fleet import (
    add_cluster,
    add_placement,
    live_targets,
    unique,
)

# A DNS subdomain of exactly 253 characters: three 63-character labels and one of 61.
PREFIX: Final = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
NAME: Final = "n" * 63
VALUE: Final = "v" * 63
KEY: Final = f"{PREFIX}/{NAME}"


def required_labels(labels: dict[str, str]) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}}
    return {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [term]}
        }
    }


@pytest.mark.asyncio(loop_scope="session")
async def test_labels_at_the_size_limits_are_stored_and_matched(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    assert (len(PREFIX), len(NAME), len(VALUE)) == (253, 63, 63)
    add_cluster(hub, "member-a", labels={KEY: VALUE})
    add_cluster(hub, "member-b", labels={KEY: VALUE[:-1]})
    web = unique("web")
    add_placement(hub, web, {"placementType": "PickAll", "affinity": required_labels({KEY: VALUE})})

    done = await finished(temporal_client, web)
    assert_no_retries(done)
    assert done.error is None
    assert live_targets(hub, web) == {"member-a": names.STATE_SCHEDULED}
    assert decisions(hub, web)["member-b"].reason == filtered(REASON_NO_MATCH)
    assert hub.get(MemberCluster, "member-a").metadata.labels == {KEY: VALUE}


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        pytest.param(KEY, VALUE + "v", f"metadata.labels[{KEY}]", id="value-64"),
        pytest.param(f"{PREFIX}/{NAME}n", VALUE, "metadata.labels", id="name-part-64"),
        pytest.param(f"{PREFIX}x/{NAME}", VALUE, "metadata.labels", id="prefix-254"),
    ],
)
def test_labels_over_the_limits_are_refused_by_the_hub(
    hub: HubClient, key: str, value: str, field: str
) -> None:
    wanted = member_cluster("member-a", datetime.now(UTC))
    cluster = wanted.model_copy(
        update={"metadata": ObjectMeta(name="member-a", labels={key: value})}
    )
    with pytest.raises(InvalidObjectError) as refused:
        hub.create(cluster)
    assert refused.value.status == 422
    causes = {cause.field: cause.message for cause in refused.value.causes}
    assert field in causes, causes
    assert "must be no more than" in causes[field]
    assert not hub.list(MemberCluster).items
    # A placement is refused the same way.
    with pytest.raises(InvalidObjectError):
        hub.create(
            ClusterResourcePlacement.from_wire(
                {"metadata": {"name": "web", "labels": {key: value}}, "spec": {}}
            )
        )


@pytest.mark.asyncio(loop_scope="session")
async def test_an_over_limit_value_in_a_selector_is_refused_naming_the_field(
    hub: HubClient, temporal_client: Client, standalone: Watcher
) -> None:
    add_cluster(hub, "member-a", labels={KEY: VALUE})
    web = unique("web")
    too_long = VALUE + "v"
    add_placement(
        hub,
        web,
        {
            "placementType": "PickN",
            "numberOfClusters": 1,
            "affinity": required_labels({KEY: too_long}),
        },
    )

    field = REQUIRED_TERM_PATH.format(index=0) + ".labelSelector.matchLabels: "
    shown = await refused(hub, web, field)
    assert f"invalid value {too_long!r}" in shown.message and "at most 63" in shown.message
    assert live_targets(hub, web) == {}
