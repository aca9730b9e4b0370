"""Plain-text rendering of what `fleet-scheduler explain` and `status` print.

Pure functions from the workflow's `status` query (`PlacementStatus`) and from visibility rows
to text, so the output can be tested without a server and stays the same whichever process asks.
A terminal is the target: fixed-width columns, one cluster per line, nothing wider than the data
needs. Every cluster of the last cycle appears with its fate (picked, not picked, filtered, kept,
or PickFixed's valid / invalid / not found) and the numbers or reason behind it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from activities.rebalance import RebalancePlan
from hub.kinds import placement_key
from scheduler import Explanation, ScoreGroup
from scheduler.explain.explanation import beyond_room_message
from scheduler.explain.readable import (
    filter_reason_line,
    readable_reason,
    shared_filter_groups,
    shorten,
)
from scheduler.moves.rebalance import percent
from scheduler.opt_in.deadline import AGING_DEFAULT_KEY, format_duration
from workflows.models import (
    CycleReport,
    DeadlineState,
    PlacementStatus,
    TurnPriority,
    WriteCounts,
)

__all__ = [
    "FATE_FILTERED",
    "FATE_INVALID",
    "FATE_KEPT",
    "FATE_NOT_FOUND",
    "FATE_NOT_PICKED",
    "FATE_PICKED",
    "FATE_VALID",
    "PlacementRow",
    "cluster_rows",
    "deadline_line",
    "deadline_text",
    "explanation_lines",
    "render_explain",
    "render_status",
    "short_waiting",
    "table",
    "tie_line",
]

# The fate column of `explain`, one word or two per cluster.
FATE_PICKED: Final = "picked"
FATE_NOT_PICKED: Final = "not picked"
FATE_FILTERED: Final = "filtered"
FATE_KEPT: Final = "kept"
FATE_ALREADY_SELECTED: Final = "dropped"
FATE_VALID: Final = "valid target"
FATE_INVALID: Final = "invalid target"
FATE_NOT_FOUND: Final = "not found"

NONE: Final = "-"
KEPT_DETAIL: Final = "already has a binding of this snapshot"
KEPT_SUFFIX: Final = "; keeps its binding"
COLUMN_GAP: Final = "  "
CLUSTER_HEADERS: Final = ("CLUSTER", "FATE", "AFFINITY", "TOPOLOGY", "DETAIL")
BINDING_HEADERS: Final = ("CLUSTER", "BINDING WRITE", "WHY")
ROOM_HEADERS: Final = ("CLUSTER", "ALLOCATABLE", "ALLOCATED", "REQUESTED")
STATUS_HEADERS: Final = ("NAME", "TYPE", "SCHEDULED", "CYCLES", "STATE", "WAITING FOR")
# First column when ResourcePlacements are listed (as kubectl's -A).
NAMESPACE_HEADER: Final = "NAMESPACE"
PRIORITY_HEADERS: Final = ("PRIORITY", "TENANT")
DEADLINE_HEADER: Final = "DEADLINE"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; no trailing blanks on any line."""
    materialised = [list(headers), *([str(cell) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in materialised) for i in range(len(headers))]
    lines = [
        COLUMN_GAP.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in materialised
    ]
    return "\n".join(lines)


TIE_WON: Final = "won a tie on score"
TIE_LOST: Final = "lost a tie on score to a picked cluster"
# Said once below the table, not on every tied row.
TIE_RULE: Final = "ties on score: the larger name wins (KubeFleet)"
ALL_TIED: Final = (
    "every cluster that passed the filters scored the same: the larger names were picked "
    "(KubeFleet's tie-break)"
)

ScoreKey = tuple[int, int, int, int | None]


def _score_key(group: ScoreGroup) -> ScoreKey:
    return (group.affinity, group.topology, group.obsolete, group.total)


def _score_detail(group: ScoreGroup, tie: str | None = None) -> str:
    notes = []
    if group.obsolete:
        notes.append("has an obsolete binding (preferred on ties)")
    if group.total is not None:
        notes.append(f"weighted total {group.total}")
    if tie is not None:
        notes.append(tie)
    return "; ".join(notes)


def _all_tied(explanation: Explanation) -> bool:
    """Picked and not-picked clusters all scored the same: the name alone chose."""
    keys = {_score_key(g) for g in (*explanation.picked, *explanation.not_picked)}
    return len(keys) == 1 and bool(explanation.picked) and bool(explanation.not_picked)


def _ties(explanation: Explanation) -> bool:
    """Some picked cluster scored the same as a not-picked one: the name tie-break split them."""
    picked = {_score_key(g) for g in explanation.picked}
    return any(_score_key(g) in picked for g in explanation.not_picked)


def tie_line(explanation: Explanation) -> str | None:
    """The tie-break, said once for the table: ALL_TIED when the name alone chose, TIE_RULE when
    some rows say they won or lost a tie, else None."""
    if _all_tied(explanation):
        return ALL_TIED
    return TIE_RULE if _ties(explanation) else None


def _scored(
    fate: str,
    groups: Sequence[ScoreGroup],
    tied: set[ScoreKey],
    tie: str,
    *,
    by_name: bool = False,
) -> list[tuple[str, ...]]:
    # Groups come best first and clusters within a group in rank order: keep that order, it is
    # the ranking the cycle used (`by_name`: by name instead). A group scoring the same as one
    # of the other fate was split by the name tie-break: say so.
    rows: list[tuple[str, ...]] = [
        (
            cluster,
            fate,
            str(group.affinity),
            str(group.topology),
            _score_detail(group, tie if _score_key(group) in tied else None),
        )
        for group in groups
        for cluster in group.clusters
    ]
    return sorted(rows) if by_name else rows


def cluster_rows(explanation: Explanation) -> list[tuple[str, ...]]:
    """One row per cluster the cycle mentions: (cluster, fate, affinity, topology, detail).

    Ordered by fate as a reader scans it (what was chosen, then what was not and why); within a
    fate, not-picked clusters keep their rank (the next in line first), the others are sorted by
    name, as the cycle's summary names its picks. A PickFixed target that keeps its binding is
    one row: a valid target, with "kept" in its detail. A filter reason shared by several
    clusters is a reference (`[1]`) that `explanation_lines` prints once, with its count; a tie
    on score is said on each tied row, its rule once (`tie_line`), and when every cluster
    scored the same, only once."""
    kept = set(explanation.kept)
    all_tied = _all_tied(explanation)
    picked_scores = set() if all_tied else {_score_key(g) for g in explanation.picked}
    not_picked_scores = set() if all_tied else {_score_key(g) for g in explanation.not_picked}
    references = shared_filter_groups(explanation)
    rows: list[tuple[str, ...]] = []
    rows += _scored(FATE_PICKED, explanation.picked, not_picked_scores, TIE_WON, by_name=True)
    rows += [
        (c, FATE_VALID, NONE, NONE, f"fixed target{KEPT_SUFFIX if c in kept else ''}")
        for c in sorted(explanation.valid)
    ]
    listed = {row[0] for row in rows}
    rows += [(c, FATE_KEPT, NONE, NONE, KEPT_DETAIL) for c in sorted(kept - listed)]
    rows += _scored(FATE_NOT_PICKED, explanation.not_picked, picked_scores, TIE_LOST)
    rows += sorted(
        (
            c,
            FATE_FILTERED,
            NONE,
            NONE,
            f"{group.plugin} [{references[index]}]"
            if index in references
            else f"{group.plugin}: {readable_reason(group.reason)}",
        )
        for index, group in enumerate(explanation.filtered)
        for c in group.clusters
    )
    rows += [
        (c, FATE_ALREADY_SELECTED, NONE, NONE, "already selected")
        for c in sorted(explanation.already_selected)
    ]
    rows += sorted(
        (t.cluster, FATE_INVALID, NONE, NONE, readable_reason(t.reason))
        for t in explanation.invalid
    )
    rows += [
        (c, FATE_NOT_FOUND, NONE, NONE, "no such member cluster")
        for c in sorted(explanation.not_found)
    ]
    return rows


def shared_reason_lines(explanation: Explanation) -> list[str]:
    """`[1] ClusterAffinity, 12 clusters: <reason>`: each filter reason several clusters share."""
    return [
        f"[{number}] {filter_reason_line(explanation.filtered[index])}"
        for index, number in shared_filter_groups(explanation).items()
    ]


def _writes(writes: WriteCounts) -> str:
    parts = [
        f"{writes.created} created",
        f"{writes.patched} patched",
        f"{writes.unscheduled} unscheduled",
        f"{writes.finalizers_removed} finalizers removed",
        "snapshot status written" if writes.status_written else "snapshot status unchanged",
    ]
    if writes.placement_condition_written:
        parts.append("placement Scheduled condition written")
    return ", ".join(parts)


def _wanted(report: CycleReport) -> str:
    outcome = report.outcome
    wanted = "" if outcome.wanted is None else f"/{outcome.wanted}"
    fulfilled = "fully scheduled" if outcome.fulfilled else "not fully scheduled"
    return f"{outcome.placement_type} {outcome.picked}{wanted} picked, {fulfilled}"


def _report_lines(report: CycleReport) -> list[str]:
    summary = report.summary or _wanted(report)
    # The activity's summary usually names its cycle already ("cycle 7: PickN 3/3, ...").
    head = (
        summary
        if summary.startswith(f"cycle {report.cycle}:")
        else (f"cycle {report.cycle}: {summary}")
    )
    lines = [f"last {head}"]
    lines.append(f"  outcome:   {_wanted(report)}")
    explanation = report.full_explanation()
    snapshot = f"  snapshot:  {report.snapshot}"
    if explanation is not None:
        snapshot += f" (score mode {explanation.score_mode}"
        snapshot += f", branch {explanation.branch})" if explanation.branch else ")"
    lines.append(snapshot)
    lines.append(
        f"  read:      {report.clusters_seen} member clusters, {report.bindings_seen} bindings "
        f"in {report.duration_ms:.0f} ms"
    )
    lines.append(f"  writes:    {_writes(report.writes)}")
    if report.requeue:
        lines.append("  requeue:   another cycle right away")
    elif report.requeue_after_seconds:
        lines.append(f"  requeue:   after {report.requeue_after_seconds:g}s")
    if report.error and report.error not in head:
        lines.append(f"  error:     {report.error}")
    return lines


def explanation_lines(explanation: Explanation) -> list[str]:
    """Every cluster's fate, the binding writes and the notes of one cycle (explain and plan)."""
    rows = cluster_rows(explanation)
    lines = [table(CLUSTER_HEADERS, rows) if rows else "no member clusters were considered"]
    tie = tie_line(explanation)
    shared = shared_reason_lines(explanation)
    if tie is not None or shared:
        lines.append("")
    if tie is not None:
        lines.append(tie)
    lines += shared
    if explanation.not_evaluated:
        lines.append(
            f"{explanation.not_evaluated} more clusters not evaluated: enough feasible clusters "
            "were found first (percentageOfClustersToScore)"
        )
    if explanation.bindings:
        lines.append("")
        lines.append(
            table(
                BINDING_HEADERS,
                sorted(
                    (cluster, group.action, group.why)
                    for group in explanation.bindings
                    for cluster in group.clusters
                ),
            )
        )
    lines += room_lines(explanation)
    if explanation.notes:
        lines.append("")
        lines += [f"note: {note}" for note in explanation.notes]
    return lines


def room_lines(explanation: Explanation) -> list[str]:
    """Capacity-aware cycles (docs/capacity.md): each judged cluster's room in the requested
    resources (allocated = other placements' reservations and the room nominated for other
    placements' preemptions, before the cycle), and what was short."""
    lines: list[str] = []
    if explanation.room:
        requested = explanation.requests or NONE
        lines += [
            "",
            table(
                ROOM_HEADERS,
                (
                    (row.cluster, row.allocatable or NONE, row.allocated or "0", requested)
                    for row in explanation.room
                ),
            ),
        ]
    if explanation.shortage is not None:
        lines += ["", f"short: {explanation.shortage.message()}"]
    if explanation.beyond_room:
        lines += ["", f"over: {beyond_room_message(explanation.beyond_room, shown=20)}"]
    return lines


def deadline_text(state: DeadlineState, now: datetime) -> str:
    """The scheduling deadline in a few words (docs/operations.md, "Scheduling deadlines"):
    `10m, 6m left`, `10m, exceeded 3m ago`, `10m, met`, or what is wrong with the annotation."""
    if state.seconds is None:
        return f"invalid ({state.problem})" if state.problem else "invalid"
    text = format_duration(state.seconds) + (", aging" if state.aging else "")
    if state.since is None:
        return f"{text}, met"
    due = state.since + timedelta(seconds=state.seconds)
    if now >= due:
        return f"{text}, exceeded {format_duration(now - due)} ago"
    left = format_duration(due - now) if due - now >= timedelta(seconds=1) else "<1s"
    return f"{text}, {left} left"


def deadline_line(
    state: DeadlineState, now: datetime, last_turn_key: int | None, best_key: int | None = None
) -> str:
    """`explain`'s line: e.g. "deadline: 10m, exceeded 3m ago: 2 of 3 clusters picked; missing
    1: 4 clusters filtered by ClusterAffinity (...)". An aging placement past its deadline adds
    how far aging may lift it (`best_key`, TurnPriority.best_aged_key; None: key 3)."""
    line = f"deadline: {deadline_text(state, now)}"
    if state.since is not None and state.missing:
        line += f": {state.missing}"
    if state.aging and state.misses and last_turn_key is not None:
        best = best_key if best_key is not None else AGING_DEFAULT_KEY
        line += (
            f" (aging after {state.misses} miss(es): last turn at key {last_turn_key}, "
            f"aging lifts it to key {best} at best)"
        )
    return line


def render_explain(
    status: PlacementStatus, evaluating: CycleReport | None = None, now: datetime | None = None
) -> str:
    """The `explain` text: header, the last cycle's summary, every cluster's fate, the binding
    writes and notes of that cycle.

    When the last cycle evaluated no cluster (PickN already had its clusters), `evaluating` is
    the most recent cycle that did, if the caller found one (e.g. in the workflow's history):
    its table follows, so every cluster's fate is still shown."""
    key = placement_key(status.namespace, status.placement)
    lines = [
        f"placement {key}: {status.cycles} cycle{'s' if status.cycles != 1 else ''}",
        f"waiting for: {status.waiting_for or NONE}",
    ]
    if status.priority is not None:
        lines.append(priority_line(status.priority, status.last_turn_key))
    if status.deadline is not None:
        when = now or datetime.now(UTC)
        best = status.priority.best_aged_key() if status.priority is not None else None
        lines.append(deadline_line(status.deadline, when, status.last_turn_key, best))
    if status.pending_reasons:
        fresh = " (fresh)" if status.fresh_pending else ""
        lines.append(f"pending{fresh}: {'; '.join(status.pending_reasons)}")
    if status.last_moves is not None and status.last_moves.lines:
        lines.append(f"moves before cycle {status.last_moves.cycle}:")
        lines += [f"  {line}" for line in status.last_moves.lines]
    report = status.last
    if report is None or not report.error or status.last_error != report.error:
        lines.append(f"last error: {status.last_error or NONE}")  # else: the cycle shows it
    if report is None:
        lines.append("no cycle has finished yet")
        return "\n".join(lines) + "\n"
    lines.append("")
    lines += _report_lines(report)
    explanation = report.full_explanation()
    if explanation is None:
        lines.append("(this cycle recorded no per-cluster explanation)")
        return "\n".join(lines) + "\n"
    lines.append("")
    lines += explanation_lines(explanation)
    if explanation.evaluated:
        return "\n".join(lines) + "\n"
    if report.error:
        lines.append("")
        lines.append(
            f"cycle {report.cycle} could not act, and retrying will not help: fix what the error "
            "names; the change to the placement runs the next cycle."
        )
        return "\n".join(lines) + "\n"
    others = report.clusters_seen - len(explanation.kept)
    lines.append("")
    lines.append(
        f"cycle {report.cycle} kept the current picks and evaluated no other cluster"
        + (f" ({others} more in the fleet)" if others > 0 else "")
        + "."
    )
    chosen = evaluating.full_explanation() if evaluating is not None else None
    if evaluating is not None and chosen is not None:
        headline, *details = _report_lines(evaluating)
        lines.append("The last cycle that evaluated them: " + headline.removeprefix("last "))
        lines += details
        lines.append("")
        lines += explanation_lines(chosen)
    else:
        lines.append(
            "Requeue with --fresh to evaluate every cluster again (PickN may then pick others)."
        )
    return "\n".join(lines) + "\n"


def priority_line(priority: TurnPriority, last_turn_key: int | None) -> str:
    """e.g. "priority: 1000 (PriorityClass high), key 2 for its own turns; tenant team-a;
    last turn at key 3"."""
    origin = (
        f" (PriorityClass {priority.priority_class})" if priority.priority_class else " (default)"
    )
    own = NONE if priority.own_priority_key is None else str(priority.own_priority_key)
    text = f"priority: {priority.value}{origin}, key {own} for its own turns"
    if priority.tenant:
        weight = (
            f", fairness weight {priority.fairness_weight:g}"
            if priority.fairness_weight is not None
            else ", fairness off"
        )
        text += f"; tenant {priority.tenant}{weight}"
    if last_turn_key is not None:
        text += f"; last turn at key {last_turn_key}"
    if priority.problem:
        text += f" ({priority.problem})"
    return text


@dataclass(frozen=True)
class PlacementRow:
    """One placement workflow as `status` lists it. None means "not known" (shown as -); a
    ClusterResourcePlacement has no namespace (-), a ResourcePlacement always has one."""

    name: str
    placement_type: str | None
    fully_scheduled: bool | None
    cycles: int | None
    state: str
    waiting_for: str | None
    namespace: str | None = None
    priority: int | None = None  # FleetPriority: the PriorityClass value
    tenant: str | None = None  # FleetTenant
    deadline: str | None = None  # its scheduling deadline, in a few words (deadline_text)


def _yes_no(value: bool | None) -> str:
    return NONE if value is None else ("yes" if value else "no")


# `status` fits a terminal of this width: the WAITING FOR column takes what the others leave
# (at least WAITING_MIN characters), its text shortened to fit; `explain` has the whole of it.
STATUS_WIDTH: Final = 80
WAITING_MIN: Final = 16
RUNNING: Final = "Running"


def short_waiting(text: str, width: int) -> str:
    """What a placement waits for, in at most `width` characters: its head, without the
    parenthesised detail (`an event (placement, snapshot, ... or requeue)` is `an event`) and,
    where that is still too long, without what follows its first `, or ` or `: `."""
    head = text.split(" (", 1)[0]
    for separator in (", or ", ": "):
        if len(head) > width:
            head = head.split(separator, 1)[0]
    return shorten(head, width)


def render_status(rows: Sequence[PlacementRow]) -> str:
    """The `status` table, narrow enough for an 80-column terminal: ClusterResourcePlacements
    by name, then ResourcePlacements by namespace and name. A NAMESPACE column comes first when
    any ResourcePlacement is listed (a ClusterResourcePlacement's reads -), so a fleet of CRPs
    only reads as it always did. STATE is shown when some workflow is not Running (`--all`).
    WAITING FOR says what each waits for in a few words (`short_waiting`). PRIORITY and TENANT
    columns come last when any placement has a priority other than 0 or a tenant
    (docs/priority.md)."""
    if not rows:
        return "no placement workflows found\n"
    namespaced = any(row.namespace for row in rows)
    prioritised = any(row.priority or row.tenant for row in rows)
    deadlines = any(row.deadline for row in rows)
    states = any(row.state != RUNNING for row in rows)
    ordered = sorted(rows, key=lambda r: (r.namespace or "", r.name))
    before = [
        (
            *((row.namespace or NONE,) if namespaced else ()),
            row.name,
            row.placement_type or NONE,
            _yes_no(row.fully_scheduled),
            NONE if row.cycles is None else str(row.cycles),
            *((row.state,) if states else ()),
        )
        for row in ordered
    ]
    after = [
        (
            *(
                (NONE if row.priority is None else str(row.priority), row.tenant or NONE)
                if prioritised
                else ()
            ),
            *((row.deadline or NONE,) if deadlines else ()),
        )
        for row in ordered
    ]
    headers_before = (
        *((NAMESPACE_HEADER,) if namespaced else ()),
        *STATUS_HEADERS[:4],
        *((STATUS_HEADERS[4],) if states else ()),
    )
    headers_after = (
        *(PRIORITY_HEADERS if prioritised else ()),
        *((DEADLINE_HEADER,) if deadlines else ()),
    )
    used = sum(
        max(len(cells[i]) for cells in [headers, *body]) + len(COLUMN_GAP)
        for headers, body in ((headers_before, before), (headers_after, after))
        for i in range(len(headers))
    )
    width = max(STATUS_WIDTH - used, WAITING_MIN)
    body = [
        (*first, short_waiting(row.waiting_for, width) if row.waiting_for else NONE, *last)
        for row, first, last in zip(ordered, before, after, strict=True)
    ]
    return table((*headers_before, STATUS_HEADERS[5], *headers_after), body) + "\n"


def render_rebalance(plan: RebalancePlan, *, dry_run: bool) -> str:
    """Every move with the utilisation of both clusters before and after, then the totals."""
    lines = []
    for move in plan.moves:
        lines.append(
            f"move {move.binding} ({move.placement}) {move.source} -> {move.target}: "
            f"{move.reason}; {move.source} {percent(move.source_before)} -> "
            f"{percent(move.source_after)}, {move.target} {percent(move.target_before)} -> "
            f"{percent(move.target_after)}"
        )
    for name, why in sorted(plan.skipped.items()):
        lines.append(f"skipped {name}: {why}")
    before, after = plan.clusters_in_use()
    verb = "would make" if dry_run else "proposed"
    lines.append(
        f"{plan.strategy}: {verb} {len(plan.moves)} move(s) of {len(plan.movable)} movable "
        f"binding(s); clusters in use {before} -> {after}"
        + ("; nothing was written" if dry_run else "")
    )
    return "\n".join(lines) + "\n"
