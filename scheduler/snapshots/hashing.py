"""KubeFleet's policy hash, byte for byte: SHA-256 over Go's `encoding/json` output of the policy
with `numberOfClusters` cleared, so snapshots written here and by KubeFleet's controller are
interchangeable. Go writes struct fields in declaration order, honours `omitempty`, writes nil
slices without `omitempty` as `null`, sorts map keys, escapes `<`, `>`, `&`, U+2028 and U+2029,
and uses no whitespace; `_GoJSON` encodes each type explicitly in its Go struct order (a
pydantic dump would follow Python field order and Python's escaping rules). Pure."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from hub.types import (
    Affinity,
    ClusterAffinity,
    ClusterSelector,
    ClusterSelectorTerm,
    LabelSelector,
    LabelSelectorRequirement,
    PlacementPolicy,
    PreferredClusterSelector,
    PropertySelector,
    PropertySelectorRequirement,
    PropertySorter,
    Toleration,
    TopologySpreadConstraint,
)
from scheduler.errors import (
    InvalidPlacementError,
)

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1


# --- Go encoding/json of the policy ----------------------------------------------------------

_GO_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",  # Go >= 1.22 writes \b and \f (earlier: \u0008, \u000c)
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    # HTML-safe escaping (json.Marshal always uses it) and JavaScript line terminators.
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


class _GoJSON:
    """Go's `encoding/json` for the placement-policy types, one method per Go struct.

    Each method lists the struct's fields in Go declaration order with their JSON tags:
    `_omit_*` for `omitempty`, plain for always-written fields (nil slices become `null`).
    Fields our models keep as extras are unknown to Go and therefore never written."""

    @staticmethod
    def string(value: str) -> str:
        out = ['"']
        for char in value:
            escaped = _GO_SHORT_ESCAPES.get(char)
            if escaped is not None:
                out.append(escaped)
            elif char < " ":
                out.append(f"\\u{ord(char):04x}")
            elif "\ud800" <= char <= "\udfff":
                # A lone surrogate cannot come from valid UTF-8; Go's decoder would already
                # have replaced it with U+FFFD, which the encoder then writes as itself.
                out.append("\ufffd")
            else:
                out.append(char)
        out.append('"')
        return "".join(out)

    @staticmethod
    def int32(value: int, path: str) -> str:
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise InvalidPlacementError(f"{path} = {value} does not fit in an int32")
        return str(value)

    @classmethod
    def obj(cls, members: Iterable[tuple[str, str | None]]) -> str:
        """A JSON object of the members whose encoded value is not None (None = omitted)."""
        return (
            "{"
            + ",".join(f"{cls.string(key)}:{value}" for key, value in members if value is not None)
            + "}"
        )

    @staticmethod
    def array(items: Iterable[str]) -> str:
        return "[" + ",".join(items) + "]"

    @classmethod
    def strings(cls, values: Iterable[str]) -> str:
        return cls.array(cls.string(v) for v in values)

    @classmethod
    def string_map(cls, values: Mapping[str, str]) -> str:
        # Go sorts map keys by their bytes.
        keys = sorted(values, key=lambda k: k.encode("utf-8", "surrogatepass"))
        return cls.obj((key, cls.string(values[key])) for key in keys)

    # omitempty helpers: Go omits "", nil pointers, and empty slices and maps.
    @classmethod
    def omit_string(cls, value: str | None) -> str | None:
        return cls.string(value) if value else None

    @classmethod
    def omit_strings(cls, values: Sequence[str]) -> str | None:
        return cls.strings(values) if values else None

    # metav1.LabelSelector and LabelSelectorRequirement (k8s.io/apimachinery).
    @classmethod
    def label_selector(cls, sel: LabelSelector) -> str:
        return cls.obj(
            [
                ("matchLabels", cls.string_map(sel.match_labels) if sel.match_labels else None),
                (
                    "matchExpressions",
                    cls.array(cls.label_requirement(r) for r in sel.match_expressions)
                    if sel.match_expressions
                    else None,
                ),
            ]
        )

    @classmethod
    def label_requirement(cls, req: LabelSelectorRequirement) -> str:
        return cls.obj(
            [
                ("key", cls.string(req.key)),
                ("operator", cls.string(req.operator)),
                ("values", cls.omit_strings(req.values)),
            ]
        )

    # placement.kubernetes-fleet.io/v1beta1 (apis/placement/v1beta1).
    @classmethod
    def property_requirement(cls, req: PropertySelectorRequirement) -> str:
        # `values` has no omitempty: a nil slice is `null`, an empty one `[]`.
        return cls.obj(
            [
                ("name", cls.string(req.name)),
                ("operator", cls.string(req.operator)),
                ("values", cls.strings(req.values) if "values" in req.model_fields_set else "null"),
            ]
        )

    @classmethod
    def property_selector(cls, sel: PropertySelector) -> str:
        expressions = (
            cls.array(cls.property_requirement(r) for r in sel.match_expressions)
            if "match_expressions" in sel.model_fields_set
            else "null"
        )
        return cls.obj([("matchExpressions", expressions)])

    @classmethod
    def property_sorter(cls, sorter: PropertySorter) -> str:
        return cls.obj(
            [("name", cls.string(sorter.name)), ("sortOrder", cls.string(sorter.sort_order))]
        )

    @classmethod
    def selector_term(cls, term: ClusterSelectorTerm) -> str:
        return cls.obj(
            [
                (
                    "labelSelector",
                    cls.label_selector(term.label_selector)
                    if term.label_selector is not None
                    else None,
                ),
                (
                    "propertySelector",
                    cls.property_selector(term.property_selector)
                    if term.property_selector is not None
                    else None,
                ),
                (
                    "propertySorter",
                    cls.property_sorter(term.property_sorter)
                    if term.property_sorter is not None
                    else None,
                ),
            ]
        )

    @classmethod
    def cluster_selector(cls, sel: ClusterSelector) -> str:
        return cls.obj(
            [
                (
                    "clusterSelectorTerms",
                    cls.array(cls.selector_term(t) for t in sel.cluster_selector_terms),
                )
            ]
        )

    @classmethod
    def preferred(cls, pref: PreferredClusterSelector, path: str) -> str:
        return cls.obj(
            [
                ("weight", cls.int32(pref.weight, f"{path}.weight")),
                ("preference", cls.selector_term(pref.preference)),
            ]
        )

    @classmethod
    def cluster_affinity(cls, aff: ClusterAffinity, path: str) -> str:
        required = aff.required_during_scheduling_ignored_during_execution
        preferred = aff.preferred_during_scheduling_ignored_during_execution
        return cls.obj(
            [
                (
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    cls.cluster_selector(required) if required is not None else None,
                ),
                (
                    "preferredDuringSchedulingIgnoredDuringExecution",
                    cls.array(
                        cls.preferred(
                            p, f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
                        )
                        for i, p in enumerate(preferred)
                    )
                    if preferred
                    else None,
                ),
            ]
        )

    @classmethod
    def affinity(cls, aff: Affinity, path: str) -> str:
        cluster = aff.cluster_affinity
        return cls.obj(
            [
                (
                    "clusterAffinity",
                    cls.cluster_affinity(cluster, f"{path}.clusterAffinity")
                    if cluster is not None
                    else None,
                )
            ]
        )

    @classmethod
    def topology_constraint(cls, tsc: TopologySpreadConstraint, path: str) -> str:
        return cls.obj(
            [
                (
                    "maxSkew",
                    cls.int32(tsc.max_skew, f"{path}.maxSkew")
                    if tsc.max_skew is not None
                    else None,
                ),
                ("topologyKey", cls.string(tsc.topology_key)),
                ("whenUnsatisfiable", cls.omit_string(tsc.when_unsatisfiable)),
            ]
        )

    @classmethod
    def toleration(cls, tol: Toleration) -> str:
        return cls.obj(
            [
                ("key", cls.omit_string(tol.key)),
                ("operator", cls.omit_string(tol.operator)),
                ("value", cls.omit_string(tol.value)),
                ("effect", cls.omit_string(tol.effect)),
            ]
        )

    @classmethod
    def policy(cls, policy: PlacementPolicy, *, with_number_of_clusters: bool) -> str:
        path = "spec.policy"
        number = policy.number_of_clusters if with_number_of_clusters else None
        return cls.obj(
            [
                ("placementType", cls.omit_string(policy.placement_type)),
                ("clusterNames", cls.omit_strings(policy.cluster_names)),
                (
                    "numberOfClusters",
                    cls.int32(number, f"{path}.numberOfClusters") if number is not None else None,
                ),
                (
                    "affinity",
                    cls.affinity(policy.affinity, f"{path}.affinity")
                    if policy.affinity is not None
                    else None,
                ),
                (
                    "topologySpreadConstraints",
                    cls.array(
                        cls.topology_constraint(t, f"{path}.topologySpreadConstraints[{i}]")
                        for i, t in enumerate(policy.topology_spread_constraints)
                    )
                    if policy.topology_spread_constraints
                    else None,
                ),
                (
                    "tolerations",
                    cls.array(cls.toleration(t) for t in policy.tolerations)
                    if policy.tolerations
                    else None,
                ),
            ]
        )


def go_json(policy: PlacementPolicy | None, *, with_number_of_clusters: bool = True) -> bytes:
    """The bytes Go's `json.Marshal(policy)` produces for this policy (`null` for no policy).

    Raises:
        InvalidPlacementError: an int32 field holds a value Go could not have decoded.
    """
    if policy is None:
        return b"null"
    text = _GoJSON.policy(policy, with_number_of_clusters=with_number_of_clusters)
    return text.encode("utf-8", "surrogatepass")


def policy_hash(policy: PlacementPolicy | None) -> str:
    """KubeFleet's policy hash: lowercase hex SHA-256 of the Go JSON of the policy without
    `numberOfClusters` (kubefleet-rules 2.1), so scaling a PickN placement keeps its snapshot."""
    return hashlib.sha256(go_json(policy, with_number_of_clusters=False)).hexdigest()


def encode_policy_hash(hex_digest: str) -> str:
    """The `spec.policyHash` wire value: Go `[]byte` of the hex string, hence base64."""
    return base64.b64encode(hex_digest.encode("ascii")).decode("ascii")


def decode_policy_hash(wire_value: str) -> str | None:
    """The hex digest stored in a snapshot's `spec.policyHash`, or None if it is not base64."""
    try:
        return base64.b64decode(wire_value, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None
