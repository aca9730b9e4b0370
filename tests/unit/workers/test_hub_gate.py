"""The worker's hub-outage gate: which failures close it, and that waiting activities resume
when the probe reaches the hub again."""

from __future__ import annotations

import threading
import time

import pytest
from temporalio.exceptions import ApplicationError

from activities.outage import HubGate, through_outages
from hub.errors import HubUnavailableError
from workflows import failures


def _failure(status: int | None) -> ApplicationError:
    try:
        raise HubUnavailableError("hub down", status=status)
    except HubUnavailableError as exc:
        error = ApplicationError("cannot reach the hub", type=failures.HUB_UNAVAILABLE)
        error.__cause__ = exc
        return error


class FlakyHub:
    """Down for the first `down` calls (the activity's and the probe's alike)."""

    def __init__(self, down: int, status: int | None = 503) -> None:
        self.down, self.status, self.calls = down, status, 0
        self.lock = threading.Lock()

    def __call__(self) -> str:
        with self.lock:
            self.calls += 1
            if self.calls <= self.down:
                raise _failure(self.status)
        return "ok"


def test_an_activity_waits_out_an_outage_and_runs_again_when_the_hub_is_back() -> None:
    hub = FlakyHub(down=3)
    gate = HubGate(lambda: hub() and None, probe_interval_s=0.02)
    beats: list[str] = []

    assert through_outages(gate, beats.append, hub) == "ok"

    # One failing call by the activity, two failed probes, one good probe, the run again.
    assert hub.calls == 5
    assert (gate.stats.outages, gate.stats.probes) == (1, 3) and not gate.is_down


@pytest.mark.parametrize("status", [429, 404])
def test_a_busy_hub_is_left_to_temporals_backoff(status: int) -> None:
    hub = FlakyHub(down=1, status=status)
    gate = HubGate(lambda: None, probe_interval_s=0.02)
    with pytest.raises(ApplicationError):
        through_outages(gate, lambda _: None, hub)
    assert hub.calls == 1 and gate.stats.outages == 0


def test_an_activity_stops_waiting_at_the_gates_limit_and_fails_as_before() -> None:
    hub = FlakyHub(down=10_000, status=None)
    gate = HubGate(lambda: hub() and None, probe_interval_s=0.01, max_wait_s=0.2)
    started = time.monotonic()
    with pytest.raises(ApplicationError):
        through_outages(gate, lambda _: None, hub)
    assert time.monotonic() - started < 2.0
    assert gate.is_down  # still probing; the retry Temporal makes meets the gate closed
