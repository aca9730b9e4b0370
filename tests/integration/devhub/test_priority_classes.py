"""PriorityClasses: the built-in `scheduling.k8s.io/v1` kind, served as kube-apiserver serves it.

Over real HTTP, with HubClient and with kubectl: cluster-scoped CRUD, watch, patches (merge and
the strategic merge patch `kubectl apply` sends for a built-in kind), the system classes that
exist from the start, and each rule of the scheduling API's validation and of the Priority
admission plugin, with kube-apiserver's status codes and words."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devhub import DevHub
from hub.client import HubClient, WatchEvent
from hub.errors import InvalidObjectError, NotFoundError, UnauthorizedError
from hub.types import ObjectMeta, PriorityClass
from tests.integration.devhub.devhub_helpers import (
    PRIORITY_CLASSES,
    TABLE_ACCEPT,
    Client,
    priority_class,
)

KUBECTL = shutil.which("kubectl")
KUBECTL_TIMEOUT = 30
STRATEGIC = "application/strategic-merge-patch+json"
SYSTEM_CLASSES = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
]
NOT_A_SYSTEM_CLASS = (
    "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for "
    "system use only. error: "
)
DECODE_ERROR = (
    'PriorityClass in version "v1" cannot be handled as a PriorityClass: json: cannot unmarshal '
)
# No `globalDefault: false`: the API server leaves a false one out, so kubectl would find it
# missing from the live object and re-apply it every time.
PC_MANIFEST = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: NAME
value: VALUE
description: DESCRIPTION
"""


def _names(listing: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in listing["items"]]


