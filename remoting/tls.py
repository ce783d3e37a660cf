"""TLS on trio's :class:`trio.SSLStream`, with RocketMQ's three server modes.

RocketMQ's ``TlsMode``: ``DISABLED`` (plain only), ``PERMISSIVE`` (TLS and plain on
one port, told apart by the first byte: a TLS record starts with 0x16, a RocketMQ
frame with the high byte of a length, which is 0 below 16 MiB) and ``ENFORCING``
(TLS only).
"""

from __future__ import annotations

import enum
import socket
import ssl

import trio

__all__ = ["TlsMode", "server_ssl_context", "client_ssl_context", "starts_with_tls"]

_TLS_HANDSHAKE_RECORD = 0x16


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


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
