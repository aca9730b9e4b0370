"""The one way fleet-scheduler processes connect to Temporal.

Where to connect comes from the Temporal SDK's standard environment configuration, read exactly
as the `temporal` CLI reads it (`temporalio.envconfig`): the TOML config file
(`$TEMPORAL_CONFIG_FILE`, else the platform's default path) with the profile named by
`--temporal-profile` or `$TEMPORAL_PROFILE` (default "default"), then the environment on top
(`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS`,
`TEMPORAL_TLS_CLIENT_CERT_PATH`/`_DATA`, `TEMPORAL_TLS_CLIENT_KEY_PATH`/`_DATA`,
`TEMPORAL_TLS_SERVER_CA_CERT_PATH`/`_DATA`, `TEMPORAL_TLS_SERVER_NAME`,
`TEMPORAL_TLS_DISABLE_HOST_VERIFICATION`, `TEMPORAL_GRPC_META_*`), then the command-line flags
`--temporal-address` and `--namespace` on top of both. Nothing configured means the local dev
server: 127.0.0.1:7233, namespace "default". The project's earlier `FLEET_TEMPORAL_ADDRESS` and
`FLEET_TEMPORAL_NAMESPACE` still work as aliases of the standard names, which win when both are
set. docs/temporal-connection.md has examples (Temporal Cloud with an API key, mTLS).

Every client must also agree on three things or histories stop making sense: the pydantic data
converter (our models cross Temporal as camelCase JSON, readable in the UI), the tracing
interceptor (so a trace runs from the watcher's signal into the activities; given to the client
only, the worker inherits it), and, in long-running processes, a runtime that serves the SDK's
metrics. `connect` also turns "cannot connect", "TLS refused" and "no such namespace" into one
typed error whose message says what to fix, because they are the first thing a newcomer hits."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile
from temporalio.runtime import Runtime
from temporalio.service import RetryConfig, RPCError, RPCStatusCode, TLSConfig

from control.telemetry import temporal_interceptors
from workers.devserver import DEFAULT_NAMESPACE

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_TEMPORAL_ADDRESS",
    "LEGACY_ALIASES",
    "TemporalConfigError",
    "TemporalTarget",
    "TemporalUnavailableError",
    "check_address",
    "connect",
    "load_target",
]

DEFAULT_TEMPORAL_ADDRESS: Final = "127.0.0.1:7233"  # the dev server's default, and `make run`'s
# The project's own names from before it read the standard configuration: alias -> standard.
LEGACY_ALIASES: Final = {
    "FLEET_TEMPORAL_ADDRESS": "TEMPORAL_ADDRESS",
    "FLEET_TEMPORAL_NAMESPACE": "TEMPORAL_NAMESPACE",
}
# Connecting to loopback takes milliseconds; a remote frontend behind a load balancer, a second.
CONNECT_TIMEOUT_S: Final = 10.0
# The Rust core reports e.g. `... message: "Connection refused" ...`: keep the human part.
_CORE_REASON = re.compile(r'(?:message|error): "([^"]+)"')


class TemporalConfigError(ValueError):
    """The Temporal connection settings cannot be loaded (a bad config file, an unknown profile,
    an unreadable certificate); the message says which and where."""


class TemporalUnavailableError(RuntimeError):
    """Temporal cannot be used at the given address and namespace; the message says why and
    what to try."""


@dataclass(frozen=True)
class TemporalTarget:
    """Where and how to connect, resolved from the config file, the environment and flags."""

    address: str = DEFAULT_TEMPORAL_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    api_key: str | None = field(default=None, repr=False)
    tls: bool | TLSConfig = False
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)

    def describe(self) -> str:
        """E.g. "my-ns.tmprl.cloud:7233, namespace my-ns (TLS, API key)": never the secrets."""
        flags = (("TLS", bool(self.tls)), ("API key", bool(self.api_key)))
        how = [word for word, on in flags if on]
        return f"{self.address}, namespace {self.namespace}" + (
            f" ({', '.join(how)})" if how else ""
        )


def _with_aliases(env: Mapping[str, str]) -> dict[str, str]:
    merged = dict(env)
    for alias, standard in LEGACY_ALIASES.items():
        if env.get(alias, "").strip() and not env.get(standard, "").strip():
            merged[standard] = env[alias].strip()
    return merged


def load_target(
    *,
    address: str | None = None,
    namespace: str | None = None,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> TemporalTarget:
    """The connection settings, as the `temporal` CLI resolves them, with flags on top.

    Raises:
        TemporalConfigError: the config file or a certificate cannot be read, the profile
            named does not exist, or the address is not HOST:PORT.
    """
    environment = _with_aliases(os.environ if env is None else env)
    try:
        loaded = ClientConfigProfile.load(profile=profile, override_env_vars=environment)
        config = loaded.to_client_connect_config()
    except (RuntimeError, ValueError, OSError) as exc:
        raise TemporalConfigError(
            f"cannot load the Temporal connection settings: {_reason(exc)}"
        ) from exc
    return TemporalTarget(
        address=check_address(address or config.get("target_host") or DEFAULT_TEMPORAL_ADDRESS),
        namespace=namespace or config.get("namespace") or DEFAULT_NAMESPACE,
        api_key=config.get("api_key"),
        tls=config.get("tls", False),
        rpc_metadata=config.get("rpc_metadata", {}),
    )


_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+):([0-9]{1,5})$")


def check_address(address: str) -> str:
    """`address` if it is HOST:PORT (a bracketed IPv6 host too), else TemporalConfigError saying
    what is wrong: without a port the SDK would report a refused connection, which misleads."""
    found = _HOST_PORT.match(address.strip())
    if found is not None and 0 < int(found.group(2)) < 65536:
        return address.strip()
    if "://" in address:
        problem = "is a URL; give HOST:PORT without a scheme"
    elif found is None and address.strip() and ":" not in address.strip().rsplit("]", 1)[-1]:
        problem = f"has no port; give HOST:PORT, e.g. {address.strip()}:7233"
    else:
        problem = "is not HOST:PORT with a port from 1 to 65535"
    raise TemporalConfigError(f"the Temporal address {address!r} {problem}")


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    found = _CORE_REASON.findall(text)
    return found[-1] if found else text


async def connect(
    target: TemporalTarget,
    *,
    runtime: Runtime | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
    identity: str | None = None,
) -> Client:
    """A client with our data converter and interceptors, checked against the namespace.

    Raises:
        TemporalUnavailableError: nothing answers at the address, TLS or the API key is refused,
            or the namespace does not exist.
    """
    address, namespace = target.address, target.namespace
    hint = (
        "is Temporal running there, and are its TLS and credentials set? (locally, `make run` "
        "in the repository starts one on 127.0.0.1:7233; elsewhere pass --temporal-address "
        "HOST:PORT or set TEMPORAL_ADDRESS; docs/temporal-connection.md)"
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
                api_key=target.api_key,
                tls=target.tls,
                rpc_metadata=target.rpc_metadata,
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
                f"Temporal at {address} has no Temporal namespace {namespace!r}; create it "
                f"(`temporal operator namespace create --namespace {namespace}`) or pass "
                "--temporal-namespace"
            ) from exc
        raise TemporalUnavailableError(
            f"Temporal at {address} did not describe Temporal namespace {namespace!r}: "
            f"{exc.message}"
        ) from exc
    return client
