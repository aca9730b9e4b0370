"""devhub.cel against the generated placement CRD: which rules run when, and what they answer."""

from __future__ import annotations

import copy
from typing import Any

from devhub import cel
from devhub.cel import VALIDATIONS, check_rules
from hub.crds import open_api_schema
from hub.types import ClusterResourcePlacement

SCHEMA = open_api_schema(ClusterResourcePlacement)
IMMUTABLE = 'Invalid value: "object": placement type is immutable'


def crp(**policy: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web"}, "spec": {"policy": policy}}


def messages(value: Any, old: Any = None) -> list[str]:
    causes = check_rules(SCHEMA, value) if old is None else check_rules(SCHEMA, value, old)
    return [f"{cause.field}: {cause.message}" for cause in causes]


def test_the_placement_crd_carries_kubefleets_rules() -> None:
    policy = SCHEMA["properties"]["spec"]["properties"]["policy"]
    assert len(policy[VALIDATIONS]) == 5
    assert all(set(rule) == {"rule", "message"} for rule in policy[VALIDATIONS])


def test_transition_rules_wait_for_an_update() -> None:
    pick_all = crp(placementType="PickAll")
    assert messages(pick_all) == []
    assert messages(pick_all, crp(placementType="PickN", numberOfClusters=1)) == [
        f"spec.policy: {IMMUTABLE}"
    ]


def test_an_unchanged_value_is_not_checked_again() -> None:
    """Ratcheting: a stored object that breaks a rule (written before the rule existed) can
    still have its metadata or status updated; changing the broken part is checked."""
    stored = crp(placementType="PickN")  # no numberOfClusters
    updated = copy.deepcopy(stored)
    updated["metadata"]["finalizers"] = []
    updated["status"] = {"conditions": []}
    assert messages(updated, stored) == []
    updated["spec"]["policy"]["clusterNames"] = ["a"]
    assert len(messages(updated, stored)) == 1


def test_every_broken_rule_is_reported_at_its_field() -> None:
    tolerations = [{"operator": "Equal", "value": "v"}]
    bad = crp(placementType="PickFixed", numberOfClusters=1, tolerations=tolerations)
    assert messages(bad) == [
        'spec.policy: Invalid value: "object": affinity, numberOfClusters, '
        "topologySpreadConstraints, and tolerations cannot be set when placementType is PickFixed",
        'spec.policy.tolerations: Invalid value: "array": operator must be Exists when key is '
        "empty",
    ]


def test_a_rule_that_cannot_be_evaluated_says_so() -> None:
    """A placement type that is absent (no defaulting ran) leaves `self.placementType` without a
    value: an evaluation error for each rule whose outcome depends on it, reported, not raised.
    (CEL's `||` is true when either side is, error or not: the PickN rule holds here.)"""
    found = messages(crp(numberOfClusters=1))
    assert len(found) == 2
    for message in found:
        assert message.startswith('spec.policy: Invalid value: "object": rule evaluation error: ')
        assert "placementType" in message


def every_rule(schema: Any) -> list[str]:
    found = [rule["rule"] for rule in schema.get(VALIDATIONS, ())]
    below = list((schema.get("properties") or {}).values())
    below += [
        schema[key]
        for key in ("items", "additionalProperties")
        if isinstance(schema.get(key), dict)
    ]
    return found + [rule for sub in below for rule in every_rule(sub)]


def test_a_rule_reads_only_the_fields_it_selects() -> None:
    assert cel._reads("size(self.metadata.name) <= 63", "self") == {"metadata": {"name": None}}
    assert cel._reads("self.a.all(t, t.b) && has(self.a.c)", "self") == {"a": None}
    assert cel._reads("self.x == oldSelf.y", "oldSelf") == {"y": None}
    for whole in ("self.all(t, t.x)", "size(self) > 0", "self['a'] == 1", "self.x__dash__y"):
        assert cel._reads(whole, "self") is None, whole


def test_a_status_update_does_not_evaluate_the_name_rule_again() -> None:
    """The root's rule reads metadata.name only: a new status is no new input to it."""
    stored = crp(placementType="PickAll")
    stored["status"] = {"conditions": [{"type": "Scheduled", "status": "False"}]}
    assert messages(stored) == []
    misses = cel._outcome.cache_info().misses
    updated = copy.deepcopy(stored)
    updated["status"]["conditions"][0]["status"] = "True"
    assert messages(updated, stored) == []
    assert cel._outcome.cache_info().misses == misses


def test_projected_inputs_answer_as_the_whole_object_does() -> None:
    """Every rule of the placement CRD, on objects that keep and break them: evaluated on what
    the rule reads, the outcome is the whole object's."""
    values = [
        crp(placementType="PickAll"),
        crp(
            placementType="PickN",
            numberOfClusters=2,
            tolerations=[{"operator": "Exists", "value": "v"}],
        ),
        crp(placementType="PickFixed", clusterNames=["a"], affinity={}),
        {
            "metadata": {"name": "x" * 70},
            "spec": {"resourceSelectors": [{"name": "n", "labelSelector": {}}]},
        },
        {"metadata": {}, "spec": {}},
    ]
    for rule in every_rule(SCHEMA):
        for value in values:
            for node in (
                value,
                value["spec"],
                value["spec"].get("policy"),
                value["spec"].get("resourceSelectors"),
            ):
                if node is None:
                    continue
                old = values[0]["spec"]["policy"] if node is value["spec"].get("policy") else node
                want = cel._outcome(rule, cel._canonical(node), cel._canonical(old))
                got = cel._outcome(
                    rule,
                    cel._canonical(cel._project(node, cel._reads(rule, "self"))),
                    cel._canonical(cel._project(old, cel._reads(rule, "oldSelf"))),
                )
                assert got == want, (rule, node)