def _message(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["kind"] == "Status"
    message: str = body["message"]
    return message


# --- CRUD ------------------------------------------------------------------------------------


def test_the_system_classes_exist_from_the_start(api: Client) -> None:
    listing = api.get(PRIORITY_CLASSES).json()
    assert (listing["apiVersion"], listing["kind"]) == ("scheduling.k8s.io/v1", "PriorityClassList")
    assert [(i["metadata"]["name"], i["value"]) for i in listing["items"]] == SYSTEM_CLASSES
    node = api.get(f"{PRIORITY_CLASSES}/system-node-critical").json()
    assert node["description"] == (
        "Used for system critical pods that must not be moved from their current node."
    )
    assert node["preemptionPolicy"] == "PreemptLowerPriority"
    assert "globalDefault" not in node


def test_create_defaults_the_preemption_policy_and_leaves_zero_values_out(api: Client) -> None:
    body = priority_class("high", 1000, globalDefault=False, description="")
    created = api.create(PRIORITY_CLASSES, body)
    assert created["value"] == 1000
    assert created["preemptionPolicy"] == "PreemptLowerPriority"
    assert "globalDefault" not in created  # omitempty, as the Go struct encodes it
    assert "description" not in created
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["uid"]
    assert "namespace" not in created["metadata"]
    assert api.get(f"{PRIORITY_CLASSES}/high").json() == created
    again = api.post(PRIORITY_CLASSES, priority_class("high"))
    assert _message(again, 409) == 'priorityclasses.scheduling.k8s.io "high" already exists'


def test_a_built_in_kind_needs_no_api_version_or_kind_in_the_body(api: Client) -> None:
    created = api.create(PRIORITY_CLASSES, {"metadata": {"name": "bare"}, "value": 7})
    assert (created["apiVersion"], created["kind"]) == ("scheduling.k8s.io/v1", "PriorityClass")


def test_get_of_a_missing_class_is_not_found(api: Client) -> None:
    response = api.get(f"{PRIORITY_CLASSES}/nope")
    assert _message(response, 404) == 'priorityclasses.scheduling.k8s.io "nope" not found'


def test_list_selects_by_label_and_by_name(api: Client) -> None:
    for name, tier in (("gold", "1"), ("silver", "2"), ("bronze", "2")):
        body = priority_class(name)
        body["metadata"]["labels"] = {"tier": tier}
        api.create(PRIORITY_CLASSES, body)
    tier_two = api.get(PRIORITY_CLASSES, params={"labelSelector": "tier=2"}).json()
    assert _names(tier_two) == ["bronze", "silver"]
    tiered = api.get(PRIORITY_CLASSES, params={"labelSelector": "tier"}).json()
    assert _names(tiered) == ["bronze", "gold", "silver"]
    named = api.get(PRIORITY_CLASSES, params={"fieldSelector": "metadata.name=gold"}).json()
    assert _names(named) == ["gold"]


def test_a_class_is_cluster_scoped(api: Client) -> None:
    in_namespace = "/apis/scheduling.k8s.io/v1/namespaces/default/priorityclasses"
    assert api.get(in_namespace).status_code == 404
    assert api.post(in_namespace, priority_class("high")).status_code == 404
    created = api.create(
        PRIORITY_CLASSES, {**priority_class("high"), "metadata": {"name": "high", "namespace": "x"}}
    )
    assert "namespace" not in created["metadata"]


def test_update_changes_the_description_and_keeps_the_generation(api: Client) -> None:
    created = api.create(PRIORITY_CLASSES, priority_class("high", description="before"))
    changed = {**created, "description": "after"}
    response = api.put(f"{PRIORITY_CLASSES}/high", changed)
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["description"] == "after"
    assert updated["metadata"]["generation"] == 1  # the strategy never moves it
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    stale = api.put(f"{PRIORITY_CLASSES}/high", {**created, "description": "stale"})
    assert stale.status_code == 409
    assert stale.json()["reason"] == "Conflict"


def test_an_update_without_a_resource_version_is_unconditional(api: Client) -> None:
    api.create(PRIORITY_CLASSES, priority_class("high"))
    response = api.put(f"{PRIORITY_CLASSES}/high", priority_class("high", description="x"))
    assert response.status_code == 200, response.text
    assert response.json()["description"] == "x"


def test_merge_patch_changes_metadata_and_description(api: Client) -> None:
    api.create(PRIORITY_CLASSES, priority_class("high", description="before"))
    response = api.patch(
        f"{PRIORITY_CLASSES}/high",
        {"metadata": {"labels": {"tier": "gold"}}, "description": None, "globalDefault": True},
    )
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["metadata"]["labels"] == {"tier": "gold"}
    assert "description" not in patched
    assert patched["globalDefault"] is True
    assert patched["value"] == 1000


def test_strategic_merge_patch_merges_finalizers(api: Client) -> None:
    body = priority_class("high")
    body["metadata"]["finalizers"] = ["example.com/a"]
    api.create(PRIORITY_CLASSES, body)
    response = api.patch(
        f"{PRIORITY_CLASSES}/high",
        {"metadata": {"finalizers": ["example.com/b"]}, "description": "patched"},
        STRATEGIC,
    )
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]
    assert patched["description"] == "patched"
    merge = api.patch(f"{PRIORITY_CLASSES}/high", {"metadata": {"finalizers": ["example.com/c"]}})
    assert merge.json()["metadata"]["finalizers"] == ["example.com/c"]  # a merge patch replaces


