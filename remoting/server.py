"""RemotingServer: the boss (accept loop), TLS detection, and graceful shutdown.

Run it inside a nursery you own::

    server = RemotingServer(ServerConfig(listen_port=0))
    server.register_processor(100, my_processor)
    await nursery.start(server.serve)          # returns once listening
    ...
    await server.shutdown()                     # stop accepting, drain, close

or as an async context manager (``async with RemotingServer(cfg) as server:``),
which serves on ``config.listen_host:listen_port`` and shuts down on exit.
"""

from __future__ import annotations

import errno
import logging
import ssl
from typing import Iterable

import trio

from ._nursery import ServiceContextManager
from .config import ServerConfig
from .connection import Connection, format_address
from .endpoint import RemotingEndpoint
from .events import ChannelEventListener
from .ratelog import KeyedRateLimitedLog, RateLimitedLog
from .response import InvokeCallback, ResponseFuture
from .tls import TlsMode, starts_with_tls

__all__ = ["RemotingServer"]

log = logging.getLogger(__name__)

# accept() errors that mean "out of resources, try again soon" (as trio.serve_listeners)
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
# accept() errors about that one connection, to be treated as "try again" (accept(2); as
# trio's SocketListener.accept)
_ACCEPT_RETRY_ERRNOS = {
    getattr(errno, name)
    for name in (
        "EAGAIN", "EWOULDBLOCK", "ECONNABORTED", "EPROTO", "ENETDOWN", "ENOPROTOOPT",
        "EHOSTDOWN", "ENONET", "EHOSTUNREACH", "EOPNOTSUPP", "ENETUNREACH",
    )
    if hasattr(errno, name)
}


