"""The built-in plugins, one module (or package) each, keyed by their NAME.

Names are KubeFleet's (kubefleet-rules 5.0; PrioritySort, the QueueSort default, is
kube-scheduler's) and double as profile keys and cycle-store prefixes. Each value is a
factory: the plugin class, called with the profile's keyword arguments."""

from collections.abc import Callable, Mapping
from types import MappingProxyType

from scheduler.framework.interfaces import Plugin
from scheduler.plugins import (
    cluster_affinity,
    cluster_eligibility,
    cluster_resources_fit,
    default_preemption,
    namespace_affinity,
    priority_sort,
    same_placement_anti_affinity,
    taint_toleration,
    topology_spread_constraints,
)
from scheduler.plugins.cluster_affinity import ClusterAffinity
from scheduler.plugins.cluster_eligibility import ClusterEligibility
from scheduler.plugins.cluster_resources_fit import ClusterResourcesFit
from scheduler.plugins.default_preemption import DefaultPreemption
from scheduler.plugins.namespace_affinity import NamespaceAffinity
from scheduler.plugins.priority_sort import PrioritySort
from scheduler.plugins.same_placement_anti_affinity import SamePlacementAntiAffinity
from scheduler.plugins.taint_toleration import TaintToleration
from scheduler.plugins.topology_spread_constraints import TopologySpreadConstraints

__all__ = [
    "BUILTIN_PLUGINS",
    "ClusterAffinity",
    "ClusterEligibility",
    "ClusterResourcesFit",
    "DefaultPreemption",
    "NamespaceAffinity",
    "PrioritySort",
    "SamePlacementAntiAffinity",
    "TaintToleration",
    "TopologySpreadConstraints",
]

BUILTIN_PLUGINS: Mapping[str, Callable[..., Plugin]] = MappingProxyType(
    {
        cluster_affinity.NAME: ClusterAffinity,
        cluster_eligibility.NAME: ClusterEligibility,
        namespace_affinity.NAME: NamespaceAffinity,
        taint_toleration.NAME: TaintToleration,
        same_placement_anti_affinity.NAME: SamePlacementAntiAffinity,
        topology_spread_constraints.NAME: TopologySpreadConstraints,
        priority_sort.NAME: PrioritySort,
        cluster_resources_fit.NAME: ClusterResourcesFit,
        default_preemption.NAME: DefaultPreemption,
    }
)