def test_delete_removes_a_class_and_finalizers_hold_it(api: Client) -> None:
    api.create(PRIORITY_CLASSES, priority_class("high"))
    assert api.delete(f"{PRIORITY_CLASSES}/high").status_code == 200
    assert api.get(f"{PRIORITY_CLASSES}/high").status_code == 404
    held = priority_class("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    api.create(PRIORITY_CLASSES, held)
    assert api.delete(f"{PRIORITY_CLASSES}/held").status_code == 202
    assert api.get(f"{PRIORITY_CLASSES}/held").json()["metadata"]["deletionTimestamp"]
    api.patch(f"{PRIORITY_CLASSES}/held", {"metadata": {"finalizers": None}})
    assert api.get(f"{PRIORITY_CLASSES}/held").status_code == 404


@pytest.mark.parametrize("name", [name for name, _ in SYSTEM_CLASSES])
def test_a_system_class_may_not_be_deleted(api: Client, name: str) -> None:
    response = api.delete(f"{PRIORITY_CLASSES}/{name}")
    assert _message(response, 403) == (
        f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: this is a system priority '
        "class and cannot be deleted"
    )
    assert api.get(f"{PRIORITY_CLASSES}/{name}").status_code == 200


def test_deletecollection_deletes_the_system_classes_too_and_a_reset_brings_them_back(
    api: Client, devhub: DevHub
) -> None:
    """As kube-apiserver's: its deletecollection skips the guard of the REST delete."""
    api.create(PRIORITY_CLASSES, priority_class("high"))
    assert api.delete(PRIORITY_CLASSES).status_code == 200
    assert api.get(PRIORITY_CLASSES).json()["items"] == []
    devhub.reset()
    assert _names(api.get(PRIORITY_CLASSES).json()) == [name for name, _ in SYSTEM_CLASSES]


def test_classes_survive_a_restart(devhub_factory: Callable[..., DevHub], tmp_path: Path) -> None:
    data = tmp_path / "hub"
    first = Client(devhub_factory(data_dir=data))
    created = first.create(PRIORITY_CLASSES, priority_class("high", globalDefault=True))
    system = first.get(f"{PRIORITY_CLASSES}/system-node-critical").json()
    first.hub.stop()

    second = Client(devhub_factory(data_dir=data))
    assert second.get(f"{PRIORITY_CLASSES}/high").json() == created
    assert second.get(f"{PRIORITY_CLASSES}/system-node-critical").json() == system
    refused = second.post(PRIORITY_CLASSES, priority_class("other", globalDefault=True))
    assert refused.status_code == 403  # the restored default still counts


# --- watch -----------------------------------------------------------------------------------


def test_a_watch_from_a_resource_version_sees_a_class_live_and_go(api: Client) -> None:
    api.create(PRIORITY_CLASSES, priority_class("before"))
    start = api.get(PRIORITY_CLASSES).json()["metadata"]["resourceVersion"]
    api.create(PRIORITY_CLASSES, priority_class("high"))
    api.patch(f"{PRIORITY_CLASSES}/high", {"description": "busy"})
    api.delete(f"{PRIORITY_CLASSES}/high")
    with api.watch(PRIORITY_CLASSES, resourceVersion=start) as watch:
        events = watch.take(3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "high"),
        ("MODIFIED", "high"),
        ("DELETED", "high"),
    ]
    assert events[1]["object"]["description"] == "busy"


def test_a_watch_with_a_label_selector_sees_only_its_classes(api: Client) -> None:
    start = api.get(PRIORITY_CLASSES).json()["metadata"]["resourceVersion"]
    for name, team in (("a", "red"), ("b", "blue")):
        body = priority_class(name)
        body["metadata"]["labels"] = {"team": team}
        api.create(PRIORITY_CLASSES, body)
    with api.watch(PRIORITY_CLASSES, resourceVersion=start, labelSelector="team=blue") as watch:
        event = watch.next()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "b")


# --- validation ------------------------------------------------------------------------------


def test_value_is_required(api: Client) -> None:
    body = priority_class("high")
    del body["value"]
    response = api.post(PRIORITY_CLASSES, body)
    assert _message(response, 422) == (
        'PriorityClass.scheduling.k8s.io "high" is invalid: value: Required value'
    )


@pytest.mark.parametrize(
    ("value", "seen"),
    [
        pytest.param("1000", "string", id="string"),
        pytest.param(1.5, "number 1.5", id="fraction"),
        pytest.param(2**31, "number 2147483648", id="above-int32"),
        pytest.param(-(2**31) - 1, "number -2147483649", id="below-int32"),
        pytest.param(True, "bool", id="bool"),
    ],
)
def test_value_must_be_an_int32(api: Client, value: Any, seen: str) -> None:
    response = api.post(PRIORITY_CLASSES, priority_class("high", value))
    assert _message(response, 400) == (
        f"{DECODE_ERROR}{seen} into Go struct field PriorityClass.value of type int32"
    )


def test_the_int32_bounds_are_values(api: Client) -> None:
    assert api.post(PRIORITY_CLASSES, priority_class("lowest", -(2**31))).status_code == 201
    assert api.post(PRIORITY_CLASSES, priority_class("zero", 0)).status_code == 201


@pytest.mark.parametrize(
    ("field", "value", "go_type"),
    [
        pytest.param("globalDefault", "true", "bool", id="globalDefault"),
        pytest.param("description", 5, "string", id="description"),
        pytest.param("preemptionPolicy", ["Never"], "v1.PreemptionPolicy", id="preemptionPolicy"),
    ],
)
def test_other_fields_of_the_wrong_type_do_not_decode(
    api: Client, field: str, value: Any, go_type: str
) -> None:
    response = api.post(PRIORITY_CLASSES, priority_class("high", **{field: value}))
    assert f"Go struct field PriorityClass.{field} of type {go_type}" in _message(response, 400)


