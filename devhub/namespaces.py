"""The core v1 Namespace kind: what gives the namespaced fleet kinds their meaning.

devhub serves one other core kind, Event (`devhub.events`). Namespaces are here so that
namespaced objects (ResourcePlacement, SchedulingPolicySnapshot, ResourceBinding) can be created
only where kube-apiserver would let them be (its NamespaceLifecycle admission plugin: 404 in a
missing namespace, 403 in a terminating one), and so that deleting a namespace deletes what is
in it, as kube-controller-manager's namespace controller does. The store treats Namespace like
any other kind, described the way a CRD would describe it (schema, printer columns, a status the
main endpoint leaves alone); this module holds what differs: DNS-label names, the create and
update rules of the namespace strategy, the phases, and the namespaces that always exist.

One simplification: `spec.finalizers` is devhub's business, as `kubernetes` is the namespace
controller's. A terminating namespace goes once nothing is left in it and its
`metadata.finalizers` are gone; devhub serves no `/finalize` subresource to remove others."""

from __future__ import annotations

from typing import Any, Final

from devhub import errors
from devhub.errors import ApiError, Cause
from devhub.patch import MergeLists
from devhub.resources import Resource, resource_from_crd
from hub.validation import MAX_LABEL_LENGTH, is_dns1123_label

__all__ = [
    "ACTIVE",
    "HUB_NAMESPACES",
    "MERGE_LISTS",
    "NAMESPACES",
    "SYSTEM_NAMESPACES",
    "TERMINATING",
    "finalized",
    "is_terminating",
    "manifest",
    "mark_terminating",
    "missing",
    "name_error",
    "prepare_for_create",
    "prepare_for_update",
    "terminating",
    "undeletable",
]

ACTIVE: Final = "Active"
TERMINATING: Final = "Terminating"
KUBERNETES_FINALIZER: Final = "kubernetes"
NAME_LABEL: Final = "kubernetes.io/metadata.name"
# Created at start and after a reset; NamespaceLifecycle refuses to delete them.
SYSTEM_NAMESPACES: Final = ("default", "kube-public", "kube-system")
# Also there at start and after a reset, as on every KubeFleet hub (its hub agent runs there),
# but deletable: where KubeFleet keeps its ClusterProfiles and fleet-scheduler, by default, a
# ClusterResourcePlacement's PlacementDecisions (docs/decisions.md).
HUB_NAMESPACES: Final = ("fleet-system",)
LABEL_HINT: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {"finalizers": {"type": "array", "items": {"type": "string"}}},
        },
        "status": {
            "type": "object",
            "properties": {
                "phase": {"type": "string", "enum": [ACTIVE, TERMINATING]},
                "conditions": {
                    "type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
        },
    },
}

# Shaped like a CRD so the one Resource constructor reads it; never served as a CRD.
_DEFINITION: Final[dict[str, Any]] = {
    "spec": {
        "group": "",
        "scope": "Cluster",
        "names": {
            "kind": "Namespace",
            "listKind": "NamespaceList",
            "plural": "namespaces",
            "singular": "namespace",
            "shortNames": ["ns"],
        },
        "versions": [{
            "name": "v1",
            "served": True,
            "storage": True,
            "schema": {"openAPIV3Schema": _SCHEMA},
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Status", "type": "string", "jsonPath": ".status.phase",
                 "description": "The status of the namespace"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ],
        }],
    },
}

# The lists of a Namespace a strategic merge patch merges (patchStrategy "merge" in k8s.io/api
# and apimachinery's ObjectMeta), with their merge keys; every other list is replaced.
MERGE_LISTS: Final[MergeLists] = {
    ("metadata", "finalizers"): None,
    ("metadata", "ownerReferences"): "uid",
    ("status", "conditions"): "type",
}

NAMESPACES: Final[Resource] = resource_from_crd(_DEFINITION, merge_lists=MERGE_LISTS)


def manifest(name: str) -> dict[str, Any]:
    """The body that creates namespace `name`."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def name_error(name: str) -> str | None:
    """Why `name` cannot name a namespace (it must be a DNS-1123 label), or None."""
    if len(name) > MAX_LABEL_LENGTH:
        return f"must be no more than {MAX_LABEL_LENGTH} characters"
    if not is_dns1123_label(name):
        return LABEL_HINT
    return None


def _label_name(obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), NAME_LABEL: meta.get("name", "")}


def prepare_for_create(obj: dict[str, Any]) -> None:
    """A new namespace is Active, carries the `kubernetes` finalizer in its spec and the
    `kubernetes.io/metadata.name` label, whatever the request said."""
    obj["status"] = {"phase": ACTIVE}
    spec = obj.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    finalizers = list(spec.get("finalizers") or ())
    if KUBERNETES_FINALIZER not in finalizers:
        finalizers.append(KUBERNETES_FINALIZER)
    spec["finalizers"] = finalizers
    obj["spec"] = spec
    _label_name(obj)


def prepare_for_update(obj: dict[str, Any], old: dict[str, Any]) -> None:
    """An update changes metadata only: spec (its finalizers) and status stay as stored."""
    if "spec" in old:
        obj["spec"] = old["spec"]
    else:
        obj.pop("spec", None)
    _label_name(obj)


def is_terminating(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp")) or \
        (obj.get("status") or {}).get("phase") == TERMINATING


def mark_terminating(obj: dict[str, Any], now: str) -> dict[str, Any]:
    """`obj` as the first DELETE leaves it: deletionTimestamp set (no grace period: the
    namespace REST delete sets none), phase Terminating."""
    obj["metadata"]["deletionTimestamp"] = now
    obj["status"] = {**(obj.get("status") or {}), "phase": TERMINATING}
    return obj


def finalized(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` once the namespace controller is done with it: no `kubernetes` finalizer left."""
    spec = obj.get("spec") or {}
    rest = [f for f in spec.get("finalizers") or () if f != KUBERNETES_FINALIZER]
    obj["spec"] = {**spec, "finalizers": rest} if rest else {}
    return obj


def missing(namespace: str) -> ApiError:
    """What NamespaceLifecycle answers a create in a namespace that does not exist."""
    return errors.not_found(NAMESPACES.plural, NAMESPACES.group, namespace)


def terminating(res: Resource, name: str, namespace: str) -> ApiError:
    """What NamespaceLifecycle answers a create in a namespace being deleted."""
    return errors.forbidden_object(
        res.plural, res.group, name,
        f"unable to create new content in namespace {namespace} because it is being terminated",
        [Cause("NamespaceTerminating", f"namespace {namespace} is being terminated",
               "metadata.namespace")],
    )


def undeletable(name: str) -> ApiError:
    return errors.forbidden_object(
        NAMESPACES.plural, NAMESPACES.group, name, "this namespace may not be deleted"
    )
