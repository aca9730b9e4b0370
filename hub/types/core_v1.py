"""The core (`v1`) kinds the scheduler's tools touch: Namespace, the home of every
ResourcePlacement, and Event, how a placement past its scheduling deadline is reported
(docs/operations.md, "Scheduling deadlines"). Not fleet kinds: they have no CRD
(`hub.types.KINDS` leaves them out), the API server serves them itself, under /api/v1."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from hub.types.meta import FleetModel, HubObject

__all__ = ["Event", "EventSource", "Namespace", "ObjectReference"]


class Namespace(HubObject):
    GROUP: ClassVar[str] = ""
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Namespace"
    PLURAL: ClassVar[str] = "namespaces"
    SINGULAR: ClassVar[str] = "namespace"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ns",)

    spec: dict[str, Any] = Field(default_factory=dict)  # finalizers: the API server's
    status: dict[str, Any] = Field(default_factory=dict)  # phase: Active or Terminating


class ObjectReference(FleetModel):
    """What an Event is about (core/v1 ObjectReference)."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None


class EventSource(FleetModel):
    component: str | None = None
    host: str | None = None


class Event(HubObject):
    """A core/v1 Event: what `kubectl describe` and `kubectl get events` show about an object.
    Namespaced: a cluster-scoped object's events live in `default`, as Kubernetes puts them."""

    GROUP: ClassVar[str] = ""
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Event"
    PLURAL: ClassVar[str] = "events"
    SINGULAR: ClassVar[str] = "event"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ev",)
    NAMESPACED: ClassVar[bool] = True

    involved_object: ObjectReference = Field(default_factory=ObjectReference)
    reason: str = ""
    message: str = ""
    type: str = ""  # Normal or Warning
    count: int | None = None
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    source: EventSource = Field(default_factory=EventSource)
    reporting_component: str | None = None
