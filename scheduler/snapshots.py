"""Policy snapshots from placements, decided the way KubeFleet's placement controller does.

fleet-scheduler can run without KubeFleet's hub agent, so something must turn each
ClusterResourcePlacement into ClusterSchedulingPolicySnapshots and report the placement's
Scheduled condition (kubefleet-rules section 2). This module decides *what* to write; the
snapshotter process does the reads and writes. Pure: no I/O, no clock (`now` is passed in).

Interoperability shaped it: snapshots written here and by KubeFleet's Go controller must be
interchangeable, so a placement can move between the two without a new snapshot (and a full
reschedule). That requires the policy hash to be byte-for-byte KubeFleet's: SHA-256 over Go's
`encoding/json` output of the policy with `numberOfClusters` cleared. Go writes struct fields in
declaration order, honours `omitempty`, writes nil slices without `omitempty` as `null`, sorts
map keys, escapes `<`, `>`, `&`, U+2028 and U+2029, and uses no whitespace; `_GoJSON` below
encodes each type explicitly in its Go struct order (a pydantic dump would follow Python field
order and Python's escaping rules).

Errors: objects that break the controller's invariants (an unparsable `policy-index` label, a
missing `CRP-generation` annotation, two snapshots labelled latest) raise a `SnapshotError`
subclass with a message naming the object and the fix; KubeFleet treats the same cases as
"unexpected behaviour" and waits for the next event instead of retrying."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from hub import names
from hub.kinds import kinds_for
from hub.types import (
    Affinity,
    ClusterAffinity,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    ClusterSelector,
    ClusterSelectorTerm,
    Condition,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    OwnerReference,
    PlacementPolicy,
    PreferredClusterSelector,
    PropertySelector,
    PropertySelectorRequirement,
    PropertySorter,
    SchedulingPolicySnapshotSpec,
    Toleration,
    TopologySpreadConstraint,
)
from scheduler import labels
from scheduler.annotations import snapshot_number
from scheduler.errors import (
    InvalidPlacementError,
    MultipleLatestSnapshotsError,
    SnapshotError,
    SnapshotMetadataError,
)

__all__ = [
    "PICK_N_WITHOUT_NUMBER",
    "PREFERRED_TERM_PATH",
    "REQUIRED_TERM_PATH",
    "InvalidPlacementError",
    "MultipleLatestSnapshotsError",
    "SnapshotError",
    "SnapshotMetadataError",
    "SnapshotSync",
    "SnapshotUpdate",
    "decode_policy_hash",
    "encode_policy_hash",
    "go_json",
    "placement_scheduled_condition",
    "plan_snapshot_sync",
    "policy_hash",
    "policy_index",
    "revision_history_limit",
    "snapshot_name",
]

SNAPSHOT_NAME_FORMAT: Final = "{placement}-{index}"  # KubeFleet's PolicySnapshotNameFmt "%s-%d"
TRUE_LABEL: Final = "true"  # strconv.FormatBool
FALSE_LABEL: Final = "false"
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1


# --- errors ----------------------------------------------------------------------------------


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


# --- labels and annotations ------------------------------------------------------------------


def policy_index(snapshot: ClusterSchedulingPolicySnapshot) -> int:
    """The snapshot's `policy-index` label as an integer.

    Raises:
        SnapshotMetadataError: the label is missing, not an integer, or negative.
    """
    return snapshot_number(snapshot, names.POLICY_INDEX_LABEL, label=True)


def snapshot_name(placement_name: str, index: int) -> str:
    """`<placement>-<index>`, KubeFleet's snapshot name."""
    return SNAPSHOT_NAME_FORMAT.format(placement=placement_name, index=index)


def revision_history_limit(placement: ClusterResourcePlacement) -> int:
    """How many snapshots to keep: the spec value, else KubeFleet's default of 10."""
    limit = placement.spec.revision_history_limit
    if limit is None:
        return names.DEFAULT_REVISION_HISTORY_LIMIT
    return max(limit, 1)  # the API enforces >= 1; never plan to delete everything


def _generation(placement: ClusterResourcePlacement) -> int:
    generation = placement.metadata.generation
    if generation is None:
        raise InvalidPlacementError(
            f"placement {placement.name!r} has no metadata.generation; "
            "read it from the API server before planning its snapshots"
        )
    return generation


