"""The OpenAPI v3 documents kubectl reads before it writes.

`kubectl apply`/`create` validate by default: kubectl fetches `/openapi/v3`, finds the group
version's document, and if the PATCH operation of the kind lists a `fieldValidation` query
parameter it leaves validation to the server (`fieldValidation=Strict`); without the documents it
refuses to apply. `kubectl explain` reads the schemas from the same documents. So devhub publishes
one document per group version with each kind's paths, operations tagged with
`x-kubernetes-group-version-kind`, and the CRD schema under components. A namespaced kind's
operations sit under `namespaces/{namespace}/`, with the all-namespace list beside them; the
documents of the built-in kinds (`api/v1`, Namespace; `apis/scheduling.k8s.io/v1`,
PriorityClass) have the same shape."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Final

from devhub.namespaces import NAMESPACES
from devhub.resources import Resource

__all__ = ["document_key", "group_version_document", "index_document", "schema_name"]

QUERY_PARAMETERS: Final = (
    "dryRun", "fieldManager", "fieldValidation", "force", "pretty",
)
LIST_PARAMETERS: Final = (
    "allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
    "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch",
)
JSON: Final = "application/json"


def document_key(group: str, version: str) -> str:
    """Where a group version's document is, below /openapi/v3: `apis/G/V`, or `api/v1`."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(res: Resource) -> str:
    """io.k8s-style schema name: the group reversed, then version and kind; built-in kinds are
    named as kube-apiserver names them, `io.k8s.api.<core or the group's first label>.v1.<Kind>`
    (`io.k8s.api.scheduling.v1.PriorityClass`)."""
    if res.built_in:
        return f"io.k8s.api.{res.group.split('.')[0] or 'core'}.{res.version}.{res.kind}"
    reversed_group = ".".join(reversed(res.group.split(".")))
    return f"{reversed_group}.{res.version}.{res.kind}"


def _gvk(res: Resource) -> dict[str, str]:
    return {"group": res.group, "version": res.version, "kind": res.kind}


def _params(names: Iterable[str]) -> list[dict[str, Any]]:
    return [
        {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
        for name in names
    ]


def _operation(res: Resource, action: str, params: Iterable[str], *, body: bool) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{schema_name(res)}"}
    op: dict[str, Any] = {
        "operationId": f"{action}{res.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(res),
        "parameters": _params(params),
        "responses": {"200": {"description": "OK", "content": {JSON: {"schema": ref}}}},
    }
    if body:
        media = {JSON: {"schema": ref}}
        if action == "patch":
            kinds = ["application/json-patch+json", "application/merge-patch+json",
                     "application/apply-patch+yaml"]
            if res.built_in:  # built-in kinds also take strategic merge patches
                kinds.insert(2, "application/strategic-merge-patch+json")
            media = {kind: {"schema": {"type": "object"}} for kind in kinds}
        op["requestBody"] = {"content": media, "required": True}
    return op


def group_version_document(
    group: str, version: str, resources: Iterable[Resource]
) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for res in sorted(resources, key=lambda r: r.plural):
        root = f"/{document_key(group, version)}"
        base = f"{root}/{res.plural}"
        name_param = [{"name": "name", "in": "path", "required": True,
                       "schema": {"type": "string"}}]
        if res.namespaced:
            across = _operation(res, "list", LIST_PARAMETERS, body=False)
            across["operationId"] += "ForAllNamespaces"
            paths[base] = {"get": across}  # the only verbs there are list and watch
            base = f"{root}/namespaces/{{namespace}}/{res.plural}"
            name_param = [*name_param, {"name": "namespace", "in": "path", "required": True,
                                        "schema": {"type": "string"}}]
        paths[base] = {
            "get": _operation(res, "list", LIST_PARAMETERS, body=False),
            "post": _operation(res, "post", QUERY_PARAMETERS, body=True),
            "delete": _operation(res, "deletecollection", LIST_PARAMETERS, body=False),
        }
        item_ops = {
            "get": _operation(res, "get", (), body=False),
            "put": _operation(res, "put", QUERY_PARAMETERS, body=True),
            "patch": _operation(res, "patch", QUERY_PARAMETERS, body=True),
            "delete": _operation(res, "delete", ("dryRun", "gracePeriodSeconds",
                                                 "propagationPolicy"), body=False),
            "parameters": name_param,
        }
        if res.namespaced:
            paths[base]["parameters"] = name_param[1:]
        if res is NAMESPACES:
            del paths[base]["delete"]  # namespaces have no deletecollection
        paths[f"{base}/{{name}}"] = item_ops
        if res.status_subresource and res is not NAMESPACES:
            paths[f"{base}/{{name}}/status"] = {
                "get": _operation(res, "get", (), body=False),
                "put": _operation(res, "put", QUERY_PARAMETERS, body=True),
                "patch": _operation(res, "patch", QUERY_PARAMETERS, body=True),
                "parameters": name_param,
            }
        schema = json.loads(json.dumps(res.schema))
        schema["x-kubernetes-group-version-kind"] = [_gvk(res)]
        schemas[schema_name(res)] = schema
    return {
        "openapi": "3.0.0",
        "info": {"title": "devhub", "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def index_document(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`/openapi/v3`: where each group version's document lives, with a content hash."""
    paths = {}
    for key, doc in sorted(documents.items()):
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest.upper()}"}
    return {"paths": paths}
