"""What a placement workflow records is written compact (workflows.models.wire): a field at its
default is left out, and a turn's result does not repeat its cycle's summary. The figures are
from bench/turn_history.py's recorded turns at 1,000 clusters; the JSON below is a PickN-10 turn's
result and the watcher's signal as the history held them before.

Readers of every version build the same model: a field left out is at the default every
version has (fields are only added, defaults never change), results recorded before (every
field written) read as before, and a newer writer's unknown fields are ignored
(tests/unit/workers/test_wire_compat.py decodes every model with one in every object)."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.contrib.pydantic import pydantic_data_converter

from scheduler import Outcome
from workflows.models import (
    CycleReport,
    HubEvent,
    PlacementInput,
    PlacementState,
    PrepareResult,
    RequeueResult,
    TurnPriority,
    TurnRequest,
    TurnResult,
    WriteCounts,
)
from workflows.models.wire import WHOLE

CONVERTER = pydantic_data_converter.payload_converter

SUMMARY = (
    "cycle 2: PickN 11/11, picked member-00664,member-00000,member-00676,member-00688,"
    "member-00732 +6 more; 1 created, status written, placement condition written; filtered "
    "400: ClusterAffinity 333, TaintToleration 67"
)
# A turn's result as a local-activity marker recorded it (the packed explanation shortened).
RECORDED_RESULT = json.dumps(
    {
        "summary": SUMMARY,
        "prepared": {
            "phase": "ready",
            "message": "latest policy snapshot th-53b3-n-0 (PickN)",
            "snapshot": "th-53b3-n-0",
            "placementType": "PickN",
            "placementGeneration": 2,
            "snapshotAction": "refreshed th-53b3-n-0",
            "scheduleDeadline": None,
            "scheduleDeadlineProblem": None,
            "unscheduledSince": None,
        },
        "report": {
            "summary": SUMMARY,
            "cycle": 2,
            "placement": "th-53b3-n",
            "namespace": None,
            "snapshot": "th-53b3-n-0",
            "outcome": {"placementType": "PickN", "wanted": 11, "picked": 11, "fulfilled": True},
            "evaluated": True,
            "explanation": None,
            "explanationPacked": "0pJvH0vH4UV1iyyipqjjZj?S{B3CI}q6A^~dQ-OV7WF20#2",
            "explanationDigest": "5f249810b3fc957483e13cab04fd00fa",
            "writes": {
                "created": 1,
                "adopted": 0,
                "patched": 0,
                "unscheduled": 0,
                "finalizersRemoved": 0,
                "statusWritten": True,
                "placementConditionWritten": True,
                "deadlineEvent": False,
            },
            "requeue": False,
            "requeueAfterSeconds": None,
            "error": None,
            "clustersSeen": 1000,
            "bindingsSeen": 10,
            "durationMs": 25.2766720004729,
        },
        "moves": [],
        "nextLocal": True,
    },
    separators=(",", ":"),
)
# The watcher's placement_changed signal as recorded.
RECORDED_SIGNAL = json.dumps(
    {
        "reason": "placement th-53b3-n: spec changed (generation 1 -> 2)",
        "turnExecution": "auto",
        "localCycles": None,
        "priority": {
            "priorityKey": 3,
            "placementKey": 3,
            "fairnessKey": None,
            "fairnessWeight": None,
            "value": 0,
            "priorityClass": None,
            "tenant": None,
            "problem": None,
            "agingLimit": None,
        },
    },
    separators=(",", ":"),
)


def encoded(model: BaseModel) -> bytes:
    (payload,) = CONVERTER.to_payloads([model])
    return payload.data


def decoded(data: bytes | str, kind: type[Any]) -> Any:
    (payload,) = CONVERTER.to_payloads([json.loads(data)])
    (value,) = CONVERTER.from_payloads([payload], [kind])
    return value


def leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    return [value]


def test_a_turns_result_leaves_out_its_defaults_and_the_copy_of_its_summary() -> None:
    result = decoded(RECORDED_RESULT, TurnResult)

    written = encoded(result)

    document = json.loads(written)
    assert None not in leaves(document) and [] not in leaves(document)
    assert "summary" not in document  # the report's is the result's
    assert next(iter(document)) == "report"  # the UI's view starts with the report's summary
    assert document["report"]["summary"] == SUMMARY
    assert document["report"]["writes"] == {
        "created": 1,
        "statusWritten": True,
        "placementConditionWritten": True,
    }
    assert len(written) < len(RECORDED_RESULT) * 0.7


def test_a_result_recorded_before_and_its_compact_form_read_the_same() -> None:
    recorded = decoded(RECORDED_RESULT, TurnResult)

    again = decoded(encoded(recorded), TurnResult)

    assert again == recorded
    assert again.summary == SUMMARY  # restored from the report's
    assert RequeueResult.scheduled(again.report).summary == SUMMARY


def test_a_result_with_moves_keeps_its_own_summary() -> None:
    report = decoded(RECORDED_RESULT, TurnResult).report
    result = TurnResult.of(PrepareResult(phase="ready"), report, ["moved b1 from a to c"])

    document = json.loads(encoded(result))

    assert document["summary"].endswith("1 move(s): moved b1 from a to c")
    assert decoded(json.dumps(document), TurnResult) == result


def test_a_turn_without_a_cycle_keeps_its_summary() -> None:
    result = TurnResult.of(PrepareResult(phase="no_latest_snapshot", message="no snapshot yet"))

    document = json.loads(encoded(result))

    assert document == {
        "summary": "no cycle: no snapshot yet",
        "prepared": {"phase": "no_latest_snapshot", "message": "no snapshot yet"},
    }
    assert decoded(json.dumps(document), TurnResult) == result


def test_the_watchers_signal_leaves_out_its_nulls() -> None:
    event = decoded(RECORDED_SIGNAL, HubEvent)

    document = json.loads(encoded(event))

    assert document == {
        "reason": "placement th-53b3-n: spec changed (generation 1 -> 2)",
        "turnExecution": "auto",
        "priority": {"priorityKey": 3, "placementKey": 3},
    }
    assert decoded(json.dumps(document), HubEvent) == event


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (`CycleReport | None`: CycleReport), if any."""
    for kind in (annotation, *typing.get_args(annotation)):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return kind
    return None


