"""The HTTP face of devhub: kube-apiserver's URL shapes, verbs, media types and Status errors.

Everything a client can send is answered with JSON: objects, lists, Tables for `kubectl get`,
watch streams, discovery documents, and `metav1.Status` for every failure. Namespaced kinds live
under `namespaces/NS/` and list or watch across namespaces at their plain path (nothing else
there: 404, as kube-apiserver); the core group at /api serves Namespaces, and
/apis/scheduling.k8s.io serves PriorityClasses: built-in kinds, which typed clients may send in
protobuf and `kubectl apply` patches with strategic merge patches. Middlewares, outermost
first: failures to Status (unexpected exceptions become a 500 Status and a log line, never a
traceback on the wire), then bearer-token authentication. Each resource request is counted in
`Stats` and may be failed or held by an injected `Fault` before it reaches the store.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import yaml
from aiohttp import web
from multidict import MultiMapping

from devhub import errors, openapi, protobuf
from devhub.errors import ApiError
from devhub.faults import Faults, Stats
from devhub.namespaces import NAMESPACES
from devhub.resources import STATUS_VERBS, VERBS, Resource
from devhub.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from devhub.store import (
    APPLY_PATCH,
    BOOKMARK,
    ERROR,
    PATCH_TYPES,
    STRATEGIC_PATCH,
    Entry,
    Event,
    Store,
    TooOldError,
    Watcher,
    dumps,
)
from devhub.tables import table

__all__ = ["SERVER_VERSION", "Api"]

log = logging.getLogger("devhub")

SERVER_VERSION: Final = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-devhub",
    "gitCommit": "devhub",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}
PUBLIC_PATHS: Final = frozenset({"/version", "/healthz", "/livez", "/readyz"})
JSON_TYPE: Final = "application/json"
YAML_TYPES: Final = frozenset({"application/yaml", "application/x-yaml", "text/yaml", APPLY_PATCH})
BODY_TYPES: Final = (JSON_TYPE, "application/yaml")
MAX_WATCH_SECONDS: Final = 1800
HANG_POLL_SECONDS: Final = 0.05
INITIAL_EVENTS_END: Final = "k8s.io/initial-events-end"
FIELD_VALIDATIONS: Final = ("Ignore", "Warn", "Strict")
MIN_NODE_BUDGET: Final = 10_000
# What kube-apiserver serves for Namespaces (no deletecollection); devhub serves no subresource.
NAMESPACE_VERBS: Final = ("create", "delete", "get", "list", "patch", "update", "watch")
# The only verbs of a namespaced kind at its all-namespace path, /apis/G/V/PLURAL.
ALL_NAMESPACE_VERBS: Final = frozenset({"list", "watch"})
# `/namespaces/NS/<these>` are subresources of the Namespace itself, as in apiserver's
# RequestInfo parsing, not a namespaced resource.
NAMESPACE_SUBRESOURCES: Final = frozenset({"status", "finalize"})
NOT_FOUND_MESSAGE: Final = "the server could not find the requested resource"
REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class _YamlLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML without timestamp parsing: Kubernetes keeps timestamps as strings."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_plain_json(value: Any, size: int) -> None:
    """Refuse what YAML (or an overflowing JSON number) can say but JSON objects cannot hold:
    non-string keys, bytes, sets, infinities, self-referencing anchors, and alias bombs (a few
    bytes of YAML aliases that expand to more nodes than the body has bytes)."""
    budget = max(size, MIN_NODE_BUDGET)
    stack: list[tuple[Any, str, frozenset[int]]] = [(value, "", frozenset())]
    while stack:
        budget -= 1
        if budget < 0:
            raise errors.bad_request("the request body expands to too many values (YAML aliases?)")
        node, path, ancestors = stack.pop()
        if isinstance(node, bool) or node is None or isinstance(node, (str, int)):
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                raise errors.bad_request(f"{path or 'the body'}: {node} is not a JSON number")
            continue
        if id(node) in ancestors:
            raise errors.bad_request(f"{path or 'the body'}: a YAML alias refers to itself")
        inside = ancestors | {id(node)}
        if isinstance(node, dict):
            for key, item in node.items():
                if not isinstance(key, str):
                    raise errors.bad_request(
                        f"{path or 'the body'}: key {key!r} is not a string; JSON object keys "
                        "must be strings"
                    )
                stack.append((item, f"{path}.{key}" if path else key, inside))
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{index}]", inside) for index, item in enumerate(node))
        else:
            raise errors.bad_request(
                f"{path or 'the body'}: a YAML {type(node).__name__} has no JSON equivalent"
            )


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", NOT_FOUND_MESSAGE, details={})


def _status_response(exc: ApiError) -> web.Response:
    response = web.Response(
        body=dumps(exc.status()), status=exc.code, content_type=JSON_TYPE
    )
    for key, value in exc.headers.items():
        response.headers[key] = value
    return response


def _json_response(
    body: bytes | Mapping[str, Any], status: int = 200, warnings: list[str] | None = None
) -> web.Response:
    data = body if isinstance(body, bytes) else dumps(body)
    response = web.Response(body=data, status=status, content_type=JSON_TYPE)
    for warning in warnings or ():
        response.headers.add("Warning", f'299 - "{_escape_warning(warning)}"')
    return response


def _escape_warning(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _flag(query: MultiMapping[str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _int_param(query: MultiMapping[str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f"{name}: invalid value {raw!r}: must be an integer") from None


def _wants_table(accept: str) -> bool:
    """True if the first media type this server can produce in `accept` is a v1 Table."""
    for part in accept.split(","):
        pieces = [piece.strip() for piece in part.split(";")]
        mime = pieces[0].lower()
        params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
        if mime not in (JSON_TYPE, "*/*", "application/*"):
            continue  # protobuf and the like: devhub speaks JSON only
        wanted = params.get("as")
        if wanted == "Table" and params.get("g") == "meta.k8s.io":
            return params.get("v", "v1") in ("v1", "v1beta1")
        if wanted is None:
            return False
    return False


class Api:
    """The aiohttp application of one DevHub, serving `store`."""

    def __init__(
        self,
        store: Store,
        *,
        token: str,
        faults: Faults,
        stats: Stats,
        bookmark_interval: float,
        server_address: Callable[[], str],
    ) -> None:
        self.store = store
        self.token = token
        self.faults = faults
        self.stats = stats
        self.bookmark_interval = bookmark_interval
        self.closing = False
        self._server_address = server_address
        # Kinds by version and plural: the core (legacy) group at /api, the others at /apis.
        self._core: dict[str, dict[str, Resource]] = {}
        self._by_group: dict[str, dict[str, dict[str, Resource]]] = {}
        for res in store.resources.values():
            versions = self._by_group.setdefault(res.group, {}) if res.group else self._core
            versions.setdefault(res.version, {})[res.plural] = res
        self._openapi = {
            openapi.document_key(group, version): dumps(
                openapi.group_version_document(group, version, by_plural.values())
            )
            for group, versions in (("", self._core), *self._by_group.items())
            for version, by_plural in versions.items()
        }
        self._openapi_index = dumps(openapi.index_document(
            {key: json.loads(doc) for key, doc in self._openapi.items()}
        ))

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._errors_middleware, self._auth_middleware],
            client_max_size=3 * 1024 * 1024,
        )
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    # --- middlewares -----------------------------------------------------------------------

    @web.middleware
    async def _errors_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return _status_response(exc)
        except web.HTTPException as exc:
            reason = REASONS.get(exc.status, "Unknown")
            return _status_response(ApiError(exc.status, reason, exc.text or exc.reason))
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("devhub: unexpected error serving %s %s", request.method, request.path)
            return _status_response(errors.internal("unexpected server error (see devhub log)"))

    @web.middleware
    async def _auth_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        if not header and request.path in PUBLIC_PATHS:
            return await handler(request)  # what system:public-info-viewer may see
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode(), self.token.encode()
        ):
            raise errors.unauthorized()
        return await handler(request)

    # --- routing ---------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [part for part in request.path.split("/") if part]
        if request.method not in ("GET", "HEAD") and (not parts or parts[0] not in ("api", "apis")):
            raise errors.method_not_allowed(request.method, request.path)
        if not parts:
            return _json_response({"paths": ["/api", "/apis", "/healthz", "/livez",
                                              "/openapi/v3", "/readyz", "/version"]})
        head = parts[0]
        if len(parts) == 1 and head in ("healthz", "livez", "readyz"):
            return web.Response(text="ok", content_type="text/plain")
        if parts == ["version"]:
            return _json_response(SERVER_VERSION)
        if head == "api":
            return await self._api(request, parts[1:])
        if parts[:2] == ["openapi", "v3"]:
            key = "/".join(parts[2:])
            if not key:
                return _json_response(self._openapi_index)
            if key in self._openapi:
                return _json_response(self._openapi[key])
            raise _not_found()
        if head == "apis":
            return await self._apis(request, parts[1:])
        raise _not_found()

    async def _api(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        """The core (legacy) group: /api, /api/v1 and its kinds, Namespace and Event."""
        if len(rest) < 2 and request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed(request.method, request.path)
        if not rest:
            return _json_response({
                "kind": "APIVersions",
                "versions": sorted(self._core),
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self._server_address()}
                ],
            })
        version = rest[0]
        if version not in self._core:
            raise _not_found()
        if len(rest) == 1:
            return _json_response(self._resource_list(version, self._core[version]))
        return await self._route(request, self._core[version], rest[1:])

    def _group_doc(self, group: str) -> dict[str, Any]:
        versions = [
            {"groupVersion": f"{group}/{version}", "version": version}
            for version in sorted(self._by_group[group])
        ]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    @staticmethod
    def _resource_list(group_version: str, by_plural: Mapping[str, Resource]) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for plural, res in sorted(by_plural.items()):
            entry: dict[str, Any] = {
                "name": plural,
                "singularName": res.singular,
                "namespaced": res.namespaced,
                "kind": res.kind,
                "verbs": list(NAMESPACE_VERBS if res is NAMESPACES else VERBS),
            }
            if res.short_names:
                entry["shortNames"] = list(res.short_names)
            if res.categories:
                entry["categories"] = list(res.categories)
            resources.append(entry)
            if res.status_subresource and res is not NAMESPACES:
                resources.append({
                    "name": f"{plural}/status",
                    "singularName": "",
                    "namespaced": res.namespaced,
                    "kind": res.kind,
                    "verbs": list(STATUS_VERBS),
                })
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }

    async def _apis(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        if not rest:
            if request.method not in ("GET", "HEAD"):
                raise errors.method_not_allowed(request.method, request.path)
            groups = [self._group_doc(group) for group in sorted(self._by_group)]
            return _json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        group = rest[0]
        if group not in self._by_group:
            raise _not_found()
        if len(rest) == 1:
            return _json_response({"kind": "APIGroup", "apiVersion": "v1",
                                   **self._group_doc(group)})
        version = rest[1]
        if version not in self._by_group[group]:
            raise _not_found()
        if len(rest) == 2:
            return _json_response(
                self._resource_list(f"{group}/{version}", self._by_group[group][version])
            )
        return await self._route(request, self._by_group[group][version], rest[2:])

    async def _route(
        self, request: web.Request, by_plural: Mapping[str, Resource], tail: list[str]
    ) -> web.StreamResponse:
        """Resource paths below a group version, as apiserver's RequestInfo reads them:
        `[watch/][namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]`."""
        watch_path = tail[0] == "watch"
        if watch_path:
            tail = tail[1:]
        namespace = None
        if len(tail) > 2 and tail[0] == "namespaces" and tail[2] not in NAMESPACE_SUBRESOURCES:
            namespace, tail = tail[1], tail[2:]
        if not tail or tail[0] not in by_plural:
            raise _not_found()
        res = by_plural[tail[0]]
        name = tail[1] if len(tail) > 1 else None
        subresource = tail[2] if len(tail) > 2 else None
        if len(tail) > 3 or (subresource is not None and (
                subresource != "status" or not res.status_subresource or res is NAMESPACES)):
            raise _not_found()
        if namespace is not None and not res.namespaced:
            raise _not_found()  # as kube-apiserver answers a cluster-scoped kind in a namespace
        return await self._resource(request, res, name, subresource, watch_path, namespace)

    # --- resources -------------------------------------------------------------------------

    @staticmethod
    def _verb(method: str, name: str | None, watch: bool) -> str | None:
        if watch and method == "GET":
            return "watch"
        collection = {"GET": "list", "POST": "create", "DELETE": "deletecollection"}
        item = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
        return (item if name else collection).get(method)

    async def _resource(
        self,
        request: web.Request,
        res: Resource,
        name: str | None,
        subresource: str | None,
        watch_path: bool,
        namespace: str | None,
    ) -> web.StreamResponse:
        query = request.query
        method = "GET" if request.method == "HEAD" else request.method
        watch = watch_path or _flag(query, "watch")
        verb = self._verb(method, name, watch)
        if res.namespaced and namespace is None and verb not in ALL_NAMESPACE_VERBS:
            # The crdHandler hands these to its delegate, which finds nothing: 404.
            raise _not_found()
        if verb is None or (subresource and verb not in STATUS_VERBS) or \
                (res is NAMESPACES and verb not in NAMESPACE_VERBS):
            raise errors.method_not_allowed(request.method, request.path)
        resource_name = f"{res.plural}/{subresource}" if subresource else res.plural
        self.stats.record(verb, resource_name)
        await self._maybe_fail(request, verb, resource_name)
        handler = getattr(self, f"_{verb}")
        response: web.StreamResponse = await handler(request, res, name, subresource, namespace)
        return response

    async def _maybe_fail(self, request: web.Request, verb: str, resource: str) -> None:
        fault = self.faults.match(verb, resource)
        if fault is None:
            return
        if fault.hang:
            while not fault.released and not self.closing:
                transport = request.transport
                if transport is None or transport.is_closing():
                    raise errors.unavailable("client went away while the request was held")
                await asyncio.sleep(HANG_POLL_SECONDS)
            return  # released: the request goes on as if nothing happened
        if fault.status == 429:
            raise errors.too_many_requests(fault.retry_after)
        if fault.status == 409:
            raise errors.conflict(
                resource.split("/")[0], "", request.path.rsplit("/", 1)[-1],
                "the object has been modified; please apply your changes to the latest version "
                "and try again (devhub fault injection)",
            )
        if fault.status == 403:
            raise errors.forbidden(
                f'{resource} is forbidden: User "devhub" cannot {verb} resource "{resource}" '
                "(devhub fault injection)"
            )
        if fault.status == 503:
            raise errors.unavailable("the server is currently unable to handle the request "
                                     "(devhub fault injection)")
        raise errors.internal("devhub fault injection")

    @staticmethod
    def _selectors(query: MultiMapping[str]) -> tuple[LabelSelector, FieldSelector]:
        try:
            return (
                parse_label_selector(query.get("labelSelector")),
                parse_field_selector(query.get("fieldSelector")),
            )
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None

    @staticmethod
    def _dry_run(query: MultiMapping[str]) -> bool:
        values = query.getall("dryRun", [])
        for value in values:
            if value != "All":
                raise errors.bad_request(
                    f'dryRun: Unsupported value: "{value}": supported values: "All"'
                )
        return bool(values)

    @staticmethod
    def _field_validation(query: MultiMapping[str]) -> str:
        value = query.get("fieldValidation", "Warn") or "Warn"
        if value not in FIELD_VALIDATIONS:
            raise errors.bad_request(
                f'fieldValidation: Unsupported value: "{value}": supported values: '
                + ", ".join(f'"{v}"' for v in FIELD_VALIDATIONS)
            )
        return value

    @staticmethod
    async def _read_body(
        request: web.Request, *, allow_empty: bool = False, res: Resource | None = None
    ) -> Any:
        """The body as JSON values; a built-in kind (`res`) may also come in protobuf."""
        raw = await request.read()
        if not raw.strip():
            if allow_empty:
                return None
            raise errors.bad_request("the request body is empty; send a JSON or YAML object")
        content_type = request.content_type.lower()
        if content_type == protobuf.PROTOBUF and res is not None and res.built_in:
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise errors.bad_request(f"the request body is not valid protobuf: {exc}") from None
        try:
            if content_type in YAML_TYPES:
                body = yaml.load(raw.decode("utf-8"), Loader=_YamlLoader)
            elif content_type in (JSON_TYPE, "application/octet-stream", "text/plain") or \
                    content_type.endswith("+json"):
                body = json.loads(raw, parse_constant=_reject_constant)
            else:
                raise errors.unsupported_media_type(content_type, BODY_TYPES)
        except (ValueError, yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
            kind = "YAML" if content_type in YAML_TYPES else "JSON"
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise errors.bad_request(
                f"the request body is not valid {kind}: {detail}"
            ) from None
        _check_plain_json(body, len(raw))
        return body

    def _object_response(
        self,
        request: web.Request,
        res: Resource,
        entry: Entry,
        status: int = 200,
        warnings: list[str] | None = None,
    ) -> web.Response:
        if _wants_table(request.headers.get("Accept", "")):
            obj = entry.obj  # parsed only for a table; the object itself is served as stored
            doc = table(
                res, [obj], resource_version=str(obj["metadata"].get("resourceVersion", "")),
                include_object=request.query.get("includeObject", "Metadata"),
            )
            return _json_response(doc, status, warnings)
        return _json_response(entry.raw, status, warnings)

    # --- verbs -----------------------------------------------------------------------------

    async def _get(
        self, request: web.Request, res: Resource, name: str, subresource: str | None,
        namespace: str | None,
    ) -> web.StreamResponse:
        entry = self.store.get(res, name, namespace=namespace)
        return self._object_response(request, res, entry)

    async def _list(
        self, request: web.Request, res: Resource, name: None, subresource: None,
        namespace: str | None,
    ) -> web.StreamResponse:
        query = request.query
        labels, fields = self._selectors(query)
        limit = _int_param(query, "limit")
        if limit is not None and limit <= 0:
            limit = None
        result = self.store.list_entries(
            res, labels, fields, limit=limit, continue_token=query.get("continue") or None,
            resource_version=query.get("resourceVersion"),
            match=query.get("resourceVersionMatch"), namespace=namespace,
        )
        if _wants_table(request.headers.get("Accept", "")):
            doc = table(
                res,
                [entry.obj for entry in result.entries],
                resource_version=str(result.resource_version),
                include_object=query.get("includeObject", "Metadata"),
                continue_token=result.continue_token,
                remaining=result.remaining,
            )
            return _json_response(doc)
        metadata: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            metadata["continue"] = result.continue_token
        if result.remaining is not None:
            metadata["remainingItemCount"] = result.remaining
        body = b"".join((
            b'{"apiVersion":', json.dumps(res.api_version).encode(),
            b',"items":[', b",".join(entry.raw for entry in result.entries),
            b'],"kind":', json.dumps(res.list_kind).encode(),
            b',"metadata":', dumps(metadata), b"}",
        ))
        return _json_response(body)

    async def _create(
        self, request: web.Request, res: Resource, name: None, subresource: None,
        namespace: str | None,
    ) -> web.StreamResponse:
        body = await self._read_body(request, res=res)
        entry, warnings = self.store.create(
            res, body, namespace=namespace, dry_run=self._dry_run(request.query),
            field_validation=self._field_validation(request.query),
        )
        return self._object_response(request, res, entry, 201, warnings)

    async def _update(
        self, request: web.Request, res: Resource, name: str, subresource: str | None,
        namespace: str | None,
    ) -> web.StreamResponse:
        body = await self._read_body(request, res=res)
        entry, warnings = self.store.replace(
            res, name, body, subresource=subresource, dry_run=self._dry_run(request.query),
            field_validation=self._field_validation(request.query), namespace=namespace,
        )
        return self._object_response(request, res, entry, 200, warnings)

    async def _patch(
        self, request: web.Request, res: Resource, name: str, subresource: str | None,
        namespace: str | None,
    ) -> web.StreamResponse:
        content_type = request.content_type.lower()
        # Strategic merge patch is for built-in kinds only, as on kube-apiserver.
        strategic = content_type == STRATEGIC_PATCH and res.built_in
        if content_type not in PATCH_TYPES and not strategic:
            raise errors.unsupported_media_type(content_type, PATCH_TYPES)
        patch = await self._read_body(request)
        query = request.query
        entry, warnings, created = self.store.patch(
            res, name, content_type, patch, subresource=subresource,
            dry_run=self._dry_run(query),
            field_validation=self._field_validation(query),
            field_manager=query.get("fieldManager"), namespace=namespace,
        )
        return self._object_response(
            request, res, entry, 201 if created else 200, warnings
        )

    async def _delete_options(self, request: web.Request) -> Mapping[str, Any]:
        body = await self._read_body(request, allow_empty=True)
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a DeleteOptions object")
        preconditions = body.get("preconditions") or {}
        if not isinstance(preconditions, dict):
            raise errors.bad_request("DeleteOptions.preconditions must be an object")
        return body

    async def _delete(
        self, request: web.Request, res: Resource, name: str, subresource: None,
        namespace: str | None,
    ) -> web.StreamResponse:
        options = await self._delete_options(request)
        dry_run = self._dry_run(request.query) or options.get("dryRun") == ["All"]
        entry, gone = self.store.delete(
            res, name, preconditions=options.get("preconditions"), dry_run=dry_run,
            namespace=namespace,
        )
        # 202 while finalizers hold the object, as the API server answers a pending deletion;
        # a namespace's REST delete answers 200 with the Terminating namespace.
        pending = not gone and res is not NAMESPACES
        return self._object_response(request, res, entry, 202 if pending else 200)

    async def _deletecollection(
        self, request: web.Request, res: Resource, name: None, subresource: None,
        namespace: str | None,
    ) -> web.StreamResponse:
        await self._delete_options(request)
        labels, fields = self._selectors(request.query)
        deleted = self.store.delete_collection(
            res, labels, fields, dry_run=self._dry_run(request.query), namespace=namespace
        )
        body = b"".join((
            b'{"apiVersion":', json.dumps(res.api_version).encode(),
            b',"items":[', b",".join(entry.raw for entry in deleted),
            b'],"kind":', json.dumps(res.list_kind).encode(),
            b',"metadata":', dumps({"resourceVersion": str(self.store.rv)}), b"}",
        ))
        return _json_response(body)

    # --- watch -----------------------------------------------------------------------------

    async def _watch(
        self, request: web.Request, res: Resource, name: str | None, subresource: None,
        namespace: str | None,
    ) -> web.StreamResponse:
        query = request.query
        labels, fields = self._selectors(query)
        if name is not None:
            fields = FieldSelector((*fields.terms, ("metadata.name", True, name)))
        timeout = _int_param(query, "timeoutSeconds")
        if timeout is None or timeout <= 0 or timeout > MAX_WATCH_SECONDS:
            timeout = MAX_WATCH_SECONDS
        bookmarks = _flag(query, "allowWatchBookmarks")
        send_initial = _flag(query, "sendInitialEvents")
        as_table = _wants_table(request.headers.get("Accept", ""))
        include_object = query.get("includeObject", "Metadata")
        too_old: TooOldError | None = None
        watcher: Watcher | None = None
        initial: list[tuple[str, Event]] = []
        try:
            initial, watcher = self.store.watch(
                res, labels, fields, query.get("resourceVersion"),
                send_initial_events=send_initial, namespace=namespace,
            )
        except TooOldError as exc:
            too_old = exc
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON_TYPE})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            if too_old is not None or watcher is None:
                status = errors.ApiError(410, "Expired", str(too_old)).status()
                await response.write(_line(ERROR, dumps(status)))
                return response
            encode = self._encoder(res, as_table, include_object)
            chunk = b"".join(encode(kind, event) for kind, event in initial)
            if send_initial:
                chunk += _line(BOOKMARK, self._bookmark(res, initial_end=True))
            if chunk:
                await response.write(chunk)
            await self._stream(response, res, watcher, encode, timeout, bookmarks)
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away; nothing to tell it
        finally:
            if watcher is not None:
                self.store.unwatch(watcher)
        return response

    def _bookmark(self, res: Resource, *, initial_end: bool = False) -> bytes:
        metadata: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if initial_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        return dumps({"kind": res.kind, "apiVersion": res.api_version, "metadata": metadata})

    def _encoder(
        self, res: Resource, as_table: bool, include_object: str
    ) -> Callable[[str, Event], bytes]:
        if not as_table:
            return lambda kind, event: _line(kind, event.raw)
        first = [True]

        def encode(kind: str, event: Event) -> bytes:
            doc = table(res, [event.obj], resource_version=str(event.rv),
                        include_object=include_object, with_columns=first[0])
            first[0] = False
            return _line(kind, dumps(doc))

        return encode

    async def _stream(
        self,
        response: web.StreamResponse,
        res: Resource,
        watcher: Watcher,
        encode: Callable[[str, Event], bytes],
        timeout: float,
        bookmarks: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        while True:
            if watcher.pending:
                batch = []
                while watcher.pending:
                    kind, event = watcher.pending.popleft()
                    batch.append(encode(kind, event))
                await response.write(b"".join(batch))
                continue
            if watcher.closed or self.closing:
                return
            now = loop.time()
            if now >= deadline:
                return
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(next_bookmark - now, 0.0))
            watcher.wakeup.clear()
            if watcher.pending or watcher.closed:
                continue
            try:
                await asyncio.wait_for(watcher.wakeup.wait(), wait)
            except TimeoutError:
                if bookmarks and loop.time() >= next_bookmark:
                    await response.write(_line(BOOKMARK, self._bookmark(res)))
                    next_bookmark = loop.time() + self.bookmark_interval


def _line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"

