"""Validation against the CRD schema: 422 Invalid with field paths, never a stored object."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

import pytest

from hub import names
from tests.integration.devhub.devhub_helpers import (
    BINDINGS,
    CLUSTERS,
    PLACEMENTS,
    SNAPSHOTS,
    Client,
    binding,
    cluster,
    placement,
)

Mutation = Callable[[dict[str, Any]], None]


def _policy(**fields: Any) -> Mutation:
    return lambda obj: obj["spec"]["policy"].update(fields)


@pytest.mark.parametrize(("mutate", "field", "reason"), [
    pytest.param(_policy(numberOfClusters=-1), "spec.policy.numberOfClusters",
                 "FieldValueInvalid", id="minimum"),
    pytest.param(_policy(numberOfClusters="two"), "spec.policy.numberOfClusters",
                 "FieldValueTypeInvalid", id="type-string-for-integer"),
    pytest.param(_policy(numberOfClusters=1.5), "spec.policy.numberOfClusters",
                 "FieldValueTypeInvalid", id="type-fraction-for-integer"),
    pytest.param(_policy(numberOfClusters=True), "spec.policy.numberOfClusters",
                 "FieldValueTypeInvalid", id="type-bool-for-integer"),
    pytest.param(_policy(placementType="PickSome"), "spec.policy.placementType",
                 "FieldValueNotSupported", id="enum"),
    pytest.param(_policy(clusterNames=[f"c{i}" for i in range(101)]),
                 "spec.policy.clusterNames", "FieldValueTooMany", id="max-items"),
    pytest.param(_policy(tolerations=[{"operator": "Maybe"}]),
                 "spec.policy.tolerations[0].operator", "FieldValueNotSupported",
                 id="nested-enum"),
    pytest.param(_policy(topologySpreadConstraints=[{"maxSkew": 1}]),
                 "spec.policy.topologySpreadConstraints[0].topologyKey", "FieldValueRequired",
                 id="nested-required"),
    pytest.param(_policy(affinity={"clusterAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 101, "preference": {}}]}}),
        "spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        "[0].weight", "FieldValueInvalid", id="maximum"),
    pytest.param(lambda o: o["spec"].update(revisionHistoryLimit=0),
                 "spec.revisionHistoryLimit", "FieldValueInvalid", id="minimum-one"),
    pytest.param(lambda o: o["spec"].update(policy="PickAll"), "spec.policy",
                 "FieldValueTypeInvalid", id="object-expected"),
    pytest.param(lambda o: o["spec"].update(resourceSelectors={"kind": "Namespace"}),
                 "spec.resourceSelectors", "FieldValueTypeInvalid", id="array-expected"),
    pytest.param(lambda o: o["spec"]["resourceSelectors"][0].pop("kind"),
                 "spec.resourceSelectors[0].kind", "FieldValueRequired", id="required"),
    pytest.param(lambda o: o["metadata"].update(name="Web"), "metadata.name",
                 "FieldValueInvalid", id="name-uppercase"),
    pytest.param(lambda o: o["metadata"].update(name="a" * 254), "metadata.name",
                 "FieldValueInvalid", id="name-too-long"),
    pytest.param(lambda o: o["metadata"].update(name="web_1"), "metadata.name",
                 "FieldValueInvalid", id="name-underscore"),
    pytest.param(lambda o: o["metadata"].update(name="-web"), "metadata.name",
                 "FieldValueInvalid", id="name-leading-dash"),
    pytest.param(lambda o: o["metadata"].pop("name"), "metadata.name",
                 "FieldValueRequired", id="name-missing"),
    pytest.param(lambda o: o["metadata"].update(labels={"bad key": "x"}), "metadata.labels",
                 "FieldValueInvalid", id="label-key"),
    pytest.param(lambda o: o["metadata"].update(labels={"k": "v" * 64}),
                 "metadata.labels[k]", "FieldValueInvalid", id="label-value-too-long"),
    pytest.param(lambda o: o["metadata"].update(labels={"k": 3}), "metadata.labels[k]",
                 "FieldValueTypeInvalid", id="label-value-type"),
    pytest.param(lambda o: o["metadata"].update(finalizers=["not a finalizer"]),
                 "metadata.finalizers[0]", "FieldValueInvalid", id="finalizer-name"),
])
def test_invalid_placements_are_refused_with_the_field_path(
    api: Client, mutate: Mutation, field: str, reason: str
) -> None:
    body = placement("web")
    mutate(body)
    response = api.post(PLACEMENTS, body)
    assert response.status_code == 422, response.text
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    assert (field, reason) in {(c["field"], c["reason"]) for c in status["details"]["causes"]}
    assert field in status["message"]
    assert api.get(PLACEMENTS).json()["items"] == []


def test_the_name_limit_is_253_characters(api: Client) -> None:
    """An object name is a DNS subdomain (placements have a CEL rule of their own: 63)."""
    name = ".".join(["a" * 63] * 4)[:253]
    assert len(name) == 253
    assert api.post(CLUSTERS, cluster(name)).status_code == 201
    response = api.post(CLUSTERS, cluster(name + "a"))
    assert response.status_code == 422, response.text


def test_every_problem_is_reported_at_once(api: Client) -> None:
    body = placement("web")
    body["spec"]["policy"].update(numberOfClusters=-1, placementType="Nope")
    causes = api.post(PLACEMENTS, body).json()["details"]["causes"]
    assert {c["field"] for c in causes} == {"spec.policy.numberOfClusters",
                                            "spec.policy.placementType"}


@pytest.mark.parametrize(("mutate", "field"), [
    pytest.param(lambda o: o["spec"].pop("targetCluster"), "spec.targetCluster", id="required"),
    pytest.param(lambda o: o["spec"].update(state="Gone"), "spec.state", id="state-enum"),
    pytest.param(lambda o: o["spec"]["clusterDecision"].pop("selected"),
                 "spec.clusterDecision.selected", id="decision-required"),
    pytest.param(lambda o: o.pop("spec"), "spec", id="spec-required"),
])
def test_invalid_bindings_are_refused(api: Client, mutate: Mutation, field: str) -> None:
    body = binding("b1")
    mutate(body)
    response = api.post(BINDINGS, body)
    assert response.status_code == 422, response.text
    assert field in {c["field"] for c in response.json()["details"]["causes"]}


def _snapshot(policy_hash: str) -> dict[str, Any]:
    return {"apiVersion": names.PLACEMENT_API_VERSION, "kind": "ClusterSchedulingPolicySnapshot",
            "metadata": {"name": "web-0"}, "spec": {"policyHash": policy_hash}}


def test_policy_hash_must_be_base64_bytes(api: Client) -> None:
    assert api.post(SNAPSHOTS, _snapshot("not base64!")).status_code == 422
    good = base64.b64encode(b"0" * 64).decode()
    assert api.post(SNAPSHOTS, _snapshot(good)).status_code == 201


@pytest.mark.parametrize(("status", "field"), [
    pytest.param({"conditions": [{"type": "Joined", "status": "Maybe"}]},
                 "status.conditions[0].status", id="condition-status-enum"),
    pytest.param({"conditions": [{"type": "Joined", "status": "True"},
                                 {"type": "Joined", "status": "False"}]},
                 "status.conditions[1]", id="duplicate-condition-type"),
    pytest.param({"conditions": [{"type": "Joined", "status": "True",
                                  "lastTransitionTime": "yesterday"}]},
                 "status.conditions[0].lastTransitionTime", id="date-time"),
    pytest.param({"properties": {"kubernetes-fleet.io/node-count": {"value": 3}}},
                 "status.properties[kubernetes-fleet.io/node-count].value", id="map-value-type"),
])
def test_status_updates_are_validated_too(
    api: Client, status: dict[str, Any], field: str
) -> None:
    created = api.create(CLUSTERS, cluster("m1"))
    created["status"] = status
    response = api.put(f"{CLUSTERS}/m1/status", created)
    assert response.status_code == 422, response.text
    assert field in {c["field"] for c in response.json()["details"]["causes"]}
    assert "status" not in api.get(f"{CLUSTERS}/m1").json()


def test_invalid_updates_leave_the_stored_object_alone(api: Client) -> None:
    created = api.create(PLACEMENTS, placement("web"))
    broken = copy.deepcopy(created)
    broken["spec"]["policy"]["numberOfClusters"] = -5
    assert api.put(f"{PLACEMENTS}/web", broken).status_code == 422
    assert api.patch(f"{PLACEMENTS}/web", {"spec": {"policy": {"placementType": 7}}}
                     ).status_code == 422
    assert api.get(f"{PLACEMENTS}/web").json() == created


def test_defaults_are_applied(api: Client) -> None:
    body = placement("web", n=None, placement_type="PickAll")
    body["spec"]["policy"] = {"tolerations": [{"key": "gpu"}]}
    created = api.create(PLACEMENTS, body)
    assert created["spec"]["policy"]["placementType"] == "PickAll"
    assert created["spec"]["policy"]["tolerations"] == [{"key": "gpu", "operator": "Equal"}]
    assert created["spec"]["revisionHistoryLimit"] == 10


def test_unknown_fields_are_pruned_where_the_schema_does_not_preserve_them(api: Client) -> None:
    body = placement("web")
    body["spec"]["policy"]["surprise"] = 1  # PlacementPolicy: fully modelled, pruned
    body["spec"]["strategy"] = {"type": "RollingUpdate"}  # spec: partially modelled, kept
    body["metadata"]["surprise"] = "x"  # ObjectMeta: typed, pruned
    body["extra"] = True  # root: pruned
    response = api.post(PLACEMENTS, body)
    assert response.status_code == 201
    assert response.headers.get("Warning", "").count("unknown field") >= 1
    created = response.json()
    assert "surprise" not in created["spec"]["policy"]
    assert created["spec"]["strategy"] == {"type": "RollingUpdate"}
    assert "surprise" not in created["metadata"]
    assert "extra" not in created


def test_member_cluster_status_keeps_fields_it_does_not_model(api: Client) -> None:
    created = api.create(CLUSTERS, cluster("m1"))
    created["status"] = {"agentStatus": [{"type": "MemberAgent"}],
                         "somethingNew": {"a": 1}}
    updated = api.put(f"{CLUSTERS}/m1/status", created).json()
    assert updated["status"]["somethingNew"] == {"a": 1}


def test_strict_field_validation_refuses_unknown_fields(api: Client) -> None:
    body = placement("web")
    body["spec"]["policy"]["surprise"] = 1
    response = api.post(f"{PLACEMENTS}?fieldValidation=Strict", body)
    assert response.status_code == 400
    assert 'unknown field "spec.policy.surprise"' in response.json()["message"]
    assert api.get(f"{PLACEMENTS}/web").status_code == 404


def test_null_fields_are_dropped(api: Client) -> None:
    body = placement("web")
    body["spec"]["policy"]["affinity"] = None
    created = api.create(PLACEMENTS, body)
    assert "affinity" not in created["spec"]["policy"]
