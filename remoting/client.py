"""RemotingClient: a connection table per address (one connection reused, made
lazily under a per-address lock, within the connect timeout) over the shared core.

::

    async with RemotingClient(ClientConfig()) as client:
        response = await client.invoke_sync("127.0.0.1:9876", request, timeout=3)

or ``await nursery.start(client.run)`` ... ``await client.aclose()``.
"""

from __future__ import annotations

import logging
import ssl
from typing import Iterable

import trio

from trocket.codecs.command import RemotingCommand

from ._nursery import ServiceContextManager
from .config import ClientConfig
from .connection import Connection
from .endpoint import RemotingEndpoint
from .errors import RemotingConnectError, RemotingShutdownError, RemotingTimeoutError
from .events import ChannelEventListener
from .response import InvokeCallback, ResponseFuture

__all__ = ["RemotingClient", "parse_address"]

log = logging.getLogger(__name__)


def parse_address(addr: str) -> tuple[str, int]:
    """``host:port`` or ``[v6host]:port`` -> (host, port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {addr!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class RemotingClient(RemotingEndpoint, ServiceContextManager):
    role = 2

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        hooks: Iterable = (),
        listener: ChannelEventListener | None = None,
        tap=None,
    ) -> None:
        config = config or ClientConfig()
        super().__init__(config, hooks=hooks, listener=listener, tap=tap)
        self.config: ClientConfig = config
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname
        self._table: dict[str, Connection] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None
        self._run_done = trio.Event()

    # -- lifecycle ---------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Own the client's connections and its response scan until :meth:`aclose`."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._scan_loop)
                task_status.started(self)
        finally:
            self._run_done.set()

    async def aclose(self, deadline: float | None = None) -> None:
        """Fail pending calls (:class:`RemotingShutdownError`), give in-flight
        processors up to ``deadline`` seconds, close every connection."""
        if self._nursery is None:
            return
        deadline = self.config.shutdown_deadline if deadline is None else deadline
        await self._shutdown_connections(deadline)
        self._nursery.cancel_scope.cancel()
        await self._run_done.wait()


    # -- the connection table ----------------------------------------------------------

    async def get_connection(self, addr: str, timeout: float | None = None) -> Connection:
        """The connection to ``addr``, made now if there is none (one per address)."""
        conn = self._table.get(addr)
        if conn is not None and conn.is_active:
            return conn
        if self._nursery is None:
            raise RuntimeError("the client is not running: use `async with client` or nursery.start(client.run)")
        if self.shutting_down:
            raise RemotingShutdownError("the client is shut down", addr)
        limit = self.config.connect_timeout if timeout is None else min(timeout, self.config.connect_timeout)
        lock = self._locks.get(addr)
        if lock is None:
            lock = self._locks[addr] = trio.Lock()
        with trio.move_on_after(limit) as scope:
            async with lock:
                conn = self._table.get(addr)
                if conn is not None and conn.is_active:
                    return conn
                conn = await self._connect(addr)
                self._table[addr] = conn
                self._nursery.start_soon(conn.run)
                return conn
        assert scope.cancelled_caught
        raise RemotingConnectError(f"connect to {addr} timed out after {limit * 1000:.0f}(ms)", addr)

    async def _connect(self, addr: str) -> Connection:
        try:
            host, port = parse_address(addr)
        except ValueError as exc:
            raise RemotingConnectError(str(exc), addr) from None
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise RemotingConnectError(f"connect to {addr} failed: {exc}", addr) from exc
        if self.ssl_context is not None:
            tls = trio.SSLStream(stream, self.ssl_context, server_hostname=self.server_hostname or host)
            try:
                await tls.do_handshake()
            except (trio.BrokenResourceError, OSError) as exc:
                await trio.aclose_forcefully(tls)
                raise RemotingConnectError(f"TLS handshake with {addr} failed: {exc.__cause__ or exc}", addr) from exc
            except BaseException:
                await trio.aclose_forcefully(tls)
                raise
            stream = tls
        return Connection(self, stream, tls=self.ssl_context is not None, peer=addr)

    def connection_closed(self, conn: Connection) -> None:
        super().connection_closed(conn)
        if conn.peer is not None and self._table.get(conn.peer) is conn:
            del self._table[conn.peer]

    def close_connection(self, addr: str) -> None:
        conn = self._table.pop(addr, None)
        if conn is not None:
            conn.close()

    def connection_for(self, addr: str) -> Connection | None:
        return self._table.get(addr)

    # -- invoking ----------------------------------------------------------------------

    async def invoke_sync(
        self, addr: str, request: RemotingCommand, timeout: float | None = None, *, begin: float | None = None
    ) -> RemotingCommand:
        """Send ``request`` and wait for its response; connecting counts toward ``timeout``,
        which runs from ``begin`` (trio time; default now: a caller that has just read
        the clock passes what it read)."""
        if timeout is None:
            timeout = self.config.default_timeout
        conn = self._table.get(addr)
        if conn is None or not conn.is_active:
            if begin is None:
                begin = trio.current_time()
            conn = await self.get_connection(addr, timeout)
            elapsed = trio.current_time() - begin
            if elapsed >= timeout:
                raise RemotingTimeoutError(addr, elapsed, timeout)
        return await self.invoker.sync(conn, request, timeout, begin)

    async def invoke_async(
        self,
        addr: str,
        request: RemotingCommand,
        timeout: float | None = None,
        callback: InvokeCallback | None = None,
        *,
        future_class: type[ResponseFuture] = ResponseFuture,
    ) -> ResponseFuture:
        """Send ``request``; returns once it is queued, with an awaitable future (a
        ``future_class``). Waits for an async permit up to ``timeout``, else
        RemotingTooManyRequestsError."""
        if timeout is None:
            timeout = self.config.default_timeout
        conn = self._table.get(addr)
        if conn is None or not conn.is_active:
            begin = trio.current_time()
            conn = await self.get_connection(addr, timeout)
            return await self.invoker.call_async(conn, request, timeout, callback, begin, future_class)
        return await self.invoker.call_async(conn, request, timeout, callback, None, future_class)

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float | None = None) -> None:
        """Send ``request`` with the oneway flag; no response is expected. Connecting,
        waiting for a permit and for room to send count toward one ``timeout``."""
        if timeout is None:
            timeout = self.config.default_timeout
        conn = self._table.get(addr)
        if conn is None or not conn.is_active:
            begin = trio.current_time()
            conn = await self.get_connection(addr, timeout)
            await self.invoker.oneway(conn, request, timeout, begin)
            return
        await self.invoker.oneway(conn, request, timeout)
