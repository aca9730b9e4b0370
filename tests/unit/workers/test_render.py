"""`explain` and `status` text: every cluster shows its fate and the numbers or reason behind it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from activities.turn.cycle import cycle_summary
from hub.types import Taint
from scheduler import (
    BindingGroup,
    CycleInput,
    Explanation,
    FilterGroup,
    InvalidTarget,
    Outcome,
    ScoreGroup,
    default_profile,
    schedule,
)
from scheduler.explain.readable import readable_reason
from scheduler.plugins.taint_toleration import REASON_UNTOLERATED, render_taint
from scheduler.testing import member_cluster, policy_snapshot
from workers.cli.render import (
    ALL_TIED,
    FATE_FILTERED,
    FATE_INVALID,
    FATE_KEPT,
    FATE_NOT_FOUND,
    FATE_NOT_PICKED,
    FATE_PICKED,
    FATE_VALID,
    TIE_LOST,
    TIE_RULE,
    TIE_WON,
    PlacementRow,
    cluster_rows,
    deadline_text,
    explanation_lines,
    render_explain,
    render_status,
    short_waiting,
    table,
    tie_line,
)
from workflows.models import (
    CycleReport,
    DeadlineState,
    PlacementStatus,
    TurnPriority,
    WriteCounts,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def explanation(**fields: object) -> Explanation:
    return Explanation.model_validate({"placement_type": "PickN", "snapshot": "web-1", **fields})


def scores(
    affinity: int, *clusters: str, topology: int = 0, obsolete: int = 0, total: int | None = None
) -> ScoreGroup:
    return ScoreGroup(
        affinity=affinity,
        topology=topology,
        obsolete=obsolete,
        total=total,
        clusters=list(clusters),
    )


def report(exp: Explanation | None, **fields: object) -> CycleReport:
    defaults: dict[str, object] = {
        "cycle": 3,
        "placement": "web",
        "snapshot": "web-1",
        "outcome": Outcome(placement_type="PickN", wanted=2, picked=2, fulfilled=True),
        "explanation": exp,
        "summary": "PickN 2/2; 1 created, status written",
    }
    return CycleReport.model_validate({**defaults, **fields})


def status(last: CycleReport | None = None, **fields: object) -> PlacementStatus:
    return PlacementStatus.model_validate(
        {"placement": "web", "cycles": 3, "waiting_for": "an event", "last": last, **fields}
    )


def row_of(rows: list[tuple[str, ...]], cluster: str) -> tuple[str, ...]:
    (found,) = [row for row in rows if row[0] == cluster]
    return found


@pytest.mark.parametrize(
    ("exp", "cluster", "fate", "affinity", "detail"),
    [
        pytest.param(explanation(picked=[scores(20, "a")]), "a", FATE_PICKED, "20", "",
                     id="picked"),
        pytest.param(
            explanation(not_picked=[scores(-5, "b", topology=1)]),
            "b", FATE_NOT_PICKED, "-5", "", id="not-picked",
        ),
        pytest.param(
            explanation(filtered=[FilterGroup(plugin="TaintToleration", reason="taint x",
                                              clusters=["c"])]),
            "c", FATE_FILTERED, "-", "TaintToleration: taint x", id="filtered",
        ),
        pytest.param(explanation(kept=["d"]), "d", FATE_KEPT, "-",
                     "already has a binding of this snapshot", id="kept"),
        pytest.param(explanation(valid=["e"]), "e", FATE_VALID, "-", "fixed target", id="valid"),
        pytest.param(
            explanation(invalid=[InvalidTarget(cluster="f", reason="cluster is leaving")]),
            "f", FATE_INVALID, "-", "cluster is leaving", id="invalid",
        ),
        pytest.param(explanation(not_found=["g"]), "g", FATE_NOT_FOUND, "-",
                     "no such member cluster", id="not-found"),
        pytest.param(
            explanation(picked=[scores(1, "h", obsolete=1, total=7)]), "h", FATE_PICKED, "1",
            "has an obsolete binding (preferred on ties); weighted total 7", id="obsolete-total",
        ),
    ],
)  # fmt: skip
def test_each_fate_has_its_own_row(
    exp: Explanation, cluster: str, fate: str, affinity: str, detail: str
) -> None:
    row = row_of(cluster_rows(exp), cluster)
    assert row[1:3] == (fate, affinity)
    assert row[4] == detail


def test_picks_come_by_name_the_next_in_line_by_rank_and_fates_in_reading_order() -> None:
    """Picks are named in one order, the cycle summary's (by name), whether a cycle picked or
    kept them (before: by rank when picked, by name when kept, so `explain` listed the same
    picks in two orders); the clusters not picked keep their rank."""
    exp = explanation(
        picked=[scores(30, "zeta"), scores(10, "beta", "alpha")],
        not_picked=[scores(5, "omega"), scores(4, "delta")],
        filtered=[FilterGroup(plugin="ClusterAffinity", reason="no match", clusters=["aaa"])],
        kept=["kappa"],
    )
    assert [row[0] for row in cluster_rows(exp)] == [
        "alpha",
        "beta",
        "zeta",
        "kappa",
        "omega",
        "delta",
        "aaa",
    ]


def test_table_aligns_columns_without_trailing_blanks() -> None:
    text = table(("A", "LONG HEADER"), [("wide value", "x"), ("b", "")])
    assert text.splitlines() == [
        "A           LONG HEADER",
        "wide value  x",
        "b",
    ]


def test_explain_shows_the_cycle_summary_writes_and_every_cluster() -> None:
    exp = explanation(
        wanted=2,
        branch="schedule",
        picked=[scores(20, "member-a", "member-b")],
        not_picked=[scores(0, "member-c")],
        filtered=[
            FilterGroup(plugin="TaintToleration", reason="untolerated", clusters=["member-d"])
        ],
        bindings=[BindingGroup(action="unscheduled", why="not picked any more", clusters=["old"])],
        notes=["something worth knowing"],
    )
    text = render_explain(
        status(
            report(
                exp,
                writes=WriteCounts(created=1, unscheduled=1, status_written=True),
                clusters_seen=4,
                bindings_seen=2,
                duration_ms=12.4,
            ),
            last_error="cycle 2 failed: hub unavailable",
        )
    )
    assert "placement web: 3 cycles" in text
    assert "waiting for: an event" in text
    assert "last error: cycle 2 failed: hub unavailable" in text
    assert "last cycle 3: PickN 2/2; 1 created, status written" in text
    assert "PickN 2/2 picked, fully scheduled" in text
    assert "branch schedule" in text
    assert "read:      4 member clusters, 2 bindings in 12 ms" in text
    assert (
        "1 created, 0 patched, 1 unscheduled, 0 finalizers removed, snapshot status written" in text
    )
    lines = text.splitlines()
    assert any(line.split()[:4] == ["member-a", "picked", "20", "0"] for line in lines)
    assert any(
        line.split()[:3] == ["member-d", "filtered", "-"]
        and line.endswith("TaintToleration: untolerated")
        for line in lines
    )
    assert any(
        line.split() == ["old", "unscheduled", "not", "picked", "any", "more"] for line in lines
    )
    assert "note: something worth knowing" in text


def test_explain_before_any_cycle_says_so() -> None:
    text = render_explain(status(None, cycles=0, waiting_for="an event: no latest snapshot"))
    assert "placement web: 0 cycles" in text
    assert "waiting for: an event: no latest snapshot" in text
    assert "no cycle has finished yet" in text
    assert "CLUSTER" not in text


def test_explain_shows_a_cycle_error_and_pending_requeue() -> None:
    text = render_explain(
        status(
            report(explanation(), error="snapshot has no policy", summary="PickN 0/2; error"),
            pending_reasons=["fresh requeue: operator asked"],
            fresh_pending=True,
        )
    )
    assert "error:     snapshot has no policy" in text
    assert "pending (fresh): fresh requeue: operator asked" in text
    assert "no member clusters were considered" in text


def test_a_cycle_error_is_said_once_with_no_advice_that_cannot_help() -> None:
    error = "spec.policy.numberOfClusters is required for PickN"
    cycle = report(explanation(), error=error, summary=f"cycle 3: PickN 0; error: {error}")
    text = render_explain(status(cycle, last_error=error))
    assert text.count(error) == 1, text
    assert "--fresh" not in text
    assert "could not act, and retrying will not help" in text


def test_explain_of_a_real_cycle_lists_every_member_cluster() -> None:
    clusters = [
        member_cluster("prod-1", NOW, labels={"env": "prod"}),
        member_cluster("prod-2", NOW, labels={"env": "prod"}),
        member_cluster("dev-1", NOW, labels={"env": "dev"}),
        member_cluster("gpu-1", NOW, labels={"env": "prod"}, taints=[("gpu", "a100")]),
        member_cluster("old-1", NOW, heartbeat_age=NOW - datetime(2025, 1, 1, tzinfo=UTC)),
    ]
    snapshot = policy_snapshot(
        "web",
        {
            "placementType": "PickN",
            "numberOfClusters": 1,
            "affinity": {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 40, "preference": {"labelSelector": {"matchLabels": {"env": "prod"}}}},
            ]}},
        },
        index=1,
    )  # fmt: skip
    result = schedule(CycleInput(snapshot=snapshot, clusters=clusters, now=NOW), default_profile())
    text = render_explain(
        status(
            report(
                result.explanation,
                outcome=result.outcome,
                summary=cycle_summary(1, result, WriteCounts()),
                clusters_seen=len(clusters),
            )
        )
    )
    fates = {line.split()[0]: line for line in text.splitlines() if line.split()[:1] in (
        [c.name] for c in clusters)}  # fmt: skip
    assert sorted(fates) == sorted(c.name for c in clusters)
    assert fates["prod-2"].split()[1:3] == ["picked", "40"]  # ties break toward the larger name
    assert fates["prod-1"].split()[1:4] == ["not", "picked", "40"]
    assert fates["dev-1"].split()[1:4] == ["not", "picked", "0"]
    assert "TaintToleration" in fates["gpu-1"]
    assert "ClusterEligibility" in fates["old-1"]


def test_status_of_cluster_scoped_placements_only_has_no_namespace_column() -> None:
    text = render_status(
        [
            PlacementRow("web", "PickN", True, 4, "Running", "an event"),
            PlacementRow("api", None, None, None, "Running", None),
        ]
    )
    lines = text.splitlines()
    # Every workflow listed runs (status without --all): no STATE column saying so on each row.
    assert lines[0].split() == ["NAME", "TYPE", "SCHEDULED", "CYCLES", "WAITING", "FOR"]
    assert lines[1].split() == ["api", "-", "-", "-", "-"]
    assert lines[2].split() == ["web", "PickN", "yes", "4", "an", "event"]


def test_status_lists_placements_by_namespace_and_name_with_unknowns_as_dashes() -> None:
    text = render_status(
        [
            PlacementRow("web", "PickN", True, 4, "Running", "an event"),
            PlacementRow("api", None, None, None, "Running", None),
            PlacementRow("gone", "PickAll", False, 2, "Completed", "nothing: cleaned up"),
            PlacementRow("web", "PickAll", True, 1, "Running", "an event", namespace="team-a"),
            PlacementRow("api", "PickAll", True, 1, "Running", "an event", namespace="team-a"),
        ]
    )
    lines = text.splitlines()
    assert lines[0].split() == [
        "NAMESPACE", "NAME", "TYPE", "SCHEDULED", "CYCLES", "STATE", "WAITING", "FOR"
    ]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["-", "api"], ["-", "gone"], ["-", "web"], ["team-a", "api"], ["team-a", "web"]
    ]
    assert lines[1].split() == ["-", "api", "-", "-", "-", "Running", "-"]
    assert lines[3].split() == ["-", "web", "PickN", "yes", "4", "Running", "an", "event"]
    assert lines[2].split()[:6] == ["-", "gone", "PickAll", "no", "2", "Completed"]


IDLE = "an event (placement, snapshot, cluster or binding change, or requeue)"


def test_status_of_the_sample_fleet_fits_an_80_column_terminal() -> None:
    """`make run`'s seven placements and README's `demo`: each waits for the same 70-character
    phrase, which status said on every row (109 columns); it says `an event`, and explain the
    rest."""
    rows = [
        PlacementRow(name, kind, kind != "PickFixed", 1, "Running", IDLE)
        for name, kind in (
            ("api-spread", "PickN"), ("cache-biggest", "PickN"), ("demo", "PickN"),
            ("gpu-training", "PickN"), ("pinned", "PickFixed"), ("prod-only", "PickAll"),
            ("web-everywhere", "PickAll"),
        )
    ]
    rows += [
        PlacementRow("storefront", "PickAll", True, 1, "Running", IDLE, namespace="shop"),
        PlacementRow("checkout", "PickN", False, 12, "Running", "a 30s requeue timer, or an event",
                     namespace="shop"),
    ]  # fmt: skip
    lines = render_status(rows).splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    assert IDLE not in "\n".join(lines)
    waiting = {line.split()[1]: line.split(maxsplit=5)[5] for line in lines[1:]}
    assert waiting["demo"].startswith("an event ") or waiting["demo"] == "an event"
    assert waiting["checkout"].startswith("a 30s requeue timer")


@pytest.mark.parametrize(
    ("text", "width", "shown"),
    [
        pytest.param(IDLE, 30, "an event", id="idle"),
        pytest.param("an event (last attempt: hub unavailable)", 30, "an event", id="attempt"),
        pytest.param("a 30s requeue timer, or an event", 40, "a 30s requeue timer, or an event",
                     id="fits"),
        pytest.param("a 30s requeue timer, or an event", 20, "a 30s requeue timer", id="timer"),
        pytest.param("nothing: cleaned up (3 bindings removed)", 25, "nothing: cleaned up",
                     id="cleaned-up"),
        pytest.param("an event: the placement's policy is invalid", 20, "an event", id="why"),
        pytest.param("cycle 12", 16, "cycle 12", id="running"),
        pytest.param("x" * 40, 16, "x" * 15 + "…", id="cut"),
    ],
)  # fmt: skip
def test_what_a_placement_waits_for_in_a_few_words(text: str, width: int, shown: str) -> None:
    assert short_waiting(text, width) == shown


def test_status_with_no_placements_says_so() -> None:
    assert render_status([]) == "no placement workflows found\n"


def test_a_fixed_target_that_keeps_its_binding_is_one_row() -> None:
    rows = cluster_rows(explanation(valid=["a", "b"], kept=["a"], not_found=["z"]))
    assert rows == [
        ("a", FATE_VALID, "-", "-", "fixed target; keeps its binding"),
        ("b", FATE_VALID, "-", "-", "fixed target"),
        ("z", FATE_NOT_FOUND, "-", "-", "no such member cluster"),
    ]


@pytest.mark.parametrize(
    ("summary", "headline"),
    [
        pytest.param("cycle 3: PickN 2/2; no change", "last cycle 3: PickN 2/2; no change",
                     id="summary-names-its-cycle"),
        pytest.param("PickN 2/2; no change", "last cycle 3: PickN 2/2; no change", id="bare"),
        pytest.param("", "last cycle 3: PickN 2/2 picked, fully scheduled", id="no-summary"),
    ],
)  # fmt: skip
def test_the_last_cycle_headline_names_the_cycle_once(summary: str, headline: str) -> None:
    text = render_explain(status(report(explanation(), summary=summary)))
    assert headline in text.splitlines()


def steady(cycle: int = 4) -> CycleReport:
    kept = explanation(branch="steady", kept=["member-a", "member-b"])
    return report(kept, cycle=cycle, summary=f"cycle {cycle}: PickN 2/2; no change",
                  clusters_seen=5)  # fmt: skip


def test_a_cycle_that_only_kept_its_picks_shows_the_cycle_that_chose_them() -> None:
    chose = report(
        explanation(
            branch="schedule",
            picked=[scores(30, "member-a", "member-b")],
            not_picked=[scores(10, "member-c")],
            filtered=[FilterGroup(plugin="ClusterAffinity", reason="no match",
                                  clusters=["member-d", "member-e"])],
        ),
        cycle=1,
        summary="cycle 1: PickN 2/2; 2 created, status written",
    )  # fmt: skip
    text = render_explain(status(steady(), cycles=4), chose)
    assert (
        "cycle 4 kept the current picks and evaluated no other cluster (3 more in the fleet)."
        in text
    )
    assert (
        "The last cycle that evaluated them: cycle 1: PickN 2/2; 2 created, status written" in text
    )
    fates = [line.split()[:2] for line in text.splitlines() if line.startswith("member-")]
    assert fates == [
        ["member-a", "kept"], ["member-b", "kept"],
        ["member-a", "picked"], ["member-b", "picked"], ["member-c", "not"],
        ["member-d", "filtered"], ["member-e", "filtered"],
    ]  # fmt: skip


def test_a_kept_only_cycle_without_history_suggests_a_fresh_requeue() -> None:
    text = render_explain(status(steady()))
    assert "cycle 4 kept the current picks" in text
    assert "Requeue with --fresh to evaluate every cluster again" in text


def test_a_tie_split_by_the_name_rule_says_so_on_both_sides_and_the_rule_once() -> None:
    exp = explanation(
        picked=[scores(90, "c"), scores(50, "b", "d")],
        not_picked=[scores(50, "a", "aa"), scores(10, "z")],
    )
    detail = {row[0]: row[4] for row in cluster_rows(exp)}
    assert detail["b"] == detail["d"] == TIE_WON and detail["a"] == detail["aa"] == TIE_LOST
    assert detail["c"] == "" and detail["z"] == ""  # no tie: nothing to explain
    text = "\n".join(explanation_lines(exp))
    assert text.count("larger name") == 1
    assert TIE_RULE in text.splitlines()


def test_when_every_cluster_scored_the_same_the_tie_break_is_said_once() -> None:
    """README's `demo`: no preferred affinity, so every score is 0 and the name alone picks
    (before: "the larger name wins ties (KubeFleet)" on every row)."""
    exp = explanation(
        picked=[scores(0, "west-1", "japan-1")],
        not_picked=[scores(0, "east-2", "east-1")],
        filtered=[FilterGroup(plugin="ClusterAffinity", reason="no match", clusters=["dev-1"])],
    )
    rows = {row[0]: row[4] for row in cluster_rows(exp)}
    assert rows["west-1"] == rows["japan-1"] == rows["east-2"] == rows["east-1"] == ""
    text = "\n".join(explanation_lines(exp))
    assert text.count("larger name") == 1
    assert ALL_TIED in text.splitlines()
    assert tie_line(explanation(picked=[scores(0, "a")])) is None  # nothing lost: no tie


def test_a_reason_many_clusters_share_is_printed_once_with_its_count() -> None:
    reason = "cluster does not match with any of the required cluster affinity terms " * 3
    exp = explanation(
        filtered=[
            FilterGroup(plugin="ClusterAffinity", reason=reason, clusters=["a", "b", "c"]),
            FilterGroup(plugin="ClusterEligibility", reason="not joined", clusters=["d"]),
        ]
    )
    text = "\n".join(explanation_lines(exp))
    assert text.count(reason.strip()) == 1
    assert f"[1] ClusterAffinity, 3 clusters: {reason}" in text
    rows = {row[0]: row[4] for row in cluster_rows(exp)}
    assert rows == {
        "a": "ClusterAffinity [1]",
        "b": "ClusterAffinity [1]",
        "c": "ClusterAffinity [1]",
        "d": "ClusterEligibility: not joined",
    }


@pytest.mark.parametrize(
    ("taint", "shown"),
    [
        (Taint(key="gpu", value="true", effect="NoSchedule"), "gpu=true:NoSchedule"),
        (Taint(key="maintenance", effect="NoSchedule"), "maintenance:NoSchedule"),
    ],
)
def test_taints_read_as_kubectl_shows_them(taint: Taint, shown: str) -> None:
    kubefleet = REASON_UNTOLERATED.format(taint=render_taint(taint))  # what the hub keeps
    assert "&{Key:" in kubefleet
    assert readable_reason(kubefleet) == f"taint {shown} cannot be tolerated"
    exp = explanation(filtered=[FilterGroup(plugin="TaintToleration", reason=kubefleet,
                                            clusters=["m"])])
    assert cluster_rows(exp)[0][4] == f"TaintToleration: taint {shown} cannot be tolerated"


def test_explain_of_a_capacity_aware_cycle_shows_each_clusters_room_and_what_is_short() -> None:
    """docs/capacity.md: ALLOCATABLE / ALLOCATED / REQUESTED per judged cluster, then `short:`."""
    from scheduler.explain.explanation import ClusterRoom, ResourceShortage, Shortage

    exp = explanation(
        wanted=2,
        branch="schedule",
        picked=[scores(20, "member-a")],
        room=[
            ClusterRoom(cluster="member-a", allocatable="cpu=8", allocated="cpu=2"),
            ClusterRoom(cluster="member-b", allocatable="cpu=8", allocated=""),
        ],
        requests="cpu=4",
        shortage=Shortage(
            unplaced=1,
            requests="cpu=4",
            resources=[
                ResourceShortage(
                    resource="cpu", requested="4", clusters=1, most_free="2", missing="4"
                )
            ],
        ),
    )
    lines = render_explain(status(report(exp))).splitlines()
    header = next(
        i for i, line in enumerate(lines) if line.startswith("CLUSTER") and "ALLOC" in line
    )
    assert lines[header].split() == ["CLUSTER", "ALLOCATABLE", "ALLOCATED", "REQUESTED"]
    assert lines[header + 1].split() == ["member-a", "cpu=8", "cpu=2", "cpu=4"]
    assert lines[header + 2].split() == ["member-b", "cpu=8", "0", "cpu=4"]
    assert (
        "short: not enough room for 1 binding(s) of cpu=4: cpu short on 1 cluster(s) "
        "(at most 2 free); missing cpu=4"
    ) in lines


def test_the_deadline_reads_as_time_left_exceeded_or_met() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    running = DeadlineState(annotation="10m", seconds=600, since=now - timedelta(minutes=4))
    assert deadline_text(running, now) == "10m, 6m left"
    late = running.model_copy(update={"since": now - timedelta(minutes=13), "misses": 1})
    assert deadline_text(late, now) == "10m, exceeded 3m ago"
    met = running.model_copy(update={"since": None})
    assert deadline_text(met, now) == "10m, met"
    bad = DeadlineState(annotation="soon", problem="schedule deadline 'soon' is not a duration")
    assert deadline_text(bad, now) == "invalid (schedule deadline 'soon' is not a duration)"


def test_explain_says_how_far_aging_lifts_a_late_placement() -> None:
    """Aging stops at the placement's own key unless the profile allows more (docs/priority.md,
    "Aging"): the line says where it stops, not a count of keys it could not climb."""
    state = DeadlineState(
        annotation="1s,aging", seconds=1, aging=True, since=NOW - timedelta(seconds=9), misses=9
    )
    own = TurnPriority(priority_key=3, own_priority_key=3)
    status = PlacementStatus(
        placement="late", cycles=3, waiting_for="an event", phase="idle", priority=own,
        last_turn_key=3, deadline=state,
    )  # fmt: skip
    line = next(x for x in render_explain(status, now=NOW).splitlines() if "deadline:" in x)
    assert line.endswith(
        "(aging after 9 miss(es): last turn at key 3, aging lifts it to key 3 at best)"
    )
    allowed = status.model_copy(
        update={"priority": own.model_copy(update={"aging_limit": 1}), "last_turn_key": 1}
    )
    line = next(x for x in render_explain(allowed, now=NOW).splitlines() if "deadline:" in x)
    assert line.endswith("last turn at key 1, aging lifts it to key 1 at best)")


def test_the_same_picks_read_in_one_order_whether_picked_or_kept() -> None:
    """README's `demo` after a requeue: cycle 2 kept what cycle 1 picked, and `explain` shows
    both. Every list of those picks (both summaries, both tables) names them in one order
    (before: cycle 1 by rank, `west-1,japan-1`; cycle 2 by name, `japan-1,west-1`)."""
    clusters = [member_cluster(name, NOW) for name in ("east-1", "east-2", "japan-1", "west-1")]
    snapshot = policy_snapshot("demo", {"placementType": "PickN", "numberOfClusters": 2}, index=0)
    chose = schedule(CycleInput(snapshot=snapshot, clusters=clusters, now=NOW), default_profile())
    picks = [c for g in chose.explanation.picked for c in g.clusters]
    assert picks == ["west-1", "japan-1"]  # KubeFleet's rank: the larger name wins the tie
    kept = chose.model_copy(
        update={"explanation": explanation(branch="steady", kept=["west-1", "japan-1"])}
    )
    first = report(chose.explanation, cycle=1, summary=cycle_summary(1, chose, WriteCounts()))
    second = report(kept.explanation, cycle=2, summary=cycle_summary(2, kept, WriteCounts()))
    text = render_explain(status(second, cycles=2), first)
    headlines = re.findall(r"cycle \d: PickN 2/2, picked (\S+);", text)
    assert headlines == ["japan-1,west-1", "japan-1,west-1"]
    listed = [line.split()[0] for line in text.splitlines() if line.split()[1:2] in (
        ["picked"], ["kept"])]  # fmt: skip
    assert listed == ["japan-1", "west-1", "japan-1", "west-1"]
