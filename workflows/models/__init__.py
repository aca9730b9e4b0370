"""What crosses Temporal: workflow inputs, signals, updates and query results
(`placement`), activity inputs and results (`turn`), the fleet-wide workflows' (`fleet`). One
base, scheduler.wire.WireModel: camelCase on the wire, unknown fields ignored, fields only ever
added with defaults; the placement workflow's are written compact (`wire.CompactWire`: a field
at its default is left out)."""

from workflows.models.fleet import (
    RebalanceInput,
    RebalanceReport,
    ReconcileInput,
    ReconcileReport,
)
from workflows.models.placement import (
    DeadlineState,
    HubEvent,
    MovesRequest,
    PlacementExplanation,
    PlacementInput,
    PlacementPhase,
    PlacementState,
    PlacementStatus,
    RenewRequest,
    RequeueRequest,
    RequeueResult,
    TurnExecutionMode,
    TurnMoves,
    TurnOutcome,
    TurnPriority,
)
from workflows.models.turn import (
    INLINE_EXPLANATION_BYTES,
    CleanupReport,
    CleanupRequest,
    CycleReport,
    DeadlineMiss,
    DeadlineReport,
    DeadlineReported,
    MoveRequest,
    PreparePhase,
    PrepareResult,
    TurnRequest,
    TurnResult,
    WriteCounts,
)

__all__ = [
    "INLINE_EXPLANATION_BYTES",
    "CleanupReport",
    "CleanupRequest",
    "CycleReport",
    "DeadlineMiss",
    "DeadlineReport",
    "DeadlineReported",
    "DeadlineState",
    "HubEvent",
    "MoveRequest",
    "MovesRequest",
    "PlacementExplanation",
    "PlacementInput",
    "PlacementPhase",
    "PlacementState",
    "PlacementStatus",
    "PreparePhase",
    "PrepareResult",
    "RebalanceInput",
    "RebalanceReport",
    "ReconcileInput",
    "ReconcileReport",
    "RenewRequest",
    "RequeueRequest",
    "RequeueResult",
    "TurnExecutionMode",
    "TurnMoves",
    "TurnOutcome",
    "TurnPriority",
    "TurnRequest",
    "TurnResult",
    "WriteCounts",
]
