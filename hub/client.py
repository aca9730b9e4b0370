"""HubClient: typed reads, writes and watches of the fleet kinds over the hub's HTTP API.

The only module that imports `kubernetes`. It borrows the official client's configuration
loading (kubeconfig, in-cluster, exec plugins, client certificates, token refresh) and its
connection pool, and nothing else: our kinds go out as `obj.to_wire()` and come back through
`Kind.from_wire(dict)`, never through the generated models, so fields we do not model survive
a read-modify-write untouched.

Two constraints shaped it:

- Temporal owns retries. Client-side retries are off (a retried POST whose first attempt landed
  would duplicate a write behind the activity's back) and every request has a connect and read
  timeout, so a hanging server becomes a `HubUnavailableError` the activity's RetryPolicy
  handles. Failures leave as the typed errors of `hub.errors`, chained to the original.
- The scheduler reads whole fleets. A list page is validated straight from the response bytes
  in one pass, with the cyclic GC held off meanwhile (`_gc_paused` says why): 5,000
  MemberClusters with full status (6.7 MB) load in about a quarter of a second.

Watching follows kube-apiserver's contract: a watch from resourceVersion R delivers every
change after R, in order, or fails with 410 Gone when R is too old. `list_then_watch` builds on
that so a caller never misses an event; its docstring says how."""

from __future__ import annotations

import builtins
import functools
import gc
import http.client
import json
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Generic, Literal, Self, TypeVar
from urllib.parse import quote

import kubernetes.client
import kubernetes.config
import urllib3
from kubernetes.client.exceptions import OpenApiException
from kubernetes.config.config_exception import ConfigException
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hub.errors import (
    GoneError,
    HubConfigError,
    HubError,
    HubUnavailableError,
    MalformedObjectError,
    error_for_status,
    parse_retry_after,
)
from hub.types.meta import FleetModel, HubObject

__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_WATCH_SECONDS",
    "READ_TIMEOUT",
    "Bookmark",
    "EventType",
    "HubClient",
    "ListResult",
    "Resync",
    "Timeout",
    "WatchEvent",
]

T = TypeVar("T", bound=HubObject)

# (connect, read) seconds, or one number for both. The read timeout bounds each wait for bytes,
# so a server that accepts the connection and then says nothing fails within it.
Timeout = float | tuple[float, float]
CONNECT_TIMEOUT: Final = 5.0
READ_TIMEOUT: Final = 20.0
# Connections kept per hub: enough for a worker's activity slots times their write fan-out.
CONNECTION_POOL_SIZE: Final = 64
# The kubeconfig loader's token refresh (an exec plugin's or OIDC token near its expiry, the
# in-cluster token file re-read each minute) is asked at most this often, and after a 401. The
# loader refreshes five minutes before expiry, so a token is never sent stale for want of asking.
TOKEN_CHECK_SECONDS = 10.0
# How long the server keeps one watch stream open before ending it cleanly.
DEFAULT_WATCH_SECONDS: Final = 300
# Extra read time beyond the server's watch timeout before a silent stream counts as hung.
WATCH_READ_SLACK: Final = 10.0
# An expired `continue` token restarts a paginated list this many times before GoneError.
LIST_RESTARTS: Final = 1
# list_then_watch gives up after this many streams in a row that broke without an event.
MAX_BROKEN_STREAMS: Final = 3
# A stream that ends cleanly this fast with nothing in it is re-opened after a short pause,
# so a misbehaving server cannot turn list_then_watch into a busy loop.
QUICK_STREAM_SECONDS: Final = 0.5
QUICK_STREAM_PAUSE: Final = 0.5
STREAM_READ_BYTES: Final = 64 * 1024
USER_AGENT: Final = "fleet-scheduler/hub-client"
AUTH_SETTINGS: Final = ["BearerToken"]

JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
_OBJECT_EVENTS: Final = frozenset({"ADDED", "MODIFIED", "DELETED"})
Propagation = Literal["Foreground", "Background", "Orphan"]
Selector = str | Mapping[str, str]
_Query = list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class ListResult(Generic[T]):
    """Every object that matched, and the resourceVersion to watch from for what comes next."""

    items: list[T]
    resource_version: str

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[T]):
    """One change: ADDED, MODIFIED or DELETED (`object` is then the last state seen)."""

    type: EventType
    object: T
    resource_version: str