# KubeFleet's webhook refuses these placements (pkg/utils/validator/placement.go); where no
# webhook runs and the CRD's CEL rules cannot say it (label keys and values: a rule over an
# unbounded map exceeds kube-apiserver's cost budget) or a hub's older CRD lacks the rule, the
# snapshotter refuses them, naming the field (docs/validation.md).
PICK_N_WITHOUT_NUMBER: Final = (
    "spec.policy.numberOfClusters: number of cluster cannot be nil for policy type PickN "
    "(set how many clusters to pick)"
)
_AFFINITY_PATH: Final = "spec.policy.affinity.clusterAffinity"
REQUIRED_TERM_PATH: Final = (
    _AFFINITY_PATH + ".requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[{index}]"
)
PREFERRED_TERM_PATH: Final = (
    _AFFINITY_PATH + ".preferredDuringSchedulingIgnoredDuringExecution[{index}].preference"
)


def _check_policy(placement: ClusterResourcePlacement) -> None:
    """A policy the snapshotter cannot turn into a snapshot the scheduler can act on."""
    policy = placement.spec.policy
    if policy is None:
        return
    problems = []
    if policy.placement_type == names.PICK_N and policy.number_of_clusters is None:
        problems.append(PICK_N_WITHOUT_NUMBER)
    problems.extend(_selector_problems(policy))
    problems.extend(_toleration_problems(policy))
    if problems:
        raise InvalidPlacementError("; ".join(problems))


def _selector_problems(policy: PlacementPolicy) -> list[str]:
    """Label selectors Kubernetes cannot build, each named by its field path."""
    affinity = policy.affinity.cluster_affinity if policy.affinity else None
    if affinity is None:
        return []
    terms: list[tuple[str, ClusterSelectorTerm]] = []
    required = affinity.required_during_scheduling_ignored_during_execution
    if required is not None:
        terms.extend(
            (REQUIRED_TERM_PATH.format(index=index), term)
            for index, term in enumerate(required.cluster_selector_terms)
        )
    terms.extend(
        (PREFERRED_TERM_PATH.format(index=index), preferred.preference)
        for index, preferred in enumerate(
            affinity.preferred_during_scheduling_ignored_during_execution
        )
    )
    problems = []
    for path, term in terms:
        if term.label_selector is None:
            continue
        problem = labels.validate(term.label_selector)
        if problem:
            problems.append(f"{path}.labelSelector.{problem}")
    return problems


def _toleration_problems(policy: PlacementPolicy) -> list[str]:
    """The webhook's toleration rules the CRD's CEL rules leave out: a key is a label key, an
    Equal toleration's value a label value, and no toleration is listed twice."""
    problems = []
    seen: set[str] = set()
    for index, toleration in enumerate(policy.tolerations):
        path = f"spec.policy.tolerations[{index}]"
        if toleration.key and (problem := labels.key_problem(toleration.key)):
            problems.append(f"{path}.key: {problem}")
        equal = (toleration.operator or names.TOLERATION_EQUAL) == names.TOLERATION_EQUAL
        value = toleration.value or ""
        if equal and (problem := labels.value_problem(toleration.key or "", value)):
            problems.append(f"{path}.value: {problem}")
        identity = json.dumps(toleration.to_wire(), sort_keys=True)
        if identity in seen:
            problems.append(f"{path}: toleration already exists, tolerations must be unique")
        seen.add(identity)
    return problems


def _wanted_number_of_clusters(placement: ClusterResourcePlacement) -> int | None:
    policy = placement.spec.policy
    if policy is None or policy.placement_type != names.PICK_N:
        return None
    return policy.number_of_clusters


# --- the plan --------------------------------------------------------------------------------


UpdatePurpose = Literal["refresh", "demote"]


@dataclass(frozen=True, slots=True)
class SnapshotUpdate:
    """Set `labels` and `annotations` (only the keys that change) on an existing snapshot.

    Send it as an Update or merge patch carrying `resource_version`, so a concurrent change is
    a Conflict to retry with a fresh read (KubeFleet: "update ignoring conflict")."""

    name: str
    resource_version: str | None
    purpose: UpdatePurpose
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def apply(self, snapshot: ClusterSchedulingPolicySnapshot) -> ClusterSchedulingPolicySnapshot:
        """The snapshot with this update applied (for a read-modify-PUT)."""
        if snapshot.name != self.name:
            raise ValueError(f"update for {self.name!r} applied to {snapshot.name!r}")
        meta = snapshot.metadata.model_copy(
            update={
                "labels": {**snapshot.metadata.labels, **self.labels},
                "annotations": {**snapshot.metadata.annotations, **self.annotations},
            }
        )
        return snapshot.model_copy(update={"metadata": meta})


