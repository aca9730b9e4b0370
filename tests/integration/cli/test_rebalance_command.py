"""`fleet-scheduler rebalance --dry-run` (docs/capacity.md) as a user runs it: a subprocess
against devhub over real HTTP. It prints every move with the utilisation of both clusters before
and after, and writes nothing; a bad request is one line and exit 2."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    ClusterDecision,
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ObjectMeta,
    Reservation,
)
from scheduler.bindings.writes import new_binding
from scheduler.testing import member_cluster
from tests.support.cli import beside_make_run, run_cli

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@pytest.fixture
def spread_fleet(devhub_factory: Callable[..., DevHub], tmp_path: Path) -> tuple[DevHub, Path]:
    """Three 10-CPU clusters, each with one 3-CPU binding of its own placement (reserved)."""
    hub = devhub_factory()
    kubeconfig = hub.write_kubeconfig(tmp_path / "kubeconfig")
    client = HubClient.from_kubeconfig(kubeconfig)
    now = datetime.now(UTC)
    try:
        for i in range(3):
            cluster, placement = f"c{i}", f"p{i}"
            wanted = member_cluster(cluster, now, allocatable={"cpu": "10"})
            created = client.create(wanted.model_copy(update={"status": wanted.status}))
            client.update_status(created.model_copy(update={"status": wanted.status}))
            client.create(
                ClusterResourcePlacement.from_wire(
                    {
                        "metadata": {
                            "name": placement,
                            "annotations": {
                                names.REQUESTS_ANNOTATION: "cpu=3",
                                names.REBALANCE_ANNOTATION: names.REBALANCE_ALLOWED,
                            },
                        },
                        "spec": {
                            "resourceSelectors": [
                                {"group": "", "version": "v1", "kind": "Namespace", "name": "a"}
                            ],
                            "policy": {"placementType": "PickN", "numberOfClusters": 1},
                        },
                    }
                )
            )
            snapshot = _snapshot(client, placement)
            binding = new_binding(
                f"{placement}-{cluster}",
                placement,
                cluster,
                snapshot,
                ClusterDecision(cluster_name=cluster, selected=True, reason="test"),
            )
            client.create(binding)
            client.create(
                CapacityLedger(
                    metadata=ObjectMeta(name=cluster),
                    spec=CapacityLedgerSpec(
                        reservations={
                            binding.name: Reservation(
                                placement=placement, requests={"cpu": "3"}, reserved_at=now
                            )
                        }
                    ),
                )
            )
    finally:
        client.close()
    return hub, kubeconfig


def _snapshot(client: HubClient, placement: str) -> str:
    from scheduler.snapshots import plan_snapshot_sync

    crp = client.get(ClusterResourcePlacement, placement)
    created = plan_snapshot_sync(crp, []).create
    assert created is not None
    return client.create(created).name


def test_dry_run_prints_each_move_with_utilisation_and_writes_nothing(
    spread_fleet: tuple[DevHub, Path],
) -> None:
    hub, kubeconfig = spread_fleet
    before = sum(hub.stats.count(verb) for verb in WRITE_VERBS)
    done = run_cli("rebalance", "--dry-run", "--kubeconfig", str(kubeconfig))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    moves = [line for line in lines if line.startswith("move ")]
    # c0 (30%) empties into the fullest in use that fits (c2, 30%, by name), then c1 into c2
    assert moves == [
        "move p0-c0 (p0) c0 -> c2: pack: empties c0 into c2; c0 30% -> 0%, c2 30% -> 60%",
        "move p1-c1 (p1) c1 -> c2: pack: empties c1 into c2; c1 30% -> 0%, c2 60% -> 90%",
    ]
    assert lines[-1] == (
        "pack: would make 2 move(s) of 3 movable binding(s); clusters in use 3 -> 1; "
        "nothing was written"
    )
    assert sum(hub.stats.count(verb) for verb in WRITE_VERBS) == before
    assert len(HubClient.from_kubeconfig(kubeconfig).list(ClusterResourceBinding).items) == 3


def test_spread_has_nothing_to_do_on_an_even_fleet(spread_fleet: tuple[DevHub, Path]) -> None:
    _, kubeconfig = spread_fleet
    done = run_cli(
        "rebalance", "--dry-run", "--strategy", "spread", "--kubeconfig", str(kubeconfig)
    )
    assert done.returncode == 0, done.stderr
    assert "spread: would make 0 move(s) of 3 movable binding(s); clusters in use 3 -> 3" in (
        done.stdout
    )


def test_a_placement_that_cannot_move_is_one_line_and_exit_2(
    spread_fleet: tuple[DevHub, Path],
) -> None:
    _, kubeconfig = spread_fleet
    done = run_cli("rebalance", "nope", "--kubeconfig", str(kubeconfig))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "fleet-scheduler rebalance: error: placement 'nope' has no binding that may move: is it "
        "a PickN ClusterResourcePlacement annotated fleet-scheduler.io/rebalance: allowed and "
        "fleet-scheduler.io/requests?"
    ]


def test_rebalance_beside_make_run_reads_its_kubeconfig(
    spread_fleet: tuple[DevHub, Path], tmp_path: Path
) -> None:
    """No --kubeconfig and no KUBECONFIG in the repository root after `make run`: the hub of
    .run/kubeconfig."""
    hub, _ = spread_fleet
    hub.write_kubeconfig(tmp_path / ".run" / "kubeconfig")
    done = run_cli("rebalance", "--dry-run", cwd=tmp_path, env=beside_make_run(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("pack: would make 2 move(s)")
