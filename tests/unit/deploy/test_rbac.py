"""The ClusterRoles grant exactly what the code asks the hub for: no 403 in production, no spare
verb an attacker holding the pod's token could use.

The code side comes from `tests.support.deploy.hub_calls()` (every HubClient call in
activities/ and workers/, typed by mypy); the manifest side from `kubectl kustomize` of each
overlay."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.types import (
    KINDS,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Event,
    MemberCluster,
    PriorityClass,
)
from tests.support.deploy import (
    ABSTRACT_KIND_SOURCES,
    BESIDE_KUBEFLEET,
    DEV_ONLY_FUNCTIONS,
    STANDALONE,
    CallScan,
    Permission,
    by_kind,
    granted_permissions,
    guarded_lines,
    hub_calls,
    kubectl,
    render,
    required_permissions,
    standalone_only,
)

NAMESPACE = "fleet-scheduler"
SERVICE_ACCOUNT = "fleet-scheduler"
SHARED_ROLE = "fleet-scheduler"
STANDALONE_ROLE = "fleet-scheduler-standalone"
FLEET_GROUPS = {kind.GROUP for kind in KINDS}
SNAPSHOTS = ClusterSchedulingPolicySnapshot.PLURAL


@pytest.fixture(scope="module")
def scan() -> CallScan:
    return hub_calls()


@pytest.fixture(scope="module")
def needs(scan: CallScan) -> dict[str, set[Permission]]:
    """overlay -> the permissions its mode's code paths need."""
    return {
        STANDALONE: required_permissions(scan.calls),
        BESIDE_KUBEFLEET: required_permissions(c for c in scan.calls if not standalone_only(c)),
    }


@pytest.fixture(scope="module", autouse=True)
def _kubectl() -> Iterator[None]:
    if kubectl() is None:
        pytest.skip("kubectl is not installed (make system-deps installs Debian's kubectl)")
    yield


def _describe(permissions: set[Permission]) -> str:
    return ", ".join(f"{verb} {resource}" for _, resource, verb in sorted(permissions)) or "none"


def test_every_hub_call_is_understood(scan: CallScan) -> None:
    assert scan.errors == ()
    assert scan.unresolved == (), "\n".join(scan.unresolved)


def test_the_scan_finds_the_calls_the_design_requires(scan: CallScan) -> None:
    """Guards the analysis itself: a scan that silently found nothing would grant nothing."""
    seen = {(c.method, c.resource) for c in scan.calls}
    binding = ClusterResourceBinding.PLURAL
    assert ("create", binding) in seen  # run_cycle creates bindings
    assert ("update_status", f"{SNAPSHOTS}/status") in seen  # ... and writes the snapshot status
    for kind in (MemberCluster, ClusterResourcePlacement, ClusterSchedulingPolicySnapshot,
                 ClusterResourceBinding):
        assert ("list_then_watch", kind.PLURAL) in seen, f"the watcher watches {kind.PLURAL}"
    standalone = {(c.method, c.resource) for c in scan.calls if standalone_only(c)}
    assert ("create", SNAPSHOTS) in standalone  # the snapshotter, only when it is on
    assert ("create", binding) not in standalone


def test_dev_only_and_abstract_kind_tables_name_real_code(scan: CallScan) -> None:
    for function in DEV_ONLY_FUNCTIONS:
        module, _, name = function.rpartition(".")
        assert hasattr(importlib.import_module(module), name), f"{function} no longer exists"
    assert {c.function for c in scan.dev_only} == set(DEV_ONLY_FUNCTIONS)
    for function, source in ABSTRACT_KIND_SOURCES.items():
        module, _, constant = source.partition(":")
        assert getattr(importlib.import_module(module), constant), source
        made = (*scan.calls, *scan.dev_only)
        assert any(c.function == function for c in made), f"{function} makes no call"


@pytest.mark.parametrize("overlay", [STANDALONE, BESIDE_KUBEFLEET])
def test_granted_equals_needed(overlay: str, needs: dict[str, set[Permission]]) -> None:
    granted = granted_permissions(render(overlay), NAMESPACE, SERVICE_ACCOUNT)
    missing = needs[overlay] - granted
    spare = granted - needs[overlay]
    assert not missing, f"{overlay}: the code calls {_describe(missing)} but RBAC refuses it"
    assert not spare, f"{overlay}: RBAC grants {_describe(spare)} that no code path uses"