def test_value_is_immutable(api: Client) -> None:
    created = api.create(PRIORITY_CLASSES, priority_class("high", 1000))
    expected = (
        'PriorityClass.scheduling.k8s.io "high" is invalid: value: Forbidden: may not be '
        "changed in an update."
    )
    patched = api.patch(f"{PRIORITY_CLASSES}/high", {"value": 2000})
    assert _message(patched, 422) == expected
    assert patched.json()["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "field": "value",
            "message": "Forbidden: may not be changed in an update.",
        }
    ]
    assert _message(api.put(f"{PRIORITY_CLASSES}/high", {**created, "value": 999}), 422) == expected
    assert api.get(f"{PRIORITY_CLASSES}/high").json()["value"] == 1000


def test_preemption_policy_is_immutable_and_defaults_again_on_a_put(api: Client) -> None:
    created = api.create(PRIORITY_CLASSES, priority_class("high", preemptionPolicy="Never"))
    patched = api.patch(f"{PRIORITY_CLASSES}/high", {"preemptionPolicy": "PreemptLowerPriority"})
    assert _message(patched, 422).endswith(
        'preemptionPolicy: Invalid value: "PreemptLowerPriority": field is immutable'
    )
    # A PUT that leaves the policy out gets the default, which changes it: refused as well.
    without = {k: v for k, v in created.items() if k != "preemptionPolicy"}
    assert api.put(f"{PRIORITY_CLASSES}/high", without).status_code == 422
    assert api.get(f"{PRIORITY_CLASSES}/high").json()["preemptionPolicy"] == "Never"


def test_user_classes_may_not_go_above_one_billion(api: Client) -> None:
    assert api.post(PRIORITY_CLASSES, priority_class("top", 1_000_000_000)).status_code == 201
    response = api.post(PRIORITY_CLASSES, priority_class("above", 1_000_000_001))
    assert _message(response, 422) == (
        'PriorityClass.scheduling.k8s.io "above" is invalid: value: Forbidden: maximum allowed '
        "value of a user defined priority is 1000000000"
    )


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        pytest.param(
            "system-important",
            2_000_000_000,
            "system-important is not a known system priority class",
            id="unknown-name",
        ),
        pytest.param(
            "system-low",
            10,
            "system-low is not a known system priority class",
            id="unknown-name-low-value",
        ),
        pytest.param(
            "system-node-critical",
            5,
            "value of system-node-critical PriorityClass must be 2000001000",
            id="known-name-wrong-value",
        ),
    ],
)
def test_system_names_are_reserved_for_the_system_classes(
    api: Client, name: str, value: int, problem: str
) -> None:
    api.delete(PRIORITY_CLASSES)  # the system classes too, so a known name is free
    response = api.post(PRIORITY_CLASSES, priority_class(name, value))
    assert _message(response, 422) == (
        f'PriorityClass.scheduling.k8s.io "{name}" is invalid: {NOT_A_SYSTEM_CLASS}{problem}'
    )


def test_a_system_class_may_be_created_again_as_it_was(api: Client) -> None:
    api.delete(PRIORITY_CLASSES)
    assert (
        api.post(
            PRIORITY_CLASSES, priority_class("system-node-critical", 2_000_001_000)
        ).status_code
        == 201
    )
    defaulted = api.post(
        PRIORITY_CLASSES,
        priority_class("system-cluster-critical", 2_000_000_000, globalDefault=True),
    )
    assert _message(defaulted, 422).endswith(
        "globalDefault of system-cluster-critical PriorityClass must be false"
    )


@pytest.mark.parametrize(
    ("policy", "cause"),
    [
        pytest.param(
            "Sometimes",
            'preemptionPolicy: Unsupported value: "Sometimes": supported '
            'values: "PreemptLowerPriority", "Never"',
            id="unknown",
        ),
        pytest.param("", "preemptionPolicy: Required value", id="empty"),
    ],
)
def test_preemption_policy_is_preempt_lower_priority_or_never(
    api: Client, policy: str, cause: str
) -> None:
    response = api.post(PRIORITY_CLASSES, priority_class("high", preemptionPolicy=policy))
    assert _message(response, 422) == f'PriorityClass.scheduling.k8s.io "high" is invalid: {cause}'
    never = api.create(PRIORITY_CLASSES, priority_class("polite", preemptionPolicy="Never"))
    assert never["preemptionPolicy"] == "Never"


