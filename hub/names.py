"""KubeFleet's wire names: API groups, labels, annotations, finalizers, condition types and reasons.

Every string here is a contract with KubeFleet's own controllers and with users' tooling; they are
spelled exactly as KubeFleet spells them (kubefleet-rules sections 1.2-1.9) and declared once."""

from typing import Final

PLACEMENT_GROUP: Final = "placement.kubernetes-fleet.io"
CLUSTER_GROUP: Final = "cluster.kubernetes-fleet.io"
VERSION: Final = "v1beta1"
PLACEMENT_API_VERSION: Final = f"{PLACEMENT_GROUP}/{VERSION}"
CLUSTER_API_VERSION: Final = f"{CLUSTER_GROUP}/{VERSION}"

_PREFIX: Final = "kubernetes-fleet.io/"

# Labels (kubefleet-rules 1.2).
PARENT_PLACEMENT_LABEL: Final = _PREFIX + "parent-CRP"
IS_LATEST_SNAPSHOT_LABEL: Final = _PREFIX + "is-latest-snapshot"
POLICY_INDEX_LABEL: Final = _PREFIX + "policy-index"
MEMBER_NAME_LABEL: Final = _PREFIX + "member-name"

# Annotations (kubefleet-rules 1.3).
CRP_GENERATION_ANNOTATION: Final = _PREFIX + "CRP-generation"
NUMBER_OF_CLUSTERS_ANNOTATION: Final = _PREFIX + "number-of-clusters"
PREVIOUS_BINDING_STATE_ANNOTATION: Final = _PREFIX + "previous-binding-state"

# Finalizers (kubefleet-rules 1.4).
SCHEDULER_CLEANUP_FINALIZER: Final = _PREFIX + "scheduler-cleanup"
SCHEDULER_BINDING_CLEANUP_FINALIZER: Final = _PREFIX + "scheduler-crb-cleanup"
WORK_FINALIZER: Final = _PREFIX + "work-cleanup"

# Placement types (kubefleet-rules 1.5).
PICK_ALL: Final = "PickAll"
PICK_N: Final = "PickN"
PICK_FIXED: Final = "PickFixed"
PLACEMENT_TYPES: Final = (PICK_ALL, PICK_N, PICK_FIXED)

# Binding states (kubefleet-rules 1.8).
STATE_SCHEDULED: Final = "Scheduled"
STATE_BOUND: Final = "Bound"
STATE_UNSCHEDULED: Final = "Unscheduled"
BINDING_STATES: Final = (STATE_SCHEDULED, STATE_BOUND, STATE_UNSCHEDULED)

# Taints, tolerations, topology, sorters (kubefleet-rules 1.5, 1.10).
EFFECT_NO_SCHEDULE: Final = "NoSchedule"
TOLERATION_EQUAL: Final = "Equal"
TOLERATION_EXISTS: Final = "Exists"
TOLERATION_OPERATORS: Final = (TOLERATION_EQUAL, TOLERATION_EXISTS)
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
SORT_ASCENDING: Final = "Ascending"
SORT_DESCENDING: Final = "Descending"
PROPERTY_OPERATORS: Final = ("Gt", "Ge", "Eq", "Ne", "Lt", "Le")
LABEL_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")

# Condition statuses.
TRUE: Final = "True"
FALSE: Final = "False"
UNKNOWN: Final = "Unknown"

# Policy snapshot condition, written by the scheduler (kubefleet-rules 1.9).
SCHEDULED_CONDITION: Final = "Scheduled"
POLICY_FULFILLED_REASON: Final = "SchedulingPolicyFulfilled"
POLICY_UNFULFILLED_REASON: Final = "SchedulingPolicyUnfulfilled"
POLICY_FULFILLED_MESSAGE: Final = (
    "found all cluster needed as specified by the scheduling policy, found {count} cluster(s)"
)
POLICY_UNFULFILLED_MESSAGE: Final = (
    "could not find all clusters needed as specified by the scheduling policy, "
    "found {count} cluster(s) instead"
)

# Placement condition, written by the placement controller / our snapshotter (kubefleet-rules 2.7).
PLACEMENT_SCHEDULED_CONDITION: Final = "ClusterResourcePlacementScheduled"
# The same condition on a namespaced ResourcePlacement (kubefleet-rules 9).
RP_SCHEDULED_CONDITION: Final = "ResourcePlacementScheduled"
SCHEDULE_PENDING_REASON: Final = "SchedulePending"
SCHEDULE_PENDING_MESSAGE: Final = "Scheduling has not completed"

