"""Affinity enforced during execution, end to end (devhub, the dev server, the worker and the
watcher): relabelling a bound cluster moves an enforcing PickN placement's binding at the
turn the relabel causes, new binding first; the same placement without the annotation keeps
its binding, as KubeFleet does (docs/enforcement.md)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from temporalio.client import Client

from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourcePlacement, MemberCluster, Namespace, ResourcePlacement
from scheduler.moves.budgets import moved_from
from tests.support.fleet import (
    add_cluster,
    bindings,
    live_targets,
    rb_targets,
    report_namespaces,
    settled,
    status,
    unique,
)
from tests.support.waits import consistently_async, until_async
from workers.cli.render import render_explain
from workflows.models import TurnMoves

pytestmark = pytest.mark.asyncio(loop_scope="session")

SELECTOR = {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}


def placement(name: str, key: str, *, enforced: bool) -> ClusterResourcePlacement:
    annotations = (
        {names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"} if enforced else {}
    )
    required: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "clusterSelectorTerms": [{"labelSelector": {"matchLabels": {key: "prod"}}}]
        }
    }
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "resourceSelectors": [SELECTOR],
                "policy": {
                    "placementType": "PickN",
                    "numberOfClusters": 2,
                    "affinity": {"clusterAffinity": required},
                },
            },
        }
    )


@pytest.mark.parametrize("enforced", [True, False], ids=["enforced", "kubefleet"])
async def test_a_relabelled_cluster_loses_an_enforcing_placements_binding(
    hub: HubClient, system: Watcher, temporal_client: Client, enforced: bool
) -> None:
    prefix = unique("enf")
    key = f"{prefix}.example.com/env"
    clusters = [f"{prefix}-{i}" for i in range(3)]
    for name in clusters:
        add_cluster(hub, name, labels={key: "prod"})
    web = f"{prefix}-web"
    hub.create(placement(web, key, enforced=enforced))
    def two() -> dict[str, str] | None:
        found = live_targets(hub, web)
        return found if len(found) == 2 else None

    before = await until_async(two, blocking=True)
    lost = sorted(before)[0]
    [spare] = set(clusters) - set(before)
    cycles_before = (await settled(temporal_client, web)).cycles

    started = time.monotonic()
    hub.patch(MemberCluster, lost, {"metadata": {"labels": {key: "retired"}}})

    if not enforced:
        await consistently_async(lambda: live_targets(hub, web) == before, duration=3.0)
        return
    want = {c: names.STATE_SCHEDULED for c in (set(before) - {lost}) | {spare}}
    await until_async(lambda: live_targets(hub, web) == want or None, blocking=True)
    took = time.monotonic() - started
    print(f"relabel -> moved in {took:.2f} s")
    new = next(b for b in bindings(hub, web) if b.spec.target_cluster == spare)
    old = next(b for b in bindings(hub, web) if b.spec.target_cluster == lost)
    assert moved_from(new) == old.metadata.name
    assert old.spec.state == names.STATE_UNSCHEDULED
    # explain and the UI's details say what moved and why (the workflow's status).
    said = await until_async(
        lambda: _moves_said(temporal_client, web), what="the workflow's last moves"
    )
    # Within one turn of the event: the turn the relabel caused made the move.
    assert said.cycle == cycles_before + 1
    assert said.lines == [
        f"moved {old.metadata.name} {lost} -> {spare} as {new.metadata.name}: "
        f"cluster lost {key}=prod"
    ]
    assert f"moves before cycle {said.cycle}:" in render_explain(
        await status(temporal_client, web)  # type: ignore[arg-type]
    )


async def _moves_said(client: Client, placement: str) -> TurnMoves | None:
    found = await status(client, placement)
    return found.last_moves if found is not None and found.last_moves else None


async def test_a_resource_placement_moves_off_a_cluster_its_namespace_left(
    hub: HubClient, system: Watcher, temporal_client: Client
) -> None:
    """A ResourcePlacement's namespace deleted on a member cluster (the member agent's namespace
    collection stops listing it): the enforcing placement's ResourceBinding moves to a cluster
    that still has it."""
    namespace = unique("team")
    hub.create(Namespace(metadata={"name": namespace}))
    clusters = [f"{namespace}-{i}" for i in range(2)]
    for name in clusters:
        add_cluster(hub, name)
        report_namespaces(hub, name, {namespace: ""})
    spec = {
        "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "cm"}],
        "policy": {"placementType": "PickN", "numberOfClusters": 1},
    }
    meta = {
        "name": "web",
        "namespace": namespace,
        "annotations": {names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"},
    }
    hub.create(ResourcePlacement.from_wire({"metadata": meta, "spec": spec}))

    def one() -> str | None:
        found = rb_targets(hub, namespace, "web")
        live = [c for c, state in found.items() if state != names.STATE_UNSCHEDULED]
        return live[0] if len(found) == 1 and len(live) == 1 else None

    bound = await until_async(one, blocking=True)
    [other] = set(clusters) - {bound}
    report_namespaces(hub, bound, {"kube-system": ""})

    want = {bound: names.STATE_UNSCHEDULED, other: names.STATE_SCHEDULED}
    await until_async(lambda: rb_targets(hub, namespace, "web") == want or None, blocking=True)


async def test_a_binding_with_nowhere_to_go_moves_once_a_cluster_passes(
    hub: HubClient, system: Watcher, temporal_client: Client
) -> None:
    """The relabelled cluster's binding has nowhere to go (the third cluster is not prod): it
    is kept. Relabelling the third cluster prod, a cluster the placement holds nothing on, moves
    it there through the watcher (no timer: the turn asked for none)."""
    prefix = unique("enfw")
    key = f"{prefix}.example.com/env"
    clusters = [f"{prefix}-{i}" for i in range(3)]
    for name, env in zip(clusters, ("prod", "prod", "dev"), strict=True):
        add_cluster(hub, name, labels={key: env})
    web = f"{prefix}-web"
    hub.create(placement(web, key, enforced=True))
    bound = clusters[:2]
    want = dict.fromkeys(bound, names.STATE_SCHEDULED)
    await until_async(lambda: live_targets(hub, web) == want or None, blocking=True)
    lost, spare = bound[0], clusters[2]
    hub.patch(MemberCluster, lost, {"metadata": {"labels": {key: "retired"}}})
    kept = await until_async(lambda: _moves_said(temporal_client, web), what="the kept line")
    assert kept.lines[0].startswith("kept ") and "no other cluster passes" in kept.lines[0]
    assert live_targets(hub, web) == want

    hub.patch(MemberCluster, spare, {"metadata": {"labels": {key: "prod"}}})

    moved = {bound[1]: names.STATE_SCHEDULED, spare: names.STATE_SCHEDULED}
    await until_async(lambda: live_targets(hub, web) == moved or None, blocking=True)
    old = next(b for b in bindings(hub, web) if b.spec.target_cluster == lost)
    assert old.spec.state == names.STATE_UNSCHEDULED
