"""TLS on the node's ports. The agent port serves a certificate it reads again
whenever its files change on disk (``ServerTls``: gRPC asks for it at each new
connection), so a renewed certificate is served without a restart; the query
endpoint's HTTPS does the same (``HttpsTls``: Python's ``ssl`` asks at each
handshake). Both read their files through ``CertificateFiles``. Between
nodes, both ends present a certificate of the cluster's CA (``ServerTls`` with
a client CA, ``ClientTls``), and a client checks that the node it reaches
presents the identity that node registered under (``identity_of``)."""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

log = logging.getLogger(__name__)

T = TypeVar("T")


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


class CertificateFiles:
    """A certificate and its key on disk, read at once (a node with unreadable
    or mismatched files does not start) and again once either file changed.
    A pair that does not load, such as one caught halfway through being
    replaced, is logged and the last good one stays in use."""

    def __init__(self, cert_path: str, key_path: str) -> None:
        self.paths = (cert_path, key_path)
        self._lock = threading.Lock()
        self._stamp = _stamp(*self.paths)
        self.pair = KeyPair.read(cert_path, key_path)

    def renewed(self, load: Callable[[KeyPair], T]) -> T | None:
        """``load(pair)`` of the new pair if the files changed since they were
        last read and hold a good pair; None otherwise. Cheap when nothing
        changed (two ``stat`` calls), so it can be asked at every connection.
        A ``load`` that raises ValueError keeps the last good pair too."""
        stamp = _stamp(*self.paths)
        with self._lock:
            if stamp == self._stamp:
                return None
            self._stamp = stamp
            try:
                pair = KeyPair.read(*self.paths)
                if pair == self.pair:
                    return None
                loaded = load(pair)
            except ValueError as e:
                log.warning("keeping the certificate in use: %s", e)
                return None
            self.pair = pair
        log.info("serving the new certificate of %s (%s)", self.paths[0], pair.identity)
        return loaded


class ServerTls:
    """A gRPC server's certificate (``CertificateFiles``), which gRPC asks
    for again at each new connection. With ``client_ca``, every client must
    present a certificate it signed."""

    def __init__(self, cert_path: str, key_path: str, client_ca: str = "") -> None:
        self._client_ca = _read(client_ca, "CA certificate") if client_ca else None
        self._files = CertificateFiles(cert_path, key_path)

    @property
    def pair(self) -> KeyPair:
        return self._files.pair

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
        return self._files.renewed(self._configuration)


class HttpsTls:
    """An HTTPS server's certificate (``CertificateFiles``): ``context`` is
    what the server is given, and at each handshake the connection is moved
    to a context of the current pair, read again if the files changed."""

    def __init__(self, cert_path: str, key_path: str) -> None:
        self._files = CertificateFiles(cert_path, key_path)
        self.context = self._context_of(self._files.pair)
        self._current = self.context
        # Called at every handshake, with or without a server name (OpenSSL
        # calls it for each ClientHello), before the certificate is chosen.
        self.context.sni_callback = self._handshake

    @property
    def pair(self) -> KeyPair:
        return self._files.pair

    def _context_of(self, pair: KeyPair) -> ssl.SSLContext:
        """A server context serving ``pair`` (ValueError if it does not load)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        cert_path, key_path = self._files.paths
        try:
            # From the files (ssl loads no chain from memory); one replaced
            # since it was read as ``pair`` is seen at the next handshake.
            context.load_cert_chain(cert_path, key_path)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(
                f"cannot load the certificate {cert_path} with its key {key_path}: {e}"
            ) from None
        return context

    def _handshake(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: object
    ) -> None:
        try:
            renewed = self._files.renewed(self._context_of)
            if renewed is not None:
                self._current = renewed
            if self._current is not self.context:
                connection.context = self._current
        except Exception:
            log.exception("keeping the certificate in use: the new one could not be served")


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