class RemotingServer(RemotingEndpoint, ServiceContextManager):
    role = 1

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        hooks: Iterable = (),
        listener: ChannelEventListener | None = None,
        tap=None,
    ) -> None:
        config = config or ServerConfig()
        super().__init__(config, hooks=hooks, listener=listener, tap=tap)
        if config.tls_mode is not TlsMode.DISABLED and ssl_context is None:
            raise ValueError(f"TLS mode {config.tls_mode.value} needs an ssl_context")
        self.config: ServerConfig = config
        self.ssl_context = ssl_context
        self.listeners: list[trio.SocketListener] = []
        self._sockname: tuple = ("", 0)
        self._nursery: trio.Nursery | None = None
        self._boss_scope: trio.CancelScope | None = None
        self._serve_done = trio.Event()
        self.tls_handshake_failures = 0
        #: connections accepted and not yet ended (TLS handshakes included), and those
        #: refused past ``max_connections``
        self._serving = 0
        self.refused_connections = 0
        #: the connections served per host, and those refused past ``max_connections_per_host``
        self.serving_per_host: dict[str, int] = {}
        self.refused_connections_per_host = 0
        #: accept-side trouble (refusals, EMFILE) is logged at most once a second
        self._accept_log = RateLimitedLog(log, burst=1, interval=1.0, what="accept messages")
        #: a host's refusals past its limit, at most once a minute per host
        self._host_log = KeyedRateLimitedLog(log, interval=60.0)

    # -- addresses ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._sockname[1]

    @property
    def address(self) -> str:
        """``host:port`` of the first listener (``127.0.0.1`` if bound to all interfaces)."""
        host, port = self._sockname[:2]
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        return format_address((host, port))

    # -- serving -----------------------------------------------------------------------

    async def serve(
        self, host: str | None = None, port: int | None = None, *, task_status=trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen and serve until :meth:`shutdown` or cancellation."""
        cfg = self.config
        host = cfg.listen_host if host is None else host
        port = cfg.listen_port if port is None else port
        self.listeners = await open_listeners(host, port, backlog=cfg.backlog)
        self._sockname = self.listeners[0].socket.getsockname()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._scan_loop)
                self._boss_scope = boss = trio.CancelScope()
                nursery.start_soon(self._boss, boss)
                task_status.started(self)
        finally:
            for listener in self.listeners:
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(listener)
            self._serve_done.set()

    async def _boss(self, scope: trio.CancelScope) -> None:
        with scope:
            async with trio.open_nursery() as boss:
                for listener in self.listeners:
                    boss.start_soon(self._accept_loop, listener)
        for listener in self.listeners:  # stop accepting: close the listening sockets now
            await trio.aclose_forcefully(listener)

    async def _accept_loop(self, listener: trio.SocketListener) -> None:
        """Accept on the listener's socket ourselves, to keep the peer address accept()
        returns: ``getpeername`` fails on a connection the peer reset meanwhile."""
        nursery = self._nursery
        accept = listener.socket.accept
        limit = self.config.max_connections
        host_limit = self.config.max_connections_per_host
        per_host = self.serving_per_host
        while True:
            try:
                sock, sockaddr = await accept()
            except OSError as exc:
                if exc.errno in _ACCEPT_RETRY_ERRNOS:
                    continue
                if exc.errno in _ACCEPT_CAPACITY_ERRNOS:
                    self._accept_log.log(logging.ERROR, "accept() failed (%s); sleeping 0.1 s", exc)
                    await trio.sleep(0.1)
                    continue
                raise
            if self._serving >= limit:
                self.refused_connections += 1
                self._accept_log.log(
                    logging.WARNING, "refused a connection from %s: %d connections served already (max_connections)",
                    format_address(sockaddr), self._serving,
                )
                sock.close()
                continue
            host = sockaddr[0] if isinstance(sockaddr, tuple) else str(sockaddr)
            served = per_host.get(host, 0)
            if served >= host_limit:
                self.refused_connections_per_host += 1
                self._host_log.log(
                    host, logging.WARNING, "refused connections from %s: %d served from that host already "
                    "(max_connections_per_host); %d more refused since the last line",
                    host, served,
                )
                sock.close()
                continue
            per_host[host] = served + 1
            self._serving += 1
            nursery.start_soon(self._serve_connection, trio.SocketStream(sock), format_address(sockaddr), host)

    async def _serve_connection(self, stream: trio.SocketStream, peer: str, host: str) -> None:
        try:
            await self._handshake_and_serve(stream, peer)
        finally:
            self._serving -= 1
            left = self.serving_per_host[host] - 1
            if left:
                self.serving_per_host[host] = left
            else:
                del self.serving_per_host[host]

    async def _handshake_and_serve(self, stream: trio.SocketStream, peer: str) -> None:
        mode = self.config.tls_mode
        tls = mode is TlsMode.ENFORCING
        transport: trio.abc.Stream = stream
        if mode is not TlsMode.DISABLED:
            try:
                with trio.fail_after(self.config.handshake_timeout):
                    if mode is TlsMode.PERMISSIVE:
                        tls = await starts_with_tls(stream)
                    if tls:
                        transport = trio.SSLStream(stream, self.ssl_context, server_side=True)
                        await transport.do_handshake()
            except (trio.TooSlowError, trio.BrokenResourceError, OSError) as exc:
                self.tls_handshake_failures += 1
                self.io_log.log(logging.INFO, "TLS handshake with %s failed: %r", peer, exc)
                await trio.aclose_forcefully(stream)
                return
        await Connection(self, transport, tls=tls, remote_address=peer).run()

    # -- calls to clients --------------------------------------------------------------

    async def invoke_sync(self, conn: Connection, request, timeout: float):
        """Call a client over the connection it opened (a broker calling its clients)."""
        return await self.invoker.sync(conn, request, timeout)

    async def invoke_async(
        self,
        conn: Connection,
        request,
        timeout: float,
        callback: InvokeCallback | None = None,
        *,
        future_class: type[ResponseFuture] = ResponseFuture,
    ) -> ResponseFuture:
        return await self.invoker.call_async(conn, request, timeout, callback, None, future_class)

    async def invoke_oneway(self, conn: Connection, request, timeout: float) -> None:
        await self.invoker.oneway(conn, request, timeout)

    # -- shutdown ----------------------------------------------------------------------

    async def shutdown(self, deadline: float | None = None) -> None:
        """Stop accepting, fail pending calls to clients (:class:`RemotingShutdownError`),
        let in-flight processors finish and their answers go out for up to ``deadline``
        seconds (``config.shutdown_deadline``), then close every connection."""
        if self._nursery is None:
            return
        if self._boss_scope is not None:
            self._boss_scope.cancel()
        deadline = self.config.shutdown_deadline if deadline is None else deadline
        await self._shutdown_connections(deadline)
        self._nursery.cancel_scope.cancel()
        await self._serve_done.wait()

    # the ServiceContextManager names: ``async with server`` serves on the configured
    # address and shuts down on exit
    run = serve
    aclose = shutdown


async def open_listeners(host: str | None, port: int, **kwargs) -> list[trio.SocketListener]:
    """``trio.open_tcp_listeners``, its error naming the address: ``cannot listen on
    127.0.0.1:10911: address already in use`` (the bare OSError names no port)."""
    try:
        return await trio.open_tcp_listeners(port, host=host, **kwargs)
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower() if exc.errno is not None else str(exc)
        where = format_address((host or "0.0.0.0", port))
        raise OSError(exc.errno, f"cannot listen on {where}: {why}") from exc
