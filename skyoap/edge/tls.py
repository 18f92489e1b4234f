"""TLS on the node's ports. The agent port serves a certificate it reads again
whenever its files change on disk (``ServerTls``: gRPC asks for it at each new
connection), so a renewed certificate is served without a restart. Between
nodes, both ends present a certificate of the cluster's CA (``ServerTls`` with
a client CA, ``ClientTls``), and a client checks that the node it reaches
presents the identity that node registered under (``identity_of``)."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate chain and its private key, checked to belong together."""

    cert: bytes
    key: bytes

    @classmethod
    def read(cls, cert_path: str, key_path: str) -> KeyPair:
        """Raises ValueError saying what is wrong with the files."""
        cert, key = _read(cert_path, "certificate"), _read(key_path, "key")
        try:
            certificate = x509.load_pem_x509_certificate(cert)
        except ValueError as e:
            raise ValueError(f"{cert_path} is not a PEM certificate: {e}") from None
        try:
            private = serialization.load_pem_private_key(key, password=None)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{key_path} is not an unencrypted PEM private key: {e}") from None
        if _public(certificate.public_key()) != _public(private.public_key()):
            raise ValueError(f"the key in {key_path} is not the key of the certificate in {cert_path}")
        return cls(cert, key)

    @property
    def identity(self) -> str:
        return identity_of(self.cert)


def identity_of(cert_pem: bytes) -> str:
    """The name a certificate vouches for: its first DNS subject alternative
    name, else its common name (what gRPC checks a target name against)."""
    certificate = x509.load_pem_x509_certificate(cert_pem)
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        dns = names.value.get_values_for_type(x509.DNSName)
        if dns:
            return str(dns[0])
    except x509.ExtensionNotFound:
        pass
    common = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not common:
        raise ValueError("the certificate names no DNS name and no common name to identify it by")
    return str(common[0].value)


def _public(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"cannot read the {what} {path}: {e.strerror}") from None


def _stamp(*paths: str) -> tuple[tuple[int, int, int], ...]:
    """What changes when a file is replaced or rewritten."""
    stamps = []
    for p in paths:
        try:
            s = os.stat(p)
            stamps.append((s.st_ino, s.st_mtime_ns, s.st_size))
        except OSError:
            stamps.append((0, 0, 0))
    return tuple(stamps)


class ServerTls:
    """A server's certificate, read at once (a node with unreadable or
    mismatched files does not start) and again at the first connection after
    either file changed. A pair that does not load, such as one caught halfway
    through being replaced, is logged and the last good one stays in use.
    With ``client_ca``, every client must present a certificate it signed."""

    def __init__(self, cert_path: str, key_path: str, client_ca: str = "") -> None:
        self._paths = (cert_path, key_path)
        self._client_ca = _read(client_ca, "CA certificate") if client_ca else None
        self._lock = threading.Lock()
        self._stamp = _stamp(*self._paths)
        self.pair = KeyPair.read(cert_path, key_path)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._configuration(self.pair),
            self._fetch,
            require_client_authentication=self._client_ca is not None,
        )

    def _configuration(self, pair: KeyPair) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration([(pair.key, pair.cert)], self._client_ca)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC at each new connection: the new pair if the files changed, else None."""
        stamp = _stamp(*self._paths)
        with self._lock:
            if stamp == self._stamp:
                return None
            self._stamp = stamp
            try:
                pair = KeyPair.read(*self._paths)
            except ValueError as e:
                log.warning("keeping the certificate in use: %s", e)
                return None
            if pair == self.pair:
                return None
            self.pair = pair
        log.info("serving the new certificate of %s (%s)", self._paths[0], pair.identity)
        return self._configuration(pair)


class ClientTls:
    """How a node reaches other nodes: it trusts ``ca`` and presents its own
    certificate, read again for each new channel."""

    def __init__(self, ca: str, cert_path: str, key_path: str) -> None:
        self._ca_path = ca
        self._paths = (cert_path, key_path)
        _read(ca, "CA certificate")
        self.identity = KeyPair.read(cert_path, key_path).identity
        """The name this node's certificate carries, which its membership record names."""

    def channel(self, address: str, identity: str) -> grpc.Channel:
        """A channel to ``address`` that only completes its handshake with a
        node presenting a certificate of the CA for ``identity``."""
        pair = KeyPair.read(*self._paths)
        ca = _read(self._ca_path, "CA certificate")
        credentials = grpc.ssl_channel_credentials(ca, pair.key, pair.cert)
        options = [("grpc.ssl_target_name_override", identity)]
        return grpc.secure_channel(address, credentials, options=options)