def test_the_standalone_role_holds_exactly_the_standalone_only_needs(
    needs: dict[str, set[Permission]],
) -> None:
    objects = render(STANDALONE)
    roles = by_kind(objects, "ClusterRole")
    assert set(roles) == {SHARED_ROLE, STANDALONE_ROLE}

    def allowed(role: str) -> set[Permission]:
        only = [
            o for o in objects
            if (o["kind"] != "ClusterRole" or o["metadata"]["name"] == role)
            and (o["kind"] != "ClusterRoleBinding" or o["roleRef"]["name"] == role)
        ]
        return granted_permissions(only, NAMESPACE, SERVICE_ACCOUNT)

    assert allowed(SHARED_ROLE) == needs[BESIDE_KUBEFLEET]
    assert allowed(STANDALONE_ROLE) == needs[STANDALONE] - needs[BESIDE_KUBEFLEET]


def test_beside_kubefleet_cannot_make_or_delete_policy_snapshots() -> None:
    granted = granted_permissions(render(BESIDE_KUBEFLEET), NAMESPACE, SERVICE_ACCOUNT)
    snapshot_verbs = {verb for _, resource, verb in granted if resource == SNAPSHOTS}
    assert snapshot_verbs.isdisjoint({"create", "patch", "delete", "deletecollection"})
    assert snapshot_verbs == {"list", "watch"}  # a turn lists the latest; the watcher watches


@pytest.mark.parametrize("overlay", [STANDALONE, BESIDE_KUBEFLEET])
def test_roles_name_only_fleet_resources_without_wildcards(overlay: str) -> None:
    """Fleet kinds, the built-in PriorityClasses read-only (docs/priority.md), and core/v1
    Events created, read and patched, never updated, listed or deleted (a schedule deadline's
    one Event per placement, counting its misses, docs/operations.md)."""
    for role in by_kind(render(overlay), "ClusterRole").values():
        for rule in role["rules"]:
            if set(rule["apiGroups"]) == {PriorityClass.GROUP}:
                assert rule["resources"] == [PriorityClass.PLURAL], rule
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
            elif set(rule["apiGroups"]) == {Event.GROUP}:
                assert rule["resources"] == [Event.PLURAL], rule
                assert rule["verbs"] == ["create", "get", "patch"], rule
            else:
                assert set(rule["apiGroups"]) <= FLEET_GROUPS, rule
            assert "*" not in rule["resources"] and "*" not in rule["verbs"], rule
            assert "resourceNames" not in rule and "nonResourceURLs" not in rule, rule


@pytest.mark.parametrize("overlay", [STANDALONE, BESIDE_KUBEFLEET])
def test_every_binding_binds_our_service_account_only(overlay: str) -> None:
    objects = render(overlay)
    roles = by_kind(objects, "ClusterRole")
    bindings = by_kind(objects, "ClusterRoleBinding")
    assert {b["roleRef"]["name"] for b in bindings.values()} == set(roles)
    for binding in bindings.values():
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
        ]
    assert not by_kind(objects, "Role") and not by_kind(objects, "RoleBinding")


GUARD_CASES = [
    ("if self._settings.snapshotter:\n    a()\n    b()\nc()\n", {2, 3}),
    ("if settings.snapshotter and ready:\n    a()\nelse:\n    b()\n", {2}),
    ("if snapshotter:\n    a()\n", {2}),
    ("if not self._settings.snapshotter:\n    a()\n", set()),
    ("if self._settings.snapshotter or force:\n    a()\n", set()),
    ("if self._settings.profile:\n    a()\n", set()),
]


@pytest.mark.parametrize(("source", "lines"), GUARD_CASES)
def test_snapshotter_guards_are_recognised(source: str, lines: set[int], tmp_path: Path) -> None:
    path = tmp_path / "module.py"
    path.write_text(source)
    assert guarded_lines(path) == lines
