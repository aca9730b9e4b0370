"""Worker Deployment versioning: which worker version may run which workflow task.

A rolling upgrade runs two versions of the worker side by side for minutes. Without versioning
Temporal hands any task to any poller, so an old worker can receive a task of a workflow that a
new one has already advanced with commands the old code does not know. With it, every worker
polls as a version (`deployment name`.`build id`), and the server sends workflow tasks only to
the deployment's *current* version (or a ramp of it).

Placement workflows are declared AUTO_UPGRADE, not PINNED. A placement workflow lives as long
as its placement, mostly idle: a pinned run would stay on the version that started it, keeping
the old workers alive until every placement had an event and continued-as-new, which for a quiet
placement may be never. Auto-upgrade moves every workflow to the new current version at its
next task; the price is that a change to the workflow's commands goes behind
`workflow.patched()`, which the replay tests of recorded histories check (docs/operations.md,
"Upgrades with running workflows").

A worker started with `promote` makes its own version current once the server sees it polling,
so a plain Deployment rolling update is an upgrade: the new pod turns ready after promoting
itself, the old pod stops, and its in-flight activities time out on their heartbeat and are
retried on the new version. Operators who ramp by hand start workers without promote and use
`temporal worker deployment set-current-version` / `set-ramping-version`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from control.config import DEFAULT_DEPLOYMENT_NAME, VersionFlags

__all__ = [
    "DEFAULT_DEPLOYMENT_NAME",
    "PromoteError",
    "WorkerVersion",
    "current_build_id",
    "promote",
    "worker_version",
]

MAX_NAME: Final = 255
PROMOTE_RPC_TIMEOUT: Final = timedelta(seconds=5)
PROMOTE_POLL_S: Final = 0.25
# Answers meaning "the server has not registered this version's pollers yet": try again.
_NOT_YET: Final = frozenset({RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION})


class PromoteError(RuntimeError):
    """The version could not be made current (the message says what the server answered)."""


@dataclass(frozen=True)
class WorkerVersion:
    """The version a worker polls as, and whether it makes itself current."""

    build_id: str
    deployment: str = DEFAULT_DEPLOYMENT_NAME
    promote: bool = True

    def __post_init__(self) -> None:
        # Temporal writes a version as "<deployment>.<build id>" and splits it at the first '.'.
        if not self.deployment or "." in self.deployment or len(self.deployment) > MAX_NAME:
            raise ValueError(
                f"deployment name {self.deployment!r}: give 1-{MAX_NAME} characters without '.' "
                "(Temporal joins it to the build id with one)"
            )
        if not self.build_id.strip() or len(self.build_id) > MAX_NAME:
            raise ValueError(f"build id {self.build_id!r}: give 1-{MAX_NAME} characters")

    @property
    def label(self) -> str:
        return f"{self.deployment}.{self.build_id}"

    def deployment_config(self) -> WorkerDeploymentConfig:
        return WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(self.deployment, self.build_id),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE,
        )


def worker_version(flags: VersionFlags) -> WorkerVersion | None:
    """The version `flags` ask for: None without a build id (an unversioned worker).

    Raises:
        ValueError: a build id or deployment name Temporal would refuse.
    """
    if flags.build_id is None:
        return None
    return WorkerVersion(flags.build_id, flags.deployment_name, flags.promote)


async def current_build_id(client: Client, deployment: str) -> str | None:
    """The build id of the deployment's current version, or None (no deployment, or unversioned
    current)."""
    try:
        response = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment),
            timeout=PROMOTE_RPC_TIMEOUT,
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    current = response.worker_deployment_info.routing_config.current_deployment_version
    return current.build_id or None


async def promote(client: Client, version: WorkerVersion, *, timeout_s: float = 60.0) -> None:
    """Make `version` the deployment's current version, waiting until the server knows it
    (a version exists once its workers poll). Nothing to do when it already is current.

    Raises:
        PromoteError: the server refused for another reason, or did not know the version
            within `timeout_s`.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    last = ""
    while loop.time() < deadline:
        try:
            if await current_build_id(client, version.deployment) == version.build_id:
                return
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace,
                    deployment_name=version.deployment,
                    build_id=version.build_id,
                    identity=client.identity,
                ),
                timeout=PROMOTE_RPC_TIMEOUT,
            )
            return
        except RPCError as exc:
            if exc.status not in _NOT_YET:
                raise PromoteError(f"cannot make {version.label} current: {exc.message}") from exc
            last = exc.message
        await asyncio.sleep(PROMOTE_POLL_S)
    raise PromoteError(
        f"{version.label} was not known to the server within {timeout_s:g}s ({last})"
    )
