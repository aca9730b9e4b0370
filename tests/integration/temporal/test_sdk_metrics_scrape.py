"""One /metrics scrape returns KubeFleet's scheduler metrics and the Temporal SDK's, with the
SDK's served by a real Runtime after real worker traffic."""

from __future__ import annotations

import uuid

import aiohttp
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.integration.temporal.temporal_test_workflows import GreetingWorkflow, greet
from workers.health import HealthServer
from workers.metrics import SchedulerMetrics, sdk_metrics_runtime


async def test_metrics_endpoint_serves_ours_and_the_sdks(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    runtime, sdk_url = sdk_metrics_runtime()
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        runtime=runtime,
    )
    async with Worker(
        client, task_queue=task_queue, workflows=[GreetingWorkflow], activities=[greet]
    ):
        await client.execute_workflow(
            GreetingWorkflow.run,
            "web",
            id=f"crp/metrics-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
    metrics = SchedulerMetrics(sdk_metrics_url=sdk_url, process_metrics=False)
    metrics.observe_cycle(12.0, placement_type="PickAll", outcome="success")

    async with (
        HealthServer("127.0.0.1", 0, lambda: True, metrics) as server,
        aiohttp.ClientSession() as session,
        session.get(server.url + "/metrics") as response,
    ):
        assert response.status == 200
        body = await response.text()
    assert (
        'scheduling_cycle_duration_milliseconds_count{is_failed="false",needs_requeue="false"} 1.0'
        in body
    )
    assert "temporal_workflow_completed" in body  # from the SDK's own endpoint
    assert "temporal_activity_execution_latency" in body
