"""NamespaceAffinity: namespaced placements need their namespace on the cluster (kubefleet-rules
5.3)."""

from __future__ import annotations

import pytest

from hub.types import Condition, MemberCluster
from scheduler.framework.status import Code, Status
from scheduler.plugins.namespace_affinity import (
    NAME,
    REASON_NAMESPACE_MISSING,
    REASON_NO_NAMESPACE_INFO,
    SKIP_CLUSTER_SCOPED,
    NamespaceAffinity,
)
from tests.unit.scheduler.plugins.plugin_builders import cluster, snapshot, state

COLLECTING = Condition(type="NamespaceCollectionSucceeded", status="True", reason="Collected")
DEGRADED = Condition(type="NamespaceCollectionSucceeded", status="False", reason="LimitReached")


def test_cluster_scoped_snapshots_skip_with_kubefleets_reason() -> None:
    status = NamespaceAffinity().pre_filter(state(), snapshot())
    assert status == Status.skip(SKIP_CLUSTER_SCOPED)
    assert SKIP_CLUSTER_SCOPED == (
        "cluster-scoped placement does not require namespace affinity filtering"
    )


def test_namespaced_snapshots_run_the_filter() -> None:
    assert NamespaceAffinity().pre_filter(state(), snapshot(namespace="app")).is_success


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        pytest.param(cluster("a"), Status.success(), id="feature-off-passes"),
        pytest.param(
            cluster("a", namespaces={"app": "work-1"}),
            Status.success(),
            id="feature-off-ignores-data",
        ),
        pytest.param(
            cluster("a", conditions=[COLLECTING]),
            Status.unschedulable(REASON_NO_NAMESPACE_INFO),
            id="no-namespace-data",
        ),
        pytest.param(
            cluster("a", conditions=[COLLECTING], namespaces={}),
            Status.unschedulable(REASON_NAMESPACE_MISSING),
            id="empty-namespace-data",
        ),
        pytest.param(
            cluster("a", conditions=[COLLECTING], namespaces={"other": "w"}),
            Status.unschedulable(REASON_NAMESPACE_MISSING),
            id="namespace-missing",
        ),
        pytest.param(
            cluster("a", conditions=[COLLECTING], namespaces={"app": "w"}),
            Status.success(),
            id="namespace-present",
        ),
        pytest.param(
            cluster("a", conditions=[DEGRADED], namespaces={"app": "w"}),
            Status.success(),
            id="degraded-collection-still-used",
        ),
        pytest.param(
            cluster("a", conditions=[DEGRADED], namespaces={}),
            Status.unschedulable(REASON_NAMESPACE_MISSING),
            id="degraded-collection-missing",
        ),
    ],
)
def test_filter_checks_the_target_namespace(member: MemberCluster, expected: Status) -> None:
    assert NamespaceAffinity().filter(state(member), snapshot(namespace="app"), member) == expected


def test_reasons_read_as_kubefleets() -> None:
    member = cluster("a", conditions=[COLLECTING])
    status = NamespaceAffinity().filter(state(member), snapshot(namespace="app"), member)
    assert status.code is Code.CLUSTER_UNSCHEDULABLE
    assert str(status) == "ClusterUnschedulable, cluster has no namespace information available"
    assert REASON_NAMESPACE_MISSING == "target namespace does not exist on cluster"


def test_name() -> None:
    assert NamespaceAffinity().name == NAME == "NamespaceAffinity"
