"""Temporal workflows of fleet-scheduler and their wire names.

Deterministic orchestration only: workflow modules import data types from elsewhere and do
nothing at import, because the sandbox re-imports them for every run."""

from workflows import names

__all__ = ["names"]
