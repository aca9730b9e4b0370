"""The one core (`v1`) kind the scheduler's tools touch: Namespace, the home of every
ResourcePlacement. Not a fleet kind: it has no CRD (`hub.types.KINDS` leaves it out), the API
server serves it itself, at /api/v1/namespaces."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from hub.types.meta import HubObject

__all__ = ["Namespace"]


class Namespace(HubObject):
    GROUP: ClassVar[str] = ""
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Namespace"
    PLURAL: ClassVar[str] = "namespaces"
    SINGULAR: ClassVar[str] = "namespace"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ns",)

    spec: dict[str, Any] = Field(default_factory=dict)  # finalizers: the API server's
    status: dict[str, Any] = Field(default_factory=dict)  # phase: Active or Terminating