@dataclass(frozen=True, slots=True)
class Bookmark:
    """The server's note that the stream has reached `resource_version`; no object changed."""

    resource_version: str
    type: Literal["BOOKMARK"] = "BOOKMARK"


@dataclass(frozen=True, slots=True)
class Resync(Generic[T]):
    """The complete current set of matching objects at `resource_version`.

    Yielded by `list_then_watch` first, and again whenever it had to list anew. A consumer
    replaces its whole view with `objects`: anything it knew that is absent was deleted while
    nobody was watching."""

    objects: list[T]
    resource_version: str
    type: Literal["RESYNC"] = "RESYNC"


def _timeout_pair(timeout: Timeout) -> tuple[float, float]:
    if isinstance(timeout, tuple):
        connect, read = timeout
    else:
        connect = read = timeout
    if connect <= 0 or read <= 0:
        raise ValueError(f"timeouts must be positive seconds, got {timeout!r}")
    return float(connect), float(read)


def _selector(selector: Selector | None) -> str | None:
    if selector is None or isinstance(selector, str):
        return selector
    return ",".join(f"{key}={value}" for key, value in selector.items())


def _object_path(
    kind: type[HubObject], name: str, subresource: str | None = None, namespace: str | None = None
) -> str:
    if not name:
        raise ValueError(f"a {kind.KIND} name is required")
    if kind.NAMESPACED and not namespace:
        raise ValueError(f"{kind.KIND} {name!r} is namespaced: a namespace is required")
    path = f"{kind.api_path(namespace)}/{quote(name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


def _versioned(patch: Mapping[str, Any], resource_version: str | None) -> dict[str, Any]:
    """A merge patch's body, carrying `resource_version` in its metadata when one is given."""
    body = dict(patch)
    if resource_version is not None:
        metadata = body.get("metadata")
        body["metadata"] = {
            **(metadata if isinstance(metadata, Mapping) else {}),
            "resourceVersion": resource_version,
        }
    return body


def _guard_resource_version(obj: HubObject, verb: str) -> None:
    if not obj.metadata.resource_version:
        raise ValueError(
            f"{verb} of {obj.KIND} {obj.name!r} needs metadata.resourceVersion: read the object "
            "first (optimistic concurrency), or use patch() to write only your fields"
        )


@contextmanager
def _translated(doing: str) -> Iterator[None]:
    """Turn transport and client-library exceptions into hub errors, chained."""
    try:
        yield
    except HubError:
        raise
    except urllib3.exceptions.SSLError as exc:
        # As the REST layer reported it (ApiException(status=0), below): an untrusted
        # certificate is configuration, anything else the hub's trouble.
        text = f"{type(exc).__name__}\n{exc}"
        if "CERTIFICATE_VERIFY_FAILED" in text:
            raise HubConfigError(f"hub certificate not trusted while {doing}: {text}") from exc
        raise HubUnavailableError(f"hub request failed while {doing}: {text}") from exc
    except urllib3.exceptions.HTTPError as exc:
        raise HubUnavailableError(f"hub unreachable while {doing}: {exc}") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise HubUnavailableError(f"hub unreachable while {doing}: {exc!r}") from exc
    except ConfigException as exc:
        raise HubConfigError(f"cannot authenticate to the hub: {exc}") from exc
    except OpenApiException as exc:
        # The REST layer reports TLS failures as ApiException(status=0).
        text = str(exc)
        if "CERTIFICATE_VERIFY_FAILED" in text:
            raise HubConfigError(f"hub certificate not trusted while {doing}: {text}") from exc
        raise HubUnavailableError(f"hub request failed while {doing}: {text}") from exc


