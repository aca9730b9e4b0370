"""KubeFleet's disruption-budget arithmetic, move by move (scheduler.moves.budgets): the same rule
for the planner, the turn that makes the moves and `fleet-scheduler check`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.moves.budgets import BudgetState


@pytest.mark.parametrize(
    ("state", "in_a_row"),
    [
        pytest.param(BudgetState(2, 2, 2), None, id="no-budget-no-limit"),
        # minAvailable: each move takes one available binding away
        pytest.param(BudgetState(2, 2, 2, min_available=1), 1, id="min-1-of-2"),
        pytest.param(BudgetState(4, 4, 4, min_available="50%"), 2, id="min-50pct-of-4"),
        pytest.param(BudgetState(2, 2, 1, min_available=1), 0, id="min-1-one-unavailable"),
        # maxUnavailable: each move adds an unavailable binding and makes its old one unavailable
        pytest.param(BudgetState(3, 3, 3, max_unavailable=1), 1, id="max-1"),
        pytest.param(BudgetState(3, 3, 3, max_unavailable=2), 1, id="max-2-two-per-move"),
        pytest.param(BudgetState(4, 4, 4, max_unavailable=3), 2, id="max-3"),
        pytest.param(BudgetState(1, 1, 0, max_unavailable=1), 0, id="max-1-never-available"),
    ],
)
def test_moves_in_a_row_apply_kubefleets_rule_before_each_move(
    state: BudgetState, in_a_row: int | None
) -> None:
    assert state.moves_in_a_row(limit=10) == in_a_row


def test_a_half_done_move_is_weighed_on_the_state_before_it_began() -> None:
    """PickN 2, minAvailable 1, both available, move 1's new binding made (not available): read
    now, the budget still allows one; weighed without that binding it allows one, which move 1
    uses, and none is left for move 2."""
    now = BudgetState(2, 3, 2, min_available=1)
    assert now.allowed() == 1
    before = BudgetState(2, 2, 2, min_available=1)
    assert before.allows_one() and not before.after_move(True).allows_one()


@pytest.mark.parametrize(
    ("state", "kept"),
    [
        pytest.param(BudgetState(2, 2, 1, min_available=1), True, id="min-held"),
        pytest.param(BudgetState(2, 2, 0, min_available=1), False, id="min-broken"),
        pytest.param(BudgetState(3, 3, 1, max_unavailable=2), True, id="max-held"),
        pytest.param(BudgetState(3, 4, 1, max_unavailable=2), False, id="max-broken"),
        pytest.param(BudgetState(3, 3, 0), True, id="no-budget"),
    ],
)
def test_a_state_keeps_its_budget_within_its_bound(state: BudgetState, kept: bool) -> None:
    assert state.respected() is kept


@given(
    desired=st.integers(1, 8),
    bindings=st.integers(0, 10),
    available=st.integers(0, 10),
    bound=st.one_of(
        st.integers(0, 8).map(lambda n: {"max_unavailable": n}),
        st.integers(0, 8).map(lambda n: {"min_available": n}),
        st.integers(0, 100).map(lambda n: {"min_available": f"{n}%"}),
        st.integers(0, 100).map(lambda n: {"max_unavailable": f"{n}%"}),
    ),
)
def test_a_move_the_rule_allows_keeps_the_bound_once_its_old_binding_is_gone(
    desired: int, bindings: int, available: int, bound: dict[str, int | str]
) -> None:
    """What check relies on: if the turn's rule allows a move on a state that keeps the bound,
    the state after the move keeps it too, its old binding counted as KubeFleet's eviction
    leaves it (gone)."""
    state = BudgetState(desired, bindings, min(available, bindings), **bound)  # type: ignore[arg-type]
    if not (state.respected() and state.allows_one() and state.available > 0):
        return
    after = state.after_move(True)
    gone = BudgetState(after.desired, after.bindings - 1, after.available,
                       after.max_unavailable, after.min_available)  # fmt: skip
    assert gone.respected()
