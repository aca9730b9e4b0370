"""A self-signed certificate for devhub, because kubectl sends credentials only over TLS.

client-go's kubeconfig loader drops the user's token when the server URL is `http://` (it only
reads auth info for TLS transports), so a token-protected devhub must also speak HTTPS for kubectl
to work unchanged. devhub makes a fresh ECDSA key and a certificate for its loopback names at
start (kept in the data directory when it has one, so a kubeconfig survives restarts) and writes
it into the kubeconfig as `certificate-authority-data`: verification stays on."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Certificate", "load_or_create"]

VALIDITY: Final = datetime.timedelta(days=365)
RENEW_BEFORE: Final = datetime.timedelta(days=7)
CERT_FILE: Final = "tls.crt"
KEY_FILE: Final = "tls.key"
LOOPBACK_NAMES: Final = ("localhost",)
LOOPBACK_IPS: Final = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class Certificate:
    cert_pem: bytes
    key_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # load_cert_chain reads files only; the files live just long enough to be read.
        with tempfile.TemporaryDirectory(prefix="devhub-tls-") as scratch:
            cert_path = Path(scratch) / CERT_FILE
            key_path = Path(scratch) / KEY_FILE
            cert_path.write_bytes(self.cert_pem)
            key_path.touch(mode=0o600)
            key_path.write_bytes(self.key_pem)
            context.load_cert_chain(cert_path, key_path)
        return context

    def covers(self, host: str) -> bool:
        cert = x509.load_pem_x509_certificate(self.cert_pem)
        if cert.not_valid_after_utc - RENEW_BEFORE < datetime.datetime.now(datetime.UTC):
            return False
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        try:
            return ipaddress.ip_address(host) in names.get_values_for_type(x509.IPAddress)
        except ValueError:
            return host in names.get_values_for_type(x509.DNSName)


def _sans(host: str) -> list[x509.GeneralName]:
    ips = {ipaddress.ip_address(ip) for ip in LOOPBACK_IPS}
    dns = set(LOOPBACK_NAMES)
    try:
        ips.add(ipaddress.ip_address(host))
    except ValueError:
        dns.add(host)
    return [x509.DNSName(name) for name in sorted(dns)] + [
        x509.IPAddress(ip) for ip in sorted(ips, key=str)
    ]


def create(host: str) -> Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "devhub")])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(_sans(host)), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Certificate(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def load_or_create(host: str, data_dir: Path | None) -> Certificate:
    """The certificate kept in `data_dir` if it still covers `host`, else a new one (saved)."""
    if data_dir is not None:
        cert_path, key_path = data_dir / CERT_FILE, data_dir / KEY_FILE
        if cert_path.is_file() and key_path.is_file():
            kept = Certificate(cert_path.read_bytes(), key_path.read_bytes())
            try:
                if kept.covers(host):
                    return kept
            except (ValueError, x509.ExtensionNotFound):
                pass  # unreadable or foreign: replace it
    fresh = create(host)
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / CERT_FILE).write_bytes(fresh.cert_pem)
        key_path = data_dir / KEY_FILE
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(fresh.key_pem)
    return fresh
