"""The shared base of every hub type, and the Kubernetes object metadata we read and write.

One base for all: camelCase on the wire, snake_case in Python, frozen values, and unknown fields
kept (`extra="allow"`), because other KubeFleet controllers write fields we never model and a
read-modify-write by us must hand them back untouched. The same models cross Temporal (pydantic
data converter) and HTTP (`to_wire`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar, Self
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "Condition",
    "FleetModel",
    "HubObject",
    "ObjectMeta",
    "OwnerReference",
    "cel_validations",
    "crd_default",
    "crd_enum",
    "crd_rules",
]


def crd_enum(*values: str) -> dict[str, Any]:
    """Schema hint: the CRD restricts this string to `values`.

    The Python model stays lenient (a plain `str`) so that a value which slips past an API
    server's validation still loads and gets a clear condition from the scheduler instead of a
    parse failure."""
    return {"enum": list(values)}


def crd_default(value: Any) -> dict[str, Any]:
    """Schema hint: the API server defaults this field to `value` when it is absent.

    The Python model keeps `None` for "absent", so objects round-trip byte-for-byte."""
    return {"x-crd-default": value}


def cel_validations(rules: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    """`x-kubernetes-validations` entries for (rule, message) pairs."""
    return [{"rule": rule, "message": message} for rule, message in rules]


def crd_rules(*rules: tuple[str, str]) -> dict[str, Any]:
    """Schema hint: CEL rules, `(rule, message)`, the CRD carries as `x-kubernetes-validations`.

    kube-apiserver evaluates them on every write (rules naming `oldSelf` only on an update that
    had the field before), and so does devhub (`devhub.cel`). The Python model does not: an
    object that slipped past them still loads, and the snapshotter says what is wrong."""
    return {"x-crd-rules": cel_validations(rules)}


class FleetModel(BaseModel):
    """Base of every hub type. See the module docstring for why each setting is what it is."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="allow",
        ser_json_timedelta="iso8601",
    )

    # Models listed as "partially modelled" keep unknown fields in the CRD too
    # (x-kubernetes-preserve-unknown-fields), so other controllers' fields are not pruned.
    preserve_unknown_fields: ClassVar[bool] = False

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict as the API server expects it: camelCase, no nulls."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Self:
        return cls.model_validate(data)


class OwnerReference(FleetModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(FleetModel):
    """The subset of Kubernetes ObjectMeta the fleet kinds use; the rest is kept as extra."""

    preserve_unknown_fields: ClassVar[bool] = True

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list)

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None


class Condition(FleetModel):
    """A standard Kubernetes condition (metav1.Condition)."""

    type: str
    status: str = Field(json_schema_extra=crd_enum("True", "False", "Unknown"))
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: datetime | None = None


class HubObject(FleetModel):
    """A top-level hub object: apiVersion, kind, metadata, and the kind's API coordinates.

    Subclasses set the ClassVars; `hub.crds` and `devhub` read them to serve the kind."""

    GROUP: ClassVar[str]
    VERSION: ClassVar[str] = "v1beta1"
    KIND: ClassVar[str]
    PLURAL: ClassVar[str]
    SINGULAR: ClassVar[str]
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    CATEGORIES: ClassVar[tuple[str, ...]] = ()
    NAMESPACED: ClassVar[bool] = False
    # (name, type, jsonPath) for `kubectl get`; the CRD always adds an Age column.
    PRINTER_COLUMNS: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    # CEL rules (rule, message) on the whole object, where `self.metadata.name` is readable.
    RULES: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Top-level fields the CRD requires, and whether it has a status subresource (a write to
    # the object then leaves its status alone). Every kind but data-only ones: spec, status.
    REQUIRED: ClassVar[tuple[str, ...]] = ("spec",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def model_post_init(self, context: Any, /) -> None:
        # apiVersion and kind are implied by the class; fill them so every write carries them.
        if not self.api_version:
            version = f"{self.GROUP}/{self.VERSION}" if self.GROUP else self.VERSION
            object.__setattr__(self, "api_version", version)
        if not self.kind:
            object.__setattr__(self, "kind", self.KIND)

    @property
    def name(self) -> str:
        return self.metadata.name

    @classmethod
    def api_path(cls, namespace: str | None = None) -> str:
        """The collection URL path, e.g. /apis/<group>/v1beta1/clusterresourcebindings.

        For a namespaced kind, `namespace` narrows it to /apis/<group>/v1beta1/namespaces/<ns>/
        <plural>; without one it is the all-namespace collection (lists and watches only)."""
        if namespace and not cls.NAMESPACED:
            raise ValueError(f"{cls.KIND} is cluster-scoped: it has no namespace {namespace!r}")
        # The core group ("") lives under /api, every other group under /apis/<group>.
        base = f"/apis/{cls.GROUP}/{cls.VERSION}" if cls.GROUP else f"/api/{cls.VERSION}"
        if namespace:
            return f"{base}/namespaces/{quote(namespace, safe='')}/{cls.PLURAL}"
        return f"{base}/{cls.PLURAL}"
