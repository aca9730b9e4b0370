"""The base of what a placement workflow records and is sent: WireModel, written compact.

Every turn's request and result, every signal and the state continue-as-new carries are stored
in the placement's event history, and the server reads, writes and (for a worker whose cache
lost the run) sends them again. A field at its default says nothing a reader does not know
already: a reader of any version fills a field that is not there with its default, the same
default, since fields are only ever added, with defaults that never change (scheduler.wire).
So a field equal to its default is left out of the JSON (about a sixth of a turn's result
and a third of a signal were `null`, `0`, `false` and `[]`), and what the reader builds is the
same model. Readers of JSON written before (recorded histories: every field written) read it
as before. Tests: tests/unit/workflows/test_compact_wire.py."""

from __future__ import annotations

from typing import Any

from pydantic import SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from scheduler.wire import WireModel

__all__ = ["WHOLE", "CompactWire"]

# A serialisation context key ({WHOLE: True}): every field written, as before (for tests and
# for anyone who wants to see the defaults).
WHOLE = "whole"


class CompactWire(WireModel):
    """A WireModel whose fields at their defaults are left out when it is serialised."""

    @model_serializer(mode="wrap")
    def _compact(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if isinstance(info.context, dict) and info.context.get(WHOLE):
            return data
        for name, field in type(self).model_fields.items():
            if field.is_required():
                continue
            key = (field.serialization_alias or field.alias or name) if info.by_alias else name
            if key in data and getattr(self, name) == field.get_default(call_default_factory=True):
                del data[key]
        return self._said_once(data)

    def _said_once(self, data: dict[str, Any]) -> dict[str, Any]:
        """`data` (this model's JSON, defaults left out) without what it repeats: a model that
        repeats something leaves it out here, and puts it back when it is read."""
        return data
