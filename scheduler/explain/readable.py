"""What people read of a cycle's decisions: KubeFleet's reasons in the forms `explain` prints,
and the filter reasons collapsed to one line per shared reason with its count.

One home for the CLI (`explain`, `plan`), the activities (a cycle's one-line summary, the lines
of rebalance moves) and the placement workflow (its current details in the Temporal UI), so
they say the same thing the same way. Only what people read is rewritten: the hub objects
(binding and snapshot decision reasons) and the recorded `Explanation` keep KubeFleet's exact
text, which tools compare."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from scheduler.explain.explanation import Explanation, FilterGroup

__all__ = [
    "COLLAPSE_AT",
    "filter_reason_line",
    "filtered_count",
    "first_few",
    "main_filter_reasons",
    "readable_reason",
    "shared_filter_groups",
    "shorten",
]

# Filter groups of this many clusters or more are a shared reason: `explain` prints it once,
# below its table, with its count.
COLLAPSE_AT: Final = 2

_TAINT: Final = re.compile(r"&\{Key:(?P<key>.*?) Value:(?P<value>.*?) Effect:(?P<effect>.*?)\}")


# KubeFleet's filter status code, which its status string puts before the reasons
# (kubefleet-rules 4.3): "ClusterUnschedulable, cluster does not match ...". It says the cluster
# cannot take this placement, which the fate (filtered, invalid target) already says; read
# before an affinity mismatch it sounds like a cordoned cluster, so people read the reasons.
_UNSCHEDULABLE: Final = re.compile(r"^ClusterUnschedulable, (?=\S)")


def readable_reason(reason: str) -> str:
    """A decision reason for people: KubeFleet's status code in front of its reasons left out
    (`cluster does not match with any of the required cluster affinity terms`, not
    `ClusterUnschedulable, cluster does not match ...`), and taints as kubectl shows them
    (`gpu=true:NoSchedule`) instead of Go's `&{Key:gpu Value:true Effect:NoSchedule}`
    (scheduler.plugins.taint_toleration.render_taint, what KubeFleet writes)."""

    def kubectl_style(found: re.Match[str]) -> str:
        value = f"={found['value']}" if found["value"] else ""
        return f"{found['key']}{value}:{found['effect']}"

    return _TAINT.sub(kubectl_style, _UNSCHEDULABLE.sub("", reason))


def first_few(items: Iterable[str], limit: int, more: str = " and {} more") -> str:
    """The first `limit` of `items`, comma-separated, then `more` with how many were left out
    (e.g. "a, b, c and 4 more"): a log line or a summary names a few, and counts the rest."""
    listed = list(items)
    left = len(listed) - limit
    return ", ".join(listed[:limit]) + (more.format(left) if left > 0 else "")


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis saying it was cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def shared_filter_groups(explanation: Explanation) -> dict[int, int]:
    """Filter group index -> its reference number (`[1]`), for the groups of COLLAPSE_AT
    clusters or more, in the explanation's order."""
    shared = [i for i, g in enumerate(explanation.filtered) if len(g.clusters) >= COLLAPSE_AT]
    return {index: number for number, index in enumerate(shared, start=1)}


def filter_reason_line(group: FilterGroup) -> str:
    """One filter reason: `ClusterAffinity, 12 clusters: <reason>` when shared, else
    `TaintToleration, member-2: <reason>`, the reason as `readable_reason` says it."""
    count = len(group.clusters)
    who = f"{count} clusters" if count >= COLLAPSE_AT else ", ".join(group.clusters)
    return f"{group.plugin}, {who}: {readable_reason(group.reason)}"


def main_filter_reasons(explanation: Explanation) -> list[FilterGroup]:
    """The filter groups, the reasons most clusters share first (ties by plugin and reason,
    so the order never depends on the explanation's)."""
    return sorted(explanation.filtered, key=lambda g: (-len(g.clusters), g.plugin, g.reason))


def filtered_count(explanation: Explanation) -> int:
    """How many clusters the filters left out."""
    return sum(len(g.clusters) for g in explanation.filtered)