def _models() -> list[BaseModel]:
    report = decoded(RECORDED_RESULT, TurnResult).report
    assert isinstance(report, CycleReport)
    state = PlacementState(
        cycles=2,
        dirty=False,
        last=report.slim(),
        deciding=report,
        phase="idle",
        priority=TurnPriority(priority_key=2, own_priority_key=3, tenant="a"),
    )
    return [
        TurnRequest(placement="web", cycle=4, reason="requeue", known_explanation="ab"),
        decoded(RECORDED_RESULT, TurnResult),
        TurnResult(prepared=PrepareResult(phase="gone")),
        PlacementInput(placement="web", carried=state, turn_execution="auto"),
        state,
        CycleReport(
            cycle=1,
            placement="p",
            snapshot="s",
            outcome=Outcome(placement_type="PickAll", picked=0, fulfilled=False),
            writes=WriteCounts(),
            error="boom",
        ),
    ]


@pytest.mark.parametrize("model", _models(), ids=lambda m: type(m).__name__)
def test_every_field_left_out_is_at_the_default_an_older_reader_fills_in(
    model: BaseModel,
) -> None:
    """An older worker has the same fields with the same defaults (or fewer): a field left out
    reads as the value it had. TurnResult's summary is the one exception: left out when it is
    its report's, which is the one any version's workflow reads (RequeueResult.scheduled)."""
    document = json.loads(encoded(model))
    full = json.loads(model.model_dump_json(context={WHOLE: True}))

    def check(kind: type[BaseModel], written: dict[str, Any], whole: dict[str, Any]) -> None:
        by_alias = {
            (f.serialization_alias or f.alias or n): (n, f) for n, f in kind.model_fields.items()
        }
        for key, value in whole.items():
            name, field = by_alias[key]
            if key in written:
                nested = model_in(field.annotation)
                if isinstance(value, dict) and nested is not None:
                    check(nested, written[key], value)
                continue
            if kind is TurnResult and key == "summary" and whole["report"] is not None:
                assert value == whole["report"]["summary"]
                continue
            default = field.get_default(call_default_factory=True)
            default = json.loads(
                json.dumps(
                    default, default=lambda m: m.model_dump(mode="json", context={WHOLE: True})
                )
            )
            assert value == default, f"{kind.__name__}.{name} left out but not at its default"

    check(type(model), document, full)
    assert decoded(json.dumps(document), type(model)) == model
