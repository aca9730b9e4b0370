"""Placement policies as people write them (wire dicts), for what many tests ask: clusters
labelled env=prod, and only those."""

from __future__ import annotations

from typing import Any

__all__ = ["prod_only"]


def prod_only(**policy: Any) -> dict[str, Any]:
    """`policy`'s wire fields (placementType, numberOfClusters, ...) with a required cluster
    affinity for env=prod; alone, just that affinity (to spread into a policy). A new dict every
    call, so a test may change its copy."""
    term = {"labelSelector": {"matchLabels": {"env": "prod"}}}
    required = {"clusterSelectorTerms": [term]}
    affinity = {"clusterAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return {**policy, "affinity": affinity}
