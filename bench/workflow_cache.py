"""Workflow cache bench: the memory one cached PlacementWorkflow costs a worker.

    python bench/workflow_cache.py [--workflows 1000]

Starts the Temporal dev server (a child) and, in this process, a workflow worker with a cache
large enough for all of them and an activity worker whose cycle never returns, so every workflow
stays in the cache waiting on its first cycle. Prints `name value` lines: the process's RSS
before, after every quarter of the workflows has started, and `workflow_cache.kb_per_workflow`
(the growth over the whole run divided by the workflows). The figure sizes the worker's
`--max-cached-workflows` (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e_stack import rss_mb
from temporalio import activity
from temporalio.worker import Worker

from workers.devserver import DevServer, free_port
from workers.temporal_client import TemporalTarget, connect
from workflows import names
from workflows.models import PlacementInput, TurnRequest, TurnResult
from workflows.names import ACTIVITY_SCHEDULE_ONCE
from workflows.placement import PlacementWorkflow

SETTLE_S = 8.0


def own_rss_mb() -> float:
    return rss_mb(os.getpid()) or float("nan")


@activity.defn(name=ACTIVITY_SCHEDULE_ONCE)
async def never_returns(request: TurnRequest) -> TurnResult:
    await asyncio.sleep(3600)
    raise RuntimeError("unreachable")


async def main(workflows: int) -> None:
    server = DevServer(port=free_port(), ui=False)
    await server.start()
    try:
        client = await connect(TemporalTarget(server.target, server.namespace))
        queue = f"cache-{uuid.uuid4().hex[:6]}"
        async with (
            Worker(
                client, task_queue=queue, workflows=[PlacementWorkflow],
                max_cached_workflows=workflows * 2,
            ),
            Worker(
                client, task_queue=names.activity_task_queue(queue),
                activities=[never_returns], max_concurrent_activities=workflows * 2,
            ),
        ):  # fmt: skip
            base = own_rss_mb()
            print(f"workflow_cache.rss_mb.0 {base:.1f}", flush=True)
            quarter = max(1, workflows // 4)
            started = 0
            while started < workflows:
                for _ in range(min(quarter, workflows - started)):
                    name = f"cache-{started:05d}"
                    await client.start_workflow(
                        PlacementWorkflow.run, PlacementInput(placement=name),
                        id=names.workflow_id(name) + f"-{uuid.uuid4().hex[:4]}", task_queue=queue,
                    )  # fmt: skip
                    started += 1
                await asyncio.sleep(SETTLE_S)
                print(f"workflow_cache.rss_mb.{started} {own_rss_mb():.1f}", flush=True)
            grown = own_rss_mb() - base
            print(f"workflow_cache.kb_per_workflow {grown * 1024 / workflows:.0f}", flush=True)
    finally:
        await server.stop()


if __name__ == "__main__":
    # The activities still waiting are cancelled when the workers stop; that is not news.
    logging.getLogger("temporalio.activity").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workflows", type=int, default=1000)
    asyncio.run(main(parser.parse_args().workflows))
