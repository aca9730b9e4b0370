"""The placement workflow's current details in the Temporal UI: the last cycle's outcome, picks
and main filter reasons, as `explain` says them, then what the placement does now; small at
5,000 clusters."""

from __future__ import annotations

from hub.types import Taint
from scheduler import Explanation, FilterGroup, Outcome, ScoreGroup
from scheduler.plugins.taint_toleration import REASON_UNTOLERATED, render_taint
from workflows import details
from workflows.models import CycleReport

TAINTED = "ClusterUnschedulable, " + REASON_UNTOLERATED.format(
    taint=render_taint(
        Taint(key="fleet.example.com/maintenance", value="true", effect="NoSchedule")
    )
)
NO_MATCH = "ClusterUnschedulable, cluster does not match with any of the required cluster affinity"


def report(
    explanation: Explanation | None,
    *,
    cycle: int = 3,
    picked: int = 2,
    wanted: int | None = None,
    error: str | None = None,
    summary: str = "",
) -> CycleReport:
    outcome = Outcome(
        placement_type="PickN" if wanted else "PickAll",
        wanted=wanted,
        picked=picked,
        fulfilled=error is None,
    )
    bare = CycleReport(
        cycle=cycle,
        placement="web",
        snapshot="web-0",
        outcome=outcome,
        error=error,
        summary=summary or f"cycle {cycle}: {outcome.placement_type} {picked}",
    )
    return bare if explanation is None else bare.recording(explanation, known_digest=None)


def judged(picked: list[str], *filtered: FilterGroup) -> Explanation:
    return Explanation(
        placement_type="PickAll",
        snapshot="web-0",
        picked=[ScoreGroup(topology=0, affinity=0, obsolete=0, clusters=picked)],
        filtered=list(filtered),
    )


def test_the_details_show_the_outcome_the_picks_and_clean_collapsed_reasons() -> None:
    explanation = judged(
        ["east-1", "japan-1"],
        FilterGroup(plugin="TaintToleration", reason=TAINTED, clusters=["west-2"]),
        FilterGroup(plugin="ClusterAffinity", reason=NO_MATCH, clusters=["dev-1", "stage-1"]),
    )
    text = details.current(details.decision(report(explanation)), "waiting for an event")

    assert text.splitlines() == [
        "**Cycle 3**: PickAll 2 picked, fully scheduled",
        "",
        "- picked: east-1, japan-1",
        "",
        "**Filtered** 3 clusters:",
        "",
        f"- ClusterAffinity, 2 clusters: {NO_MATCH.removeprefix('ClusterUnschedulable, ')}",
        "- TaintToleration, west-2: taint "
        "fleet.example.com/maintenance=true:NoSchedule cannot be tolerated",
        "",
        "**Now**: waiting for an event",
    ]


def test_a_cycle_that_kept_its_picks_shows_the_reasons_of_the_cycle_that_chose_them() -> None:
    chose = report(
        judged(["a", "b"], FilterGroup(plugin="ClusterAffinity", reason="no", clusters=["c"])),
        cycle=1,
    )
    kept = report(
        Explanation(placement_type="PickN", snapshot="web-0", kept=["a", "b"]), wanted=2, cycle=4
    )
    text = details.decision(kept, chose)
    assert "**Cycle 4**: PickN 2/2 picked, fully scheduled" in text
    assert "- picked: a, b" in text
    assert "**Filtered** 1 cluster (in cycle 1, the last that judged clusters):" in text
    assert "ClusterAffinity, c: no" in text


def test_a_report_without_its_explanation_shows_its_summary_and_error() -> None:
    text = details.decision(
        report(None, summary="cycle 5: PickAll 0; error: bad *selector*", error="bad *selector*")
    )
    assert "- cycle 5: PickAll 0; error: bad \\*selector\\*" in text
    assert "- error: bad \\*selector\\*" in text
    assert details.decision(None) == details.NO_CYCLE_YET


def test_what_the_placement_does_now_follows_its_phase() -> None:
    assert details.now_line("running", "cycle 8") == "running cycle 8"
    assert details.now_line("idle", "an event") == "waiting for an event"
    assert details.now_line("cleaning_up", "cleanup") == details.CLEANING_UP
    failed = details.now_line(
        "idle", "an event (last attempt: cycle 9 failed: taint &{Key:k Value:v Effect:NoSchedule})"
    )
    assert failed == "waiting for an event (last attempt: cycle 9 failed: taint k=v:NoSchedule)"


