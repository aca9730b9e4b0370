"""What the CLI says when Temporal answers "not found" or nothing answers: a person reads
"namespace" next to kubectl's `-n`, so every message names whose namespace it means."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from workers.cli.common import rpc_problem


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            RPCStatusCode.NOT_FOUND,
            "no placement workflow crp/web in Temporal namespace team-a:",
            id="not-found",
        ),
        pytest.param(
            RPCStatusCode.DEADLINE_EXCEEDED,
            "running for Temporal namespace team-a?",
            id="no-worker",
        ),
    ],
)
def test_temporal_problems_name_the_temporal_namespace(
    status: RPCStatusCode, expected: str
) -> None:
    message = str(rpc_problem(RPCError("workflow not found", status, b""), "crp/web", "team-a"))
    assert expected in message


def test_a_missing_resource_placement_names_both_namespaces_by_owner() -> None:
    error = RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")
    message = str(rpc_problem(error, "rp/shop/checkout", "default"))
    assert message.startswith(
        "no placement workflow rp/shop/checkout in Temporal namespace default:"
    )
    assert "ResourcePlacement named 'checkout' in hub namespace 'shop'" in message
