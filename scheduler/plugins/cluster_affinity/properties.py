"""Reading a named property from a MemberCluster (kubefleet-rules 5.1, "Property lookup").

Two kinds of names: `resources.kubernetes-fleet.io/<capacity type>-<resource>` reads
`status.resourceUsage`, anything else reads `status.properties[name].value`. A missing value is
"not available" (the term does not match, the sorter scores 0), never an error.

Deviations from KubeFleet, both because its behaviour aborts every cycle of the placement:

- the capacity type ends at the first `-`, so `available-ephemeral-storage` reads resource
  `ephemeral-storage` (KubeFleet at the reference commit demands exactly two parts; later
  KubeFleet cuts at the first `-` too, as its webhook always did);
- a value that is not a quantity raises `PropertyValueError` for the caller to turn into a
  filter reason or "not available", instead of an internal error."""

from __future__ import annotations

from dataclasses import dataclass, field

from hub import names
from scheduler.clusters.facts import ClusterFacts
from scheduler.framework.errors import SchedulerError
from scheduler.room.quantity import Quantity, QuantityError, parse

__all__ = [
    "CAPACITY_TYPES",
    "PropertyRef",
    "PropertyValueError",
    "QuantityCache",
    "compile_property",
    "lookup",
]

# Capacity type in the property name -> field of status.resourceUsage.
CAPACITY_TYPES = {"total": "capacity", "allocatable": "allocatable", "available": "available"}


class PropertyValueError(SchedulerError):
    """A cluster reports a value for the property that is not a quantity."""

    def __init__(self, property_name: str, value: str, error: QuantityError) -> None:
        super().__init__(f'property "{property_name}" has value "{value}", which is not a quantity')
        self.property_name = property_name
        self.value = value
        self.error = error


@dataclass(frozen=True, slots=True)
class PropertyRef:
    """A property name, resolved once per cycle.

    `usage` is the resourceUsage field for resource properties and None for plain ones; `error`
    is set when the name can never be read (KubeFleet: an internal error whenever reached)."""

    name: str
    usage: str | None = None
    key: str = ""
    error: str | None = None


def compile_property(name: str) -> PropertyRef:
    if not name.startswith(names.RESOURCE_PROPERTY_PREFIX):
        return PropertyRef(name, key=name)
    rest = name.removeprefix(names.RESOURCE_PROPERTY_PREFIX)
    capacity_type, _, resource = rest.partition("-")
    if not capacity_type or not resource:
        return PropertyRef(
            name,
            error=f'invalid resource property name "{name}": want '
            f"{names.RESOURCE_PROPERTY_PREFIX}<total|allocatable|available>-<resource>",
        )
    usage = CAPACITY_TYPES.get(capacity_type)
    if usage is None:
        return PropertyRef(
            name,
            error=f'invalid capacity type "{capacity_type}" in resource property name "{name}" '
            "(want total, allocatable or available)",
        )
    return PropertyRef(name, usage=usage, key=resource)


@dataclass(slots=True)
class QuantityCache:
    """Parsed quantities of one cycle, keyed by their exact text: fleets repeat values a lot."""

    parsed: dict[str, Quantity] = field(default_factory=dict)
    """Texts that parsed; read it directly on hot paths, add to it only through `parse`."""
    _errors: dict[str, QuantityError] = field(default_factory=dict)

    def parse(self, text: str) -> Quantity:
        parsed = self.parsed.get(text)
        if parsed is not None:
            return parsed
        error = self._errors.get(text)
        if error is None:
            try:
                parsed = self.parsed[text] = parse(text)
                return parsed
            except QuantityError as exc:
                error = self._errors[text] = exc
        raise error


def lookup(ref: PropertyRef, facts: ClusterFacts, cache: QuantityCache) -> Quantity | None:
    """The property's value on `cluster`, or None when it is not available.

    Raises PropertyValueError for a value that is not a quantity. The caller checks
    `ref.error` first (a name that can never be read)."""
    if ref.usage is None:
        reported = facts.properties.get(ref.key)
        if reported is None:
            return None
        text = reported
    else:
        if ref.usage == "capacity":
            raw = facts.capacity.get(ref.key)
        elif ref.usage == "allocatable":
            raw = facts.allocatable.get(ref.key)
        else:
            raw = facts.available.get(ref.key)
        if raw is None:
            return None
        text = raw.strip()  # Go decodes a ResourceList quantity with strings.TrimSpace
    known = cache.parsed.get(text)
    if known is not None:
        return known
    try:
        return cache.parse(text)
    except QuantityError as exc:
        raise PropertyValueError(ref.name, text, exc) from exc
