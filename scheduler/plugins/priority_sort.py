"""PrioritySort: the default QueueSort plugin, kube-scheduler's PrioritySort for placements.

A placement's priority is the value of the `scheduling.k8s.io/v1` PriorityClass it names with
the annotation `fleet-scheduler.io/priority-class`; without one, the value of the class with
`globalDefault: true`; without that, 0, exactly as for pods. Temporal has five priority keys, not
two billion values, so the profile cuts values into bands (`bands`, highest first: a value at or
above a band's `minValue` takes its key; below the last band, the last band's key):

    value >= 1,000,000,000  -> key 1   (system-critical work)
    value >= 1,000          -> key 2   (important placements)
    value >= 0              -> key 3   (everything else: Temporal's own default)
    below 0                 -> key 4   (best effort)

Turns the placement causes (created, changed, deleting, a person's requeue) take the band's key;
turns fanned out from a cluster change, the watcher's start or the reconcile run
`fanOutDemotion` keys lower (default 1, never below key 5), so a cluster flapping under
thousands of placements does not hold back a new placement of the same band.

Aging (docs/priority.md, "Aging"): a placement past its scheduling deadline with `,aging` has
its turns lifted one key per miss, never past the key of its own turns, its band's: a deadline
does not buy priority, since who may use a PriorityClass is the cluster admin's call. The
profile's `agingBeyondBand` (0 to 4, default 0) lets aging go that many keys further, never past
key 1; it is the admin's to turn on, as a PriorityClass is.

Fairness (off by default): the fairness key is the value of the placement's label `tenantLabel`
(default `fleet-scheduler.io/tenant`), with the tenant's weight from `weights` (default
`defaultWeight`, 1). Temporal shares each priority key's dispatch between fairness keys in
proportion to their weights once the server runs with fairness on (docs/priority.md).

Unsatisfied first (`unsatisfiedFirst`, on by default): within its class, a turn of a placement
that has less than it asks for (new, below its N, its spec or policy changed) goes before the
re-decisions of placements that already have it. Temporal's keys are whole numbers, so the
order holds in two ways: such a placement's fan-out turns are not demoted (they run at the key
of its own turns, ahead of the demoted fan-outs of satisfied placements of its band), and at the
same key `within_key` puts it first wherever the scheduler owns the queue (the watcher's outbox,
the workflow worker's local slots). It never lifts a turn past its band.

New first (`newFirst`, on by default, counts only under `unsatisfiedFirst`): among those, a
placement that has nothing yet (new: never scheduled) goes before one that has some but wants
more or changed, so a new placement does not wait behind a backlog of edits. Within the key:
0 new, 1 wanting more or changed (0 too with `newFirst: false`), 2 a satisfied re-decision.

A placement naming a PriorityClass that does not exist is not refused (pods would be): it gets
the default priority, and the result's `problem` says so for `status` and `explain`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub.names import DEFAULT_TENANT_LABEL, PRIORITY_CLASS_ANNOTATION
from scheduler.clusters.labels import key_problem
from scheduler.framework.queue_sort import (
    HIGHEST_PRIORITY_KEY,
    LOWEST_PRIORITY_KEY,
    QueueItem,
    QueuePriority,
    QueueSortPlugin,
    TurnCause,
    checked_priority_key,
)
from scheduler.opt_in.placement_annotations import PriorityClassError, parse_priority_class
from scheduler.opt_in.values import shown

__all__ = [
    "DEFAULT_BANDS",
    "NAME",
    "WITHIN_NEW",
    "WITHIN_SATISFIED",
    "WITHIN_WANTING",
    "Band",
    "PrioritySort",
]

NAME = "PrioritySort"

# PriorityClass values are int32.
MIN_VALUE = -(2**31)
MAX_VALUE = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Band:
    min_value: int
    priority_key: int


DEFAULT_BANDS: tuple[Band, ...] = (
    Band(1_000_000_000, 1),
    Band(1_000, 2),
    Band(0, 3),
    Band(MIN_VALUE, 4),
)
DEFAULT_FAN_OUT_DEMOTION = 1
# The order within a key (QueuePriority.within_key), first to last. A workflow reads any value
# above WITHIN_WANTING as a satisfied re-decision, and the value 1 of schedulers before newFirst
# (then: satisfied) as a placement that wants more: still after the new ones.
WITHIN_NEW = 0
WITHIN_WANTING = 1
WITHIN_SATISFIED = 2


class PrioritySort:
    """QueueSort plugin: priority bands from PriorityClass values, optional fairness by tenant.
    Stateless; arguments are checked here, so a bad profile fails at load with its YAML path."""

    name = NAME

    def __init__(
        self,
        *,
        bands: Sequence[Mapping[str, object]] | None = None,
        fanOutDemotion: int = DEFAULT_FAN_OUT_DEMOTION,
        fairness: Mapping[str, object] | None = None,
        agingBeyondBand: int = 0,
        unsatisfiedFirst: bool = True,
        newFirst: bool = True,
    ) -> None:
        self.bands = DEFAULT_BANDS if bands is None else _bands(bands)
        self.aging_beyond_band = _key_steps("agingBeyondBand", agingBeyondBand)
        self.fan_out_demotion = _key_steps("fanOutDemotion", fanOutDemotion)
        if not isinstance(unsatisfiedFirst, bool):
            raise ValueError(f"unsatisfiedFirst must be true or false, got {unsatisfiedFirst!r}")
        self.unsatisfied_first = unsatisfiedFirst
        if not isinstance(newFirst, bool):
            raise ValueError(f"newFirst must be true or false, got {newFirst!r}")
        self.new_first = newFirst
        self.fairness, self.tenant_label, self.weights, self.default_weight = _fairness(
            fairness or {}
        )

    def queue_sort(self, item: QueueItem) -> QueuePriority:
        value, class_name, problem = self._value(item)
        own = key = self.band_key(value)
        wanting = self.unsatisfied_first and (item.unsatisfied or item.new)
        if item.cause is TurnCause.FAN_OUT and not wanting:
            key = min(key + self.fan_out_demotion, LOWEST_PRIORITY_KEY)
        beyond = self.aging_beyond_band
        tenant = item.placement.labels.get(self.tenant_label) or None
        fair = self.fairness and tenant is not None
        return QueuePriority(
            priority_key=key,
            fairness_key=tenant if fair else None,
            fairness_weight=self.weights.get(tenant, self.default_weight)  # type: ignore[arg-type]
            if fair
            else None,
            value=value,
            priority_class=class_name,
            tenant=tenant,
            problem=problem,
            # None: aging stops at `own`, the key of the placement's own turns.
            aging_limit=max(HIGHEST_PRIORITY_KEY, own - beyond) if beyond else None,
            within_key=self._within_key(item, wanting=wanting),
        )

    def _within_key(self, item: QueueItem, *, wanting: bool) -> int:
        """New placements first, then the ones that want more or changed, then satisfied
        re-decisions (all level with `unsatisfiedFirst` off)."""
        if not self.unsatisfied_first:
            return WITHIN_NEW
        if not wanting:
            return WITHIN_SATISFIED
        return WITHIN_NEW if item.new or not self.new_first else WITHIN_WANTING

    def band_key(self, value: int) -> int:
        """The priority key of a placement of priority `value`."""
        for band in self.bands:
            if value >= band.min_value:
                return band.priority_key
        return self.bands[-1].priority_key

    @staticmethod
    def _value(item: QueueItem) -> tuple[int, str | None, str | None]:
        """(value, the class it came from, a problem) as pods get theirs."""
        classes = item.priority_classes
        value = item.placement.annotations.get(PRIORITY_CLASS_ANNOTATION)
        problem = None
        if value is not None:
            try:
                named = parse_priority_class(value)
            except PriorityClassError as exc:
                problem = f"annotation {PRIORITY_CLASS_ANNOTATION}: {exc}"
            else:
                if named in classes.values:
                    return classes.values[named], named, None
                problem = (
                    f"PriorityClass {shown(named)} (annotation {PRIORITY_CLASS_ANNOTATION}) "
                    "not found"
                )
        default = classes.global_default
        if default is not None and default in classes.values:
            return classes.values[default], default, problem
        return 0, None, problem


def _key_steps(arg: str, value: object) -> int:
    """An argument counted in priority keys (fanOutDemotion, agingBeyondBand): 0 to 4."""
    most = LOWEST_PRIORITY_KEY - HIGHEST_PRIORITY_KEY
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise ValueError(f"{arg} must be an integer in [0, {most}], got {value!r}")
    return value


def _bands(value: object) -> tuple[Band, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"bands must be a non-empty list, got {value!r}")
    bands: list[Band] = []
    for index, entry in enumerate(value):
        where = f"bands[{index}]"
        if not isinstance(entry, Mapping) or set(entry) != {"minValue", "priorityKey"}:
            raise ValueError(f"{where} must have exactly minValue and priorityKey, got {entry!r}")
        low, key = entry["minValue"], entry["priorityKey"]
        if isinstance(low, bool) or not isinstance(low, int) or not MIN_VALUE <= low <= MAX_VALUE:
            raise ValueError(f"{where}.minValue must be an int32, got {low!r}")
        key = checked_priority_key(key, f"{where}.priorityKey")
        if bands and not (low < bands[-1].min_value and key >= bands[-1].priority_key):
            raise ValueError(
                f"{where}: bands go from the highest minValue down, with keys that never "
                f"rise (1 first): {low}/{key} after {bands[-1].min_value}/{bands[-1].priority_key}"
            )
        bands.append(Band(low, key))
    return tuple(bands)


def _fairness(args: Mapping[str, object]) -> tuple[bool, str, dict[str, float], float]:
    allowed = {"enabled", "tenantLabel", "weights", "defaultWeight"}
    unknown = set(args) - allowed
    if unknown:
        raise ValueError(
            f"fairness: unknown keys {sorted(unknown)}; expected some of {sorted(allowed)}"
        )
    enabled = args.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ValueError(f"fairness.enabled must be true or false, got {enabled!r}")
    label = args.get("tenantLabel", DEFAULT_TENANT_LABEL)
    if not isinstance(label, str) or (problem := key_problem(label)):
        raise ValueError(f"fairness.tenantLabel: {problem or f'not a string: {label!r}'}")
    default = _weight(args.get("defaultWeight", 1.0), "fairness.defaultWeight")
    weights = args.get("weights", {})
    if not isinstance(weights, Mapping):
        raise ValueError(f"fairness.weights must map tenants to weights, got {weights!r}")
    return (
        enabled,
        label,
        {str(t): _weight(w, f"fairness.weights.{t}") for t, w in weights.items()},
        default,
    )


def _weight(value: object, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{where} must be a positive number, got {value!r}")
    return float(value)


_: QueueSortPlugin = PrioritySort()  # type-checking fails if the contract drifts
