"""The preempted-by mark on a victim's binding: written and read by one pair of functions."""

from __future__ import annotations

import pytest

from scheduler.preemption.marks import PreemptedBy, parse_preempted_by


def test_a_mark_reads_back_as_written() -> None:
    mark = PreemptedBy("rp/shop/checkout", 100000, "member-3", -5)
    assert mark.text() == "rp/shop/checkout (priority 100000) on member-3, over priority -5"
    assert parse_preempted_by(mark.text()) == mark
    assert mark.who() == "rp/shop/checkout (priority 100000) on member-3"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "crp/checkout",
        "crp/checkout (priority high) on member-3, over priority 0",
        "crp/checkout (priority 1) on member-3",
        "crp/checkout (priority 1) on member-3, over priority 0 and more",
    ],
)
def test_a_mark_written_by_hand_is_not_read(value: str) -> None:
    assert parse_preempted_by(value) is None
