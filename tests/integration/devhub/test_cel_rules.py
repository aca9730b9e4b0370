"""The CRDs' CEL rules (KubeFleet's placement rules), enforced by devhub as kube-apiserver does:
422 Invalid naming the field and the rule's message, on create, replace and patch; rules about the
old object only on updates; nothing stored when a rule fails."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.crds import VALIDATIONS
from hub.errors import InvalidObjectError
from hub.types import ClusterResourcePlacement
from tests.crd_files import write_crds
from tests.integration.devhub.devhub_helpers import MERGE, PLACEMENTS, SNAPSHOTS, Client, placement

Mutation = Callable[[dict[str, Any]], None]

PICK_N_RULE = (
    "clusterNames cannot be set and numberOfClusters must be set when placementType is PickN"
)
PICK_ALL_RULE = (
    "clusterNames, numberOfClusters, and topologySpreadConstraints cannot be set when "
    "placementType is PickAll"
)
PICK_FIXED_RULE = (
    "affinity, numberOfClusters, topologySpreadConstraints, and tolerations cannot be set when "
    "placementType is PickFixed"
)
SPREAD = [{"topologyKey": "region"}]


def _policy(**fields: Any) -> Mutation:
    return lambda obj: obj["spec"]["policy"].update(fields)


def _without_number(obj: dict[str, Any]) -> None:
    del obj["spec"]["policy"]["numberOfClusters"]


def _selector_with_name_and_labels(obj: dict[str, Any]) -> None:
    obj["spec"]["resourceSelectors"][0]["labelSelector"] = {"matchLabels": {"a": "b"}}


def refusal(response: Any) -> tuple[str, str]:
    """(field, message) of a 422's one cause, after checking its shape."""
    assert response.status_code == 422, response.text
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    causes = status["details"]["causes"]
    assert len(causes) == 1, causes
    cause = causes[0]
    assert cause["reason"] == "FieldValueInvalid"
    assert f"{cause['field']}: {cause['message']}" in status["message"]
    return cause["field"], cause["message"]


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        pytest.param(_without_number, "spec.policy", PICK_N_RULE, id="pick-n-without-number"),
        pytest.param(_policy(clusterNames=["a"]), "spec.policy", PICK_N_RULE,
                     id="pick-n-with-names"),
        pytest.param(_policy(placementType="PickAll"), "spec.policy", PICK_ALL_RULE,
                     id="pick-all-with-number"),
        pytest.param(_policy(placementType="PickFixed", clusterNames=["a"]), "spec.policy",
                     PICK_FIXED_RULE, id="pick-fixed-with-number"),
        pytest.param(_policy(placementType="PickFixed", numberOfClusters=None, affinity={}),
                     "spec.policy", PICK_FIXED_RULE, id="pick-fixed-with-empty-affinity"),
        pytest.param(_policy(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
                     "spec.policy.tolerations", "value must be empty when operator is Exists",
                     id="exists-with-value"),
        pytest.param(_policy(tolerations=[{"value": "v"}]), "spec.policy.tolerations",
                     "operator must be Exists when key is empty", id="equal-without-key"),
        pytest.param(_selector_with_name_and_labels, "spec.resourceSelectors",
                     "name and labelSelector are mutually exclusive in a resource selector",
                     id="selector-name-and-labels"),
    ],
)  # fmt: skip
def test_a_placement_breaking_a_rule_is_refused_with_its_message(
    api: Client, mutate: Mutation, field: str, message: str
) -> None:
    body = placement("web")
    mutate(body)
    body["spec"]["policy"] = {k: v for k, v in body["spec"]["policy"].items() if v is not None}
    kind = "array" if field.endswith(("tolerations", "resourceSelectors")) else "object"
    assert refusal(api.post(PLACEMENTS, body)) == (field, f'Invalid value: "{kind}": {message}')
    assert api.get(PLACEMENTS).json()["items"] == []


def test_a_placement_name_longer_than_a_label_value_is_refused(api: Client) -> None:
    """The name labels the placement's snapshots and bindings: 63 characters at most."""
    assert api.post(PLACEMENTS, placement("p" * 63)).status_code == 201
    field, message = refusal(api.post(PLACEMENTS, placement("p" * 64)))
    assert (field, message) == (
        "<root>",
        'Invalid value: "object": the name field cannot have length exceeding 63',
    )


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param({"placementType": "PickN", "numberOfClusters": 0, "clusterNames": [],
                      "topologySpreadConstraints": SPREAD}, id="pick-n-empty-names"),
        pytest.param({"placementType": "PickAll", "clusterNames": [],
                      "topologySpreadConstraints": [], "tolerations": [{"key": "k"}]},
                     id="pick-all-empty-lists"),
        pytest.param({"placementType": "PickFixed", "clusterNames": ["a", "b"],
                      "tolerations": [], "topologySpreadConstraints": []},
                     id="pick-fixed-empty-lists"),
        pytest.param({}, id="no-type-is-pick-all"),
    ],
)  # fmt: skip
def test_what_kubefleet_accepts_is_accepted(api: Client, policy: dict[str, Any]) -> None:
    """An empty list counts as unset, as the webhook's `len(...) > 0` has it."""
    body = placement("web")
    body["spec"]["policy"] = policy
    response = api.post(PLACEMENTS, body)
    assert response.status_code == 201, response.text


def test_the_client_gets_the_rule_in_its_error(api: Client, hub_kubeconfig: Path) -> None:
    crp = ClusterResourcePlacement.from_wire(placement("web", n=None))
    client = HubClient.from_kubeconfig(hub_kubeconfig)
    try:
        with pytest.raises(InvalidObjectError) as refused:
            client.create(crp)
    finally:
        client.close()
    assert f'spec.policy: Invalid value: "object": {PICK_N_RULE}' in str(refused.value)


