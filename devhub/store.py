"""devhub's object store: the registry and watch cache of one kube-apiserver, in one process.

Every write goes through here, on the server's event-loop thread, so there are no locks: a write
bumps the single cluster-wide resourceVersion, persists (when durable), appends one event to a
bounded window and hands it to every watcher before the next request runs. That ordering is what
makes list-then-watch lossless: a list reports the resourceVersion of the last write it includes,
and a watch from it replays the window after it.

Semantics follow the generic registry and the custom-resource strategy of kube-apiserver:
- create drops `status` (the status subresource owns it), sets uid, creationTimestamp,
  generation 1; validation runs before the existence check;
- update needs the resourceVersion it read (a stale one is a Conflict); the main endpoint keeps
  status, `/status` keeps everything but status; generation moves on any change outside metadata
  and status, and when deletion starts; a no-op update writes nothing;
- delete of an object with finalizers only sets deletionTimestamp; the object goes when an update
  removes its last finalizer (a DELETED event, 404 after);
- paginated lists read a snapshot taken by the first page; its continue token expires (410) when
  the watch window moves past that snapshot, as etcd compaction expires a real one;
- a watch from a resourceVersion older than the window gets a 410 Expired ERROR event.

Namespaced kinds are stored under `namespace/name` (cluster-scoped ones under their name, as
before, so their hot paths do not change). In name order those keys sort as etcd sorts
`/registry/<resource>/<namespace>/<name>`, so an all-namespace list comes out in kube-apiserver's
order; a per-namespace index serves the lists of one namespace. A namespaced object can be
created only in an Active namespace (NamespaceLifecycle admission: 404 when it is missing, 403
while it terminates). Deleting a namespace marks it Terminating and deletes everything in it,
each object by its own finalizers; the namespace goes with the last of them (see
`devhub.namespaces`).

Built-in kinds (Namespace, PriorityClass) follow their own strategies where those differ from a
custom resource's: an update needs no resourceVersion (without one it is unconditional), their
generation moves only where their strategy moves it, and PriorityClass adds the scheduling API's
decoding, validation and admission (see `devhub.priorityclasses`).

Entries are immutable once stored and hold only `Entry.raw` (the served JSON): `Entry.obj` parses
it on each read, a private dict. A parsed object costs several times its JSON in memory, and at
fleet scale (10,000 placements with their snapshots and bindings, and the watch window of events
over them) the dicts were most of devhub's memory, while most reads (GET, LIST, WATCH) serve the
bytes as they are.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import json
import secrets
import sqlite3
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from devhub import errors, namespaces, priorityclasses
from devhub.cel import check_rules
from devhub.errors import ApiError, Cause
from devhub.events import EVENTS
from devhub.namespaces import NAMESPACES
from devhub.objectmeta import normalize_metadata
from devhub.patch import (
    PatchError,
    apply_merge,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from devhub.persistence import SqliteStore
from devhub.priorityclasses import PRIORITY_CLASSES
from devhub.resources import Resource
from devhub.schema import normalize, validate
from devhub.selectors import FieldSelector, LabelSelector
from hub.validation import subdomain_error

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
    "MODIFIED",
    "Entry",
    "Event",
    "ListResult",
    "Store",
    "Watcher",
    "dumps",
    "now_rfc3339",
]

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
BOOKMARK: Final = "BOOKMARK"
ERROR: Final = "ERROR"

DEFAULT_WATCH_WINDOW: Final = 20_000
MAX_PAGES: Final = 256
MAX_PENDING_EVENTS: Final = 200_000  # a watcher this far behind is closed, as apiserver does
GENERATE_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
GENERATE_NAME_SUFFIX: Final = 5
SKIP_METADATA: Final = frozenset({"metadata"})
NAMESPACES_KEY: Final = NAMESPACES.group_resource
NAMESPACE_MISMATCH: Final = (
    "the namespace of the provided object does not match the namespace sent on the request"
)

MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)


def dumps(obj: Any) -> bytes:
    # Go serialises unstructured objects with sorted keys; so do we, byte for byte stable.
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Entry:
    raw: bytes
    rv: int

    @property
    def obj(self) -> dict[str, Any]:
        """The object, parsed from `raw`: a private dict on every read."""
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed

    def fresh(self) -> dict[str, Any]:
        """A private deep copy of the object, to modify."""
        return self.obj


@dataclass(slots=True)
class Event:
    rv: int
    type: str
    key: str  # Resource.group_resource
    raw: bytes
    old_raw: bytes | None  # the object before a MODIFIED (for selector transitions)
    namespace: str = ""  # the object's, so a namespace's watchers skip others' without parsing

    @property
    def obj(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed

    @property
    def old(self) -> dict[str, Any] | None:
        if self.old_raw is None:
            return None
        parsed: dict[str, Any] = json.loads(self.old_raw)
        return parsed


@dataclass(slots=True)
class ListResult:
    entries: list[Entry]
    resource_version: int
    continue_token: str | None
    remaining: int | None


@dataclass
class _Page:
    rv: int
    entries: list[Entry]


@dataclass(eq=False)
class Watcher:
    """One open watch: events for one resource (in one namespace, or in all when `namespace` is
    None), filtered by its selectors, queued in order."""

    key: str
    labels: LabelSelector
    fields: FieldSelector
    namespace: str | None = None
    pending: deque[tuple[str, Event]] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    reason: str = ""

    def translate(self, event: Event) -> str | None:
        """The event type this watcher sees, or None when the object is outside its selectors.

        With selectors, an object that starts matching arrives as ADDED and one that stops
        matching leaves as DELETED, as from the API server's watch cache."""
        if self.namespace is not None and event.namespace != self.namespace:
            return None
        if self.labels.empty and self.fields.empty:
            return event.type
        now = self.matches(event.obj)
        if event.type != MODIFIED or event.old is None:
            return event.type if now else None
        before = self.matches(event.old)
        if now and before:
            return MODIFIED
        if now:
            return ADDED
        return DELETED if before else None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return self.labels.matches(obj) and self.fields.matches(obj)

    def offer(self, event: Event) -> None:
        if self.closed:
            return
        seen = self.translate(event)
        if seen is None:
            return
        self.pending.append((seen, event))
        if len(self.pending) > MAX_PENDING_EVENTS:
            self.close("watcher fell too far behind")
        self.wakeup.set()

    def close(self, reason: str) -> None:
        self.closed = True
        self.reason = reason
        self.wakeup.set()