def test_a_second_global_default_is_forbidden_naming_the_first(api: Client) -> None:
    api.create(PRIORITY_CLASSES, priority_class("first", globalDefault=True))
    forbidden = (
        " is forbidden: PriorityClass first is already marked as default. Only one "
        "default can exist"
    )
    second = api.post(PRIORITY_CLASSES, priority_class("second", globalDefault=True))
    assert _message(second, 403) == f'priorityclasses.scheduling.k8s.io "second"{forbidden}'
    assert second.json()["reason"] == "Forbidden"
    api.create(PRIORITY_CLASSES, priority_class("other"))
    marked = api.patch(f"{PRIORITY_CLASSES}/other", {"globalDefault": True})
    assert _message(marked, 403) == f'priorityclasses.scheduling.k8s.io "other"{forbidden}'
    # The default itself may be updated, and once it steps down another may take its place.
    assert (
        api.patch(
            f"{PRIORITY_CLASSES}/first", {"globalDefault": True, "description": "d"}
        ).status_code
        == 200
    )
    assert api.patch(f"{PRIORITY_CLASSES}/first", {"globalDefault": False}).status_code == 200
    assert api.patch(f"{PRIORITY_CLASSES}/other", {"globalDefault": True}).status_code == 200


def test_a_dry_run_of_a_second_default_is_forbidden_too(api: Client) -> None:
    api.create(PRIORITY_CLASSES, priority_class("first", globalDefault=True))
    response = api.post(
        PRIORITY_CLASSES, priority_class("second", globalDefault=True), params={"dryRun": "All"}
    )
    assert response.status_code == 403


def test_unknown_fields_are_pruned_or_refused_as_asked(api: Client) -> None:
    body = priority_class("high", spec={"value": 5})
    strict = api.post(PRIORITY_CLASSES, body, params={"fieldValidation": "Strict"})
    assert _message(strict, 400) == 'strict decoding error: unknown field "spec"'
    warned = api.post(PRIORITY_CLASSES, body)
    assert warned.status_code == 201
    assert "spec" not in warned.json()
    assert 'unknown field \\"spec\\"' in warned.headers["Warning"]


# --- tables and discovery --------------------------------------------------------------------


def test_the_table_has_kubectls_columns(api: Client) -> None:
    api.create(
        PRIORITY_CLASSES, priority_class("high", 1000, globalDefault=True, preemptionPolicy="Never")
    )
    response = api.get(PRIORITY_CLASSES, headers={"Accept": TABLE_ACCEPT})
    table = response.json()
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Value",
        "Global-Default",
        "Age",
        "PreemptionPolicy",
    ]
    rows = {row["cells"][0]: row["cells"] for row in table["rows"]}
    assert rows["high"][1:3] == [1000, True]
    assert rows["high"][4] == "Never"
    assert rows["system-node-critical"][1:3] == [2_000_001_000, False]  # omitted, printed false
    assert rows["system-node-critical"][4] == "PreemptLowerPriority"


def test_discovery_serves_the_scheduling_group(api: Client) -> None:
    groups = {g["name"]: g for g in api.get("/apis").json()["groups"]}
    assert groups["scheduling.k8s.io"]["preferredVersion"] == {
        "groupVersion": "scheduling.k8s.io/v1",
        "version": "v1",
    }
    group = api.get("/apis/scheduling.k8s.io").json()
    assert (group["kind"], [v["version"] for v in group["versions"]]) == ("APIGroup", ["v1"])
    resources = api.get("/apis/scheduling.k8s.io/v1").json()["resources"]
    assert resources == [
        {
            "name": "priorityclasses",
            "singularName": "priorityclass",
            "namespaced": False,
            "kind": "PriorityClass",
            "shortNames": ["pc"],
            "verbs": [
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "create",
                "update",
                "watch",
            ],
        }
    ]


