"""The CLI finds Temporal the way the `temporal` CLI does: TEMPORAL_* variables, a TOML profile,
TLS with a private CA; flags override. Real dev server, real `fleet-scheduler` subprocesses.

The dev server speaks plain gRPC, so TLS is put in front of it by a small TLS-terminating TCP
proxy on loopback (a self-signed CA made here, ALPN h2), as a load balancer in front of a
self-hosted Temporal would."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from temporalio.testing import WorkflowEnvironment

from tests.support.cli import fleet_scheduler
from workers.devserver import free_port

LOOPBACK = "127.0.0.1"
# Nothing of the developer's own Temporal configuration may leak into these runs.
SCRUBBED = ("TEMPORAL_", "FLEET_TEMPORAL_")


# `status` proves the connection with its list call; the ResourcePlacement namespace filter
# matches nothing, so it queries no workflow (the shared dev server holds other tests' running
# workflows, whose workers are gone: each query would wait out its 5 s timeout).
STATUS = ("status", "-n", "connection-check")


def cli(*args: str, env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    # HOME and XDG_CONFIG_HOME point at an empty dir: no ~/.config/temporalio/temporal.toml.
    clean.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")})
    return subprocess.run(
        [*fleet_scheduler(), *args],
        capture_output=True, text=True, timeout=90, check=False, env={**clean, **env},
    )  # fmt: skip


def dev_address(temporal_env: WorkflowEnvironment) -> str:
    return temporal_env.client.service_client.config.target_host


def ca_and_server_certificate(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate it signed for 127.0.0.1: (ca, cert, key) files.
    rustls, under the Temporal SDK, refuses a self-signed CA certificate as the server's own."""
    now = datetime.datetime.now(datetime.UTC)
    validity = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(hours=1))

    def build(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
              signer: ec.EllipticCurvePrivateKey, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(validity[0])
            .not_valid_after(validity[1])
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
                critical=False,
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1()
    )
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca_cert = build("test CA", ca_key, ca_name, ca_key, ca=True)
    server_cert = build(LOOPBACK, server_key, ca_name, ca_key, ca=False)
    paths = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class TlsProxy:
    """TLS on `port`, plain TCP to `upstream`: a thread with its own event loop."""

    def __init__(self, upstream: str, cert: Path, key: Path) -> None:
        self.port = free_port()
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        self._context.set_alpn_protocols(["h2"])
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TlsProxy:
        self._thread.start()
        assert self._ready.wait(10), "the TLS proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, LOOPBACK, self.port, ssl=self._context)
        )
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ssl.SSLError, asyncio.IncompleteReadError):
                while data := await src.read(65536):  # bounded by: the connection's end
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError, RuntimeError):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".config").mkdir(parents=True)
    return tmp_path / "home"


@pytest.fixture
def tls_front(temporal_env: WorkflowEnvironment, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(address of the TLS proxy, path of the CA certificate that signed it)."""
    ca, cert, key = ca_and_server_certificate(tmp_path)
    with TlsProxy(dev_address(temporal_env), cert, key) as proxy:
        yield f"{LOOPBACK}:{proxy.port}", ca


def assert_ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "NAME" in done.stdout or "no placement workflows found" in done.stdout, done.stdout


def test_temporal_address_alone_is_enough(temporal_env: WorkflowEnvironment, home: Path) -> None:
    assert_ok(cli(*STATUS, env={"TEMPORAL_ADDRESS": dev_address(temporal_env)}, home=home))


def test_a_toml_profile_chosen_by_temporal_profile(
    temporal_env: WorkflowEnvironment, home: Path, tmp_path: Path
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(
        '[profile.default]\naddress = "127.0.0.1:1"\n\n'
        f'[profile.fleet]\naddress = "{dev_address(temporal_env)}"\nnamespace = "default"\n'
    )
    env = {"TEMPORAL_CONFIG_FILE": str(config)}
    assert_ok(cli(*STATUS, env={**env, "TEMPORAL_PROFILE": "fleet"}, home=home))
    assert_ok(cli(*STATUS, "--temporal-profile", "fleet", env=env, home=home))
    # The default profile points nowhere: proof that the profile, not a default, was used.
    refused = cli(*STATUS, env=env, home=home)
    assert refused.returncode == 2 and "127.0.0.1:1" in refused.stderr


def test_flags_override_the_environment(temporal_env: WorkflowEnvironment, home: Path) -> None:
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_NAMESPACE": "nowhere"}
    assert_ok(
        cli(*STATUS, "--temporal-address", dev_address(temporal_env),
            "--temporal-namespace", "default", env=env, home=home)
    )  # fmt: skip


def test_the_old_fleet_variables_still_work_and_lose_to_the_standard_ones(
    temporal_env: WorkflowEnvironment, home: Path
) -> None:
    address = dev_address(temporal_env)
    assert_ok(cli(*STATUS, env={"FLEET_TEMPORAL_ADDRESS": address}, home=home))
    both = {"FLEET_TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_ADDRESS": address}
    assert_ok(cli(*STATUS, env=both, home=home))


def test_tls_with_a_private_ca_is_accepted_with_the_ca_and_refused_without(
    tls_front: tuple[str, Path], home: Path
) -> None:
    address, ca = tls_front
    accepted = cli(
        "status",
        env={"TEMPORAL_ADDRESS": address, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca)},
        home=home,
    )
    assert_ok(accepted)

    refused = cli(*STATUS, env={"TEMPORAL_ADDRESS": address, "TEMPORAL_TLS": "true"}, home=home)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith(f"fleet-scheduler status: error: cannot reach Temporal at {address}")
    assert "Traceback" not in refused.stderr

    plain = cli(*STATUS, env={"TEMPORAL_ADDRESS": address}, home=home)  # no TLS at all
    assert plain.returncode == 2 and len(plain.stderr.strip().splitlines()) == 1, plain.stderr


def test_a_missing_ca_file_is_one_line(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    done = cli(
        "status",
        env={"TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(missing)},
        home=home,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "no-such-ca.pem" in lines[0]
