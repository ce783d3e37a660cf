"""Channel events: connect, close, idle, exception (RocketMQ's ``ChannelEventListener``).

Listeners are called synchronously from the connection's own task, once per
event, never per message; a listener that raises is logged and ignored.
Subclass :class:`ChannelEventListener` and override what you need. ``conn`` is the
:class:`~trocket.remoting.connection.Connection` (typed here as the
:class:`~trocket.remoting.interfaces.Channel` protocol, so this module imports no
connection code).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a Protocol, not the connection module: no import cycle
    from .interfaces import Channel

__all__ = ["ChannelEventListener", "emit"]

log = logging.getLogger(__name__)


class ChannelEventListener:
    def on_channel_connect(self, remote_addr: str, conn: Channel) -> None:
        """A connection was accepted or made (after the TLS handshake, if any)."""

    def on_channel_close(self, remote_addr: str, conn: Channel) -> None:
        """A connection closed, for whatever reason (once per connection)."""

    def on_channel_exception(self, remote_addr: str, conn: Channel, error: BaseException) -> None:
        """A connection failed: bad bytes, a broken socket, a failed handshake."""

    def on_channel_idle(self, remote_addr: str, conn: Channel) -> None:
        """Nothing was read or written for ``idle_timeout``; the connection is closed next."""


def emit(listener: ChannelEventListener | None, event: str, conn: Channel, *args) -> None:
    if listener is None:
        return
    try:
        getattr(listener, event)(conn.remote_address, conn, *args)
    except Exception:
        log.exception("channel event listener %s raised", event)
