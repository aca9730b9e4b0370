"""Fault injection and request counting, driven from test code on any thread.

Tests of retries and idempotency need the hub to misbehave on cue: `hub.faults.inject(verb=
"create", resource="clusterresourcebindings", status=503, count=2)` fails the next two binding
creates; `hang=True` holds matching requests open until the client gives up (or the fault is
removed). `hub.stats` counts every resource request by (verb, resource), so a test can assert
that a retried activity did not create a binding twice.

Resource matching: `"memberclusters"` matches the object and its `/status` subresource;
`"memberclusters/status"` only the subresource; `"*"` everything. Verbs are Kubernetes' request
verbs: get, list, watch, create, update, patch, delete, deletecollection."""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

__all__ = ["FAULT_STATUSES", "VERBS", "Fault", "Faults", "Stats", "resource_matches"]

VERBS: Final = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)
# 403: what RBAC answers a request its roles do not grant.
FAULT_STATUSES: Final = frozenset({403, 409, 429, 500, 503})
ANY: Final = "*"


def resource_matches(pattern: str, resource: str) -> bool:
    if pattern in (ANY, resource):
        return True
    return "/" not in pattern and resource.startswith(pattern + "/")


@dataclass(eq=False)
class Fault:
    """One injected fault. `remove()` stops it (and releases requests it holds hanging)."""

    verb: str
    resource: str
    status: int
    share: float
    count: int | None
    hang: bool
    retry_after: int
    hits: int = 0
    # Set by remove()/clear() (not by running out of `count`): requests hanging on it go free.
    released: bool = False
    _owner: Faults | None = field(default=None, repr=False)

    def remove(self) -> None:
        if self._owner is not None:
            self._owner.remove(self)


class Faults:
    """The set of active faults of one DevHub. Thread-safe."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._hangs: list[Fault] = []  # hang faults, also after their count ran out
        self._random = random.Random(seed)

    def inject(
        self,
        verb: str = ANY,
        resource: str = ANY,
        status: int = 500,
        share: float = 1.0,
        count: int | None = None,
        hang: bool = False,
        retry_after: int = 1,
    ) -> Fault:
        """Fail a `share` of matching requests with `status` (at most `count` times), or hang."""
        if verb != ANY and verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; use one of {sorted(VERBS)} or '*'")
        if not hang and status not in FAULT_STATUSES:
            raise ValueError(f"status must be one of {sorted(FAULT_STATUSES)}, not {status}")
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share must be within [0, 1], not {share}")
        if count is not None and count < 1:
            raise ValueError(f"count must be positive or None, not {count}")
        fault = Fault(verb, resource, status, share, count, hang, retry_after, _owner=self)
        with self._lock:
            self._faults.append(fault)
            if hang:
                self._hangs.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            fault.released = True
            if fault in self._faults:
                self._faults.remove(fault)
            if fault in self._hangs:
                self._hangs.remove(fault)

    def clear(self) -> None:
        with self._lock:
            for fault in (*self._faults, *self._hangs):
                fault.released = True
            self._faults.clear()
            self._hangs.clear()

    def active(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def match(self, verb: str, resource: str) -> Fault | None:
        """The fault that fires for this request, if any (counting it as a hit)."""
        with self._lock:
            for fault in self._faults:
                if fault.verb not in (ANY, verb) or not resource_matches(fault.resource, resource):
                    continue
                if fault.share < 1.0 and self._random.random() >= fault.share:
                    continue
                fault.hits += 1
                if fault.count is not None and fault.hits >= fault.count:
                    self._faults.remove(fault)
                return fault
        return None


class Stats:
    """Resource requests counted by (verb, resource). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def record(self, verb: str, resource: str) -> None:
        with self._lock:
            self._counts[(verb, resource)] += 1

    def count(self, verb: str = ANY, resource: str = ANY) -> int:
        with self._lock:
            return sum(
                n
                for (v, r), n in self._counts.items()
                if verb in (ANY, v) and resource_matches(resource, r)
            )

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
