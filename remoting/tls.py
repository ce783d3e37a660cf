"""TLS on trio's :class:`trio.SSLStream`, with RocketMQ's three server modes.

RocketMQ's ``TlsMode``: ``DISABLED`` (plain only), ``PERMISSIVE`` (TLS and plain on
one port, told apart by the first byte: a TLS record starts with 0x16, a RocketMQ
frame with the high byte of a length, which is 0 below 16 MiB) and ``ENFORCING``
(TLS only).

:class:`TlsSettings` is RocketMQ's ``TlsSystemConfig``: the ``tls.*`` settings a server
and a client take (Java reads them from system properties and ``tls.config.file``;
trocket from broker.conf, flags and the client's config), with the contexts they make.
"""

from __future__ import annotations

import enum
import os
import socket
import ssl
from collections.abc import Mapping

import attrs
import trio

__all__ = [
    "TLS_KEYS",
    "TlsMode",
    "TlsSettings",
    "client_ssl_context",
    "server_ssl_context",
    "starts_with_tls",
]

_TLS_HANDSHAKE_RECORD = 0x16


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, value: object) -> TlsMode:
        if isinstance(value, TlsMode):
            return value
        text = str(value).strip().lower()
        for mode in cls:
            if mode.value == text:
                return mode
        raise ValueError(f"bad TLS mode {value!r}: disabled, permissive or enforcing")


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"  # Boolean.parseBoolean


def _opt(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _client_auth(value: object) -> str:
    text = str(value or "none").strip().lower()
    return text if text in _CLIENT_AUTH else "none"  # TlsHelper.parseClientAuthMode


@attrs.define(slots=True, frozen=True, kw_only=True)
class TlsSettings:
    """RocketMQ's TLS settings (``TlsSystemConfig``; the ``tls.*`` key of each field in
    :data:`TLS_KEYS`). The server side: ``server_mode`` (trocket's default: disabled;
    Java's: permissive with a self-signed test certificate, which trocket does not make),
    the certificate chain and key (PEM), client certificates asked for per
    ``server_need_client_auth`` (none, optional, require) and checked against
    ``server_trust_cert`` when given. The client side: ``enable`` (``tls.enable``), the
    server's certificate checked against ``client_trust_cert`` only with
    ``client_auth_server`` (as Java's client, which trusts any certificate otherwise; no
    host name check either way, as Netty's), and a client certificate if given."""

    server_mode: TlsMode = attrs.field(default=TlsMode.DISABLED, converter=TlsMode.parse)
    server_cert: str | None = attrs.field(default=None, converter=_opt)
    server_key: str | None = attrs.field(default=None, converter=_opt)
    server_key_password: str | None = attrs.field(default=None, converter=_opt)
    server_need_client_auth: str = attrs.field(default="none", converter=_client_auth)
    server_auth_client: bool = attrs.field(default=False, converter=_bool)
    server_trust_cert: str | None = attrs.field(default=None, converter=_opt)
    enable: bool = attrs.field(default=False, converter=_bool)
    client_cert: str | None = attrs.field(default=None, converter=_opt)
    client_key: str | None = attrs.field(default=None, converter=_opt)
    client_key_password: str | None = attrs.field(default=None, converter=_opt)
    client_auth_server: bool = attrs.field(default=False, converter=_bool)
    client_trust_cert: str | None = attrs.field(default=None, converter=_opt)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: TlsSettings | None = None) -> TlsSettings:
        """Settings from ``tls.*`` keys (unknown ``tls.`` keys raise ``ValueError``);
        ``tls.config.file`` names a properties file read first, as Java's
        ``TlsHelper.extractTlsConfigFromFile`` (the keys given here win)."""
        changes: dict[str, object] = {}
        path = props.get("tls.config.file")
        if path:
            changes.update(_file_changes(path))
        for key, value in props.items():
            if key in ("tls.config.file", "tls.test.mode.enable"):
                continue
            name = _FIELDS.get(key)
            if name is None:
                raise ValueError(f"unknown TLS setting {key!r}; known: {', '.join(sorted(TLS_KEYS.values()))}")
            changes[name] = value
        return attrs.evolve(base or cls(), **changes)

    def server_context(self) -> ssl.SSLContext | None:
        """The server's context; None when ``server_mode`` is disabled. Raises
        ``ValueError`` naming what is missing, ``OSError``/``ssl.SSLError`` for bad files."""
        if self.server_mode is TlsMode.DISABLED:
            return None
        return self.server_context_always()

    def server_context_always(self) -> ssl.SSLContext:
        """The server's context whatever ``server_mode`` says (a port that is TLS only)."""
        if not self.server_cert:
            raise ValueError(
                "TLS on a server needs a certificate: tls.server.certPath "
                "(and tls.server.keyPath unless the key is in the same PEM file)"
            )
        ctx = server_ssl_context(self.server_cert, self.server_key, password=self.server_key_password)
        ctx.verify_mode = _CLIENT_AUTH[self.server_need_client_auth]
        if ctx.verify_mode != ssl.CERT_NONE:
            if self.server_trust_cert:
                ctx.load_verify_locations(self.server_trust_cert)
            else:
                ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return ctx

    def client_context(self) -> ssl.SSLContext | None:
        """The client's context; None unless ``enable``."""
        if not self.enable:
            return None
        return self.client_context_always()

    def client_context_always(self) -> ssl.SSLContext:
        """The client's context whatever ``enable`` says (a link that is TLS only)."""
        ctx = client_ssl_context(self.client_trust_cert if self.client_auth_server else None,
                                 verify=self.client_auth_server)
        ctx.check_hostname = False
        if self.client_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key, self.client_key_password)
        return ctx