def _created(api: Client, **policy: Any) -> dict[str, Any]:
    body = placement("web")
    body["spec"]["policy"] = policy
    created: dict[str, Any] = api.create(PLACEMENTS, body)
    return created


def test_the_placement_type_cannot_change(api: Client) -> None:
    _created(api, placementType="PickN", numberOfClusters=2)
    response = api.patch(
        f"{PLACEMENTS}/web",
        {"spec": {"policy": {"placementType": "PickAll", "numberOfClusters": None}}},
        content_type=MERGE,
    )
    assert refusal(response) == ("spec.policy", 'Invalid value: "object": placement type is '
                                                 "immutable")  # fmt: skip
    # What may change does: the number of clusters.
    response = api.patch(
        f"{PLACEMENTS}/web", {"spec": {"policy": {"numberOfClusters": 5}}}, content_type=MERGE
    )
    assert response.status_code == 200, response.text


def test_a_placement_without_a_policy_stays_pick_all(api: Client) -> None:
    body = placement("web")
    del body["spec"]["policy"]
    api.create(PLACEMENTS, body)
    pick_n = {"spec": {"policy": {"placementType": "PickN", "numberOfClusters": 1}}}
    response = api.patch(f"{PLACEMENTS}/web", pick_n, content_type=MERGE)
    assert refusal(response) == ("spec", 'Invalid value: "object": placement type is immutable')
    pick_all = {"spec": {"policy": {"placementType": "PickAll"}}}
    assert api.patch(f"{PLACEMENTS}/web", pick_all, content_type=MERGE).status_code == 200


def test_a_policy_cannot_be_removed(api: Client) -> None:
    created = _created(api, placementType="PickN", numberOfClusters=2)
    without = copy.deepcopy(created)
    del without["spec"]["policy"]
    response = api.put(f"{PLACEMENTS}/web", without)
    assert refusal(response) == ("spec", 'Invalid value: "object": policy cannot be removed once '
                                         "set")  # fmt: skip
    assert api.get(f"{PLACEMENTS}/web").json() == created


def test_tolerations_may_be_added_but_not_changed_or_removed(api: Client) -> None:
    gpu = {"key": "gpu", "operator": "Exists"}
    _created(api, placementType="PickAll", tolerations=[gpu])
    message = "tolerations have been updated/deleted, only additions to tolerations are allowed"
    for changed in ([], [{"key": "gpu", "operator": "Equal", "value": "a"}]):
        response = api.patch(
            f"{PLACEMENTS}/web", {"spec": {"policy": {"tolerations": changed}}}, content_type=MERGE
        )
        assert refusal(response) == ("spec.policy", f'Invalid value: "object": {message}')
    added = [gpu, {"key": "zone", "value": "a"}]
    response = api.patch(
        f"{PLACEMENTS}/web", {"spec": {"policy": {"tolerations": added}}}, content_type=MERGE
    )
    assert response.status_code == 200, response.text
    stored = response.json()["spec"]["policy"]["tolerations"]
    assert [t["key"] for t in stored] == ["gpu", "zone"]


def test_an_object_stored_before_the_rules_can_still_be_updated_and_deleted(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    """Ratcheting: a placement stored under CRDs without the rules (an upgrade of the CRDs)
    still takes metadata and status updates and its finalizer's removal, so it can be deleted;
    changing the part that breaks a rule is checked."""
    data = tmp_path / "hub"
    old_crds = write_crds(tmp_path / "old-crds", drop={VALIDATIONS})
    before = devhub_factory(data_dir=data, crd_dir=old_crds)
    body = placement("web", n=None)  # a PickN without numberOfClusters: a rule breaks
    body["metadata"]["finalizers"] = ["kubernetes-fleet.io/test"]
    created = Client(before).create(PLACEMENTS, body)
    before.stop()

    api = Client(devhub_factory(data_dir=data))  # the same objects, the CRDs with rules
    labelled = api.patch(
        f"{PLACEMENTS}/web", {"metadata": {"labels": {"team": "web"}}}, content_type=MERGE
    )
    assert labelled.status_code == 200, labelled.text
    condition = {
        "type": names.PLACEMENT_SCHEDULED_CONDITION,
        "status": "True",
        "reason": "Scheduled",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = {"status": {"conditions": [condition]}}
    response = api.patch(f"{PLACEMENTS}/web/status", status, content_type=MERGE)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["generation"] == created["metadata"]["generation"]

    names_only = {"spec": {"policy": {"clusterNames": ["a"]}}}
    changed = api.patch(f"{PLACEMENTS}/web", names_only, content_type=MERGE)
    assert refusal(changed) == ("spec.policy", f'Invalid value: "object": {PICK_N_RULE}')

    assert api.delete(f"{PLACEMENTS}/web").status_code == 202  # held by its finalizer
    released = api.patch(
        f"{PLACEMENTS}/web", {"metadata": {"finalizers": None}}, content_type=MERGE
    )
    assert released.status_code == 200, released.text
    assert api.get(f"{PLACEMENTS}/web").status_code == 404


def test_a_policy_snapshot_carries_the_toleration_rules_too(api: Client) -> None:
    snapshot = {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": "ClusterSchedulingPolicySnapshot",
        "metadata": {"name": "web-0"},
        "spec": {"policyHash": "YWJj", "policy": {"tolerations": [{"value": "v"}]}},
    }
    field, message = refusal(api.post(SNAPSHOTS, snapshot))
    assert (field, message) == (
        "spec.policy.tolerations",
        'Invalid value: "array": operator must be Exists when key is empty',
    )