@dataclass(frozen=True, slots=True)
class SnapshotSync:
    """What to write so the placement's latest snapshot matches its policy (kubefleet-rules
    2.2-2.5).

    Apply in order: `update` (refresh in place, or demote the old latest), then `delete`
    (oldest first; NotFound is fine), then `create` (AlreadyExists means an earlier attempt
    got there: re-plan). Nothing to write means `changed` is False."""

    placement: str
    policy_hash: str
    previous_name: str | None  # the latest snapshot found (labelled or highest index), if any
    previous_index: int  # its policy index; -1 when there was none
    update: SnapshotUpdate | None = None
    delete: tuple[str, ...] = ()
    create: ClusterSchedulingPolicySnapshot | None = None

    @property
    def changed(self) -> bool:
        return self.update is not None or bool(self.delete) or self.create is not None

    @property
    def latest_name(self) -> str:
        """The name of the placement's latest snapshot once the plan is applied."""
        if self.create is not None:
            return self.create.name
        if self.previous_name is None:  # only a hand-made SnapshotSync can get here
            raise ValueError(f"sync plan for {self.placement!r} leaves no latest snapshot")
        return self.previous_name


def _find_latest(
    placement: str, snapshots: Sequence[ClusterSchedulingPolicySnapshot]
) -> tuple[ClusterSchedulingPolicySnapshot | None, int]:
    """KubeFleet's lookupLatestSchedulingPolicySnapshot: the one labelled latest, else the one
    with the highest index (left unlabelled by a crash between demote and create)."""
    labelled = [s for s in snapshots if s.is_latest]
    if len(labelled) > 1:
        listed = ", ".join(sorted(s.name for s in labelled))
        raise MultipleLatestSnapshotsError(
            f"placement {placement!r} has {len(labelled)} policy snapshots labelled "
            f'{names.IS_LATEST_SNAPSHOT_LABEL}=true ({listed}); set the label to "false" on '
            "all but the newest"
        )
    if labelled:
        return labelled[0], policy_index(labelled[0])
    ordered = _sorted_by_index(snapshots)
    if not ordered:
        return None, -1
    latest = ordered[-1]
    return latest, policy_index(latest)


def _sorted_by_index(
    snapshots: Sequence[ClusterSchedulingPolicySnapshot],
) -> list[ClusterSchedulingPolicySnapshot]:
    keyed = [(policy_index(s), s.name, s) for s in snapshots]  # raises on any bad index
    return [s for _, _, s in sorted(keyed, key=lambda item: (item[0], item[1]))]


def plan_snapshot_sync(
    placement: ClusterResourcePlacement,
    snapshots: Sequence[ClusterSchedulingPolicySnapshot],
) -> SnapshotSync:
    """Decide the snapshot writes for one reconcile of a live placement.

    `snapshots` are the placement's policy snapshots (listed by the `parent-CRP` label; any
    others are ignored). Same hash as the latest: refresh its `is-latest-snapshot` label,
    `CRP-generation` and (PickN) `number-of-clusters` annotations in place. Otherwise: demote the
    latest if labelled, delete the oldest beyond `revisionHistoryLimit - 1`, create
    `<name>-<index+1>`.

    Raises:
        SnapshotError: see the subclasses; nothing should be written.
    """
    name = placement.name
    generation = _generation(placement)
    _check_policy(placement)
    ours = [s for s in snapshots if s.placement_name == name]
    digest = policy_hash(placement.spec.policy)
    latest, latest_index = _find_latest(name, ours)

    if latest is not None and decode_policy_hash(latest.spec.policy_hash) == digest:
        return SnapshotSync(
            placement=name,
            policy_hash=digest,
            previous_name=latest.name,
            previous_index=latest_index,
            update=_refresh(placement, latest, generation),
        )

    update = None
    if latest is not None and latest.is_latest:
        update = SnapshotUpdate(
            name=latest.name,
            resource_version=latest.metadata.resource_version,
            purpose="demote",
            labels={names.IS_LATEST_SNAPSHOT_LABEL: FALSE_LABEL},
        )
    ordered = _sorted_by_index(ours)
    limit = revision_history_limit(placement)
    excess = len(ordered) - limit + 1  # keep a slot for the new snapshot
    delete = tuple(s.name for s in ordered[:excess]) if excess > 0 else ()
    return SnapshotSync(
        placement=name,
        policy_hash=digest,
        previous_name=latest.name if latest is not None else None,
        previous_index=latest_index,
        update=update,
        delete=delete,
        create=_new_snapshot(placement, latest_index + 1, digest, generation),
    )


