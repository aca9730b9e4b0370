"""The base of the scheduler's own boundary models (cycle input, plan, result, explanation).

They cross Temporal as activity payloads and workflow query results, so they follow the hub
types' conventions (camelCase on the wire, frozen values). Unknown fields are ignored, not
rejected: during a rolling upgrade an older worker decodes what a newer one wrote (a result with
a field added since), and a rejection there would fail the workflow task on every retry. Fields
are therefore only ever added, with defaults, never renamed or given a new meaning."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["WireModel"]


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        frozen=True,
        extra="ignore",
    )
