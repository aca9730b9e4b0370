"""TaintToleration filters clusters whose taints the policy does not tolerate (kubefleet-rules
5.4)."""

from __future__ import annotations

import pytest

from hub.types import PlacementPolicy, Taint, Toleration
from scheduler.framework.status import Code, Status
from scheduler.plugins.taint_toleration import NAME, REASON_UNTOLERATED, TaintToleration
from tests.unit.scheduler.plugins.plugin_builders import cluster, snapshot, state

GPU = Taint(key="key1", value="value1", effect="NoSchedule")
NO_VALUE = Taint(key="key2", effect="NoSchedule")


def tol(
    key: str | None = None,
    operator: str | None = None,
    value: str | None = None,
    effect: str | None = None,
) -> Toleration:
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def run(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Status:
    member = cluster("a", taints=taints)
    policy = PlacementPolicy(tolerations=list(tolerations))
    return TaintToleration().filter(state(member), snapshot(policy), member)


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        pytest.param((), (), Code.SUCCESS, id="no-taints"),
        pytest.param((GPU,), (), Code.CLUSTER_UNSCHEDULABLE, id="untolerated"),
        pytest.param((GPU,), (tol(operator="Exists"),), Code.SUCCESS, id="exists-empty-key"),
        pytest.param((GPU,), (tol("key1", "Exists"),), Code.SUCCESS, id="exists-same-key"),
        pytest.param(
            (GPU,), (tol("other", "Exists"),), Code.CLUSTER_UNSCHEDULABLE, id="exists-other-key"
        ),
        pytest.param(
            (GPU,), (tol("key1", "Exists", effect="NoSchedule"),), Code.SUCCESS, id="same-effect"
        ),
        pytest.param(
            (GPU,),
            (tol("key1", "Exists", effect="NoExecute"),),
            Code.CLUSTER_UNSCHEDULABLE,
            id="other-effect",
        ),
        pytest.param((GPU,), (tol("key1", "Equal", "value1"),), Code.SUCCESS, id="equal"),
        pytest.param(
            (GPU,), (tol("key1", "Equal", "value2"),), Code.CLUSTER_UNSCHEDULABLE, id="equal-miss"
        ),
        pytest.param(
            (GPU,), (tol("", "Equal", "value1"),), Code.CLUSTER_UNSCHEDULABLE, id="equal-no-key"
        ),
        pytest.param((NO_VALUE,), (tol("key2", "Equal"),), Code.SUCCESS, id="equal-empty-value"),
        pytest.param(
            (GPU,), (tol("key1", None, "value1"),), Code.SUCCESS, id="absent-operator-is-equal"
        ),
        pytest.param(
            (GPU,),
            (tol("key1", "", "value1"),),
            Code.CLUSTER_UNSCHEDULABLE,
            id="empty-operator-tolerates-nothing",
        ),
        pytest.param(
            (GPU,),
            (tol("key1", "Exist"),),
            Code.CLUSTER_UNSCHEDULABLE,
            id="unknown-operator-tolerates-nothing",
        ),
        pytest.param(
            (GPU, NO_VALUE),
            (tol("key1", "Exists"),),
            Code.CLUSTER_UNSCHEDULABLE,
            id="every-taint-needs-a-toleration",
        ),
        pytest.param(
            (GPU, NO_VALUE),
            (tol("key2", "Exists"), tol("key1", "Equal", "value1")),
            Code.SUCCESS,
            id="each-taint-tolerated-by-some-toleration",
        ),
    ],
)
def test_filter_follows_tolerations(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], expected: Code
) -> None:
    assert run(taints, tolerations).code is expected


def test_reason_renders_the_first_untolerated_taint_like_go() -> None:
    status = run((GPU, NO_VALUE), ())
    assert status.reasons == (
        "taint &{Key:key1 Value:value1 Effect:NoSchedule} cannot be tolerated",
    )
    assert str(status) == (
        "ClusterUnschedulable, taint &{Key:key1 Value:value1 Effect:NoSchedule} cannot be tolerated"
    )


def test_reason_renders_an_empty_value_as_nothing() -> None:
    status = run((GPU, NO_VALUE), (tol("key1", "Exists"),))
    assert status.reasons == (
        REASON_UNTOLERATED.format(taint="&{Key:key2 Value: Effect:NoSchedule}"),
    )


def test_a_nil_policy_tolerates_nothing() -> None:
    member = cluster("a", taints=(GPU,))
    status = TaintToleration().filter(state(member), snapshot(None), member)
    assert status.code is Code.CLUSTER_UNSCHEDULABLE


def test_tolerations_are_read_once_per_cycle() -> None:
    cycle = state()
    plugin = TaintToleration()
    tolerated = cluster("a", taints=(GPU,))
    plugin.filter(cycle, snapshot(PlacementPolicy(tolerations=[tol(operator="Exists")])), tolerated)
    # A different snapshot within the same cycle cannot happen; the cached tolerations win.
    status = plugin.filter(cycle, snapshot(PlacementPolicy()), tolerated)
    assert status.code is Code.SUCCESS


def test_name() -> None:
    assert TaintToleration().name == NAME == "TaintToleration"
