"""The Argo CD example of docs/decisions.md, read as it tells Argo CD to read: the ConfigMap and
the ApplicationSet are taken from that page, and the objects real turns wrote on devhub are read
by the rules of Argo CD's cluster-decision-resource generator:

- the resource the ConfigMap names (`apiVersion` split into group and version, `kind` used as
  the resource name), in Argo CD's namespace only, selected by the generator's label selector;
- from each object, the list under `status.<statusListKey>` (`clusters` when unset); an object
  without a status is skipped;
- each entry's `<matchKey>` must name a cluster Argo CD knows, else the entry is skipped; every
  value of an entry must be a string (the generator converts each to one);
- the parameters are the Argo CD cluster's `name` and `server`, plus the entry's values."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from temporalio.testing import ActivityEnvironment

from activities.decisions import DecisionSettings
from hub.client import HubClient
from hub.types import MemberCluster, Namespace, PlacementDecision
from tests.integration.activities.activity_helpers import (
    Rig,
    add_cluster,
    add_placement,
    bindings_of,
    prepare_and_cycle,
    targets,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "decisions.md"
ARGOCD = "argocd"


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    """The ConfigMap and the ApplicationSet of the page's YAML example."""
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    config_map, application_set = yaml.safe_load_all(block)
    assert config_map["kind"] == "ConfigMap" and application_set["kind"] == "ApplicationSet"
    return config_map, application_set


def generate(
    hub: HubClient, config_map: dict[str, Any], generator: dict[str, Any],
    argo_clusters: dict[str, str],
) -> list[dict[str, Any]]:  # fmt: skip
    """The parameters Argo CD's generator would hand the ApplicationSet's template."""
    data = config_map["data"]
    group, _, version = data["apiVersion"].partition("/")
    assert group and version, "apiVersion must be group/version"
    assert (group, version, data["kind"]) == (
        PlacementDecision.GROUP, PlacementDecision.VERSION, PlacementDecision.PLURAL
    ), "the ConfigMap must name the resource the scheduler writes"  # fmt: skip
    list_key = data.get("statusListKey") or "clusters"
    match_key = data["matchKey"]
    selector = generator["labelSelector"]["matchLabels"]
    objects = hub.list(PlacementDecision, selector, namespace=config_map["metadata"]["namespace"])
    params = []
    for item in objects:
        status = item.to_wire().get("status")
        if not status:
            continue
        for entry in status[list_key]:
            assert all(isinstance(v, str) for v in entry.values()), entry  # Argo: value.(string)
            server = argo_clusters.get(entry.get(match_key) or "")
            if server is None:
                continue
            params.append({"name": entry[match_key], "server": server, **entry})
    return params


def test_argo_cd_deploys_where_the_bindings_are(
    hub: HubClient, make_activities: Callable[..., Rig], env: ActivityEnvironment
) -> None:
    config_map, application_set = example()
    assert config_map["metadata"]["namespace"] == application_set["metadata"]["namespace"] == ARGOCD
    (generators,) = application_set["spec"]["generators"]
    generator = generators["clusterDecisionResource"]
    assert generator["configMapRef"] == config_map["metadata"]["name"]
    placement = generator["labelSelector"]["matchLabels"]["multicluster.x-k8s.io/placement-key"]

    hub.create(Namespace(metadata={"name": ARGOCD}))
    rig = make_activities(decisions=DecisionSettings(namespace=ARGOCD))
    clusters = [f"member-{i}" for i in range(1, 5)]
    for cluster in clusters:
        add_cluster(hub, cluster)
    add_placement(hub, placement, {"placementType": "PickN", "numberOfClusters": 3})
    add_placement(hub, "other", {"placementType": "PickAll"})
    prepare_and_cycle(env, rig.activities, placement)
    prepare_and_cycle(env, rig.activities, "other")
    # Argo CD knows three of the four clusters, by their MemberCluster names.
    argo = {c: f"https://{c}.example:6443" for c in clusters[:3]}

    bound = targets(bindings_of(hub, placement))
    params = generate(hub, config_map, generator, argo)
    assert sorted(p["name"] for p in params) == sorted(c for c in bound if c in argo)
    assert {p["server"] for p in params} == {argo[c] for c in bound if c in argo}
    assert all(p["reason"].startswith("picked by scheduling policy") for p in params)

    # A binding goes (its cluster leaves): so does its Application, after the next turn.
    leaving = bound[0]
    hub.delete(MemberCluster, leaving)
    prepare_and_cycle(env, rig.activities, placement, 2)
    after = {p["name"] for p in generate(hub, config_map, generator, argo)}
    assert leaving not in after
    assert after == {c for c in targets(bindings_of(hub, placement), "Scheduled") if c in argo}
