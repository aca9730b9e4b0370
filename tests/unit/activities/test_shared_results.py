"""The activity process keeps one store of shared answers per profile, and can switch it off."""

from __future__ import annotations

import dataclasses

import pytest

from activities.shared_results import ENV_CELLS, ENV_SWITCH, shared_for
from scheduler import default_profile


def test_one_store_per_profile_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    profile, other = default_profile(), dataclasses.replace(default_profile())
    store = shared_for(profile)
    assert store is not None
    assert shared_for(profile) is store
    assert shared_for(other) is not store


def test_switched_off_and_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SWITCH, "0")
    assert shared_for(default_profile()) is None
    monkeypatch.setenv(ENV_SWITCH, "1")
    monkeypatch.setenv(ENV_CELLS, "1234")
    store = shared_for(dataclasses.replace(default_profile()))
    assert store is not None and store.max_cells == 1234
