"""The core both sides share: invoking (sync, async, oneway) and dispatching
incoming requests to processors, with RocketMQ's system replies
(``NettyRemotingAbstract``).

:class:`RemotingEndpoint` is the base of :class:`~trocket.remoting.server.RemotingServer`
and :class:`~trocket.remoting.client.RemotingClient`; either side can send
requests on a connection and answer requests that come in on it. It is the
connection's :class:`~.interfaces.ConnectionOwner`: connections use it through that
protocol, and answers go out through :meth:`Connection.answer
<trocket.remoting.connection.Connection.answer>`.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Awaitable, Iterable

import attrs
import trio

from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from trocket.codecs.serialize import encode_command

from .config import EndpointConfig
from .errors import RemotingSendRequestError, RemotingShutdownError, RemotingTooManyRequestsError
from .events import ChannelEventListener, emit
from .processor import Processor, ProcessorEntry, ProcessorRegistry
from .ratelog import RateLimitedLog
from .replies import SysResponseCode, exception_simple_desc
from .response import InvokeCallback, ResponseFuture
from .tap import check_sink

if TYPE_CHECKING:
    from .connection import Connection
    from .hooks import RPCHook
    from .tap import TapSink

__all__ = ["RemotingEndpoint", "RemotingStats", "next_opaque"]

log = logging.getLogger(__name__)


_REJECT_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"
_OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"

_opaque_counter = itertools.count()


def next_opaque() -> int:
    """The next request id: one process-wide counter, wrapping as a Java int."""
    n = next(_opaque_counter) & 0xFFFFFFFF
    return n - 0x100000000 if n & 0x80000000 else n


@attrs.define(slots=True)
class RemotingStats:
    """Counters an operator (or a test) can read; plain ints, no locking needed."""

    dropped_responses: int = 0  # responses matching no pending call (late or unknown)
    busy_replies: int = 0  # SYSTEM_BUSY answers (processor full or rejecting)
    not_supported_replies: int = 0
    processor_errors: int = 0
    decode_errors: int = 0  # connections closed for undecodable bytes
    expired_by_scan: int = 0
    connections_opened: int = 0
    connections_closed: int = 0


class RemotingEndpoint:
    """Shared core: processors, hooks, permits, connections and the response scan."""

    role: int = 0  # capture role: 1 server, 2 client

    def __init__(
        self,
        config: EndpointConfig,
        *,
        hooks: Iterable[RPCHook] = (),
        listener: ChannelEventListener | None = None,
        tap: TapSink | None = None,
    ) -> None:
        self.config = config
        self.processors = ProcessorRegistry(config.processor_limit, config.processor_queue)
        #: the RPC hooks, a tuple (replaced, never mutated, by :meth:`register_rpc_hook`)
        self.hooks: tuple = tuple(hooks)
        self.listener = listener
        if tap is not None:
            check_sink(tap)
        self.tap = tap
        self.stats = RemotingStats()
        self._async_permits = trio.Semaphore(config.async_permits)
        self._oneway_permits = trio.Semaphore(config.oneway_permits)
        self._connections: set[Connection] = set()
        self._shutting_down = False
        #: per-connection failure logs (resets, bad input, idle): a flood is a few lines and a count
        self.io_log = RateLimitedLog(
            logging.getLogger("trocket.remoting.connection"), what="connection failure messages"
        )

    # -- registration -------------------------------------------------------------------

    def register_processor(
        self,
        code: int,
        processor: Processor,
        *,
        limit: int | None = None,
        queue: int | None = None,
        inline: bool = False,
    ) -> ProcessorEntry:
        """Route requests with ``code`` to ``processor`` (see :mod:`.processor`)."""
        return self.processors.register(code, processor, limit=limit, queue=queue, inline=inline)

    def register_default_processor(
        self, processor: Processor, *, limit: int | None = None, queue: int | None = None, inline: bool = False
    ) -> ProcessorEntry:
        """The processor for codes nobody registered (otherwise REQUEST_CODE_NOT_SUPPORTED)."""
        return self.processors.register_default(processor, limit=limit, queue=queue, inline=inline)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        self.hooks = (*self.hooks, hook)

    @property
    def connections(self) -> frozenset[Connection]:
        return frozenset(self._connections)

    # -- invoking -----------------------------------------------------------------------

    async def _acquire(self, sem: trio.Semaphore, kind: str, permits: int, timeout: float, address: str) -> None:
        try:
            sem.acquire_nowait()
            return
        except trio.WouldBlock:
            pass
        if timeout > 0:
            with trio.move_on_after(timeout):
                await sem.acquire()
                return
        raise RemotingTooManyRequestsError(kind, permits, timeout, address)

    def _prepare(self, conn: Connection, request: RemotingCommand) -> bytes:
        if self._shutting_down:
            raise RemotingShutdownError("the endpoint is shutting down", conn.remote_address)
        request.opaque = next_opaque()
        for hook in self.hooks:
            hook.do_before_request(conn.remote_address, request)
        return encode_command(request)

    async def _send(self, conn: Connection, frame: bytes, fut: ResponseFuture) -> None:
        """Queue the frame, within the call's deadline; the outcome goes to ``fut``."""
        try:
            if not conn.send_frame_nowait(frame):
                with trio.move_on_at(fut.deadline):
                    await conn.send_frame(frame)
                    return
                fut.expire()
        except RemotingSendRequestError as exc:
            fut.set_exception(exc)
        except BaseException:
            fut.cancel()
            raise

    async def _invoke_sync(
        self, conn: Connection, request: RemotingCommand, timeout: float, begin: float | None = None
    ) -> RemotingCommand:
        request.flag &= ~(RPC_ONEWAY | RPC_RESPONSE)
        frame = self._prepare(conn, request)
        fut = ResponseFuture(
            request.opaque, request, conn.remote_address, timeout, conn.responses, hooks=self.hooks, begin=begin
        )
        conn.responses.add(fut)
        await self._send(conn, frame, fut)
        return await fut.wait()

    async def _invoke_async(
        self,
        conn: Connection,
        request: RemotingCommand,
        timeout: float,
        callback: InvokeCallback | None = None,
        begin: float | None = None,
    ) -> ResponseFuture:
        if begin is None:
            begin = trio.current_time()
        sem = self._async_permits
        await self._acquire(sem, "async", self.config.async_permits, begin + timeout - trio.current_time(), conn.remote_address)
        try:
            request.flag &= ~(RPC_ONEWAY | RPC_RESPONSE)
            frame = self._prepare(conn, request)
        except BaseException:
            sem.release()
            raise
        fut = ResponseFuture(
            request.opaque, request, conn.remote_address, timeout, conn.responses,
            permit=sem, callback=callback, hooks=self.hooks, begin=begin,
        )
        conn.responses.add(fut)
        await self._send(conn, frame, fut)
        return fut

    async def _invoke_oneway(self, conn: Connection, request: RemotingCommand, timeout: float) -> None:
        sem = self._oneway_permits
        await self._acquire(sem, "oneway", self.config.oneway_permits, timeout, conn.remote_address)
        try:
            request.flag = (request.flag | RPC_ONEWAY) & ~RPC_RESPONSE
            frame = self._prepare(conn, request)
            if not conn.send_frame_nowait(frame):
                with trio.move_on_after(timeout):
                    await conn.send_frame(frame)
                    return
                raise RemotingTooManyRequestsError("oneway", self.config.oneway_permits, timeout, conn.remote_address)
        finally:
            sem.release()

    # -- dispatching --------------------------------------------------------------------

    def _dispatch_soon(self, conn: Connection, request: RemotingCommand) -> Awaitable[object] | None:
        """Called by the connection's reader for every request, in arrival order:
        ``None`` when the request was handled without waiting, else an awaitable the
        reader awaits before it reads on (:meth:`_dispatch`).

        The common case -- an inline synchronous processor whose answer fits in the
        outbox -- runs here with no coroutine per frame; everything else (no
        processor, a ``reject_request``, async or pooled processors, a processor that
        raised, an answer that must wait for room) goes the way :meth:`_dispatch` does."""
        entry = self.processors.lookup(request.code)
        if entry is None or not entry.inline or entry.is_async or entry.reject is not None:
            return self._dispatch(conn, request)
        try:
            for hook in self.hooks:
                hook.do_before_request(conn.remote_address, request)
            response = entry.call(conn, request)
        except Exception as exc:
            return self._processor_failed(conn, request, exc)
        if response is not None or request.flag & RPC_ONEWAY:
            outcome = conn.answer_soon(request, response)
            return None if outcome.__class__ is bool else outcome  # type: ignore[return-value]
        return None  # the processor answers later, through conn.answer (the hooks run then)

    async def _dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        """One request, every kind of processor (see :meth:`_dispatch_soon`)."""
        entry = self.processors.lookup(request.code)
        oneway = request.flag & RPC_ONEWAY
        if entry is None:
            self.stats.not_supported_replies += 1
            if not oneway:
                await conn.reply_system(
                    request, SysResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {request.code} not supported",
                )
            return
        if entry.reject is not None and entry.reject():
            self.stats.busy_replies += 1
            if not oneway:
                await conn.reply_system(request, SysResponseCode.SYSTEM_BUSY, _REJECT_REMARK)
            return
        if entry.inline:
            await self._handle(conn, request, entry)
            return
        if entry.pending >= entry.limit + entry.queue:
            self.stats.busy_replies += 1
            if not oneway:
                await conn.reply_system(request, SysResponseCode.SYSTEM_BUSY, _OVERLOAD_REMARK)
            return
        entry.pending += 1
        try:
            conn.start_handler(self._run_request, conn, request, entry)
        except BaseException:
            entry.pending -= 1
            raise

    async def _run_request(self, conn: Connection, request: RemotingCommand, entry: ProcessorEntry) -> None:
        try:
            await self._handle(conn, request, entry)
        finally:
            entry.pending -= 1

    async def _handle(self, conn: Connection, request: RemotingCommand, entry: ProcessorEntry) -> None:
        hooks = self.hooks
        try:
            for hook in hooks:
                hook.do_before_request(conn.remote_address, request)
            if entry.inline:
                response = entry.call(conn, request)
                if entry.is_async:
                    response = await response
            elif entry.is_async:
                limiter = entry.limiter
                try:
                    limiter.acquire_nowait()
                except trio.WouldBlock:
                    await limiter.acquire()
                try:
                    response = await entry.call(conn, request)
                finally:
                    limiter.release()
            else:
                response = await trio.to_thread.run_sync(entry.call, conn, request, limiter=entry.limiter)
        except Exception as exc:
            await self._processor_failed(conn, request, exc)
            return
        if response is not None or request.flag & RPC_ONEWAY:
            await conn.answer(request, response)
        # else the processor answers later, through conn.answer (the hooks run then)

    async def _processor_failed(self, conn: Connection, request: RemotingCommand, exc: Exception) -> None:
        self.stats.processor_errors += 1
        log.warning("processor for code %d from %s raised", request.code, conn.remote_address, exc_info=exc)
        if not request.flag & RPC_ONEWAY:
            await conn.reply_system(request, SysResponseCode.SYSTEM_ERROR, exception_simple_desc(exc))

    # -- connections and the periodic scan ---------------------------------------------

    def _connection_opened(self, conn: Connection) -> None:
        self._connections.add(conn)
        self.stats.connections_opened += 1
        emit(self.listener, "on_channel_connect", conn)

    def _connection_closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        self.stats.connections_closed += 1

    async def _scan_loop(self) -> None:
        """Expire calls whose deadline passed and that nobody awaits (callback-only);
        summarise the connection failures the rate-limited log held back."""
        interval = self.config.scan_interval
        while True:
            await trio.sleep(interval)
            self.scan_responses()
            self.io_log.flush()
            if self.tap is not None:
                self.tap.flush()

    def scan_responses(self) -> int:
        now = trio.current_time()
        expired = 0
        for conn in list(self._connections):
            if conn.responses:
                expired += conn.responses.expire(now)
        self.stats.expired_by_scan += expired
        return expired

    async def _shutdown_connections(self, deadline: float) -> None:
        """Stop reading, let handlers finish up to ``deadline`` seconds, then close all."""
        self._shutting_down = True
        conns = list(self._connections)
        for conn in conns:
            address = conn.remote_address
            conn.responses.fail_all(
                lambda f, a=address: RemotingShutdownError(f"endpoint shut down while call {f.opaque} to {a} was pending", a)
            )
            conn.stop_reading()
        with trio.move_on_after(deadline):
            for conn in conns:
                await conn.wait_closed()
        for conn in list(self._connections):
            conn._abort_handlers()
        for conn in conns:
            await conn.wait_closed()
        if self.tap is not None:
            self.tap.flush()
