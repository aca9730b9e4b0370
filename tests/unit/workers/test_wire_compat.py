"""What crosses Temporal decodes on an older worker: fields a newer version added are ignored.

In a rolling upgrade two versions run side by side; an activity result, a continue-as-new input,
a signal or a query answer written by the newer one is read by the older one. A model that
rejected an unknown field would fail that workflow task on every retry (the workflow is stuck
until the old workers are gone), so every model is decoded here from a payload that carries a
new field in every JSON object, at every depth, including the scheduler's explanation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from scheduler import CycleInput, schedule
from scheduler.framework.profile import default_profile
from scheduler.testing import member_cluster, policy_snapshot
from workflows.models import (
    CleanupReport,
    CleanupRequest,
    CycleReport,
    HubEvent,
    PlacementInput,
    PlacementState,
    PlacementStatus,
    PrepareResult,
    ReconcileInput,
    RequeueRequest,
    TurnRequest,
    TurnResult,
    WriteCounts,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NEW_FIELD = "addedByANewerVersion"


def _report() -> CycleReport:
    """A real cycle's report: picked, not picked and filtered clusters, so the explanation has
    every kind of entry."""
    clusters = [
        member_cluster(f"c{i}", NOW, labels={"env": "prod" if i % 2 else "dev"}) for i in range(6)
    ] + [member_cluster("tainted", NOW, taints=[("gpu", None)])]
    snapshot = policy_snapshot(
        "web",
        {
            "placementType": "PickN",
            "numberOfClusters": 2,
            "affinity": {
                "clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "clusterSelectorTerms": [
                            {"labelSelector": {"matchLabels": {"env": "prod"}}}
                        ]
                    }
                }
            },
        },
    )
    result = schedule(
        CycleInput(snapshot=snapshot, clusters=clusters, bindings=[], now=NOW), default_profile()
    )
    assert result.explanation.filtered, "the fixture must filter some clusters"
    return CycleReport(
        cycle=3,
        placement="web",
        snapshot=snapshot.metadata.name,
        outcome=result.outcome,
        explanation=result.explanation,
        writes=WriteCounts(created=2, status_written=True),
        summary="cycle 3: PickN 2/2",
    )


def _models() -> list[BaseModel]:
    report = _report()
    prepared = PrepareResult(phase="ready", snapshot=report.snapshot, placement_type="PickN")
    # The last report travels without its explanation (PlacementState), the deciding one with.
    carried = PlacementState(
        cycles=3, pending_reasons=["requeue"], last=report.slim(), deciding=report, phase="idle"
    )
    return [
        TurnRequest(placement="web", cycle=4, reason="requeue"),
        TurnResult(prepared=prepared, report=report),
        CleanupRequest(placement="web"),
        CleanupReport(bindings_deleted=2, summary="2 bindings deleted"),
        PlacementInput(placement="web", carried=carried),
        PlacementStatus(placement="web", cycles=3, waiting_for="an event", last=report),
        RequeueRequest(fresh=True, reason="by hand"),
        HubEvent(reason="cluster c1 relabelled"),
        HubEvent(reason="cluster c9 joined", local_cycles=False),
        PlacementInput(placement="web", local_cycles=True),
        ReconcileInput(task_queue="fleet-scheduler", local_cycles_up_to=200),
    ]


def _with_new_fields(value: Any) -> tuple[Any, int]:
    """`value` with NEW_FIELD added to every JSON object in it, and how many were added."""
    if isinstance(value, dict):
        added = 1
        out: dict[str, Any] = {NEW_FIELD: {"nested": [1, 2]}}
        for key, item in value.items():
            out[key], n = _with_new_fields(item)
            added += n
        return out, added
    if isinstance(value, list):
        items = [_with_new_fields(item) for item in value]
        return [item for item, _ in items], sum(n for _, n in items)
    return value, 0


@pytest.mark.parametrize("model", _models(), ids=lambda m: type(m).__name__)
def test_an_older_worker_decodes_what_a_newer_one_wrote(model: BaseModel) -> None:
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([model])
    document = pydantic_data_converter.payload_converter.from_payloads([payload], [dict])[0]
    newer, added = _with_new_fields(document)
    assert added >= 1
    (newer_payload,) = converter.to_payloads([newer])
    assert isinstance(newer_payload, Payload)

    (decoded,) = converter.from_payloads([newer_payload], [type(model)])

    assert decoded == model