class TooOldError(Exception):
    """A watch asked for events the window no longer holds (or never held)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


def _too_new_message(requested: int, latest: int) -> str:
    # kube-apiserver waits and answers 504 "Too large resource version"; a version from the
    # future can only come from before a restart without --data-dir, so devhub says 410 and the
    # client relists instead of retrying forever.
    return (f"resource version {requested} is newer than this hub's latest ({latest}): it "
            f"comes from before a restart without --data-dir; list again")


def _bad_body(message: str) -> ApiError:
    return errors.bad_request(message)


def _check_type(res: Resource, obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _bad_body(f"the request body must be a {res.kind} object, not {type(obj).__name__}")
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if not kind:
        raise _bad_body(f"Object 'Kind' is missing in the request body; expected kind {res.kind}")
    if not api_version:
        raise _bad_body(
            f"Object 'apiVersion' is missing in the request body; expected {res.api_version}"
        )
    if api_version != res.api_version:
        raise _bad_body(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({res.api_version})"
        )
    if kind != res.kind:
        raise _bad_body(
            f"the kind in the data ({kind}) does not match the expected kind ({res.kind}) "
            f"of {res.group_resource}"
        )
    return obj


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key != "metadata"}


def _object_key(res: Resource, name: str, namespace: str | None) -> str:
    """Where an object is stored: under its name, or `namespace/name` for a namespaced kind."""
    if not res.namespaced:
        if namespace is not None:
            raise ValueError(f"{res.group_resource} is cluster-scoped: no namespace {namespace!r}")
        return name
    if not namespace:
        raise errors.bad_request("Namespace parameter required.")
    return f"{namespace}/{name}"


def _namespace_of(res: Resource, key: str) -> str:
    return key.partition("/")[0] if res.namespaced else ""


def _check_request_namespace(body_namespace: Any, namespace: str | None) -> None:
    """Create and update: a body may omit its namespace, but may not name another one."""
    if isinstance(body_namespace, str) and body_namespace and body_namespace != namespace:
        raise errors.bad_request(NAMESPACE_MISMATCH)


def _check_patched_namespace(patched_namespace: Any, namespace: str | None) -> None:
    """Patches (apiserver's `checkName`): the patched object may not move to another namespace."""
    if isinstance(patched_namespace, str) and patched_namespace and \
            patched_namespace != namespace:
        raise errors.bad_request(
            f"the namespace of the object ({patched_namespace}) does not match the namespace on "
            f"the request ({namespace})"
        )


def _name_error(res: Resource, name: str) -> str | None:
    return namespaces.name_error(name) if res is NAMESPACES else subdomain_error(name)


class Store:
    """All objects of all served kinds, the event window and the open watches.

    Besides the given kinds it always serves the built-in core v1 Namespaces and
    scheduling.k8s.io/v1 PriorityClasses; the system namespaces and priority classes exist from
    the start (and again after a reset)."""

    def __init__(
        self,
        resources: Iterable[Resource],
        *,
        watch_window: int = DEFAULT_WATCH_WINDOW,
        persistence: SqliteStore | None = None,
    ) -> None:
        if watch_window < 1:
            raise ValueError("watch_window must be at least 1")
        self.resources = {
            res.group_resource: res for res in (*resources, NAMESPACES, PRIORITY_CLASSES, EVENTS)
        }
        self.window = watch_window
        self.rv = 0
        self.floor = 0  # the newest resourceVersion evicted from the window
        self._objects: dict[str, dict[str, Entry]] = {key: {} for key in self.resources}
        self._sorted: dict[str, list[str] | None] = {key: None for key in self.resources}
        # Names by (label key, value), per kind: a list selecting on a label equality (every
        # binding list of a cycle selects on its placement's parent-CRP label) reads only the
        # objects that carry it, not every object of the kind.
        self._by_label: dict[str, dict[tuple[str, str], set[str]]] = {
            key: {} for key in self.resources
        }
        # Keys by namespace, per namespaced kind (a namespace with none has no entry): the lists
        # of one namespace, what deleting a namespace deletes, and whether it is empty yet.
        self._by_namespace: dict[str, dict[str, set[str]]] = {
            key: {} for key, res in self.resources.items() if res.namespaced
        }
        self._events: deque[Event] = deque()
        self._watchers: set[Watcher] = set()
        self._pages: OrderedDict[str, _Page] = OrderedDict()
        self._persistence = persistence
        if persistence is not None:
            self._load(persistence)
        self._settle_namespaces()
        self._settle_priority_classes()

    # --- persistence -----------------------------------------------------------------------

    def _load(self, persistence: SqliteStore) -> None:
        for key, name, body in persistence.objects():
            if key not in self._objects:
                continue  # a kind no longer served
            in_namespace = self._by_namespace.get(key)
            if in_namespace is not None and "/" not in name:
                continue  # stored before its kind was namespaced: no path reaches it
            obj = json.loads(body)
            rv = int(obj.get("metadata", {}).get("resourceVersion", "0") or 0)
            self._objects[key][name] = Entry(bytes(body), rv)
            self._index(key, name, obj)
            if in_namespace is not None:
                in_namespace.setdefault(name.partition("/")[0], set()).add(name)
        self.rv = max(
            [persistence.resource_version()]
            + [entry.rv for objects in self._objects.values() for entry in objects.values()]
        )
        self.floor = self.rv

    def close(self) -> None:
        for watcher in list(self._watchers):
            watcher.close("server shutting down")
        self._watchers.clear()
        if self._persistence is not None:
            self._persistence.close()
            self._persistence = None

    def reset(self) -> None:
        """Drop every object but the system namespaces; resourceVersions stay monotonic and open
        watches end."""
        for key in self._objects:
            self._objects[key] = {}
            self._sorted[key] = None
            self._by_label[key] = {}
        for in_namespace in self._by_namespace.values():
            in_namespace.clear()
        self._events.clear()
        self._pages.clear()
        # The reset consumes a resourceVersion: watches from any earlier one must relist (410),
        # because the objects they knew vanished without DELETED events.
        self.rv += 1
        self.floor = self.rv
        for watcher in list(self._watchers):
            watcher.close("devhub was reset")
        self._watchers.clear()
        if self._persistence is not None:
            self._persistence.clear(self.rv)
        self._settle_namespaces()
        self._settle_priority_classes()

    def _settle_namespaces(self) -> None:
        """After a start or a reset: the system namespaces (and fleet-system, as on a KubeFleet
        hub) exist, and so does every namespace a stored object lives in; a terminating
        namespace left empty goes."""
        wanted = {*namespaces.SYSTEM_NAMESPACES, *namespaces.HUB_NAMESPACES}
        for in_namespace in self._by_namespace.values():
            wanted.update(in_namespace)
        existing = self._objects[NAMESPACES_KEY]
        for name in sorted(wanted - existing.keys()):
            self.create(NAMESPACES, namespaces.manifest(name))
        for name in sorted(existing):
            self._reap_namespace(name)

    def _settle_priority_classes(self) -> None:
        """After a start or a reset: the system priority classes exist, as kube-apiserver's
        bootstrap creates them when missing (a deletecollection may have deleted them)."""
        existing = self._objects[PRIORITY_CLASSES.group_resource]
        for name in sorted(priorityclasses.SYSTEM_PRIORITY_CLASSES.keys() - existing.keys()):
            self.create(PRIORITY_CLASSES, priorityclasses.manifest(name))

    # --- reads -----------------------------------------------------------------------------

    def count(self, res: Resource) -> int:
        return len(self._objects[res.group_resource])

    def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Entry:
        """The object `name` (in `namespace`, for a namespaced kind), or 404."""
        entry = self._objects[res.group_resource].get(_object_key(res, name, namespace))
        if entry is None:
            raise errors.not_found(res.plural, res.group, name)
        return entry

    def _sorted_keys(self, res: Resource) -> list[str]:
        key = res.group_resource
        keys = self._sorted[key]
        if keys is None:
            keys = sorted(self._objects[key])
            self._sorted[key] = keys
        return keys

    def _scoped_keys(self, res: Resource, namespace: str | None) -> list[str]:
        """In name order, the keys of the objects in `namespace`, or of all when None."""
        if namespace is None:
            return self._sorted_keys(res)
        return sorted(self._by_namespace[res.group_resource].get(namespace, ()))

    def _sorted_entries(self, res: Resource) -> list[Entry]:
        objects = self._objects[res.group_resource]
        return [objects[key] for key in self._sorted_keys(res)]

    def _index(self, key: str, name: str, obj: Mapping[str, Any]) -> None:
        index = self._by_label[key]
        for pair in _label_pairs(obj):
            index.setdefault(pair, set()).add(name)

    def _unindex(self, key: str, name: str, obj: Mapping[str, Any]) -> None:
        index = self._by_label[key]
        for pair in _label_pairs(obj):
            names = index.get(pair)
            if names is not None:
                names.discard(name)
                if not names:
                    del index[pair]

    def _candidates(
        self, res: Resource, labels: LabelSelector, namespace: str | None
    ) -> list[Entry] | None:
        """In name order, the objects in `namespace` (if not None) that can match `labels` by
        its narrowest equality requirement; None when neither narrows (every object is then a
        candidate)."""
        key = res.group_resource
        index = self._by_label[key]
        scope: set[str] | None = None
        if namespace is not None:
            scope = self._by_namespace[key].get(namespace, set())
        best = scope
        for requirement in labels.requirements:
            if requirement.operator in ("=", "in") and len(requirement.values) == 1:
                names = index.get((requirement.key, requirement.values[0]), set())
                if best is None or len(names) < len(best):
                    best = names
        if best is None:
            return None
        objects = self._objects[key]
        keys = sorted(best)
        if scope is not None and best is not scope:
            keys = [name for name in keys if name in scope]  # selectors never check namespaces
        # Matching re-checks every requirement, so a name indexed too widely costs nothing.
        return [objects[name] for name in keys if name in objects]

    def list_entries(
        self,
        res: Resource,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        match: str | None = None,
        namespace: str | None = None,
    ) -> ListResult:
        """Objects in name order (namespace, then name, across namespaces), in `namespace` or
        in all of them; devhub serves every list at its latest resourceVersion."""
        if namespace is not None and not res.namespaced:
            raise ValueError(f"{res.group_resource} is cluster-scoped: no namespace {namespace!r}")
        if match and match not in ("Exact", "NotOlderThan"):
            raise errors.bad_request(
                f'resourceVersionMatch: Unsupported value: "{match}": supported values: '
                '"Exact", "NotOlderThan"'
            )
        if match and not resource_version:
            raise errors.bad_request(
                "resourceVersionMatch is forbidden unless resourceVersion is provided"
            )
        if resource_version and resource_version != "0":
            wanted = _parse_rv(resource_version)
            if wanted > self.rv:
                raise errors.expired(_too_new_message(wanted, self.rv))
            if match == "Exact" and wanted != self.rv:
                raise errors.expired(
                    f"devhub keeps no history: it cannot list at resource version {wanted}, "
                    f"only at the latest ({self.rv}); list without resourceVersionMatch=Exact"
                )
        if continue_token:
            page_id, start = self._decode_continue(continue_token)
            page = self._pages.get(page_id)
            if page is None or page.rv < self.floor:
                raise errors.expired()
            entries, rv = page.entries, page.rv
        else:
            scope = namespace
            if scope is None and res.namespaced:
                scope = fields.exact_namespace  # still matched below, like every selector term
            exact = fields.exact_name
            if exact is not None and (scope or not res.namespaced):
                found = self._objects[res.group_resource].get(_object_key(res, exact, scope))
                entries = [found] if found is not None else []
            else:
                narrowed = self._candidates(res, labels, scope)
                entries = narrowed if narrowed is not None else self._sorted_entries(res)
            rv, start, page_id = self.rv, 0, ""
        selected: list[Entry] = []
        filtered = not (labels.empty and fields.empty)
        index = start
        while index < len(entries) and (limit is None or len(selected) < limit):
            entry = entries[index]
            index += 1
            if not filtered:
                selected.append(entry)
                continue
            obj = entry.obj  # parsed once for both selectors
            if labels.matches(obj) and fields.matches(obj):
                selected.append(entry)
        token = None
        remaining = None
        if limit is not None and index < len(entries):
            if not page_id:
                page_id = secrets.token_hex(8)
                self._pages[page_id] = _Page(rv, entries)
                while len(self._pages) > MAX_PAGES:
                    self._pages.popitem(last=False)
            token = self._encode_continue(page_id, index, rv)
            if not filtered:
                remaining = len(entries) - index
        return ListResult(selected, rv, token, remaining)

    @staticmethod
    def _encode_continue(page_id: str, index: int, rv: int) -> str:
        payload = {"v": "meta.k8s.io/v1", "rv": rv, "page": page_id, "start": index}
        return base64.urlsafe_b64encode(dumps(payload)).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token: str) -> tuple[str, int]:
        try:
            padded = token + "=" * (-len(token) % 4)
            payload = json.loads(base64.urlsafe_b64decode(padded.encode()))
            page_id, start = payload["page"], payload["start"]
            if not isinstance(page_id, str) or not isinstance(start, int) or start < 0:
                raise ValueError("bad fields")
        except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise errors.bad_request(
                "continue key is not valid: the token was not issued by this server or is "
                "corrupted; start a new list without `continue`"
            ) from None
        return page_id, start

    # --- watch -----------------------------------------------------------------------------

    def watch(
        self,
        res: Resource,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str | None,
        *,
        send_initial_events: bool = False,
        namespace: str | None = None,
    ) -> tuple[list[tuple[str, Event]], Watcher]:
        """Register a watcher and return what it must send first (synchronously, so no gap).

        Without a resourceVersion (or "0"), or with sendInitialEvents, the first events are
        synthetic ADDEDs of the current objects; otherwise the window's events after it. The
        watch sees `namespace` only, or every namespace when None."""
        if namespace is not None and not res.namespaced:
            raise ValueError(f"{res.group_resource} is cluster-scoped: no namespace {namespace!r}")
        key = res.group_resource
        watcher = Watcher(key, labels, fields, namespace)
        initial: list[tuple[str, Event]] = []
        if resource_version in (None, "", "0") or send_initial_events:
            objects = self._objects[key]
            for name in self._scoped_keys(res, namespace):
                entry = objects[name]
                if watcher.matches(entry.obj):
                    initial.append((ADDED, Event(entry.rv, ADDED, key, entry.raw, None,
                                                 _namespace_of(res, name))))
        else:
            start = _parse_rv(resource_version)
            if start < self.floor:
                raise TooOldError(f"too old resource version: {start} ({self.floor})")
            if start > self.rv:
                raise TooOldError(_too_new_message(start, self.rv))
            replay: list[Event] = []
            for event in reversed(self._events):
                if event.rv <= start:
                    break
                if event.key == key:
                    replay.append(event)
            for event in reversed(replay):
                seen = watcher.translate(event)
                if seen is not None:
                    initial.append((seen, event))
        self._watchers.add(watcher)
        return initial, watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    # --- writes ----------------------------------------------------------------------------

    def _commit(
        self, res: Resource, name: str, obj: dict[str, Any], event_type: str,
        old: Entry | None,
        old_obj: Mapping[str, Any] | None = None,
    ) -> Entry:
        """Store (or remove) `obj` under key `name` (see `_object_key`) as one write; `old_obj`
        is `old` parsed, if the caller has it."""
        rv = self.rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        raw = dumps(obj)
        key = res.group_resource
        if self._persistence is not None:
            # Disk first: a write that cannot be stored must not be seen by anyone.
            try:
                if event_type == DELETED:
                    self._persistence.delete(key, name, rv)
                else:
                    self._persistence.put(key, name, raw, rv)
            except sqlite3.Error as exc:
                raise errors.internal(f"devhub could not store the object: {exc}") from exc
        self.rv = rv
        entry = Entry(raw, rv)
        objects = self._objects[key]
        previous = objects.get(name)
        if previous is not None:
            parsed = old_obj if old_obj is not None and previous is old else previous.obj
            self._unindex(key, name, parsed)
        if event_type == DELETED:
            del objects[name]
            self._sorted[key] = None
        else:
            if name not in objects:
                self._sorted[key] = None
            objects[name] = entry
            self._index(key, name, obj)
        namespace = ""
        if res.namespaced:
            namespace = name.partition("/")[0]
            in_namespace = self._by_namespace[key]
            if event_type != DELETED:
                in_namespace.setdefault(namespace, set()).add(name)
            elif (keys := in_namespace.get(namespace)) is not None:
                keys.discard(name)
                if not keys:
                    del in_namespace[namespace]
        event = Event(rv, event_type, key, raw, old.raw if old is not None else None, namespace)
        self._events.append(event)
        while len(self._events) > self.window:
            self.floor = self._events.popleft().rv
        for watcher in self._watchers:
            if watcher.key == key:
                watcher.offer(event)
        if namespace and event_type == DELETED:
            self._reap_namespace(namespace)  # after the object's event, as the controller would
        return entry

    def _decode(
        self, res: Resource, body: Any, field_validation: str
    ) -> tuple[dict[str, Any], list[Cause], list[str]]:
        """Type-check, prune and default a request body; returns (object, causes, warnings)."""
        if res.built_in and isinstance(body, dict):
            # kube-apiserver decodes a built-in kind with its endpoint's apiVersion and kind as
            # defaults; only custom resources must name theirs.
            body = {**body, "apiVersion": body.get("apiVersion") or res.api_version,
                    "kind": body.get("kind") or res.kind}
        _check_type(res, body)
        if res is PRIORITY_CLASSES and (problem := priorityclasses.decode_error(body)):
            raise errors.bad_request(problem)
        pruned: list[str] = []
        meta, causes = normalize_metadata(body.get("metadata"), pruned)
        if any(cause.reason == "FieldValueTypeInvalid" for cause in causes):
            raw_meta = body.get("metadata")
            raw_name = raw_meta.get("name") if isinstance(raw_meta, dict) else None
            raise self._invalid(res, raw_name if isinstance(raw_name, str) else "", causes)
        obj = normalize(res.schema, body, "", pruned, skip=SKIP_METADATA)
        obj["metadata"] = meta
        if pruned and field_validation == "Strict":
            raise errors.bad_request(
                "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in pruned)
            )
        warnings = [f'unknown field "{p}"' for p in pruned] if field_validation == "Warn" else []
        return obj, causes, warnings

    def _invalid(self, res: Resource, name: str, causes: list[Cause]) -> ApiError:
        return errors.invalid(res.kind, res.group, name, causes)

    def create(
        self,
        res: Resource,
        body: Any,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
    ) -> tuple[Entry, list[str]]:
        """Create `body` (in `namespace`, which a namespaced kind needs)."""
        obj, causes, warnings = self._decode(res, body, field_validation)
        meta = obj["metadata"]
        if res.namespaced:
            # The handler's namespace check, then admission, then the registry, as in
            # kube-apiserver: a bad namespace is reported before anything about the object.
            _check_request_namespace(meta.get("namespace"), namespace)
            self._admit_create(res, namespace, meta.get("name") or "")
            meta["namespace"] = namespace
        else:
            if namespace is not None:
                raise ValueError(f"{res.group_resource} is cluster-scoped: no namespace "
                                 f"{namespace!r}")
            meta.pop("namespace", None)  # apiserver clears it for a cluster-scoped kind
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        name = meta.get("name") or ""
        if not name:
            prefix = meta.get("generateName") or ""
            if prefix:
                suffix = "".join(
                    secrets.choice(GENERATE_NAME_ALPHABET) for _ in range(GENERATE_NAME_SUFFIX)
                )
                name = prefix + suffix
                meta["name"] = name
            else:
                causes.append(Cause("FieldValueRequired",
                                    "Required value: name or generateName is required",
                                    "metadata.name"))
        if name and (problem := _name_error(res, name)):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": {problem}',
                                "metadata.name"))
        if res.status_subresource:
            obj.pop("status", None)
        for system in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(system, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if res is NAMESPACES:
            namespaces.prepare_for_create(obj)  # built-in kinds without a spec generation
        else:
            meta["generation"] = 1
        if res is PRIORITY_CLASSES:
            priorityclasses.prepare(obj)
        causes.extend(validate(res.schema, obj, "", skip=SKIP_METADATA))
        if res is PRIORITY_CLASSES:
            causes.extend(priorityclasses.validate_create(obj))
        if not causes:
            causes.extend(check_rules(res.schema, obj))
        if causes:
            raise self._invalid(res, name, causes)
        if res is PRIORITY_CLASSES:  # admission, after validation and before the registry
            priorityclasses.refuse_second_default(obj, self._stored(res), create=True)
        key = _object_key(res, name, namespace)
        if key in self._objects[res.group_resource]:
            raise errors.already_exists(res.plural, res.group, name)
        if dry_run:
            return Entry(dumps(obj), self.rv), warnings
        return self._commit(res, key, obj, ADDED, None), warnings

    def _admit_create(self, res: Resource, namespace: str | None, name: str) -> None:
        """NamespaceLifecycle admission: new content only in an existing, Active namespace."""
        if not namespace:
            raise errors.bad_request("Namespace parameter required.")
        entry = self._objects[NAMESPACES_KEY].get(namespace)
        if entry is None:
            raise namespaces.missing(namespace)
        if namespaces.is_terminating(entry.obj):
            raise namespaces.terminating(res, name, namespace)

    def replace(
        self,
        res: Resource,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        namespace: str | None = None,
    ) -> tuple[Entry, list[str]]:
        """Update (PUT) the object or its `subresource`, in `namespace` for a namespaced kind."""
        if res.namespaced:
            raw_meta = body.get("metadata") if isinstance(body, dict) else None
            if isinstance(raw_meta, dict):
                _check_request_namespace(raw_meta.get("namespace"), namespace)
        current = self.get(res, name, namespace=namespace)
        obj, causes, warnings = self._decode(res, body, field_validation)
        body_name = obj["metadata"].get("name", "")
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        rv = obj["metadata"].get("resourceVersion")
        if not rv and not res.built_in:
            raise self._invalid(res, name, [Cause(
                "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion",
            )])
        # A built-in kind's strategy allows an unconditional update: one without a
        # resourceVersion replaces whatever is stored.
        if rv and rv != str(current.rv):
            raise errors.conflict(res.plural, res.group, name)
        return self._update(res, current, obj, subresource, dry_run, causes), warnings

    def patch(
        self,
        res: Resource,
        name: str,
        content_type: str,
        patch: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        field_manager: str | None = None,
        namespace: str | None = None,
    ) -> tuple[Entry, list[str], bool]:
        """Returns (entry, warnings, created); only apply patches may create."""
        current = self._objects[res.group_resource].get(_object_key(res, name, namespace))
        # The stored object, parsed once for the whole patch: merge and apply patches build new
        # dicts wherever they change something, and decoding builds the object anew, so a
        # custom resource's stored dict is never modified and serves as `_update`'s old object.
        # Built-in kinds' strategies and the other patch formats modify what they are given.
        stored = current.obj if current is not None else None
        shared = not res.built_in and content_type in (MERGE_PATCH, APPLY_PATCH)

        def target() -> dict[str, Any]:
            assert current is not None and stored is not None
            return stored if shared else current.fresh()

        if content_type == APPLY_PATCH:
            if not field_manager:
                raise errors.bad_request("PATCH /apply requires fieldManager to be set")
            if not isinstance(patch, dict):
                raise errors.bad_request("an apply patch must be an object")
            applied_meta = patch.get("metadata")
            applied_name = applied_meta.get("name") if isinstance(applied_meta, dict) else None
            if applied_name != name:
                raise errors.bad_request(
                    f"the name of the object ({applied_name}) does not match the name on the "
                    f"URL ({name})"
                )
            if res.namespaced and isinstance(applied_meta, dict):
                _check_patched_namespace(applied_meta.get("namespace"), namespace)
            if current is None:
                if subresource:
                    raise errors.not_found(res.plural, res.group, name)
                entry, warnings = self.create(
                    res, patch, namespace=namespace, dry_run=dry_run,
                    field_validation=field_validation,
                )
                return entry, warnings, True
            patched = apply_merge(target(), patch)
        else:
            if current is None:
                raise errors.not_found(res.plural, res.group, name)
            try:
                if content_type == MERGE_PATCH:
                    if not isinstance(patch, dict):
                        raise PatchError("a merge patch must be a JSON object", malformed=True)
                    patched = merge_patch(target(), patch)
                elif content_type == STRATEGIC_PATCH and res.merge_lists is not None:
                    patched = strategic_merge_patch(current.fresh(), patch, res.merge_lists)
                else:
                    patched = json_patch(current.fresh(), patch)
            except PatchError as exc:
                if exc.malformed:
                    raise errors.bad_request(f"invalid patch: {exc}") from None
                raise errors.ApiError(
                    422, "Invalid", f"the server rejected our request due to an error in our "
                    f"request: {exc}"
                ) from None
        if not isinstance(patched, dict):
            raise errors.bad_request("the patched object is not a JSON object")
        meta = patched.get("metadata")
        if isinstance(meta, dict):
            rv = meta.get("resourceVersion")
            if rv and rv != str(current.rv):
                raise errors.conflict(res.plural, res.group, name)
            if meta.get("name", name) != name:
                raise errors.bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name on "
                    f"the URL ({name})"
                )
            if res.namespaced:
                _check_patched_namespace(meta.get("namespace"), namespace)
        obj, causes, warnings = self._decode(res, patched, field_validation)
        obj["metadata"]["name"] = name
        old = stored if shared else None
        return self._update(res, current, obj, subresource, dry_run, causes, old), warnings, False

    def _update(
        self,
        res: Resource,
        current: Entry,
        new: dict[str, Any],
        subresource: str | None,
        dry_run: bool,
        causes: list[Cause],
        old: dict[str, Any] | None = None,
    ) -> Entry:
        """`old`: `current` already parsed, if the caller has it (and has not modified it)."""
        if old is None:
            old = current.obj
        name = old["metadata"]["name"]
        key = _object_key(res, name, old["metadata"].get("namespace"))
        if subresource == "status":
            result = current.fresh()
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            causes = []  # metadata comes from the stored object, not the request
        else:
            result = new
            if res.status_subresource:
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            causes = causes + self._carry_system_fields(old["metadata"], result["metadata"])
            if res is NAMESPACES:
                namespaces.prepare_for_update(result, old)
            elif res is PRIORITY_CLASSES:
                priorityclasses.prepare(result)
            # A custom resource's generation follows its spec; the strategies of the built-in
            # kinds here never move theirs on an update.
            if not res.built_in and _spec_part(result) != _spec_part(old):
                result["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        result["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
        causes.extend(validate(res.schema, result, "", skip=SKIP_METADATA))
        if res is PRIORITY_CLASSES:
            causes.extend(priorityclasses.validate_update(result, old))
        if not causes:
            causes.extend(check_rules(res.schema, result, old))
        if causes:
            raise self._invalid(res, name, causes)
        if res is PRIORITY_CLASSES:
            priorityclasses.refuse_second_default(result, self._stored(res), create=False)
        if result == old:
            return current  # a no-op update writes nothing, as the API server skips it
        if dry_run:
            return Entry(dumps(result), current.rv)
        if res is NAMESPACES:
            # Its last finalizer gone, a terminating namespace still waits for its content.
            entry = self._commit(res, key, result, MODIFIED, current, old)
            self._reap_namespace(name)
            return entry
        if result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            return self._commit(res, key, result, DELETED, current, old)
        return self._commit(res, key, result, MODIFIED, current, old)

    @staticmethod
    def _carry_system_fields(old: Mapping[str, Any], meta: dict[str, Any]) -> list[Cause]:
        causes = []
        if meta.get("uid") and meta["uid"] != old.get("uid"):
            causes.append(Cause("FieldValueInvalid",
                                f'Invalid value: "{meta["uid"]}": field is immutable',
                                "metadata.uid"))
        for system in ("uid", "creationTimestamp", "generation", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "namespace"):
            if system in old:
                meta[system] = old[system]
            else:
                meta.pop(system, None)
        if old.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers", ()) if f not in old.get("finalizers", ())]
            if added:
                causes.append(Cause(
                    "FieldValueForbidden",
                    f"Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {json.dumps(added)}",
                    "metadata.finalizers",
                ))
        return causes

    def delete(
        self,
        res: Resource,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        namespace: str | None = None,
    ) -> tuple[Entry, bool]:
        """Returns (entry, gone): gone is False when finalizers keep the object for now."""
        if res is PRIORITY_CLASSES and (refusal := priorityclasses.undeletable(name)):
            raise refusal
        return self._delete(res, name, preconditions, dry_run, namespace)

    def _delete(
        self,
        res: Resource,
        name: str,
        preconditions: Mapping[str, Any] | None,
        dry_run: bool,
        namespace: str | None,
    ) -> tuple[Entry, bool]:
        """The delete itself, without `delete`'s guard, which only a DELETE request meets."""
        if res is NAMESPACES:
            return self._delete_namespace(name, preconditions, dry_run)
        key = _object_key(res, name, namespace)
        current = self.get(res, name, namespace=namespace)
        meta = current.obj["metadata"]
        _check_preconditions(res, name, meta, preconditions)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return current, False
            result = current.fresh()
            result["metadata"]["deletionTimestamp"] = now_rfc3339()
            result["metadata"]["deletionGracePeriodSeconds"] = 0
            result["metadata"]["generation"] = int(meta.get("generation", 1)) + 1
            if dry_run:
                return Entry(dumps(result), current.rv), False
            return self._commit(res, key, result, MODIFIED, current), False
        if dry_run:
            return current, True
        return self._commit(res, key, current.fresh(), DELETED, current), True

    def delete_collection(
        self,
        res: Resource,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        dry_run: bool = False,
        namespace: str | None = None,
    ) -> list[Entry]:
        targets = self.list_entries(res, labels, fields, namespace=namespace).entries
        deleted = []
        for entry in targets:
            meta = entry.obj["metadata"]
            # Each goes by the registry's own delete, not the REST one: kube-apiserver's
            # deletecollection deletes even the system priority classes a DELETE may not.
            deleted.append(self._delete(
                res, meta["name"], None, dry_run, meta.get("namespace")
            )[0])
        return deleted

    def _stored(self, res: Resource) -> list[dict[str, Any]]:
        """Every stored object of `res`, parsed (for the few admission checks that read them)."""
        return [entry.obj for entry in self._objects[res.group_resource].values()]

    # --- namespaces --------------------------------------------------------------------------

    def _delete_namespace(
        self, name: str, preconditions: Mapping[str, Any] | None, dry_run: bool
    ) -> tuple[Entry, bool]:
        """The namespace REST delete, then the namespace controller's part: mark the namespace
        Terminating, delete each object in it (finalizers hold some), and remove the namespace
        once it is empty. Deleting a terminating namespace again changes nothing."""
        if name in namespaces.SYSTEM_NAMESPACES:
            raise namespaces.undeletable(name)
        current = self.get(NAMESPACES, name)
        obj = current.obj
        _check_preconditions(NAMESPACES, name, obj["metadata"], preconditions)
        if namespaces.is_terminating(obj):
            return current, False
        marked = namespaces.mark_terminating(obj, now_rfc3339())
        if dry_run:
            return Entry(dumps(marked), current.rv), False
        entry = self._commit(NAMESPACES, name, marked, MODIFIED, current)
        for key, in_namespace in self._by_namespace.items():
            res = self.resources[key]
            for object_key in sorted(in_namespace.get(name, ())):
                self.delete(res, object_key.partition("/")[2], namespace=name)
        self._reap_namespace(name)
        return entry, name not in self._objects[NAMESPACES_KEY]

    def _reap_namespace(self, name: str) -> None:
        """Remove namespace `name` if it is terminating, holds nothing and has no finalizers."""
        current = self._objects[NAMESPACES_KEY].get(name)
        if current is None:
            return
        obj = current.obj
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return
        if any(name in in_namespace for in_namespace in self._by_namespace.values()):
            return
        self._commit(NAMESPACES, name, namespaces.finalized(obj), DELETED, current)


def _check_preconditions(
    res: Resource, name: str, meta: Mapping[str, Any], preconditions: Mapping[str, Any] | None
) -> None:
    for field_name, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = (preconditions or {}).get(field_name)
        if wanted and wanted != meta.get(field_name):
            raise errors.conflict(
                res.plural, res.group, name,
                f"Precondition failed: {label} in precondition: {wanted}, {label} in "
                f"object meta: {meta.get(field_name)}",
            )


def _parse_rv(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {value!r}") from None
    if number < 0:
        raise errors.bad_request(f"invalid resource version: {value!r}")
    return number


def _label_pairs(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return [(k, v) for k, v in labels.items() if isinstance(v, str)]
