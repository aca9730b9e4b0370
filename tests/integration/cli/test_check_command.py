"""`fleet-scheduler check` as a process against devhub: exit 0 when every invariant holds, 1
for violations only, 2 when it could not read what it checks (a hub that does not answer, does
not serve a kind, or serves an object our model cannot read; a Temporal that does not answer),
then with one line on stderr saying what, never a traceback (issue 33)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest

from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
)
from hub.types.meta import HubObject
from tests.crd_files import write_crds
from tests.support.cli import assert_one_line_error, run_cli, unreachable
from tests.support.hub import raw_create

EXIT_VIOLATIONS: Final = 1


def crd_file(kind: type[HubObject]) -> str:
    return f"{kind.GROUP}_{kind.PLURAL}.yaml"


def check(kubeconfig: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return run_cli("check", "--kubeconfig", str(kubeconfig), "--no-resource-placements", *more)


def test_all_hold_is_0_and_a_violation_is_1(hub: HubClient, hub_kubeconfig: Path) -> None:
    clean = check(hub_kubeconfig, "--hub-only")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("all invariants hold: ")
    old = datetime.now(UTC) - timedelta(hours=1)
    hub.create(
        CapacityLedger.from_wire(
            {
                "metadata": {"name": "z"},
                "spec": {"reservations": {"gone-z-1": {
                    "placement": "gone", "requests": {"cpu": "2"},
                    "reservedAt": old.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }}},
            }
        )
    )  # fmt: skip
    broken = check(hub_kubeconfig, "--hub-only")
    assert broken.returncode == EXIT_VIOLATIONS, broken.stdout + broken.stderr
    assert broken.stdout.splitlines()[-1].startswith("1 violation(s): stale_reservation 1; ")
    assert broken.stderr == ""


def test_a_hub_that_does_not_answer_is_2(tmp_path: Path, devhub: DevHub) -> None:
    kubeconfig = devhub.write_kubeconfig(tmp_path / "kubeconfig")
    port = devhub.url.rsplit(":", 1)[1]
    text = kubeconfig.read_text()
    assert f"127.0.0.1:{port}" in text
    kubeconfig.write_text(text.replace(f"127.0.0.1:{port}", unreachable()))
    result = check(kubeconfig, "--hub-only")
    assert_one_line_error(result, "fleet-scheduler check: error: cannot read the hub at ")


def test_a_hub_that_does_not_serve_a_kind_it_reads_is_2(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    """A 404 listing ClusterResourcePlacements (their CRD not installed) was exit 1, the code of
    a violation."""
    crds = write_crds(tmp_path / "crds", leave_out={crd_file(ClusterResourcePlacement)})
    hub = devhub_factory(crd_dir=crds)
    result = check(hub.write_kubeconfig(tmp_path / "kubeconfig"), "--hub-only")
    line = assert_one_line_error(result, "fleet-scheduler check: error: cannot read the hub at ")
    assert ClusterResourcePlacement.PLURAL in line, line


def test_an_object_our_model_cannot_read_is_2(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    """A policy snapshot of another KubeFleet version (eleven required terms, where ours allow
    ten) on a hub whose CRD lets it be stored: was exit 1, the code of a violation."""
    crds = write_crds(
        tmp_path / "crds", drop=("maxItems",), only=[crd_file(ClusterSchedulingPolicySnapshot)]
    )
    hub = devhub_factory(crd_dir=crds)
    term = {"labelSelector": {"matchLabels": {"env": "prod"}}}
    policy = {
        "placementType": "PickAll",
        "affinity": {
            "clusterAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "clusterSelectorTerms": [term] * 11
                }
            }
        },
    }
    raw_create(hub, ClusterSchedulingPolicySnapshot, _snapshot("web", policy))
    result = check(hub.write_kubeconfig(tmp_path / "kubeconfig"), "--hub-only")
    line = assert_one_line_error(result, "fleet-scheduler check: error: cannot read the hub at ")
    assert "web-0" in line and "does not match our model" in line, line


@pytest.mark.parametrize("kind", [CapacityLedger, ClusterResourcePlacementDisruptionBudget])
def test_a_kind_rbac_does_not_let_it_read_is_2(
    devhub: DevHub, hub_kubeconfig: Path, kind: type[HubObject]
) -> None:
    """A 403 listing a kind the invariants read is "could not read": before, check went on as
    if the hub served none of them, said all invariants hold (or, with a capacity-aware
    binding, that each lacks its reservation "(the hub serves no CapacityLedgers)", exit 1),
    after an INFO line per kind on stderr."""
    fault = devhub.faults.inject(verb="list", resource=kind.PLURAL, status=403)
    try:
        result = check(hub_kubeconfig, "--hub-only")
    finally:
        fault.remove()
    line = assert_one_line_error(result, "fleet-scheduler check: error: cannot read the hub at ")
    assert kind.PLURAL in line and "403" in line, line


def test_credentials_the_hub_refuses_are_2_on_one_line(
    devhub: DevHub, hub_kubeconfig: Path
) -> None:
    """Before, an INFO line per optional kind (each 401) came first on stderr."""
    hub_kubeconfig.write_text(hub_kubeconfig.read_text().replace(devhub.token, "not-the-token"))
    result = check(hub_kubeconfig, "--hub-only")
    line = assert_one_line_error(result, "fleet-scheduler check: error: cannot read the hub at ")
    assert "401" in line, line


def test_a_temporal_that_does_not_answer_is_2(hub_kubeconfig: Path) -> None:
    result = check(hub_kubeconfig, "--temporal-address", unreachable())
    assert_one_line_error(result)


def _snapshot(placement: str, policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{ClusterSchedulingPolicySnapshot.GROUP}/"
        f"{ClusterSchedulingPolicySnapshot.VERSION}",
        "kind": ClusterSchedulingPolicySnapshot.KIND,
        "metadata": {
            "name": f"{placement}-0",
            "labels": {
                names.PARENT_PLACEMENT_LABEL: placement,
                names.IS_LATEST_SNAPSHOT_LABEL: "true",
                names.POLICY_INDEX_LABEL: "0",
            },
            "annotations": {names.CRP_GENERATION_ANNOTATION: "1"},
        },
        "spec": {"policyHash": "", "policy": policy},
    }
