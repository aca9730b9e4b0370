"""PriorityByLabel: an example QueueSort plugin that orders placements by one of their labels.

For teams that keep no PriorityClasses on the hub: a label such as `tier: gold` picks the
Temporal priority key directly. Written as a third-party plugin would be, against the
framework's contracts only, and registered through the entry-point group:

    [project.entry-points."fleet_scheduler.plugins"]
    PriorityByLabel = "scheduler.plugins.examples.priority_by_label:PriorityByLabel"

and enabled in a profile (it replaces PrioritySort: a profile has one QueueSort plugin):

    plugins:
      queueSort: {enabled: [{name: PriorityByLabel}]}
    pluginConfig:
      - {name: PriorityByLabel, args: {label: tier, keys: {gold: 1, silver: 2}, otherwise: 3}}

Fan-out turns (a cluster change reaching many placements) go one key lower, like PrioritySort's
default, so a placement's own changes overtake them."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.framework.queue_sort import (
    DEFAULT_PRIORITY_KEY,
    LOWEST_PRIORITY_KEY,
    QueueItem,
    QueuePriority,
    QueueSortPlugin,
    TurnCause,
    checked_priority_key,
)

__all__ = ["NAME", "PriorityByLabel"]

NAME = "PriorityByLabel"


class PriorityByLabel:
    """QueueSort plugin: the priority key is `keys[<the placement's label value>]`, or
    `otherwise` when the label is missing or its value not listed. Stateless."""

    name = NAME

    def __init__(
        self,
        *,
        label: str,
        keys: Mapping[str, int],
        otherwise: int = DEFAULT_PRIORITY_KEY,
    ) -> None:
        if not isinstance(label, str) or not label:
            raise ValueError(f"{NAME}: label must be a non-empty string, got {label!r}")
        if not isinstance(keys, Mapping) or not keys:
            raise ValueError(f"{NAME}: keys must map label values to priority keys, got {keys!r}")
        self.label = label
        self.keys = {str(value): _key(key, f"keys.{value}") for value, key in keys.items()}
        self.otherwise = _key(otherwise, "otherwise")

    def queue_sort(self, item: QueueItem) -> QueuePriority:
        key = self.keys.get(item.placement.labels.get(self.label, ""), self.otherwise)
        if item.cause is TurnCause.FAN_OUT:
            key = min(key + 1, LOWEST_PRIORITY_KEY)
        return QueuePriority(priority_key=key)


def _key(value: object, where: str) -> int:
    return checked_priority_key(value, f"{NAME}: {where}")


_: QueueSortPlugin = PriorityByLabel(label="example", keys={"a": 1})  # the contract, checked