#: field -> RocketMQ's key (``TlsSystemConfig``)
TLS_KEYS: dict[str, str] = {
    "server_mode": "tls.server.mode",
    "server_cert": "tls.server.certPath",
    "server_key": "tls.server.keyPath",
    "server_key_password": "tls.server.keyPassword",
    "server_need_client_auth": "tls.server.need.client.auth",
    "server_auth_client": "tls.server.authClient",
    "server_trust_cert": "tls.server.trustCertPath",
    "enable": "tls.enable",
    "client_cert": "tls.client.certPath",
    "client_key": "tls.client.keyPath",
    "client_key_password": "tls.client.keyPassword",
    "client_auth_server": "tls.client.authServer",
    "client_trust_cert": "tls.client.trustCertPath",
}
_FIELDS = {key: name for name, key in TLS_KEYS.items()}


def _file_changes(path: str) -> dict[str, object]:
    """``tls.config.file``: ``key=value`` lines (``#`` comments); every key but the mode
    and ``tls.enable``, as Java's."""
    out: dict[str, object] = {}
    with open(os.fspath(path), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                key, _, value = line.partition(" ")
            name = _FIELDS.get(key.strip())
            if name is not None and name not in ("server_mode", "enable"):
                out[name] = value.strip()
    return out


def server_ssl_context(certfile: str, keyfile: str | None = None, *, password: str | None = None) -> ssl.SSLContext:
    """A server context from a PEM certificate chain and key."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certfile, keyfile, password)
    return ctx


def client_ssl_context(cafile: str | None = None, *, verify: bool = True) -> ssl.SSLContext:
    """A client context trusting ``cafile`` (or the system store); ``verify=False``
    accepts any certificate, as RocketMQ's client does by default
    (``tls.client.authServer=false``)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def starts_with_tls(stream: trio.SocketStream) -> bool:
    """Peek (without consuming) the connection's first byte: is it a TLS record?

    Waits for the first byte; the caller bounds the wait. ``False`` at EOF.
    """
    first = await stream.socket.recv(1, socket.MSG_PEEK)
    return bool(first) and first[0] == _TLS_HANDSHAKE_RECORD