# MemberCluster agent status (kubefleet-rules 1.10, section 6).
MEMBER_AGENT: Final = "MemberAgent"
AGENT_JOINED_CONDITION: Final = "Joined"
AGENT_HEALTHY_CONDITION: Final = "Healthy"
NAMESPACE_COLLECTION_CONDITION: Final = "NamespaceCollectionSucceeded"

# Resource properties (kubefleet-rules 5.1).
RESOURCE_PROPERTY_PREFIX: Final = "resources.kubernetes-fleet.io/"
NODE_COUNT_PROPERTY: Final = _PREFIX + "node-count"

# Limits (kubefleet-rules 1.11).
MAX_DECISIONS: Final = 1000
MAX_UNSELECTED_DECISIONS: Final = 20
# KubeFleet's webhook: a placement's name is the parent-CRP label value of its snapshots and
# bindings, and label values are at most 63 characters.
MAX_PLACEMENT_NAME_LENGTH: Final = 63
DEFAULT_REVISION_HISTORY_LIMIT: Final = 10
DEFAULT_MAX_SKEW: Final = 1

# fleet-scheduler's own keys on KubeFleet's objects (KubeFleet's CRDs have no fields for them).
# Placements without them are scheduled exactly as KubeFleet schedules them.
OWN_PREFIX: Final = "fleet-scheduler.io/"
# Our own kinds (CapacityLedger) live in our own API group.
OWN_GROUP: Final = "fleet-scheduler.io"
OWN_VERSION: Final = "v1alpha1"
# Capacity-aware placement (docs/capacity.md): what one binding consumes, e.g. cpu=2,memory=4Gi.
REQUESTS_ANNOTATION: Final = OWN_PREFIX + "requests"
# On a binding a preemption unscheduled (docs/priority.md, "Preemption"): who took its room, and
# both priorities, e.g. "crp/checkout (priority 100000) on member-3, over priority 0".
PREEMPTED_BY_ANNOTATION: Final = OWN_PREFIX + "preempted-by"
# Rebalancing (docs/capacity.md): a PickN capacity-aware placement opts in with "allowed".
REBALANCE_ANNOTATION: Final = OWN_PREFIX + "rebalance"
REBALANCE_ALLOWED: Final = "allowed"
# A binding's condition KubeFleet's eviction controller counts as available (its budget).
BINDING_AVAILABLE_CONDITION: Final = "Available"
PRIORITY_CLASS_ANNOTATION: Final = OWN_PREFIX + "priority-class"
DEFAULT_TENANT_LABEL: Final = OWN_PREFIX + "tenant"
# Affinity enforced during execution, and scheduling deadlines (docs/architecture.md).
AFFINITY_ENFORCEMENT_ANNOTATION: Final = OWN_PREFIX + "affinity-enforcement"
SCHEDULE_DEADLINE_ANNOTATION: Final = OWN_PREFIX + "schedule-deadline"
# Our annotations that decisions read: a change to one of them runs a turn. The others
# (priority-class, the tenant label) only order turns: a change sends priority_changed.
DECISION_ANNOTATIONS: Final = (
    REQUESTS_ANNOTATION,
    REBALANCE_ANNOTATION,
    AFFINITY_ENFORCEMENT_ANNOTATION,
    SCHEDULE_DEADLINE_ANNOTATION,
)

# KEP-5313 PlacementDecisions (docs/decisions.md): the labels that tie a placement's slices
# together, the scheduler name they carry, and where the ClusterProfiles (KEP-4322) they
# reference live by default: KubeFleet's hub agent keeps one per MemberCluster, of the same
# name, in its system namespace.
DECISION_PLACEMENT_KEY_LABEL: Final = "multicluster.x-k8s.io/placement-key"
DECISION_KEY_LABEL: Final = "multicluster.x-k8s.io/decision-key"
DECISION_INDEX_LABEL: Final = "multicluster.x-k8s.io/decision-index"
# Which kind of placement a slice is for, so a ClusterResourcePlacement's and a
# ResourcePlacement's of one name never mix in one namespace.
DECISION_PLACEMENT_KIND_LABEL: Final = OWN_PREFIX + "placement-kind"
DECISION_SCHEDULER_NAME: Final = "fleet-scheduler"
FLEET_SYSTEM_NAMESPACE: Final = "fleet-system"