def _refresh(
    placement: ClusterResourcePlacement,
    latest: ClusterSchedulingPolicySnapshot,
    generation: int,
) -> SnapshotUpdate | None:
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if not latest.is_latest:
        # The old latest was demoted, the new one never created, and the policy was reverted.
        labels[names.IS_LATEST_SNAPSHOT_LABEL] = TRUE_LABEL
    if snapshot_number(latest, names.CRP_GENERATION_ANNOTATION) != generation:
        annotations[names.CRP_GENERATION_ANNOTATION] = str(generation)
    wanted = _wanted_number_of_clusters(placement)
    if (
        wanted is not None
        and snapshot_number(latest, names.NUMBER_OF_CLUSTERS_ANNOTATION) != wanted
    ):
        annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(wanted)
    if not labels and not annotations:
        return None
    return SnapshotUpdate(
        name=latest.name,
        resource_version=latest.metadata.resource_version,
        purpose="refresh",
        labels=labels,
        annotations=annotations,
    )


def _new_snapshot(
    placement: ClusterResourcePlacement, index: int, digest: str, generation: int
) -> ClusterSchedulingPolicySnapshot:
    uid = placement.metadata.uid
    if not uid:
        raise InvalidPlacementError(
            f"placement {placement.name!r} has no metadata.uid, so a snapshot cannot name it as "
            "owner; read it from the API server before planning its snapshots"
        )
    annotations = {names.CRP_GENERATION_ANNOTATION: str(generation)}
    wanted = _wanted_number_of_clusters(placement)
    if wanted is not None:
        annotations[names.NUMBER_OF_CLUSTERS_ANNOTATION] = str(wanted)
    return kinds_for(placement.metadata.namespace).snapshot(
        metadata=ObjectMeta(
            name=snapshot_name(placement.name, index),
            namespace=placement.metadata.namespace or None,
            labels={
                names.PARENT_PLACEMENT_LABEL: placement.name,
                names.IS_LATEST_SNAPSHOT_LABEL: TRUE_LABEL,
                names.POLICY_INDEX_LABEL: str(index),
            },
            annotations=annotations,
            owner_references=[
                OwnerReference(
                    api_version=names.PLACEMENT_API_VERSION,
                    kind=placement.KIND,
                    name=placement.name,
                    uid=uid,
                    controller=True,
                    block_owner_deletion=True,
                )
            ],
        ),
        # Verbatim, numberOfClusters included: the scheduler reads N from the annotation.
        spec=SchedulingPolicySnapshotSpec(
            policy=placement.spec.policy, policy_hash=encode_policy_hash(digest)
        ),
    )


# --- the placement's Scheduled condition -----------------------------------------------------


def placement_scheduled_condition(
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    now: datetime,
) -> Condition:
    """The placement's `ClusterResourcePlacementScheduled` condition (`ResourcePlacementScheduled`
    on a ResourcePlacement), derived from its latest snapshot (kubefleet-rules 2.7, 9).

    Unknown/SchedulePending until the scheduler has reported on this snapshot generation and
    this placement generation; then the snapshot's `Scheduled` status, reason and message.
    `lastTransitionTime` is the placement's existing one unless the status changes (then `now`),
    as Kubernetes' meta.SetStatusCondition does."""
    generation = _generation(placement)
    reported = snapshot.status.condition(names.SCHEDULED_CONDITION)
    pending = (
        reported is None
        or (reported.observed_generation or 0) < (snapshot.metadata.generation or 0)
        or (snapshot.status.observed_crp_generation or 0) < generation
        or reported.status == names.UNKNOWN
    )
    if pending or reported is None:
        status, reason, message = (
            names.UNKNOWN,
            names.SCHEDULE_PENDING_REASON,
            names.SCHEDULE_PENDING_MESSAGE,
        )
    else:
        status, reason, message = reported.status, reported.reason, reported.message
    previous = placement.status.condition(placement.SCHEDULED_CONDITION)
    transition = now
    if previous is not None and previous.status == status and previous.last_transition_time:
        transition = previous.last_transition_time
    return Condition(
        type=placement.SCHEDULED_CONDITION,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        last_transition_time=transition,
    )
