"""ensure_search_attributes on a real Temporal: adds what is missing, once, and refuses types
that would make the UI's filters lie."""

from __future__ import annotations

import uuid

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from workers.devserver import SearchAttributeError, ensure_search_attributes
from workflows import names


async def fresh_namespace(client: Client) -> str:
    namespace = f"fleet-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    return namespace


async def test_registers_missing_attributes_once(temporal_env: WorkflowEnvironment) -> None:
    namespace = await fresh_namespace(temporal_env.client)
    added = await ensure_search_attributes(temporal_env.client, namespace)
    assert added == sorted(key.name for key in names.SEARCH_ATTRIBUTES)
    assert await ensure_search_attributes(temporal_env.client, namespace) == []


async def test_attributes_registered_at_dev_server_start_need_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    assert await ensure_search_attributes(temporal_env.client, temporal_env.client.namespace) == []


async def test_an_attribute_of_another_type_is_refused(temporal_env: WorkflowEnvironment) -> None:
    namespace = await fresh_namespace(temporal_env.client)
    await temporal_env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={
                names.SA_FULLY_SCHEDULED.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
            },
        )
    )
    with pytest.raises(
        SearchAttributeError, match="FleetFullyScheduled is INDEXED_VALUE_TYPE_KEYWORD"
    ):
        await ensure_search_attributes(temporal_env.client, namespace)
