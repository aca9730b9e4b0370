"""The one way fleet-scheduler processes connect to Temporal.

Every client must agree on three things or histories stop making sense: the pydantic data
converter (our models cross Temporal as camelCase JSON, readable in the UI), the tracing
interceptor (so a trace runs from the watcher's signal into the activities; given to the client
only, the worker inherits it), and, in long-running processes, a runtime that serves the SDK's
metrics. `connect` also turns "cannot connect" and "no such namespace" into one typed error
whose message says what to fix, because both are the first thing a newcomer hits."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Final

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime
from temporalio.service import RetryConfig, RPCError, RPCStatusCode

from workers.devserver import DEFAULT_NAMESPACE
from workers.telemetry import temporal_interceptors

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_TEMPORAL_ADDRESS",
    "ENV_TEMPORAL_ADDRESS",
    "ENV_TEMPORAL_NAMESPACE",
    "TemporalUnavailableError",
    "connect",
    "default_address",
    "default_namespace",
]

DEFAULT_TEMPORAL_ADDRESS: Final = "127.0.0.1:7233"  # the dev server's default, and `make run`'s
ENV_TEMPORAL_ADDRESS: Final = "FLEET_TEMPORAL_ADDRESS"
ENV_TEMPORAL_NAMESPACE: Final = "FLEET_TEMPORAL_NAMESPACE"
# Connecting to loopback takes milliseconds; a remote frontend behind a load balancer, a second.
CONNECT_TIMEOUT_S: Final = 10.0
# The Rust core reports e.g. `... message: "Connection refused" ...`: keep the human part.
_CORE_REASON = re.compile(r'(?:message|error): "([^"]+)"')


class TemporalUnavailableError(RuntimeError):
    """Temporal cannot be used at the given address and namespace; the message says why and
    what to try."""


def default_address(env: Mapping[str, str] | None = None) -> str:
    """$FLEET_TEMPORAL_ADDRESS, else 127.0.0.1:7233."""
    env = os.environ if env is None else env
    return env.get(ENV_TEMPORAL_ADDRESS, "").strip() or DEFAULT_TEMPORAL_ADDRESS


def default_namespace(env: Mapping[str, str] | None = None) -> str:
    """$FLEET_TEMPORAL_NAMESPACE, else `default`."""
    env = os.environ if env is None else env
    return env.get(ENV_TEMPORAL_NAMESPACE, "").strip() or DEFAULT_NAMESPACE


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    found = _CORE_REASON.findall(text)
    return found[-1] if found else text


async def connect(
    address: str,
    namespace: str = DEFAULT_NAMESPACE,
    *,
    runtime: Runtime | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
    identity: str | None = None,
) -> Client:
    """A client with our data converter and interceptors, checked against `namespace`.

    Raises:
        TemporalUnavailableError: nothing answers at `address`, or the namespace does not exist.
    """
    hint = (
        f"is Temporal running there? (start one with `fleet-scheduler dev`, or pass "
        f"--temporal-address / set {ENV_TEMPORAL_ADDRESS})"
    )
    try:
        async with asyncio.timeout(timeout_s):
            client = await Client.connect(
                address,
                namespace=namespace,
                data_converter=pydantic_data_converter,
                interceptors=temporal_interceptors(),
                runtime=runtime,
                identity=identity,
                retry_config=RetryConfig(max_retries=2),
            )
    except TimeoutError as exc:
        raise TemporalUnavailableError(
            f"cannot reach Temporal at {address}: no answer within {timeout_s:g}s; {hint}"
        ) from exc
    except (RuntimeError, RPCError, ValueError) as exc:
        raise TemporalUnavailableError(
            f"cannot reach Temporal at {address}: {_reason(exc)}; {hint}"
        ) from exc
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace), timeout=timedelta(seconds=timeout_s)
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise TemporalUnavailableError(
                f"Temporal at {address} has no namespace {namespace!r}; create it (`temporal "
                f"operator namespace create --namespace {namespace}`) or pass --namespace"
            ) from exc
        raise TemporalUnavailableError(
            f"Temporal at {address} did not describe namespace {namespace!r}: {exc.message}"
        ) from exc
    return client