def test_the_details_stay_small_at_5000_clusters() -> None:
    names = [f"member-cluster-in-a-long-region-name-{i:05d}" for i in range(5000)]
    filtered = [
        FilterGroup(plugin="ClusterAffinity", reason=NO_MATCH * 5, clusters=names[1000:3000])
    ] + [
        FilterGroup(
            plugin="TaintToleration",
            reason=REASON_UNTOLERATED.format(
                taint=render_taint(Taint(key=f"example.com/t{i}", value="x", effect="NoSchedule"))
            ),
            clusters=names[3000 + i * 10 : 3010 + i * 10],
        )
        for i in range(200)
    ]
    explanation = judged(names[:1000], *filtered)
    decided = details.decision(report(explanation, picked=1000))
    text = details.current(decided, details.now_line("idle", "an event " * 200))

    assert len(text.encode()) <= 2048, len(text.encode())
    assert "and 992 more" in text
    assert "ClusterAffinity, 2000 clusters:" in text
    assert "and 197 more reason(s) (1970 clusters)" in text
    assert "&{" not in text


def test_the_last_turns_moves_show_between_the_decision_and_now() -> None:
    """Affinity enforcement's (and rebalance's) lines: a few, escaped, then "and N more"."""
    from workflows.models import TurnMoves

    lines = [f"moved web-m{i}-x m{i} -> n{i} as web-n{i}-y: cluster lost env={i}" for i in range(6)]
    moves_of = TurnMoves(cycle=4, lines=lines)
    text = details.current("**Cycle 4**: ...", "waiting for an event", moves_of)
    decision, moves, now = text.split("\n\n**")
    assert decision == "**Cycle 4**: ..."
    assert moves.startswith("Moves** (before cycle 4):")
    # markdown would read ">" as a quote: escaped, shown as written
    assert "- moved web-m0-x m0 -\\> n0 as web-n0-y: cluster lost env=0" in moves
    assert "web-m4-x" not in moves and moves.endswith("- and 2 more")
    assert now == "Now**: waiting for an event"
    assert details.current("d", "n", TurnMoves(cycle=1)) == "d\n\n**Now**: n"  # none: no block
    assert details.current("d", "n") == "d\n\n**Now**: n"


def test_markdown_in_an_error_or_a_placement_type_shows_literally() -> None:
    """Text from the hub (an annotation's value echoed in an error, a placement type no CRD
    checked) reads literally: GFM strikethrough (`~~`), entities (`&lt;`) and the headline's
    placement type are escaped like the rest."""
    error = "requests entry 'cpu=~~1~~': invalid quantity '&lt;script&gt;'"
    text = details.decision(report(None, error=error, summary="cycle 3: PickAll 0; error"))
    shown = "requests entry 'cpu=\\~\\~1\\~\\~': invalid quantity '\\&lt;script\\&gt;'"
    assert f"- error: {shown}" in text
    odd = report(None, summary="cycle 3: odd")
    odd = odd.model_copy(
        update={"outcome": odd.outcome.model_copy(update={"placement_type": "<b>Pick*</b>"})}
    )
    assert "**Cycle 3**: \\<b\\>Pick\\*\\</b\\> 2 picked" in details.decision(odd)


def test_a_link_in_a_cluster_name_or_a_reason_shows_as_text() -> None:
    """Backslashes do not stop an autolink: the Temporal UI's renderer links a bare
    `https://`, `http://`, `ftp://` or `mailto:` (escaped angle brackets round one included, and
    then with the bracket in the address), and GFM also `www.` and e-mail addresses. The
    character that makes each a link becomes an HTML entity, which the renderer shows as that
    character, in plain text (tests/integration/ui checks the UI's own renderer)."""
    error = (
        "webhook <https://hooks.example/x> said: see HTTP://docs.example, www.example.com, "
        "ftp://files.example or mailto:ops@example.com"
    )
    text = details.decision(report(None, error=error, summary="cycle 3: PickAll 0; error"))
    assert (
        "- error: webhook \\<https&#58;//hooks.example/x\\> said: see HTTP&#58;//docs.example, "
        "www&#46;example.com, ftp&#58;//files.example or mailto&#58;ops&#64;example.com"
    ) in text
    assert "://" not in text and "www." not in text and "@" not in text
    # A colon that starts no link stays as it is: taints, "reason: detail".
    assert details.now_line("idle", "gpu=true:NoSchedule: x") == (
        "waiting for gpu=true:NoSchedule: x"
    )