def test_openapi_describes_the_kind_as_a_built_in_one(api: Client) -> None:
    index = api.get("/openapi/v3").json()
    key = "apis/scheduling.k8s.io/v1"
    document = api.get(index["paths"][key]["serverRelativeURL"]).json()
    patch = document["paths"][f"/{key}/priorityclasses/{{name}}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "scheduling.k8s.io",
        "version": "v1",
        "kind": "PriorityClass",
    }
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    schema = document["components"]["schemas"]["io.k8s.api.scheduling.v1.PriorityClass"]
    assert schema["required"] == ["value"]
    assert f"/{key}/priorityclasses/{{name}}/status" not in document["paths"]


# --- HubClient -------------------------------------------------------------------------------


def test_hub_client_creates_gets_lists_watches_and_deletes_classes(
    api: Client, hub_kubeconfig: Path
) -> None:
    client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=(2.0, 5.0))
    try:
        start = client.list(PriorityClass).resource_version
        created = client.create(
            PriorityClass(
                metadata=ObjectMeta(name="high", labels={"tier": "gold"}),
                value=1000,
                global_default=True,
                description="batch work",
            )
        )
        assert created.preemption_policy == "PreemptLowerPriority"
        assert (created.value, created.global_default, created.description) == (
            1000,
            True,
            "batch work",
        )
        got = client.get(PriorityClass, "high")
        assert got == created
        listing = client.list(PriorityClass)
        assert [(pc.name, pc.value, pc.global_default) for pc in listing] == [
            ("high", 1000, True),
            ("system-cluster-critical", 2_000_000_000, False),
            ("system-node-critical", 2_000_001_000, False),
        ]
        assert [pc.name for pc in client.list(PriorityClass, {"tier": "gold"})] == ["high"]

        events = client.watch(PriorityClass, start, timeout_seconds=5)
        first = next(events)
        events.close()
        assert isinstance(first, WatchEvent)
        assert (first.type, first.object.name, first.object.value) == ("ADDED", "high", 1000)

        with pytest.raises(UnauthorizedError) as second:
            client.create(
                PriorityClass(metadata=ObjectMeta(name="low"), value=1, global_default=True)
            )
        assert second.value.status == 403
        assert "PriorityClass high is already marked as default" in second.value.message
        with pytest.raises(InvalidObjectError) as immutable:
            client.patch(PriorityClass, "high", {"value": 5})
        assert [c.field for c in immutable.value.causes] == ["value"]

        assert client.delete(PriorityClass, "high") is None
        with pytest.raises(NotFoundError):
            client.get(PriorityClass, "high")
    finally:
        client.close()


def test_hub_client_updates_a_class_it_read(api: Client, hub_kubeconfig: Path) -> None:
    client = HubClient.from_kubeconfig(hub_kubeconfig, timeout=(2.0, 5.0))
    try:
        client.create(
            PriorityClass(metadata=ObjectMeta(name="high"), value=10, preemption_policy="Never")
        )
        read = client.get(PriorityClass, "high")
        relabelled = read.model_copy(
            update={
                "metadata": read.metadata.model_copy(update={"labels": {"x": "y"}}),
                "description": "now described",
            }
        )
        updated = client.update(relabelled)
        assert updated.metadata.labels == {"x": "y"}
        assert (updated.value, updated.preemption_policy, updated.description) == (
            10,
            "Never",
            "now described",
        )
        assert updated.metadata.resource_version != read.metadata.resource_version
    finally:
        client.close()


