"""Channel events: connect, close, idle, exception (RocketMQ's ``ChannelEventListener``).

Listeners are called synchronously from the connection's own task, once per
event, never per message, as method calls (:func:`notify` guards each); a listener
that raises is logged and ignored.
Subclass :class:`ChannelEventListener` and override what you need. ``conn`` is the
:class:`~trocket.remoting.connection.Connection` (typed here as the :class:`Channel`
protocol, so this module imports no connection code).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from .state import CloseReason

__all__ = ["Channel", "ChannelEventListener", "notify"]

log = logging.getLogger(__name__)


class Channel(Protocol):
    """What a channel-event listener is told about a connection (the connection itself)."""

    id: int
    local_address: str
    remote_address: str
    #: the address a client dialled (its connection-table key); None when accepted
    peer: str | None

    def close(self, reason: CloseReason | str = ..., cause: BaseException | None = None) -> None: ...


class ChannelEventListener:
    def on_channel_connect(self, remote_addr: str, conn: Channel) -> None:
        """A connection was accepted or made (after the TLS handshake, if any)."""

    def on_channel_close(self, remote_addr: str, conn: Channel) -> None:
        """A connection closed, for whatever reason (once per connection)."""

    def on_channel_exception(self, remote_addr: str, conn: Channel, error: BaseException) -> None:
        """A connection failed: bad bytes, a broken socket, a failed handshake."""

    def on_channel_idle(self, remote_addr: str, conn: Channel) -> None:
        """Nothing was read or written for ``idle_timeout``; the connection is closed next."""


def notify(event: Callable[..., None], conn: Channel, *args: object) -> None:
    """Call a listener's ``event`` method (e.g. ``listener.on_channel_close``) for
    ``conn``; what it raises is logged, never propagated."""
    try:
        event(conn.remote_address, conn, *args)
    except Exception:
        log.exception("channel event listener %s raised", getattr(event, "__name__", event))
