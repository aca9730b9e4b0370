"""Capacity arithmetic (scheduler.room.capacity): fit, shortfalls and the three scoring
strategies."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.room.capacity import (
    MAX_SCORE,
    ClusterCapacity,
    Shortfall,
    format_amount,
    least_allocated,
    most_allocated,
    requested_to_capacity_ratio,
    shortfalls,
)
from scheduler.room.requests import parse_requests

GI = 2**30


def _cap(allocatable: dict[str, str], **allocated: str) -> ClusterCapacity:
    return ClusterCapacity.of(
        allocatable,
        parse_requests(",".join(f"{k}={v}" for k, v in allocated.items())) if allocated else None,
    )


def test_a_request_that_fits_exactly_has_no_shortfall_and_exact_sums_hold() -> None:
    capacity = _cap({"cpu": "300m"}, cpu="100m")
    assert shortfalls({"cpu": Fraction(2, 10)}, capacity) == []  # 0.1 + 0.2 = 0.3, exactly
    assert shortfalls({"cpu": Fraction(201, 1000)}, capacity) == [
        Shortfall("cpu", Fraction(201, 1000), Fraction(2, 10))
    ]


def test_shortfalls_name_each_missing_resource_with_what_is_free() -> None:
    capacity = _cap({"cpu": "8", "memory": "16Gi"}, cpu="7", memory="4Gi")
    short = shortfalls(parse_requests("cpu=2,memory=4Gi,nvidia.com/gpu=1"), capacity)
    assert [s.reason() for s in short] == [
        "cpu: 2 requested, 1 free",
        "nvidia.com/gpu: 1 requested, none allocatable (not reported)",
    ]
    assert [s.missing for s in short] == [Fraction(1), Fraction(1)]


def test_zero_requests_ask_for_nothing() -> None:
    assert shortfalls(parse_requests("cpu=0,gpu=0"), _cap({})) == []


def test_a_cluster_whose_report_shrank_below_its_reservations_has_nothing_free() -> None:
    capacity = _cap({"cpu": "2"}, cpu="3")
    assert capacity.free("cpu") == -1
    (short,) = shortfalls({"cpu": Fraction(1, 2)}, capacity)
    assert short.reason() == "cpu: 500m requested, 0 free" and short.missing == Fraction(1, 2)


def test_an_unreadable_report_counts_as_not_reported_and_is_named() -> None:
    capacity = ClusterCapacity.of({"cpu": "eight", "memory": "1Gi"})
    assert capacity.unreadable == ("cpu",)
    assert capacity.free("cpu") is None and capacity.free("memory") == GI


def test_least_allocated_scores_the_share_free_after_placing_most_the_share_used_before() -> None:
    request = parse_requests("cpu=2,memory=4Gi")
    empty = _cap({"cpu": "8", "memory": "16Gi"})
    quarter = _cap({"cpu": "8", "memory": "16Gi"}, cpu="2", memory="4Gi")
    # after placing: empty is 25% used on both, quarter 50%; before: 0% and 25%
    assert least_allocated(request, empty) == 75 and most_allocated(request, empty) == 0
    assert least_allocated(request, quarter) == 50 and most_allocated(request, quarter) == 25
    # weights: memory counts three times as much as cpu
    mixed = _cap({"cpu": "8", "memory": "16Gi"}, cpu="6")  # cpu 75%, memory 0% before
    assert most_allocated(request, mixed) == 37  # (75 + 0) / 2 = 37.5, floored
    assert most_allocated(request, mixed, {"cpu": 3, "memory": 1}) == 56  # 225 / 4
    # kube-scheduler's MostAllocated (after placing) is a curve
    kube = ((0, 0), (100, 100))
    assert requested_to_capacity_ratio(request, mixed, kube) == 62  # (100 + 25) / 2


def test_a_resource_not_reported_counts_as_full() -> None:
    request = parse_requests("cpu=1,nvidia.com/gpu=1")
    capacity = _cap({"cpu": "4"})
    assert most_allocated(request, capacity) == (0 + 100) // 2
    assert least_allocated(request, capacity) == (75 + 0) // 2


def test_a_curve_interpolates_between_points_and_is_flat_beyond_them() -> None:
    request = {"cpu": Fraction(1)}
    peak_at_half = ((20, 0), (50, 100), (80, 0))
    score = lambda used: requested_to_capacity_ratio(  # noqa: E731
        request, _cap({"cpu": "10"}, cpu=str(used)), peak_at_half
    )
    assert [score(u) for u in (0, 1, 3, 4, 6, 9)] == [0, 0, 66, 100, 33, 0]


def test_nothing_requested_scores_zero() -> None:
    assert most_allocated({}, _cap({"cpu": "1"})) == 0
    assert least_allocated({"cpu": Fraction(1)}, _cap({"cpu": "1"}), {"cpu": 0}) == 0


@pytest.mark.parametrize(
    "shape", [(), ((50, 10), (50, 20)), ((60, 0), (40, 10)), ((0, 101),), ((-1, 0),)]
)
def test_bad_shapes_are_refused(shape) -> None:
    with pytest.raises(ValueError, match="shape"):
        requested_to_capacity_ratio({"cpu": Fraction(1)}, _cap({"cpu": "1"}), shape)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (Fraction(4 * GI), "4Gi"),
        (Fraction(3 * 2**20), "3Mi"),
        (Fraction(1000), "1000"),
        (Fraction(3, 2), "1500m"),
        (Fraction(1, 10**9), "0.000000001"),
        (Fraction(0), "0"),
        (Fraction(1, 3), repr(1 / 3)),
    ],
)
def test_amounts_read_as_quantities(amount: Fraction, text: str) -> None:
    assert format_amount(amount) == text


_AMOUNTS = st.integers(min_value=0, max_value=10**6).map(lambda n: Fraction(n, 1000))


@given(supply=_AMOUNTS, taken=_AMOUNTS, asked=_AMOUNTS)
def test_fit_is_exactly_free_at_least_asked_and_scores_stay_in_range(
    supply: Fraction, taken: Fraction, asked: Fraction
) -> None:
    capacity = ClusterCapacity({"cpu": supply}, {"cpu": taken})
    fits = not shortfalls({"cpu": asked}, capacity)
    assert fits == (asked == 0 or supply - taken >= asked)
    for score in (least_allocated, most_allocated):
        assert 0 <= score({"cpu": asked}, capacity) <= MAX_SCORE
    if asked > 0:
        after = requested_to_capacity_ratio({"cpu": asked}, capacity, ((0, 0), (100, 100)))
        assert least_allocated({"cpu": asked}, capacity) + after in (MAX_SCORE - 1, MAX_SCORE)
        assert most_allocated({"cpu": asked}, capacity) <= after  # what is placed only adds


@given(
    st.lists(_AMOUNTS.filter(lambda a: a > 0), min_size=1, max_size=30),
    _AMOUNTS.filter(lambda a: a > 0),
)
def test_reserving_one_by_one_while_it_fits_never_exceeds_the_supply(
    asks: list[Fraction], supply: Fraction
) -> None:
    taken = Fraction(0)
    for ask in asks:
        capacity = ClusterCapacity({"cpu": supply}, {"cpu": taken})
        if not shortfalls({"cpu": ask}, capacity):
            taken += ask
        assert taken <= supply
