"""workflows.renewal: every patch id the workflows ask has a generation (so a new one cannot be
added without bumping PATCH_GENERATION), what a run sets at its start, the reconcile's query,
and what a `renew_run` signal leaves."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.common import SearchAttributePair, TypedSearchAttributes

from workflows import names
from workflows.models import RenewRequest
from workflows.renewal import (
    PATCH_GENERATION,
    PATCHES,
    RENEWAL_MIN_AGE,
    Renewal,
    generation_update,
    stale_runs_query,
)

WORKFLOWS = Path(__file__).resolve().parents[3] / "workflows"


def patch_ids() -> set[str]:
    """The values of every `*_PATCH` constant in workflows/ (each `workflow.patched` id)."""
    found = set()
    for path in WORKFLOWS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (
                [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
            )
            value = getattr(node, "value", None)
            for target in targets:
                if (
                    isinstance(target, ast.Name)
                    and target.id.endswith("_PATCH")
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    found.add(value.value)
    return found


def test_every_patch_id_has_a_generation_and_the_newest_is_this_code_s() -> None:
    listed = [patch for patches in PATCHES.values() for patch in patches]
    assert len(listed) == len(set(listed))
    ids = patch_ids()
    assert len(ids) >= 7  # the scan finds them: the six before generations, and its own
    assert ids == set(listed), "a new patch id: add it to PATCHES and bump PATCH_GENERATION"
    assert max(PATCHES) == PATCH_GENERATION
    assert sorted(PATCHES) == list(range(1, PATCH_GENERATION + 1))


def with_generation(generation: int) -> TypedSearchAttributes:
    return TypedSearchAttributes([SearchAttributePair(names.SA_PATCH_GENERATION, generation)])


def test_a_run_sets_its_generation_unless_its_attributes_already_say_it() -> None:
    for found in (TypedSearchAttributes.empty, with_generation(PATCH_GENERATION - 1)):
        [update] = generation_update(found)
        assert update.key == names.SA_PATCH_GENERATION and update.value == PATCH_GENERATION
    # A continue-as-new carried its run's attributes: nothing to upsert (no marker either).
    assert generation_update(with_generation(PATCH_GENERATION)) == []


def test_the_query_asks_older_generations_and_runs_without_one_old_enough() -> None:
    now = datetime(2026, 1, 2, 3, 30, tzinfo=UTC)
    assert timedelta(minutes=10) == RENEWAL_MIN_AGE
    query = stale_runs_query("fleet-scheduler", now)
    assert query == (
        f"{names.PLACEMENT_WORKFLOWS_QUERY} AND ExecutionStatus = 'Running' "
        "AND TaskQueue = 'fleet-scheduler' AND (FleetPatchGeneration < "
        f"{PATCH_GENERATION} OR (FleetPatchGeneration IS NULL "
        "AND StartTime < '2026-01-02T03:20:00Z'))"
    )


def test_a_renewal_keeps_the_first_reason_and_takes_no_payload() -> None:
    renewal = Renewal()
    assert not renewal.asked
    renewal.ask(None)
    renewal.ask(RenewRequest(reason="reconcile"))
    assert renewal.asked and renewal.reason == "asked"
    other = Renewal()
    other.ask(RenewRequest(reason="reconcile", generation=9, unknown="ignored"))  # type: ignore[call-arg]
    assert other.reason == "reconcile"
