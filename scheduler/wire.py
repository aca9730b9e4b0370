"""The base of the scheduler's own boundary models (cycle input, plan, result, explanation).

They cross Temporal as activity payloads and workflow query results, so they follow the hub
types' conventions (camelCase on the wire, frozen values) but, unlike hub objects, reject
unknown fields: nobody else writes them, so an unknown field is a bug, not data to keep."""

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
        extra="forbid",
    )