# --- kubectl ---------------------------------------------------------------------------------

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(hub_kubeconfig: Path, tmp_path: Path) -> Kubectl:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (make test installs Debian's kubernetes-client)")
    binary = KUBECTL

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [
                binary,
                "--kubeconfig",
                str(hub_kubeconfig),
                "--cache-dir",
                str(tmp_path / "kube-cache"),
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT,
            check=False,
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result

    return run


def _manifest(
    tmp_path: Path,
    name: str,
    value: int = 1000,
    *,
    default: bool = False,
    description: str = "batch work",
) -> str:
    path = tmp_path / f"{name}.yaml"
    text = PC_MANIFEST.replace("NAME", name).replace("VALUE", str(value))
    text = text.replace("DESCRIPTION", description)
    path.write_text(text + ("globalDefault: true\n" if default else ""))
    return str(path)


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines()]


@pytest.mark.kubectl
@pytest.mark.parametrize("resource", ["pc", "priorityclasses", "priorityclass"])
def test_kubectl_get_prints_a_real_clusters_columns(
    api: Client, kubectl: Kubectl, resource: str
) -> None:
    api.create(
        PRIORITY_CLASSES, priority_class("high", 1000, globalDefault=True, preemptionPolicy="Never")
    )
    rows = _rows(kubectl("get", resource).stdout)
    assert rows[0] == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert [row[:3] + row[4:] for row in rows[1:]] == [
        ["high", "1000", "true", "Never"],
        ["system-cluster-critical", "2000000000", "false", "PreemptLowerPriority"],
        ["system-node-critical", "2000001000", "false", "PreemptLowerPriority"],
    ]


@pytest.mark.kubectl
def test_kubectl_applies_a_class_again_with_changes_and_deletes_it(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = _manifest(tmp_path, "batch-high")
    created = kubectl("apply", "-f", manifest).stdout.strip()
    assert created == "priorityclass.scheduling.k8s.io/batch-high created"
    assert (
        kubectl("apply", "-f", manifest).stdout.strip()
        == "priorityclass.scheduling.k8s.io/batch-high unchanged"
    )
    # A changed built-in kind is re-applied with a strategic merge patch.
    changed = _manifest(tmp_path, "batch-high", description="batch work, urgent")
    assert (
        kubectl("apply", "-f", changed).stdout.strip()
        == "priorityclass.scheduling.k8s.io/batch-high configured"
    )
    stored = api.get(f"{PRIORITY_CLASSES}/batch-high").json()
    assert (stored["value"], stored["description"]) == (1000, "batch work, urgent")
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]

    refused = kubectl("apply", "-f", _manifest(tmp_path, "batch-high", 2000), check=False)
    assert refused.returncode != 0
    assert "value: Forbidden: may not be changed in an update." in refused.stderr, refused.stderr
    assert api.get(f"{PRIORITY_CLASSES}/batch-high").json()["value"] == 1000

    deleted = kubectl("delete", "pc", "batch-high").stdout.strip()
    assert deleted == 'priorityclass.scheduling.k8s.io "batch-high" deleted'
    assert api.get(f"{PRIORITY_CLASSES}/batch-high").status_code == 404


@pytest.mark.kubectl
def test_kubectl_server_side_apply_of_a_class(
    api: Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    applied = kubectl("apply", "--server-side", "-f", _manifest(tmp_path, "batch-high")).stdout
    assert "serverside-applied" in applied
    assert api.get(f"{PRIORITY_CLASSES}/batch-high").json()["value"] == 1000


@pytest.mark.kubectl
def test_kubectl_reports_a_second_default_and_a_value_too_high(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("apply", "-f", _manifest(tmp_path, "first", default=True))
    second = kubectl("apply", "-f", _manifest(tmp_path, "second", default=True), check=False)
    assert second.returncode != 0
    assert (
        'priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first is '
        "already marked as default. Only one default can exist"
    ) in second.stderr
    high = kubectl("apply", "-f", _manifest(tmp_path, "huge", 2_000_000_000), check=False)
    assert "maximum allowed value of a user defined priority is 1000000000" in high.stderr


@pytest.mark.kubectl
def test_kubectl_create_priorityclass_and_delete_of_a_system_class(
    api: Client, kubectl: Kubectl
) -> None:
    # A generator command: kubectl's typed client sends the class in protobuf.
    created = kubectl(
        "create",
        "priorityclass",
        "low",
        "--value=10",
        "--description=best effort",
        "--preemption-policy=Never",
    ).stdout.strip()
    assert created == "priorityclass.scheduling.k8s.io/low created"
    stored = api.get(f"{PRIORITY_CLASSES}/low").json()
    assert (stored["value"], stored["description"], stored["preemptionPolicy"]) == (
        10,
        "best effort",
        "Never",
    )
    refused = kubectl("delete", "pc", "system-node-critical", check=False)
    assert refused.returncode != 0
    assert (
        'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a '
        "system priority class and cannot be deleted"
    ) in refused.stderr
