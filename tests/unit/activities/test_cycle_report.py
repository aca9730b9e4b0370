"""How a cycle report records its explanation: as it is when small, packed when large, only a
digest when the workflow already holds the same fates; status and continue-as-new carry none."""

from __future__ import annotations

from scheduler import Explanation, FilterGroup, Outcome, ScoreGroup
from workflows.models import INLINE_EXPLANATION_BYTES, CycleReport


def report(cycle: int = 1) -> CycleReport:
    return CycleReport(
        cycle=cycle,
        placement="web",
        snapshot="web-0",
        outcome=Outcome(placement_type="PickAll", picked=3, fulfilled=True),
        summary=f"cycle {cycle}: PickAll 3",
    )


def explanation(clusters: int) -> Explanation:
    names = [f"member-{i:05d}" for i in range(clusters)]
    return Explanation(
        placement_type="PickAll",
        snapshot="web-0",
        picked=[ScoreGroup(topology=0, affinity=0, obsolete=0, clusters=names[1:])],
        filtered=[FilterGroup(plugin="ClusterAffinity", reason="no match", clusters=names[:1])],
    )


def test_a_small_explanation_is_recorded_as_it_is() -> None:
    small = explanation(5)
    assert len(small.model_dump_json()) <= INLINE_EXPLANATION_BYTES
    recorded = report().recording(small, known_digest=None)
    assert recorded.explanation == small and recorded.explanation_packed is None
    assert recorded.evaluated and recorded.explanation_digest
    assert recorded.full_explanation() == small


def test_a_large_explanation_is_recorded_packed() -> None:
    large = explanation(2000)
    recorded = report().recording(large, known_digest=None)
    assert recorded.explanation is None and recorded.explanation_packed is not None
    assert len(recorded.model_dump_json()) * 5 < len(large.model_dump_json())
    assert recorded.full_explanation() == large


def test_the_same_fates_again_are_recorded_as_a_digest_only() -> None:
    first = report(1).recording(explanation(2000), known_digest=None)
    again = report(2).recording(explanation(2000), known_digest=first.explanation_digest)
    assert not again.has_explanation
    assert again.explanation_digest == first.explanation_digest
    assert again.with_explanation_of(first).full_explanation() == explanation(2000)
    other = report(3).recording(explanation(1999), known_digest=first.explanation_digest)
    assert other.has_explanation and other.explanation_digest != first.explanation_digest


def test_a_cycle_that_only_kept_its_picks_evaluated_nothing() -> None:
    kept = Explanation(placement_type="PickN", snapshot="web-0", kept=["a", "b"])
    assert not report().recording(kept, known_digest=None).evaluated


def test_slim_drops_the_explanation_and_keeps_the_rest() -> None:
    recorded = report().recording(explanation(2000), known_digest=None)
    slim = recorded.slim()
    assert not slim.has_explanation
    assert slim.explanation_digest == recorded.explanation_digest
    assert slim.model_dump(exclude={"explanation_packed"}) == recorded.model_dump(
        exclude={"explanation_packed"}
    )


def test_a_digest_only_report_is_filled_only_from_a_report_with_the_same_fates() -> None:
    first = report(1).recording(explanation(2000), known_digest=None)
    again = report(2).recording(explanation(2000), known_digest=first.explanation_digest)
    assert again.filled_from(first).full_explanation() == explanation(2000)
    other = report(3).recording(explanation(1999), known_digest=None)
    assert not again.filled_from(other).has_explanation  # other fates: nothing to borrow
    assert not again.filled_from(None).has_explanation
    assert other.filled_from(first) == other  # it has its own
