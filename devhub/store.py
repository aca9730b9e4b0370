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

from devhub import errors
from devhub.cel import check_rules
from devhub.errors import ApiError, Cause
from devhub.objectmeta import normalize_metadata
from devhub.patch import PatchError, apply_merge, json_patch, merge_patch
from devhub.persistence import SqliteStore
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

MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
APPLY_PATCH_CBOR: Final = "application/apply-patch+cbor"
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
    """One open watch: events for one resource, filtered by its selectors, queued in order."""

    key: str
    labels: LabelSelector
    fields: FieldSelector
    pending: deque[tuple[str, Event]] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    reason: str = ""

    def translate(self, event: Event) -> str | None:
        """The event type this watcher sees, or None when the object is outside its selectors.

        With selectors, an object that starts matching arrives as ADDED and one that stops
        matching leaves as DELETED, as from the API server's watch cache."""
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


class Store:
    """All objects of all served kinds, the event window and the open watches."""

    def __init__(
        self,
        resources: Iterable[Resource],
        *,
        watch_window: int = DEFAULT_WATCH_WINDOW,
        persistence: SqliteStore | None = None,
    ) -> None:
        if watch_window < 1:
            raise ValueError("watch_window must be at least 1")
        self.resources = {res.group_resource: res for res in resources}
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
        self._events: deque[Event] = deque()
        self._watchers: set[Watcher] = set()
        self._pages: OrderedDict[str, _Page] = OrderedDict()
        self._persistence = persistence
        if persistence is not None:
            self._load(persistence)

    # --- persistence -----------------------------------------------------------------------

    def _load(self, persistence: SqliteStore) -> None:
        for key, name, body in persistence.objects():
            if key not in self._objects:
                continue  # a kind no longer served
            obj = json.loads(body)
            rv = int(obj.get("metadata", {}).get("resourceVersion", "0") or 0)
            self._objects[key][name] = Entry(bytes(body), rv)
            self._index(key, name, obj)
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
        """Drop every object; resourceVersions stay monotonic and open watches end."""
        for key in self._objects:
            self._objects[key] = {}
            self._sorted[key] = None
            self._by_label[key] = {}
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

    # --- reads -----------------------------------------------------------------------------

    def count(self, res: Resource) -> int:
        return len(self._objects[res.group_resource])

    def get(self, res: Resource, name: str) -> Entry:
        entry = self._objects[res.group_resource].get(name)
        if entry is None:
            raise errors.not_found(res.plural, res.group, name)
        return entry

    def _sorted_entries(self, res: Resource) -> list[Entry]:
        key = res.group_resource
        objects = self._objects[key]
        names = self._sorted[key]
        if names is None:
            names = sorted(objects)
            self._sorted[key] = names
        return [objects[name] for name in names]

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

    def _candidates(self, res: Resource, labels: LabelSelector) -> list[Entry] | None:
        """In name order, the objects that can match `labels` by its narrowest equality
        requirement; None when it has none (then every object is a candidate)."""
        index = self._by_label[res.group_resource]
        best: set[str] | None = None
        for requirement in labels.requirements:
            if requirement.operator in ("=", "in") and len(requirement.values) == 1:
                names = index.get((requirement.key, requirement.values[0]), set())
                if best is None or len(names) < len(best):
                    best = names
        if best is None:
            return None
        objects = self._objects[res.group_resource]
        # Matching re-checks every requirement, so a name indexed too widely costs nothing.
        return [objects[name] for name in sorted(best) if name in objects]

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
    ) -> ListResult:
        """Objects in name order; devhub serves every list at its latest resourceVersion."""
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
            exact = fields.exact_name
            if exact is not None:
                found = self._objects[res.group_resource].get(exact)
                entries = [found] if found is not None else []
            else:
                narrowed = self._candidates(res, labels)
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
    ) -> tuple[list[tuple[str, Event]], Watcher]:
        """Register a watcher and return what it must send first (synchronously, so no gap).

        Without a resourceVersion (or "0"), or with sendInitialEvents, the first events are
        synthetic ADDEDs of the current objects; otherwise the window's events after it."""
        key = res.group_resource
        watcher = Watcher(key, labels, fields)
        initial: list[tuple[str, Event]] = []
        if resource_version in (None, "", "0") or send_initial_events:
            for entry in self._sorted_entries(res):
                if watcher.matches(entry.obj):
                    initial.append((ADDED, Event(entry.rv, ADDED, key, entry.raw, None)))
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

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    # --- writes ----------------------------------------------------------------------------

    def _commit(
        self, res: Resource, name: str, obj: dict[str, Any], event_type: str,
        old: Entry | None,
    ) -> Entry:
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
            self._unindex(key, name, previous.obj)
        if event_type == DELETED:
            del objects[name]
            self._sorted[key] = None
        else:
            if name not in objects:
                self._sorted[key] = None
            objects[name] = entry
            self._index(key, name, obj)
        event = Event(rv, event_type, key, raw, old.raw if old is not None else None)
        self._events.append(event)
        while len(self._events) > self.window:
            self.floor = self._events.popleft().rv
        for watcher in self._watchers:
            if watcher.key == key:
                watcher.offer(event)
        return entry

    def _decode(
        self, res: Resource, body: Any, field_validation: str
    ) -> tuple[dict[str, Any], list[Cause], list[str]]:
        """Type-check, prune and default a request body; returns (object, causes, warnings)."""
        _check_type(res, body)
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
        self, res: Resource, body: Any, *, dry_run: bool = False, field_validation: str = "Warn"
    ) -> tuple[Entry, list[str]]:
        obj, causes, warnings = self._decode(res, body, field_validation)
        meta = obj["metadata"]
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
        if name and (problem := subdomain_error(name)):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": {problem}',
                                "metadata.name"))
        if res.status_subresource:
            obj.pop("status", None)
        for system in ("namespace", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(system, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        causes.extend(validate(res.schema, obj, "", skip=SKIP_METADATA))
        if not causes:
            causes.extend(check_rules(res.schema, obj))
        if causes:
            raise self._invalid(res, name, causes)
        if name in self._objects[res.group_resource]:
            raise errors.already_exists(res.plural, res.group, name)
        if dry_run:
            return Entry(dumps(obj), self.rv), warnings
        return self._commit(res, name, obj, ADDED, None), warnings

    def replace(
        self,
        res: Resource,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
    ) -> tuple[Entry, list[str]]:
        current = self.get(res, name)
        obj, causes, warnings = self._decode(res, body, field_validation)
        body_name = obj["metadata"].get("name", "")
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        rv = obj["metadata"].get("resourceVersion")
        if not rv:
            raise self._invalid(res, name, [Cause(
                "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion",
            )])
        if rv != str(current.rv):
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
    ) -> tuple[Entry, list[str], bool]:
        """Returns (entry, warnings, created); only apply patches may create."""
        current = self._objects[res.group_resource].get(name)
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
            if current is None:
                if subresource:
                    raise errors.not_found(res.plural, res.group, name)
                entry, warnings = self.create(
                    res, patch, dry_run=dry_run, field_validation=field_validation
                )
                return entry, warnings, True
            patched = apply_merge(current.fresh(), patch)
        else:
            if current is None:
                raise errors.not_found(res.plural, res.group, name)
            try:
                if content_type == MERGE_PATCH:
                    if not isinstance(patch, dict):
                        raise PatchError("a merge patch must be a JSON object", malformed=True)
                    patched = merge_patch(current.fresh(), patch)
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
        obj, causes, warnings = self._decode(res, patched, field_validation)
        obj["metadata"]["name"] = name
        return self._update(res, current, obj, subresource, dry_run, causes), warnings, False

    def _update(
        self,
        res: Resource,
        current: Entry,
        new: dict[str, Any],
        subresource: str | None,
        dry_run: bool,
        causes: list[Cause],
    ) -> Entry:
        old = current.obj
        name = old["metadata"]["name"]
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
            if _spec_part(result) != _spec_part(old):
                result["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        result["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
        causes.extend(validate(res.schema, result, "", skip=SKIP_METADATA))
        if not causes:
            causes.extend(check_rules(res.schema, result, old))
        if causes:
            raise self._invalid(res, name, causes)
        if result == old:
            return current  # a no-op update writes nothing, as the API server skips it
        if dry_run:
            return Entry(dumps(result), current.rv)
        if result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            return self._commit(res, name, result, DELETED, current)
        return self._commit(res, name, result, MODIFIED, current)

    @staticmethod
    def _carry_system_fields(old: Mapping[str, Any], meta: dict[str, Any]) -> list[Cause]:
        causes = []
        if meta.get("uid") and meta["uid"] != old.get("uid"):
            causes.append(Cause("FieldValueInvalid",
                                f'Invalid value: "{meta["uid"]}": field is immutable',
                                "metadata.uid"))
        for system in ("uid", "creationTimestamp", "generation", "deletionTimestamp",
                       "deletionGracePeriodSeconds"):
            if system in old:
                meta[system] = old[system]
            else:
                meta.pop(system, None)
        meta.pop("namespace", None)
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
    ) -> tuple[Entry, bool]:
        """Returns (entry, gone): gone is False when finalizers keep the object for now."""
        current = self.get(res, name)
        meta = current.obj["metadata"]
        if preconditions:
            for field_name, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                wanted = preconditions.get(field_name)
                if wanted and wanted != meta.get(field_name):
                    raise errors.conflict(
                        res.plural, res.group, name,
                        f"Precondition failed: {label} in precondition: {wanted}, {label} in "
                        f"object meta: {meta.get(field_name)}",
                    )
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return current, False
            result = current.fresh()
            result["metadata"]["deletionTimestamp"] = now_rfc3339()
            result["metadata"]["deletionGracePeriodSeconds"] = 0
            result["metadata"]["generation"] = int(meta.get("generation", 1)) + 1
            if dry_run:
                return Entry(dumps(result), current.rv), False
            return self._commit(res, name, result, MODIFIED, current), False
        if dry_run:
            return current, True
        return self._commit(res, name, current.fresh(), DELETED, current), True

    def delete_collection(
        self, res: Resource, labels: LabelSelector, fields: FieldSelector, *, dry_run: bool = False
    ) -> list[Entry]:
        targets = self.list_entries(res, labels, fields).entries
        return [self.delete(res, entry.obj["metadata"]["name"], dry_run=dry_run)[0]
                for entry in targets]


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
