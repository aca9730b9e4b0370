"""What KubeFleet's webhook refuses and the snapshotter must refuse where no webhook runs (or an
older CRD lacks the rule), naming the field (docs/validation.md). Pure."""

from __future__ import annotations

import json
from typing import Final

from hub import names
from hub.types import (
    ClusterResourcePlacement,
    ClusterSelectorTerm,
    PlacementPolicy,
)
from scheduler.clusters import labels
from scheduler.errors import (
    InvalidPlacementError,
)

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


def check_policy(placement: ClusterResourcePlacement) -> None:
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


def wanted_number_of_clusters(placement: ClusterResourcePlacement) -> int | None:
    policy = placement.spec.policy
    if policy is None or policy.placement_type != names.PICK_N:
        return None
    return policy.number_of_clusters
