"""The typed seams between remoting's modules, so none imports its neighbour back.

A :class:`~trocket.remoting.connection.Connection` needs a few things from the
endpoint that owns it (its config, its processors' dispatch, its hooks, counters,
the listener and the tap); :class:`ConnectionOwner` names exactly those, and the
endpoint satisfies it without the connection importing the endpoint module.
Channel events need only what :class:`Channel` names. (In Netty the same seam is
the ``ChannelHandlerContext`` a handler is given.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Protocol

from trocket.codecs.command import RemotingCommand

if TYPE_CHECKING:
    from .config import EndpointConfig
    from .ratelog import RateLimitedLog
    from .response import InvokeCallback, ResponseFuture

__all__ = ["Channel", "ConnectionOwner"]


class Channel(Protocol):
    """What a channel-event listener is told about a connection (the connection itself)."""

    id: int
    local_address: str
    remote_address: str

    def close(self, reason: Any = ..., cause: BaseException | None = None) -> None: ...


class ConnectionOwner(Protocol):
    """What a connection uses of the endpoint that runs it."""

    config: EndpointConfig
    listener: Any  # a ChannelEventListener or None
    tap: Any  # a TapSink or None
    stats: Any  # RemotingStats
    role: int
    hooks: tuple  # RPC hooks
    io_log: RateLimitedLog
    _shutting_down: bool

    def _dispatch_soon(self, conn: Any, request: RemotingCommand) -> Awaitable[object] | None: ...

    def _connection_opened(self, conn: Any) -> None: ...

    def _connection_closed(self, conn: Any) -> None: ...

    async def _invoke_sync(self, conn: Any, request: RemotingCommand, timeout: float) -> RemotingCommand: ...

    async def _invoke_async(
        self, conn: Any, request: RemotingCommand, timeout: float, callback: InvokeCallback | None = None
    ) -> ResponseFuture: ...

    async def _invoke_oneway(self, conn: Any, request: RemotingCommand, timeout: float) -> None: ...
