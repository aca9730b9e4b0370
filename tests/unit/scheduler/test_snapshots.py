"""The snapshotter's decisions, checked against KubeFleet's placement controller rules
(kubefleet-rules section 2) and the policy hash against Go's encoding/json, byte for byte."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hub import names
from hub.types import (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    Condition,
    PlacementPolicy,
)
from scheduler import CycleInput, schedule
from scheduler.errors import InvalidSnapshotError
from scheduler.requeue.watch_rules import is_fully_scheduled, scheduled_condition_current
from scheduler.snapshots import (
    PICK_N_WITHOUT_NUMBER,
    InvalidPlacementError,
    MultipleLatestSnapshotsError,
    SnapshotMetadataError,
    SnapshotUpdate,
    decode_policy_hash,
    encode_policy_hash,
    go_json,
    placement_scheduled_condition,
    plan_snapshot_sync,
    policy_hash,
    policy_index,
)

NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(hours=1)

# --- builders --------------------------------------------------------------------------------


def policy(**wire: Any) -> PlacementPolicy:
    return PlacementPolicy.from_wire(wire)


PICK_ALL = policy(placementType="PickAll")
PICK_N3 = policy(placementType="PickN", numberOfClusters=3)
PICK_N5 = policy(placementType="PickN", numberOfClusters=5)
PICK_N3_TOLERATING = policy(
    placementType="PickN", numberOfClusters=3, tolerations=[{"key": "gpu", "operator": "Exists"}]
)


def placement(
    pol: PlacementPolicy | None = PICK_ALL,
    *,
    name: str = "web",
    generation: int | None = 3,
    uid: str | None = "uid-web",
    limit: int | None = None,
    conditions: tuple[Condition, ...] = (),
) -> ClusterResourcePlacement:
    spec: dict[str, Any] = {"resourceSelectors": []}
    if pol is not None:
        spec["policy"] = pol.to_wire()
    if limit is not None:
        spec["revisionHistoryLimit"] = limit
    meta: dict[str, Any] = {"name": name}
    if generation is not None:
        meta["generation"] = generation
    if uid is not None:
        meta["uid"] = uid
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": meta,
            "spec": spec,
            "status": {"conditions": [c.to_wire() for c in conditions]},
        }
    )


def snap(
    index: int | str | None,
    *,
    of: ClusterResourcePlacement | None = None,
    pol: PlacementPolicy | None = PICK_ALL,
    latest: str | None = "true",
    crp_generation: str | None = "3",
    number: str | None = None,
    parent: str = "web",
    name: str | None = None,
    hash_of: PlacementPolicy | str | None = "same",
) -> ClusterSchedulingPolicySnapshot:
    """A snapshot of `pol`; `hash_of` picks the policy whose hash it stores."""
    labels = {names.PARENT_PLACEMENT_LABEL: parent}
    if latest is not None:
        labels[names.IS_LATEST_SNAPSHOT_LABEL] = latest
    if index is not None:
        labels[names.POLICY_INDEX_LABEL] = str(index)
    annotations = {}
    if crp_generation is not None:
        annotations[names.CRP_GENERATION_ANNOTATION] = crp_generation
    if number is not None:
        annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = number
    hashed = pol if hash_of == "same" else hash_of
    assert not isinstance(hashed, str)
    return ClusterSchedulingPolicySnapshot.from_wire(
        {
            "metadata": {
                "name": name or f"{parent}-{index}",
                "resourceVersion": f"rv-{index}",
                "generation": 1,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": {
                "policy": pol.to_wire() if pol is not None else None,
                "policyHash": encode_policy_hash(policy_hash(hashed)),
            },
        }
    )


def scheduled(status: str, *, observed: int = 1, crp_generation: int = 3) -> dict[str, Any]:
    """A snapshot status as the scheduler writes it."""
    reason = {
        "True": names.POLICY_FULFILLED_REASON,
        "False": names.POLICY_UNFULFILLED_REASON,
        "Unknown": "SchedulingUnknown",
    }[status]
    return {
        "observedCRPGeneration": crp_generation,
        "conditions": [
            {
                "type": names.SCHEDULED_CONDITION,
                "status": status,
                "reason": reason,
                "message": f"message for {status}",
                "observedGeneration": observed,
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
    }


def with_status(
    snapshot: ClusterSchedulingPolicySnapshot, status: dict[str, Any], *, generation: int = 1
) -> ClusterSchedulingPolicySnapshot:
    wire = snapshot.to_wire()
    wire["status"] = status
    wire["metadata"]["generation"] = generation
    return ClusterSchedulingPolicySnapshot.from_wire(wire)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- policy hash: Go encoding/json -----------------------------------------------------------

# A policy that touches every struct, given in an order unlike Go's field order, with map keys
# unsorted and HTML characters in a value.
RICH_POLICY_WIRE: dict[str, Any] = {
    "tolerations": [
        {"effect": "NoSchedule", "value": "true", "operator": "Equal", "key": "gpu"},
        {"operator": "Exists"},
    ],
    "topologySpreadConstraints": [
        {"whenUnsatisfiable": "DoNotSchedule", "topologyKey": "region", "maxSkew": 1}
    ],
    "numberOfClusters": 3,
    "affinity": {
        "clusterAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "preference": {
                        "propertySorter": {
                            "sortOrder": "Descending",
                            "name": "resources.kubernetes-fleet.io/available-cpu",
                        }
                    },
                    "weight": -20,
                }
            ],
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "clusterSelectorTerms": [
                    {
                        "propertySelector": {
                            "matchExpressions": [
                                {
                                    "values": ["3"],
                                    "operator": "Ge",
                                    "name": "kubernetes-fleet.io/node-count",
                                }
                            ]
                        },
                        "labelSelector": {
                            "matchExpressions": [
                                {"values": ["prod"], "operator": "In", "key": "env"},
                                {"operator": "Exists", "key": "gpu"},
                            ],
                            "matchLabels": {"zone": "x<y&z>", "app": "web"},
                        },
                    }
                ]
            },
        }
    },
    "placementType": "PickN",
}

# Written by hand the way Go's json.Marshal writes the same struct: field order from
# apis/placement/v1beta1 and metav1.LabelSelector, omitempty honoured, map keys sorted,
# <, > and & escaped, no whitespace, numberOfClusters cleared for the hash.
RICH_POLICY_GO_JSON_WITHOUT_N = (
    '{"placementType":"PickN",'
    '"affinity":{"clusterAffinity":{'
    '"requiredDuringSchedulingIgnoredDuringExecution":{"clusterSelectorTerms":[{'
    '"labelSelector":{"matchLabels":{"app":"web","zone":"x\\u003cy\\u0026z\\u003e"},'
    '"matchExpressions":[{"key":"env","operator":"In","values":["prod"]},'
    '{"key":"gpu","operator":"Exists"}]},'
    '"propertySelector":{"matchExpressions":[{"name":"kubernetes-fleet.io/node-count",'
    '"operator":"Ge","values":["3"]}]}}]},'
    '"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":-20,"preference":{'
    '"propertySorter":{"name":"resources.kubernetes-fleet.io/available-cpu",'
    '"sortOrder":"Descending"}}}]}},'
    '"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"region",'
    '"whenUnsatisfiable":"DoNotSchedule"}],'
    '"tolerations":[{"key":"gpu","operator":"Equal","value":"true","effect":"NoSchedule"},'
    '{"operator":"Exists"}]}'
)


def test_nil_policy_hashes_like_go_null() -> None:
    # json.Marshal(nil) is "null"; its SHA-256 is a well-known constant.
    assert policy_hash(None) == "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"


def test_rich_policy_hash_matches_hand_encoded_go_json() -> None:
    rich = policy(**RICH_POLICY_WIRE)
    assert go_json(rich, with_number_of_clusters=False).decode() == RICH_POLICY_GO_JSON_WITHOUT_N
    assert policy_hash(rich) == sha(RICH_POLICY_GO_JSON_WITHOUT_N)


def test_go_json_keeps_number_of_clusters_in_struct_position_when_asked() -> None:
    encoded = go_json(policy(**RICH_POLICY_WIRE)).decode()
    assert encoded.startswith('{"placementType":"PickN","numberOfClusters":3,"affinity":')


def test_number_of_clusters_does_not_change_the_hash() -> None:
    assert policy_hash(PICK_N3) == policy_hash(PICK_N5) == sha('{"placementType":"PickN"}')


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        pytest.param({}, "{}", id="empty-policy"),
        pytest.param({"placementType": ""}, "{}", id="empty-string-omitted"),
        pytest.param({"clusterNames": []}, "{}", id="empty-slice-omitted"),
        pytest.param({"affinity": {}}, '{"affinity":{}}', id="empty-struct-pointer-kept"),
        pytest.param(
            {"affinity": {"clusterAffinity": {}}},
            '{"affinity":{"clusterAffinity":{}}}',
            id="nested-empty-struct",
        ),
        pytest.param(
            {"clusterNames": ["b", "a"], "placementType": "PickFixed"},
            '{"placementType":"PickFixed","clusterNames":["b","a"]}',
            id="slice-order-kept",
        ),
        pytest.param(
            {"topologySpreadConstraints": [{"topologyKey": "zone"}]},
            '{"topologySpreadConstraints":[{"topologyKey":"zone"}]}',
            id="nil-maxskew-omitted",
        ),
        pytest.param(
            {
                "affinity": {
                    "clusterAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "clusterSelectorTerms": [{"propertySelector": {}}, {}]
                        }
                    }
                }
            },
            '{"affinity":{"clusterAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":'
            '{"clusterSelectorTerms":[{"propertySelector":{"matchExpressions":null}},{}]}}}}',
            id="nil-slice-without-omitempty-is-null",
        ),
        pytest.param(
            {
                "affinity": {
                    "clusterAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "clusterSelectorTerms": [
                                {
                                    "propertySelector": {
                                        "matchExpressions": [{"name": "p", "operator": "Gt"}]
                                    }
                                }
                            ]
                        }
                    }
                }
            },
            '{"affinity":{"clusterAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":'
            '{"clusterSelectorTerms":[{"propertySelector":{"matchExpressions":'
            '[{"name":"p","operator":"Gt","values":null}]}}]}}}}',
            id="nil-property-values-is-null",
        ),
        pytest.param(
            {
                "affinity": {
                    "clusterAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "clusterSelectorTerms": [
                                {"propertySelector": {"matchExpressions": []}},
                                {"labelSelector": {"matchLabels": {}, "matchExpressions": []}},
                            ]
                        }
                    }
                }
            },
            '{"affinity":{"clusterAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":'
            '{"clusterSelectorTerms":[{"propertySelector":{"matchExpressions":[]}},'
            '{"labelSelector":{}}]}}}}',
            id="empty-slice-without-omitempty-is-brackets",
        ),
        pytest.param(
            {"tolerations": [{"key": "", "operator": "Exists", "value": "", "effect": ""}]},
            '{"tolerations":[{"operator":"Exists"}]}',
            id="toleration-empty-strings-omitted",
        ),
    ],
)
def test_go_json_follows_omitempty_and_nil_rules(wire: dict[str, Any], expected: str) -> None:
    assert go_json(policy(**wire)).decode() == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param('say "hi"\\', '"say \\"hi\\"\\\\"', id="quote-backslash"),
        pytest.param("a\nb\tc\rd", '"a\\nb\\tc\\rd"', id="short-escapes"),
        pytest.param("\b\f", '"\\b\\f"', id="go-1.22-backspace-formfeed"),
        pytest.param("\x00\x1f", '"\\u0000\\u001f"', id="control-lowercase-hex"),
        pytest.param("<&>", '"\\u003c\\u0026\\u003e"', id="html-escaped"),
        pytest.param("\u2028\u2029", '"\\u2028\\u2029"', id="line-separators"),
        pytest.param("zoné-東京\x7f", '"zoné-東京\x7f"', id="utf8-and-del-raw"),
    ],
)
def test_go_json_escapes_strings_like_go(value: str, expected: str) -> None:
    encoded = go_json(policy(clusterNames=[value])).decode()
    assert encoded == '{"clusterNames":[' + expected + "]}"


def test_go_json_rejects_values_go_cannot_hold_in_int32() -> None:
    with pytest.raises(InvalidPlacementError, match="maxSkew"):
        go_json(policy(topologySpreadConstraints=[{"topologyKey": "z", "maxSkew": 2**31}]))


def test_policy_hash_wire_form_is_base64_of_the_hex_string() -> None:
    digest = policy_hash(None)
    assert encode_policy_hash(digest) == base64.b64encode(digest.encode()).decode()
    assert decode_policy_hash(encode_policy_hash(digest)) == digest
    assert decode_policy_hash("not base64!") is None


# --- plan_snapshot_sync: rotate or refresh ---------------------------------------------------


def test_first_reconcile_creates_snapshot_zero_owned_by_the_placement() -> None:
    crp = placement(PICK_N3)
    sync = plan_snapshot_sync(crp, [])
    assert sync.update is None and sync.delete == ()
    assert sync.create is not None
    created = sync.create
    assert created.to_wire()["metadata"] == {
        "name": "web-0",
        "labels": {
            names.PARENT_PLACEMENT_LABEL: "web",
            names.IS_LATEST_SNAPSHOT_LABEL: "true",
            names.POLICY_INDEX_LABEL: "0",
        },
        "annotations": {
            names.CRP_GENERATION_ANNOTATION: "3",
            names.NUMBER_OF_CLUSTERS_ANNOTATION: "3",
        },
        "finalizers": [],
        "ownerReferences": [
            {
                "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
                "kind": "ClusterResourcePlacement",
                "name": "web",
                "uid": "uid-web",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    # The policy is copied verbatim, numberOfClusters included.
    assert created.spec.policy == PICK_N3
    assert decode_policy_hash(created.spec.policy_hash) == policy_hash(PICK_N3)
    assert sync.latest_name == "web-0" and sync.previous_index == -1 and sync.changed


def test_pick_all_snapshot_has_no_number_of_clusters_annotation() -> None:
    sync = plan_snapshot_sync(placement(PICK_ALL), [])
    assert sync.create is not None
    assert names.NUMBER_OF_CLUSTERS_ANNOTATION not in sync.create.metadata.annotations


def test_nil_policy_snapshot_keeps_a_nil_policy() -> None:
    sync = plan_snapshot_sync(placement(None), [])
    assert sync.create is not None
    assert sync.create.spec.policy is None
    assert decode_policy_hash(sync.create.spec.policy_hash) == policy_hash(None)


@pytest.mark.parametrize(
    ("crp", "existing", "labels", "annotations"),
    [
        pytest.param(
            placement(PICK_N3),
            [snap(0, pol=PICK_N3, latest="false"), snap(1, pol=PICK_N3, number="3")],
            {},
            {},
            id="up-to-date",
        ),
        pytest.param(
            placement(PICK_ALL, generation=4),
            [snap(1)],
            {},
            {names.CRP_GENERATION_ANNOTATION: "4"},
            id="generation-changed",
        ),
        pytest.param(
            placement(PICK_N5, generation=4),
            [snap(1, pol=PICK_N3, number="3")],
            {},
            {names.CRP_GENERATION_ANNOTATION: "4", names.NUMBER_OF_CLUSTERS_ANNOTATION: "5"},
            id="only-n-changed-refreshes-in-place",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(0, latest="false"), snap(1, latest="false")],
            {names.IS_LATEST_SNAPSHOT_LABEL: "true"},
            {},
            id="reverted-policy-relabels-highest-index",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(2, latest=None)],
            {names.IS_LATEST_SNAPSHOT_LABEL: "true"},
            {},
            id="missing-latest-label",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(0, crp_generation="+3")],
            {},
            {},
            id="go-atoi-accepts-a-sign",
        ),
    ],
)
def test_same_hash_refreshes_the_latest_snapshot_in_place(
    crp: ClusterResourcePlacement,
    existing: list[ClusterSchedulingPolicySnapshot],
    labels: dict[str, str],
    annotations: dict[str, str],
) -> None:
    sync = plan_snapshot_sync(crp, existing)
    latest = max(existing, key=policy_index)
    assert sync.create is None and sync.delete == ()
    assert sync.latest_name == latest.name
    if not labels and not annotations:
        assert sync.update is None and not sync.changed
        return
    assert sync.update == SnapshotUpdate(
        name=latest.name,
        resource_version=latest.metadata.resource_version,
        purpose="refresh",
        labels=labels,
        annotations=annotations,
    )


@pytest.mark.parametrize(
    ("crp", "existing", "demoted", "deleted", "created"),
    [
        pytest.param(
            placement(PICK_N3_TOLERATING),
            [snap(0, pol=PICK_N3, latest="false"), snap(1, pol=PICK_N3, number="3")],
            "web-1",
            (),
            "web-2",
            id="policy-changed",
        ),
        pytest.param(
            placement(PICK_N3_TOLERATING),
            [snap(0, pol=PICK_N3, latest="false"), snap(1, pol=PICK_N3, latest="false")],
            None,
            (),
            "web-2",
            id="crash-after-demote-is-not-demoted-again",
        ),
        pytest.param(
            placement(PICK_N3),
            [snap(0, hash_of=PICK_ALL)],
            "web-0",
            (),
            "web-1",
            id="stored-hash-differs",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(i, latest="true" if i == 9 else "false", hash_of=None) for i in range(10)],
            "web-9",
            ("web-0",),
            "web-10",
            id="history-full-deletes-oldest",
        ),
        pytest.param(
            placement(PICK_ALL, limit=2),
            [snap(i, latest="true" if i == 4 else "false", hash_of=None) for i in (4, 2, 3)],
            "web-4",
            ("web-2", "web-3"),
            "web-5",
            id="history-over-limit-sorted-by-index",
        ),
        pytest.param(
            placement(PICK_ALL, limit=1),
            [snap(0, hash_of=None)],
            "web-0",
            ("web-0",),
            "web-1",
            id="limit-one-replaces-the-only-snapshot",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(7, parent="other", hash_of=None), snap(0, hash_of=None)],
            "web-0",
            (),
            "web-1",
            id="other-placements-snapshots-ignored",
        ),
    ],
)
def test_changed_policy_rotates_snapshots(
    crp: ClusterResourcePlacement,
    existing: list[ClusterSchedulingPolicySnapshot],
    demoted: str | None,
    deleted: tuple[str, ...],
    created: str,
) -> None:
    sync = plan_snapshot_sync(crp, existing)
    if demoted is None:
        assert sync.update is None
    else:
        assert sync.update is not None
        assert (sync.update.name, sync.update.purpose) == (demoted, "demote")
        assert sync.update.labels == {names.IS_LATEST_SNAPSHOT_LABEL: "false"}
        assert sync.update.annotations == {}
    assert sync.delete == deleted
    assert sync.create is not None and sync.create.name == created
    assert sync.create.metadata.labels[names.POLICY_INDEX_LABEL] == created.rsplit("-", 1)[1]
    assert sync.latest_name == created


def test_undecodable_stored_hash_rotates_instead_of_failing() -> None:
    wire = snap(0).to_wire()
    wire["spec"]["policyHash"] = "%%%"
    sync = plan_snapshot_sync(
        placement(PICK_ALL), [ClusterSchedulingPolicySnapshot.from_wire(wire)]
    )
    assert sync.create is not None and sync.create.name == "web-1"


@pytest.mark.parametrize(
    ("crp", "existing", "error", "match"),
    [
        pytest.param(
            placement(PICK_ALL),
            [snap(0), snap(1)],
            MultipleLatestSnapshotsError,
            "web-0, web-1",
            id="two-latest",
        ),
        pytest.param(
            placement(PICK_ALL), [snap("x")], SnapshotMetadataError, "'x'", id="index-text"
        ),
        pytest.param(
            placement(PICK_ALL), [snap(-1)], SnapshotMetadataError, "'-1'", id="index-negative"
        ),
        pytest.param(
            placement(PICK_ALL), [snap(" 1")], SnapshotMetadataError, "' 1'", id="index-space"
        ),
        pytest.param(
            placement(PICK_ALL), [snap("1_0")], SnapshotMetadataError, "1_0", id="index-underscore"
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(None, name="web-0")],
            SnapshotMetadataError,
            "has no kubernetes-fleet.io/policy-index label; fix the label",
            id="index-missing",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(0, latest="false"), snap("bad", latest="false")],
            SnapshotMetadataError,
            "bad",
            id="unlabelled-fallback-parses-every-index",
        ),
        pytest.param(
            placement(PICK_N3),
            [snap("oops", latest="false", hash_of=None), snap(1, hash_of=None)],
            SnapshotMetadataError,
            "oops",
            id="rotation-parses-every-index",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(0, crp_generation=None)],
            SnapshotMetadataError,
            names.CRP_GENERATION_ANNOTATION,
            id="generation-annotation-missing",
        ),
        pytest.param(
            placement(PICK_ALL),
            [snap(0, crp_generation="-2")],
            SnapshotMetadataError,
            "'-2'",
            id="generation-annotation-negative",
        ),
        pytest.param(
            placement(PICK_N3),
            [snap(0, pol=PICK_N3)],
            SnapshotMetadataError,
            names.NUMBER_OF_CLUSTERS_ANNOTATION,
            id="pick-n-without-number-annotation",
        ),
        pytest.param(
            placement(PICK_N3),
            [snap(0, pol=PICK_N3, number="three")],
            SnapshotMetadataError,
            "three",
            id="pick-n-number-annotation-not-integer",
        ),
        pytest.param(
            placement(uid=None), [], InvalidPlacementError, "uid", id="placement-without-uid"
        ),
        pytest.param(
            placement(generation=None), [], InvalidPlacementError, "generation", id="no-generation"
        ),
    ],
)
def test_broken_invariants_are_clear_errors(
    crp: ClusterResourcePlacement,
    existing: list[ClusterSchedulingPolicySnapshot],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        plan_snapshot_sync(crp, existing)


def test_refresh_does_not_parse_indexes_of_older_snapshots() -> None:
    # KubeFleet reads only the latest snapshot's index when one is labelled latest.
    sync = plan_snapshot_sync(placement(PICK_ALL), [snap("junk", latest="false"), snap(3)])
    assert not sync.changed and sync.latest_name == "web-3"


def test_snapshot_update_applies_on_top_of_existing_metadata() -> None:
    existing = snap(2, number="3")
    update = SnapshotUpdate(
        name="web-2",
        resource_version="rv-2",
        purpose="refresh",
        annotations={names.NUMBER_OF_CLUSTERS_ANNOTATION: "5"},
    )
    updated = update.apply(existing)
    assert updated.metadata.annotations == {
        names.CRP_GENERATION_ANNOTATION: "3",
        names.NUMBER_OF_CLUSTERS_ANNOTATION: "5",
    }
    assert updated.metadata.labels == existing.metadata.labels
    assert updated.metadata.resource_version == "rv-2"
    with pytest.raises(ValueError, match="web-2"):
        update.apply(snap(1))


# --- the placement's Scheduled condition -----------------------------------------------------


def placement_condition(status: str, when: datetime = EARLIER, reason: str = "Old") -> Condition:
    return Condition(
        type=names.PLACEMENT_SCHEDULED_CONDITION,
        status=status,
        reason=reason,
        message="old",
        observed_generation=2,
        last_transition_time=when,
    )


PENDING = (names.UNKNOWN, names.SCHEDULE_PENDING_REASON, names.SCHEDULE_PENDING_MESSAGE)


@pytest.mark.parametrize(
    ("snapshot_status", "snapshot_generation", "expected"),
    [
        pytest.param({}, 1, PENDING, id="no-condition-yet"),
        pytest.param(scheduled("True", observed=1), 2, PENDING, id="condition-for-older-snapshot"),
        pytest.param(
            scheduled("True", crp_generation=2), 1, PENDING, id="older-placement-generation"
        ),
        pytest.param(scheduled("Unknown"), 1, PENDING, id="scheduler-unknown"),
        pytest.param(
            scheduled("True"),
            1,
            (names.TRUE, names.POLICY_FULFILLED_REASON, "message for True"),
            id="fulfilled-copied",
        ),
        pytest.param(
            scheduled("False", crp_generation=4),
            1,
            (names.FALSE, names.POLICY_UNFULFILLED_REASON, "message for False"),
            id="unfulfilled-copied-newer-crp-generation-ok",
        ),
    ],
)
def test_scheduled_condition_follows_the_snapshot(
    snapshot_status: dict[str, Any], snapshot_generation: int, expected: tuple[str, str, str]
) -> None:
    snapshot = with_status(snap(0), snapshot_status, generation=snapshot_generation)
    condition = placement_scheduled_condition(placement(), snapshot, NOW)
    assert (condition.status, condition.reason, condition.message) == expected
    assert condition.type == names.PLACEMENT_SCHEDULED_CONDITION
    assert condition.observed_generation == 3


@pytest.mark.parametrize(
    ("previous", "snapshot_status", "transition"),
    [
        pytest.param(None, scheduled("True"), NOW, id="first-condition"),
        pytest.param(
            placement_condition("True"), scheduled("True"), EARLIER, id="same-status-kept"
        ),
        pytest.param(
            placement_condition("False", reason="Other"),
            scheduled("False"),
            EARLIER,
            id="reason-change-alone-keeps-time",
        ),
        pytest.param(placement_condition("Unknown"), scheduled("True"), NOW, id="status-changed"),
        pytest.param(placement_condition("True"), {}, NOW, id="back-to-pending"),
    ],
)
def test_scheduled_condition_transition_time_moves_only_with_status(
    previous: Condition | None, snapshot_status: dict[str, Any], transition: datetime
) -> None:
    crp = placement(conditions=(previous,) if previous is not None else ())
    condition = placement_scheduled_condition(crp, with_status(snap(0), snapshot_status), NOW)
    assert condition.last_transition_time == transition


@pytest.mark.parametrize(
    ("conditions", "generation", "expected"),
    [
        pytest.param((), 3, False, id="no-condition"),
        pytest.param((placement_condition("True"),), 2, True, id="true-current-generation"),
        pytest.param((placement_condition("True"),), 3, False, id="true-older-generation"),
        pytest.param((placement_condition("False"),), 2, False, id="false"),
    ],
)
def test_fully_scheduled_means_true_for_the_current_generation(
    conditions: tuple[Condition, ...], generation: int, expected: bool
) -> None:
    assert (
        is_fully_scheduled(placement(generation=generation, conditions=conditions))
        is expected
    )


@pytest.mark.parametrize(
    ("conditions", "generation", "expected"),
    [
        pytest.param((), 2, None, id="no-condition"),
        pytest.param((placement_condition("True"),), 2, "True", id="true-current-generation"),
        pytest.param((placement_condition("False"),), 2, "False", id="false-current-generation"),
        pytest.param((placement_condition("False"),), 3, None, id="older-generation"),
        pytest.param(
            (placement_condition("Unknown", reason="SchedulePending"),),
            2,
            None,
            id="pending-current-generation",
        ),
    ],
)
def test_a_current_scheduled_condition_is_one_for_the_generation_true_or_not(
    conditions: tuple[Condition, ...], generation: int, expected: str | None
) -> None:
    found = scheduled_condition_current(placement(generation=generation, conditions=conditions))
    assert (found.status if found is not None else None) == expected


@pytest.mark.parametrize("bad", ["three", "-1", " 3", None])
def test_a_bad_crp_generation_is_the_same_error_for_the_snapshotter_and_the_cycle(
    bad: str | None,
) -> None:
    """One parser: the snapshotter refreshing the snapshot and a cycle scheduling it reject the
    same annotation with the same error type and message."""
    snapshot = snap(0, crp_generation=bad, name="web-0")
    with pytest.raises(SnapshotMetadataError) as synced:
        plan_snapshot_sync(placement(PICK_ALL), [snapshot])
    result = schedule(CycleInput(snapshot=snapshot, now=NOW))
    assert result.error == str(synced.value)
    assert isinstance(synced.value, InvalidSnapshotError)  # a cycle error too


def test_a_pick_n_policy_without_number_of_clusters_is_refused_naming_the_field() -> None:
    crp = placement(policy(placementType="PickN"))
    with pytest.raises(InvalidPlacementError) as refused:
        plan_snapshot_sync(crp, [])
    assert str(refused.value) == PICK_N_WITHOUT_NUMBER
    assert str(refused.value).startswith("spec.policy.numberOfClusters: ")
    assert "annotation" not in str(refused.value)


def test_bad_selectors_and_tolerations_are_refused_each_naming_its_field() -> None:
    """The webhook's rules no CEL rule carries: every problem is listed once, by field path."""
    crp = placement(
        policy(
            placementType="PickN",
            numberOfClusters=1,
            affinity={
                "clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "clusterSelectorTerms": [
                            {"labelSelector": {"matchLabels": {"env": "prod"}}},
                            {"labelSelector": {"matchLabels": {"bad key": "prod"}}},
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 5,
                            "preference": {
                                "labelSelector": {
                                    "matchExpressions": [{"key": "env", "operator": "In"}]
                                }
                            },
                        }
                    ],
                }
            },
            tolerations=[
                {"key": "ok", "value": "v"},
                {"key": "ok", "value": "v"},
                {"key": "a/b/c", "operator": "Exists"},
                {"key": "k", "value": "no/slash"},
            ],
        )
    )
    with pytest.raises(InvalidPlacementError) as refused:
        plan_snapshot_sync(crp, [])
    problems = str(refused.value).split("; ")
    affinity = "spec.policy.affinity.clusterAffinity."
    assert problems == [
        affinity + "requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[1]."
        "labelSelector.matchLabels: invalid label key 'bad key': the name part must be at most "
        "63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
        affinity + "preferredDuringSchedulingIgnoredDuringExecution[0].preference.labelSelector."
        "matchExpressions[0]: key 'env': operator In needs at least one value",
        "spec.policy.tolerations[1]: toleration already exists, tolerations must be unique",
        "spec.policy.tolerations[2].key: invalid label key 'a/b/c': at most one '/' (an optional "
        "DNS subdomain prefix)",
        "spec.policy.tolerations[3].value: invalid value 'no/slash' for label key 'k': at most 63 "
        "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric (or empty)",
    ]


def test_valid_selectors_and_tolerations_are_not_refused() -> None:
    crp = placement(
        policy(
            placementType="PickAll",
            affinity={
                "clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "clusterSelectorTerms": [
                            {"labelSelector": {"matchLabels": {"example.com/env": "prod"}}}
                        ]
                    }
                }
            },
            tolerations=[{"key": "gpu", "operator": "Exists"}, {"key": "gpu", "value": "a"}],
        )
    )
    assert plan_snapshot_sync(crp, []).create is not None
