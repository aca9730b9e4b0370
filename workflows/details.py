"""A placement workflow's current details, as the Temporal UI shows them (markdown): the last
cycle's decision (its outcome, its picks, the main reasons clusters were filtered) and what the
placement does now.

The decision is written once per cycle (`decision`, which may unpack an explanation) and kept;
`current` puts it together with the line that changes between cycles (running a cycle, waiting
for an event or a timer, cleaning up), so what the last cycle decided stays on show while the
placement waits, while a turn runs, after a failed turn and in the next run after
continue-as-new. Filter reasons are collapsed as `explain` collapses them, in the same words
(scheduler.explain.readable): one line per shared reason with its count, the reasons most clusters
share first, a few at most. Everything has a bound, so the details stay within a few KB however
large the fleet; they are workflow metadata, not history. Pure and deterministic."""

from __future__ import annotations

import re
from typing import Final

from scheduler.explain.readable import (
    filter_reason_line,
    filtered_count,
    main_filter_reasons,
    readable_reason,
    shorten,
)
from workflows.models import CycleReport, PlacementPhase, TurnMoves

__all__ = [
    "DETAILS_MOVES",
    "DETAILS_PICKS",
    "DETAILS_REASONS",
    "MOVES_KEPT",
    "NO_CYCLE_YET",
    "current",
    "decision",
    "moved",
    "now_line",
]

# How many picked clusters, filter reasons and move lines the details list before "and N more".
DETAILS_PICKS: Final = 8
DETAILS_REASONS: Final = 4
DETAILS_MOVES: Final = 4
# How many lines of a turn's moves the workflow keeps (status, explain, carried over).
MOVES_KEPT: Final = 20
# How long one line (a reason, an error, what the placement waits for) may be.
LINE_CHARS: Final = 240
NO_CYCLE_YET: Final = "No cycle has finished yet."
CLEANING_UP: Final = "removing the deleted placement's bindings and finalizer"
# Characters markdown would read as formatting in a cluster name, reason or error (`~`: GFM's
# strikethrough; `&`: an entity such as `&lt;`).
_MARKDOWN: Final = str.maketrans({c: f"\\{c}" for c in "\\`*_[]<>#|~&"})
# What a renderer links with no markup at all, found in the text itself, which a backslash
# escape does not reliably stop: the UI's renderer links `scheme://...` and `mailto:`, GFM
# also `www.` and e-mail addresses. The character that makes each one a link becomes its HTML
# entity, which renders as that character, in plain text.
_AUTOLINKS: Final = re.compile(
    r"(?i)(?<=[a-z0-9]):(?=/)|(?<=\bmailto):|(?<=\bxmpp):|(?<=\bwww)\.|@"
)
_ENTITIES: Final = {":": "&#58;", ".": "&#46;", "@": "&#64;"}


def _text(text: str, limit: int = LINE_CHARS) -> str:
    """`text` as markdown shows it literally, on one line, at most `limit` characters: markdown
    escaped, and nothing a renderer would make a link of."""
    escaped = shorten(" ".join(text.split()), limit).translate(_MARKDOWN)
    return _AUTOLINKS.sub(lambda found: _ENTITIES[found.group(0)], escaped)


def _outcome(report: CycleReport) -> str:
    outcome = report.outcome
    wanted = "" if outcome.wanted is None else f"/{outcome.wanted}"
    fulfilled = "fully scheduled" if outcome.fulfilled else "not fully scheduled"
    return f"{_text(outcome.placement_type)} {outcome.picked}{wanted} picked, {fulfilled}"


def _listed(names: list[str], shown: int) -> str:
    listed = ", ".join(_text(n) for n in names[:shown])
    more = len(names) - shown
    return f"{listed} and {more} more" if more > 0 else listed


def decision(last: CycleReport | None, deciding: CycleReport | None = None) -> str:
    """The markdown of the last cycle's decision: its outcome and picks, and the filter reasons
    of the last cycle that judged clusters (`deciding`, when the last one only kept its picks).
    A report without its explanation (a worker's packed one it could not read, or a run carried
    over without it) shows its one-line summary instead."""
    if last is None:
        return NO_CYCLE_YET
    lines = [f"**Cycle {last.cycle}**: {_outcome(last)}", ""]  # a list needs a blank line
    explanation = last.full_explanation()
    if explanation is None:
        lines.append(f"- {_text(last.summary)}")
    else:
        chosen = [c for g in explanation.picked for c in g.clusters]
        chosen = list(dict.fromkeys([*chosen, *explanation.valid, *explanation.kept]))
        lines.append(f"- picked: {_listed(chosen, DETAILS_PICKS)}" if chosen else "- picked: none")
    if last.error:
        lines.append(f"- error: {_text(last.error)}")
    judged = explanation
    if judged is None or not judged.evaluated:
        judged = deciding.full_explanation() if deciding is not None else None
        source = f" (in cycle {deciding.cycle}, the last that judged clusters)" if deciding else ""
    else:
        source = ""
    if judged is not None and judged.filtered:
        groups = main_filter_reasons(judged)
        count = filtered_count(judged)
        # Top-level items under a heading line: the UI's renderer flattens nested lists.
        lines += ["", f"**Filtered** {count} cluster{'' if count == 1 else 's'}{source}:", ""]
        lines += [f"- {_text(filter_reason_line(g))}" for g in groups[:DETAILS_REASONS]]
        rest = groups[DETAILS_REASONS:]
        if rest:
            clusters = sum(len(g.clusters) for g in rest)
            lines.append(f"- and {len(rest)} more reason(s) ({clusters} clusters)")
    return "\n".join(lines)


def now_line(phase: PlacementPhase, waiting_for: str) -> str:
    """What the placement does now, from the workflow's phase and what it waits for."""
    if phase == "running":
        return f"running {_text(waiting_for)}"
    if phase == "cleaning_up":
        return CLEANING_UP
    return f"waiting for {_text(readable_reason(waiting_for))}"


def moved(moves: TurnMoves | None) -> str:
    """The last turn's moves (rebalance, affinity enforcement), a few lines; "" without any."""
    if moves is None or not moves.lines:
        return ""
    lines = [f"- {_text(line)}" for line in moves.lines[:DETAILS_MOVES]]
    if len(moves.lines) > DETAILS_MOVES:
        lines.append(f"- and {len(moves.lines) - DETAILS_MOVES} more")
    return f"**Moves** (before cycle {moves.cycle}):\n\n" + "\n".join(lines)


def current(decided: str, now: str, moves: TurnMoves | None = None) -> str:
    """The current details: the last cycle's decision, the last turn's moves if any, then what
    the placement does now (a failed turn's error is in what it waits for: "an event (last
    attempt: ...)")."""
    said = moved(moves)
    return f"{decided}\n\n" + (f"{said}\n\n" if said else "") + f"**Now**: {now}"