def _decode(data: bytes, doing: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise MalformedObjectError(f"hub sent invalid JSON while {doing}: {data[:200]!r}") from exc


def _load(kind: type[T], doc: Any) -> T:
    if not isinstance(doc, dict):
        raise MalformedObjectError(f"expected a {kind.KIND} object, got {type(doc).__name__}")
    try:
        return kind.from_wire(doc)
    except ValidationError as exc:
        name = (doc.get("metadata") or {}).get("name", "?")
        raise MalformedObjectError(f"{kind.KIND} {name!r} does not match our model: {exc}") from exc


def _status_error(response: urllib3.BaseHTTPResponse, data: bytes) -> HubError:
    body: Mapping[str, Any] | None = None
    try:
        decoded = json.loads(data) if data else None
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        body = decoded
    snippet = data[:200].decode("utf-8", "replace").strip()
    return error_for_status(
        response.status,
        body,
        retry_after=parse_retry_after(response.headers.get("Retry-After")),
        fallback_message=snippet or str(response.reason or ""),
    )


def _lines(response: urllib3.BaseHTTPResponse, doing: str) -> Iterator[bytes]:
    """Newline-delimited records from a streaming response, as they arrive."""
    partial: list[bytes] = []  # pieces of a record longer than one read
    while True:
        with _translated(doing):
            chunk = response.read1(STREAM_READ_BYTES)
        if not chunk:
            break
        if b"\n" not in chunk:
            partial.append(chunk)
            continue
        first, *rest = chunk.split(b"\n")
        complete = [b"".join((*partial, first)), *rest[:-1]]
        partial = [rest[-1]] if rest[-1] else []
        yield from (line for line in complete if line.strip())
    tail = b"".join(partial)
    if tail.strip():
        yield tail


class _ListMeta(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    resource_version: str = Field(default="", alias="resourceVersion")
    continue_: str = Field(default="", alias="continue")


class _ListPage(BaseModel, Generic[T]):
    """One page of a list response, validated straight from the response bytes."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    items: builtins.list[T] | None = None
    metadata: _ListMeta = _ListMeta()


@functools.cache
def _page_model(kind: type[HubObject]) -> type[_ListPage[Any]]:
    page: type[_ListPage[Any]] = _ListPage[kind]  # type: ignore[valid-type]
    return page


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Hold off CPython's cyclic garbage collector while a large response becomes objects.

    Building thousands of models allocates millions of containers, and the collector's
    allocation-count thresholds then trigger repeated traversals of the whole heap: on CPython
    3.11 that triples the cost of reading 5,000 MemberClusters. Reference counting still frees
    memory meanwhile; the collector resumes afterwards. Nested and concurrent pauses share one
    count, so the collector is re-enabled only by the last one out, and only if it was on."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


# Told about each object that `list` or `list_then_watch` leaves out because it does not match
# our model (when the caller asked for that rather than a MalformedObjectError).
OnMalformed = Callable[[MalformedObjectError], None]


def _parse_page(
    kind: type[T], data: bytes, on_malformed: OnMalformed | None = None
) -> _ListPage[T]:
    """A list page, parsed and validated in one pass over the bytes (no intermediate dicts).

    Equivalent to `kind.from_wire` on each item, which is plain validation; a kind that
    overrides `from_wire` takes the dict path so its override runs. With `on_malformed`, a page
    that fails is parsed again item by item, and items that do not match are reported and left
    out (the fast path stays the common one)."""
    try:
        with _gc_paused():
            if getattr(kind.from_wire, "__func__", None) is _PLAIN_FROM_WIRE:
                page: _ListPage[T] = _page_model(kind).model_validate_json(data)
                return page
            doc = json.loads(data)
            if not isinstance(doc, dict) or not isinstance(doc.get("items") or [], list):
                raise MalformedObjectError(f"expected a {kind.KIND}List, got {data[:200]!r}")
            meta = _ListMeta.model_validate(doc.get("metadata") or {})
            items = [_load(kind, item) for item in doc.get("items") or ()]
            return _ListPage.model_construct(items=items, metadata=meta)
    except ValidationError:
        # Parse again item by item, so the error names the object that does not match (or the
        # object is left out); only a failing page pays for it.
        return _parse_page_by_item(kind, data, on_malformed or _raise)
    except ValueError as exc:  # JSON errors
        raise MalformedObjectError(
            f"a {kind.KIND} list page does not match our model: {exc}"
        ) from exc
    except MalformedObjectError:
        if on_malformed is None:
            raise
        return _parse_page_by_item(kind, data, on_malformed)


def _raise(error: MalformedObjectError) -> None:
    raise error


def _parse_page_by_item(kind: type[T], data: bytes, on_malformed: OnMalformed) -> _ListPage[T]:
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or not isinstance(doc.get("items") or [], list):
            raise MalformedObjectError(f"expected a {kind.KIND}List, got {data[:200]!r}")
        meta = _ListMeta.model_validate(doc.get("metadata") or {})
    except ValueError as exc:  # the page itself, not one of its items
        raise MalformedObjectError(
            f"a {kind.KIND} list page does not match our model: {exc}"
        ) from exc
    items: list[T] = []
    for item in doc.get("items") or ():
        try:
            items.append(_load(kind, item))
        except MalformedObjectError as exc:
            on_malformed(exc)
    return _ListPage.model_construct(items=items, metadata=meta)


# from_wire as FleetModel defines it: plain validation, which the JSON fast path reproduces.
_PLAIN_FROM_WIRE: Final = FleetModel.__dict__["from_wire"].__func__


class _AuthRefresh:
    """The loader's `refresh_api_key_hook`, asked when a token can have changed, not per request.

    The official hook runs on every request: it re-checks expiry, re-assigns the host (which
    reads the proxy environment) and re-sets the token, about a sixth of a binding patch's CPU.
    The loader alone knows when its token expires (exec plugin, OIDC, GCP) or when to re-read
    its file (in-cluster); this asks it every TOKEN_CHECK_SECONDS and on the request after a
    401, and lets it decide as before."""

    def __init__(self, configuration: kubernetes.client.Configuration) -> None:
        self._hook: Callable[[kubernetes.client.Configuration], None] | None = (
            configuration.refresh_api_key_hook
        )
        self._lock = threading.Lock()
        self._asked = time.monotonic()  # the loader has just run
        if self._hook is not None:
            configuration.refresh_api_key_hook = self

    def __call__(self, configuration: kubernetes.client.Configuration) -> None:
        if time.monotonic() - self._asked < TOKEN_CHECK_SECONDS or self._hook is None:
            return
        with self._lock:
            if time.monotonic() - self._asked < TOKEN_CHECK_SECONDS:
                return
            self._hook(configuration)
            # The loader re-installs its own hook each time it runs; keep ours in front.
            self._hook = configuration.refresh_api_key_hook
            configuration.refresh_api_key_hook = self  # type: ignore[assignment]
            self._asked = time.monotonic()

    def expire(self) -> None:
        self._asked = float("-inf")


class HubClient:
    """A blocking client of one hub API server, safe to share between threads.

    Every method either returns what it says or raises a `hub.errors.HubError`; none retries.
    Build one with `from_kubeconfig`, `in_cluster`, `from_env` or `from_url`, and `close()` it
    (or use it as a context manager) when done."""

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        *,
        timeout: Timeout = (CONNECT_TIMEOUT, READ_TIMEOUT),
    ) -> None:
        self._connect_timeout, self._read_timeout = _timeout_pair(timeout)
        # Temporal owns retries: never resend a request behind the caller's back.
        configuration.retries = False
        # One worker runs many activities at once, each writing several bindings in parallel;
        # the client's default pool (5 per CPU) would churn connections under that load.
        configuration.connection_pool_maxsize = max(
            configuration.connection_pool_maxsize or 0, CONNECTION_POOL_SIZE
        )
        # The environment's proxy, looked up once: the pool below is built with it, and a host
        # re-assigned by a token refresh would otherwise read the whole environment again.
        configuration.proxy = configuration.proxy
        self._auth = _AuthRefresh(configuration)
        self._api = kubernetes.client.ApiClient(configuration)
        self._api.user_agent = USER_AGENT
        self._host: str = configuration.host
        # The official client's pool (with its proxy, TLS settings and client certificate);
        # `_send` sends on it directly.
        self._pool: urllib3.PoolManager = self._api.rest_client.pool_manager

    # --- construction ---------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str],
        context: str | None = None,
        *,
        timeout: Timeout = (CONNECT_TIMEOUT, READ_TIMEOUT),
    ) -> Self:
        """Connect as the kubeconfig at `path` says (its current context, or `context`)."""
        configuration = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=os.fspath(path),
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except Exception as exc:  # YAML, I/O, schema, exec plugin: all mean "unusable config"
            raise HubConfigError(f"cannot use kubeconfig {os.fspath(path)!r}: {exc}") from exc
        return cls(configuration, timeout=timeout)

    @classmethod
    def in_cluster(cls, *, timeout: Timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)) -> Self:
        """Connect with the pod's service account (token re-read as it rotates)."""
        configuration = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except (ConfigException, OSError) as exc:
            raise HubConfigError(f"not running in a cluster: {exc}") from exc
        return cls(configuration, timeout=timeout)

    @classmethod
    def from_env(
        cls, context: str | None = None, *, timeout: Timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
    ) -> Self:
        """$KUBECONFIG if set, else the pod's service account, else ~/.kube/config (as kubectl);
        `context` picks a kubeconfig's context (default: its current one)."""
        if os.environ.get("KUBECONFIG"):
            # The kubernetes loader merges a path list the way kubectl does.
            return cls.from_kubeconfig(os.environ["KUBECONFIG"], context, timeout=timeout)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(timeout=timeout)
        default = Path("~/.kube/config").expanduser()
        if default.exists():
            return cls.from_kubeconfig(default, context, timeout=timeout)
        raise HubConfigError(
            "no hub configured: set KUBECONFIG, run in a cluster, or create ~/.kube/config"
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        verify: bool = True,
        timeout: Timeout = (CONNECT_TIMEOUT, READ_TIMEOUT),
    ) -> Self:
        """Connect to `url` with an optional bearer token, e.g. to a devhub."""
        configuration = kubernetes.client.Configuration()
        configuration.host = url.rstrip("/")
        if token is not None:
            configuration.api_key = {"authorization": f"Bearer {token}"}
        configuration.ssl_ca_cert = ca_file
        configuration.verify_ssl = verify
        return cls(configuration, timeout=timeout)

    @property
    def host(self) -> str:
        return self._host

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- reads ----------------------------------------------------------------------------------

    def get(self, kind: type[T], name: str, *, namespace: str | None = None) -> T:
        """The object, or NotFoundError. A namespaced kind needs its `namespace`."""
        return _load(kind, self._json("GET", _object_path(kind, name, namespace=namespace)))

    def list(
        self,
        kind: type[T],
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
        limit: int | None = None,
        *,
        on_malformed: OnMalformed | None = None,
        transform: Callable[[T], T] | None = None,
        namespace: str | None = None,
    ) -> ListResult[T]:
        """Every matching object, following `continue` pages until the last.

        A namespaced kind is listed in `namespace`, or in all namespaces without one.

        `transform` is applied to each object as its page is read (e.g. to keep less of it),
        so no more than one page of full objects is held at a time.

        `limit` is the page size (None: one request). The resourceVersion is the first page's,
        which all pages share on kube-apiserver; should a server report different ones, watching
        from the earliest can repeat an event but never miss one. An object that does not match
        our model fails the call (MalformedObjectError), unless `on_malformed` is given: then it
        is reported to it and left out."""
        if limit is not None and limit <= 0:
            raise ValueError(f"limit must be a positive page size, got {limit}")
        base: _Query = []
        if (labels := _selector(label_selector)) is not None:
            base.append(("labelSelector", labels))
        if (fields := _selector(field_selector)) is not None:
            base.append(("fieldSelector", fields))
        if limit is not None:
            base.append(("limit", str(limit)))
        for attempt in range(LIST_RESTARTS + 1):
            try:
                return self._list_pages(kind, base, on_malformed, transform, namespace)
            except GoneError:
                if attempt == LIST_RESTARTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _list_pages(
        self,
        kind: type[T],
        base: _Query,
        on_malformed: OnMalformed | None = None,
        transform: Callable[[T], T] | None = None,
        namespace: str | None = None,
    ) -> ListResult[T]:
        path = kind.api_path(namespace)
        items: builtins.list[T] = []
        resource_version: str | None = None
        token = ""
        while True:
            query = [*base, ("continue", token)] if token else base
            data = self._bytes("GET", path, query=query)
            page = _parse_page(kind, data, on_malformed)
            if transform is None:
                items.extend(page.items or ())
            else:
                items.extend(transform(item) for item in page.items or ())
            if resource_version is None:
                resource_version = page.metadata.resource_version
            token = page.metadata.continue_
            if not token:
                return ListResult(items=items, resource_version=resource_version)

    # --- writes ---------------------------------------------------------------------------------

    def create(self, obj: T) -> T:
        """Create `obj`; AlreadyExistsError if the name is taken, InvalidObjectError if refused."""
        kind = type(obj)
        path = kind.api_path(obj.metadata.namespace if kind.NAMESPACED else None)
        return _load(kind, self._json("POST", path, body=obj.to_wire()))

    def update(self, obj: T) -> T:
        """Replace the object (not its status) if nobody changed it since it was read.

        Carries metadata.resourceVersion: a stale one is a ConflictError. Fields we do not model
        are sent back as read."""
        _guard_resource_version(obj, "update")
        kind = type(obj)
        path = _object_path(kind, obj.name, namespace=obj.metadata.namespace)
        return _load(kind, self._json("PUT", path, body=obj.to_wire()))

    def update_status(self, obj: T) -> T:
        """Replace the status subresource; same concurrency rule as `update`."""
        _guard_resource_version(obj, "update_status")
        kind = type(obj)
        path = _object_path(kind, obj.name, "status", obj.metadata.namespace)
        return _load(kind, self._json("PUT", path, body=obj.to_wire()))

    def patch(
        self,
        kind: type[T],
        name: str,
        patch: Mapping[str, Any],
        *,
        resource_version: str | None = None,
        subresource: str | None = None,
        namespace: str | None = None,
    ) -> T:
        """Apply a JSON merge patch (RFC 7386): only the fields named change; None deletes.

        With `resource_version`, the patch applies only to that version (ConflictError if the
        object moved on): use it when the patch was computed from a read."""
        body = _versioned(patch, resource_version)
        path = _object_path(kind, name, subresource, namespace)
        return _load(kind, self._json("PATCH", path, body=body, content_type=MERGE_PATCH))

    def patch_unread(
        self,
        kind: type[T],
        name: str,
        patch: Mapping[str, Any],
        *,
        resource_version: str | None = None,
        subresource: str | None = None,
        namespace: str | None = None,
    ) -> None:
        """`patch`, for a caller that does not use the patched object: the same request, and
        the response decides success as for `patch` (the same errors raise), but its body is not
        read into a model. A cycle's binding repoints are tens per turn, and reading each reply
        back was a fifth of what a patch cost the activity process (issue 35)."""
        body = _versioned(patch, resource_version)
        path = _object_path(kind, name, subresource, namespace)
        self._bytes("PATCH", path, body=body, content_type=MERGE_PATCH)

    def json_patch(
        self,
        kind: type[T],
        name: str,
        ops: Sequence[Mapping[str, Any]],
        *,
        subresource: str | None = None,
        namespace: str | None = None,
    ) -> T:
        """Apply a JSON patch (RFC 6902); a failing `test` op makes the whole patch fail."""
        body = [dict(op) for op in ops]
        path = _object_path(kind, name, subresource, namespace)
        return _load(kind, self._json("PATCH", path, body=body, content_type=JSON_PATCH))

    def delete(
        self,
        kind: type[T],
        name: str,
        *,
        resource_version: str | None = None,
        propagation: Propagation | None = None,
        namespace: str | None = None,
    ) -> T | None:
        """Delete; returns the object while finalizers hold it (deletionTimestamp set), else None.

        `resource_version` is a precondition: ConflictError if the object changed since."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if resource_version is not None:
            options["preconditions"] = {"resourceVersion": resource_version}
        if propagation is not None:
            options["propagationPolicy"] = propagation
        doc = self._json("DELETE", _object_path(kind, name, namespace=namespace), body=options)
        if not isinstance(doc, dict) or doc.get("kind") == "Status":
            return None
        obj = _load(kind, doc)
        if obj.metadata.deletion_timestamp is not None and obj.metadata.finalizers:
            return obj
        return None

    def delete_collection(
        self, kind: type[HubObject], label_selector: Selector, *, namespace: str | None = None
    ) -> None:
        """Delete every object matching `label_selector` ("" matches all of the kind).

        A namespaced kind needs its `namespace`: kube-apiserver has no all-namespace delete."""
        if kind.NAMESPACED and not namespace:
            raise ValueError(f"deleting {kind.PLURAL} needs a namespace")
        query = [("labelSelector", _selector(label_selector) or "")]
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        self._json("DELETE", kind.api_path(namespace), query=query, body=body)

    # --- watches --------------------------------------------------------------------------------

    def watch(
        self,
        kind: type[T],
        resource_version: str | None,
        *,
        label_selector: Selector | None = None,
        timeout_seconds: int = DEFAULT_WATCH_SECONDS,
        allow_bookmarks: bool = True,
    ) -> Iterator[WatchEvent[T] | Bookmark]:
        """Every change after `resource_version`, in order, until the server ends the stream.

        The stream ends after about `timeout_seconds`; GoneError when `resource_version` is too
        old (list again). None or "" starts from "now"; "0" asks for any cached state first. The
        request goes out at the first `next()`; closing the iterator closes the connection."""
        response = self._open_watch(
            kind, resource_version, label_selector, timeout_seconds, allow_bookmarks
        )
        yield from self._events(kind, response)

    def list_then_watch(
        self,
        kind: type[T],
        *,
        label_selector: Selector | None = None,
        timeout_seconds: int = DEFAULT_WATCH_SECONDS,
        page_size: int | None = None,
        stop: threading.Event | None = None,
        on_malformed: OnMalformed | None = None,
        transform: Callable[[T], T] | None = None,
    ) -> Iterator[WatchEvent[T] | Resync[T]]:
        """A Resync with everything, then every change, forever (until `stop` is set).

        How no event is missed: the list is taken at resourceVersion R and yielded as a
        `Resync`; the watch starts at R, so it delivers exactly the changes after the list.
        Each event (and bookmark) advances R. When a stream ends (server timeout) or breaks
        mid-way, a new watch starts from the last R, which the server answers with everything
        after it. When R is too old for the server (410 Gone), the changes in between cannot
        be replayed, so it lists again and yields a new `Resync`: the consumer replaces its
        whole view, which accounts for deletions that happened in the gap.

        Raises HubUnavailableError when a list or a watch cannot be opened, or when streams
        keep breaking without delivering anything; calling again starts over with a Resync.
        `stop` is checked after each event and between streams.

        An object that does not match our model (written under another CRD version, say) fails
        the call with MalformedObjectError, and so does every later call while it exists. With
        `on_malformed`, it is reported there and left out instead: absent from the Resync, its
        events not yielded (the watch moves past them), so one bad object cannot stop the watch
        of its whole kind. A consumer then sees such an object only once it matches again; a
        deletion of it while malformed shows at the next Resync."""
        while stop is None or not stop.is_set():
            listing = self.list(
                kind,
                label_selector,
                limit=page_size,
                on_malformed=on_malformed,
                transform=transform,
            )
            resource_version = listing.resource_version
            yield Resync(objects=listing.items, resource_version=resource_version)
            broken = 0
            try:
                while stop is None or not stop.is_set():
                    started = time.monotonic()
                    delivered = False
                    response = self._open_watch(
                        kind, resource_version, label_selector, timeout_seconds, True
                    )
                    try:
                        with closing(
                            self._events(kind, response, on_malformed, transform)
                        ) as events:
                            for event in events:
                                if event.resource_version:
                                    resource_version = event.resource_version
                                delivered = True
                                if isinstance(event, WatchEvent):
                                    yield event
                                if stop is not None and stop.is_set():
                                    return
                    except HubUnavailableError:
                        broken = 0 if delivered else broken + 1
                        if broken >= MAX_BROKEN_STREAMS:
                            raise
                        continue
                    broken = 0
                    if not delivered and time.monotonic() - started < QUICK_STREAM_SECONDS:
                        if stop is not None:
                            stop.wait(QUICK_STREAM_PAUSE)
                        else:
                            time.sleep(QUICK_STREAM_PAUSE)
            except GoneError:
                continue  # too far behind to replay: list again

    def _open_watch(
        self,
        kind: type[HubObject],
        resource_version: str | None,
        label_selector: Selector | None,
        timeout_seconds: int,
        allow_bookmarks: bool,
    ) -> urllib3.BaseHTTPResponse:
        if timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {timeout_seconds}")
        query = [("watch", "true"), ("timeoutSeconds", str(timeout_seconds))]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if (labels := _selector(label_selector)) is not None:
            query.append(("labelSelector", labels))
        doing = f"watching {kind.PLURAL}"
        response = self._send(
            "GET",
            kind.api_path(),
            query=query,
            read_timeout=timeout_seconds + WATCH_READ_SLACK,
        )
        if not 200 <= response.status < 300:
            with _translated(doing):
                data = response.data
            raise _status_error(response, data)
        return response

    def _events(
        self,
        kind: type[T],
        response: urllib3.BaseHTTPResponse,
        on_malformed: OnMalformed | None = None,
        transform: Callable[[T], T] | None = None,
    ) -> Generator[WatchEvent[T] | Bookmark, None, None]:
        doing = f"watching {kind.PLURAL}"
        try:
            for line in _lines(response, doing):
                event = self._event(kind, _decode(line, doing), on_malformed)
                if transform is not None and isinstance(event, WatchEvent):
                    event = WatchEvent(
                        type=event.type,
                        object=transform(event.object),
                        resource_version=event.resource_version,
                    )
                yield event
        finally:
            response.close()
            response.release_conn()

    @staticmethod
    def _event(
        kind: type[T], doc: Any, on_malformed: OnMalformed | None = None
    ) -> WatchEvent[T] | Bookmark:
        if not isinstance(doc, dict) or not isinstance(doc.get("object"), dict):
            raise MalformedObjectError(f"not a watch event: {str(doc)[:200]}")
        event_type, obj = doc.get("type"), doc["object"]
        if event_type == "ERROR":
            raise error_for_status(int(obj.get("code") or 500), obj)
        resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if event_type == "BOOKMARK":
            return Bookmark(resource_version=resource_version)
        if event_type in _OBJECT_EVENTS:
            try:
                loaded = _load(kind, obj)
            except MalformedObjectError as exc:
                if on_malformed is None:
                    raise
                on_malformed(exc)
                # Skipped, but its resourceVersion still moves the watch past it.
                return Bookmark(resource_version=resource_version)
            return WatchEvent(type=event_type, object=loaded, resource_version=resource_version)
        raise MalformedObjectError(f"unknown watch event type {event_type!r}")

    # --- transport ------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        read_timeout: float | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """One request, as the official client's ApiClient and REST layer would send it: the
        same URL, headers (its default ones, its auth settings), JSON body and timeouts, on its
        pool (proxy, TLS, client certificate), without their per-request work in between
        (sanitising, content-type matching, header merging: about an eighth of
        a binding patch's CPU in the client, issue 35). Its GETs send as its REST layer does with
        `client_go_retries` off, as every HubClient's configuration has it.
        tests/integration/hub/test_hub_client_wire.py holds the two to the same bytes on the
        wire."""
        doing = f"{method} {path}"
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        api = self._api
        headers.update(api.default_headers)
        if api.cookie:
            headers["Cookie"] = api.cookie
        queries = list(query)
        timeout = urllib3.Timeout(
            connect=self._connect_timeout, read=read_timeout or self._read_timeout
        )
        with _translated(doing):
            api.update_params_for_auth(headers, queries, AUTH_SETTINGS, path, method, body)
            url = self._host + path
            if queries:
                url += "?" + api.parameters_to_url_query(queries, None)  # type: ignore[no-untyped-call]
            raw: urllib3.BaseHTTPResponse = self._pool.urlopen(
                method,
                url,
                body=None if body is None else json.dumps(body),
                headers=headers,
                timeout=timeout,
                preload_content=False,
            )
        if raw.status == 401:
            self._auth.expire()
        return raw

    def _bytes(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
    ) -> bytes:
        """The body of a successful response; a hub error otherwise."""
        response = self._send(method, path, query=query, body=body, content_type=content_type)
        with _translated(f"{method} {path}"):
            data: bytes = response.data
        if not 200 <= response.status < 300:
            raise _status_error(response, data)
        return data

    def _json(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
    ) -> Any:
        data = self._bytes(method, path, query=query, body=body, content_type=content_type)
        return _decode(data, f"{method} {path}") if data else None
