"""The core both sides share: dispatching incoming requests to processors, with
RocketMQ's system replies (``NettyRemotingAbstract``), and the connections' seam.

:class:`RemotingEndpoint` is the base of :class:`~trocket.remoting.server.RemotingServer`
and :class:`~trocket.remoting.client.RemotingClient`; either side can send
requests on a connection (through its :class:`~.invoker.Invoker`) and answer requests
that come in on it. It is the connection's :class:`~.connection.ConnectionOwner`:
connections use it through that protocol, and answers go out through
:meth:`Connection.answer <trocket.remoting.connection.Connection.answer>`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Awaitable, Iterable

import trio

from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from trocket.codecs.errors import CodecError
from trocket.codecs.serialize import encode_command

from .config import EndpointConfig
from .errors import RemotingFrameError, RemotingSendRequestError, RemotingShutdownError, ResponseCodeError
from .events import ChannelEventListener, notify
from .hooks import HookSet, RequestHook
from .invoker import Invoker, next_opaque
from .processor import Processor, ProcessorEntry, ProcessorRegistry
from .ratelog import RateLimitedLog
from .replies import SysResponseCode, error_reply, exception_simple_desc
from .state import CloseReason
from .stats import RemotingStats
from .tap import check_sink

if TYPE_CHECKING:
    from .connection import Connection
    from .tap import TapSink

__all__ = ["RemotingEndpoint", "RemotingStats", "next_opaque"]

log = logging.getLogger(__name__)


_REJECT_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"
_OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"


class RemotingEndpoint:
    """Shared core: processors, hooks, the invoker, connections and the response scan."""

    role: int = 0  # capture role: 1 server, 2 client

    def __init__(
        self,
        config: EndpointConfig,
        *,
        hooks: Iterable[RequestHook] | HookSet = (),
        listener: ChannelEventListener | None = None,
        tap: TapSink | None = None,
    ) -> None:
        self.config = config
        self.processors = ProcessorRegistry(config.processor_limit, config.processor_queue)
        #: the RPC hooks by kind (:class:`~.hooks.HookSet`), shared with the invoker (a
        #: HookSet given is shared as it is: hooks added to it later apply here too)
        self.hooks = hooks if isinstance(hooks, HookSet) else HookSet.of(hooks)
        #: the channel-event listener (None: nobody listens)
        self.listener = listener
        if tap is not None:
            check_sink(tap)
        self.tap = tap
        self.stats = RemotingStats()
        self.invoker = Invoker(config, self.hooks)
        self._connections: set[Connection] = set()
        #: bytes every connection holds in frames begun and not finished (bounded by
        #: ``config.max_partial_bytes``)
        self.partial_bytes = 0
        #: per-connection failure logs (resets, bad input, idle): a flood is a few lines and a count
        self.io_log = RateLimitedLog(
            logging.getLogger("trocket.remoting.connection"), what="connection failure messages"
        )

    # -- registration -------------------------------------------------------------------

    def register_processor(
        self,
        codes: int | Iterable[int],
        processor: Processor,
        *,
        limit: int | None = None,
        queue: int | None = None,
        inline: bool = False,
    ) -> ProcessorEntry:
        """Route requests with ``codes`` (one or several) to ``processor`` (see :mod:`.processor`)."""
        return self.processors.register(codes, processor, limit=limit, queue=queue, inline=inline)

    def register_default_processor(
        self, processor: Processor, *, limit: int | None = None, queue: int | None = None, inline: bool = False
    ) -> ProcessorEntry:
        """The processor for codes nobody registered (otherwise REQUEST_CODE_NOT_SUPPORTED)."""
        return self.processors.register_default(processor, limit=limit, queue=queue, inline=inline)

    def register_rpc_hook(self, hook: RequestHook) -> None:
        """Add a hook (an :class:`~.hooks.RPCHook`, or a request-only
        :class:`~.hooks.RequestHook`); it applies to calls and requests from now on."""
        self.hooks.add(hook)

    @property
    def connections(self) -> frozenset[Connection]:
        return frozenset(self._connections)

    @property
    def shutting_down(self) -> bool:
        """Shutdown has begun: no new calls, connections close as SHUTDOWN."""
        return self.invoker.closed

    # -- dispatching (the connection's reader calls this for every request) ------------

    def dispatch(self, conn: Connection, request: RemotingCommand) -> Awaitable[object] | None:
        """Handle one request, in arrival order: ``None`` when it was handled without
        waiting, else an awaitable the reader awaits before it reads on.

        The common case -- an inline synchronous processor whose answer fits in the
        outbox -- runs here with no coroutine per frame; everything else (no
        processor, a ``reject_request``, a full processor, async or pooled
        processors, a processor that raised, an answer that must wait for room) goes
        the way :meth:`_dispatch` does."""
        entry = self.processors.by_code.get(request.code)  # (ProcessorRegistry.lookup, inline)
        if entry is None or not entry.inline_sync or entry.pending >= entry.capacity:
            return self._dispatch(conn, request)
        try:
            for hook in self.hooks.before:
                hook.do_before_request(conn.remote_address, request)
            response = entry.call(conn, request)
        except ResponseCodeError as exc:
            response = error_reply(exc, ext_fields=self.config.system_reply_ext_fields)
        except Exception as exc:
            return self._processor_failed(conn, request, exc)
        if request.flag & RPC_ONEWAY:  # never held, never answered
            if self.hooks.after:
                conn.answer_soon(request, response)  # the hooks see what the processor returned
            return None
        if response is not None and not self.hooks.after:
            # the common answer, finished, encoded and queued here: what answer_soon
            # does (through _answer_frame) less its calls, its held-answer and hook
            # checks (this request was never held, no hook is there)
            if response.__class__ is RemotingCommand:
                response.opaque = request.opaque
                response.flag |= RPC_RESPONSE
                response.serialize_type = request.serialize_type
                try:
                    frame = encode_command(response)
                except CodecError:
                    frame = None  # answer_soon below logs it and answers SYSTEM_ERROR
            elif isinstance(response, RemotingCommand):
                frame = None  # (a subclass: answer_soon's way)
            else:  # a PreparedResponse (the broker's stored send): its own frame, or None
                frame = response.frame_for(request)
            if frame is not None:
                try:
                    if conn.outbox.send_nowait(frame):
                        return None
                except RemotingSendRequestError:
                    return None  # the connection is gone: the answer is dropped
                return conn.send_answer(frame)
        if response is not None:
            outcome = conn.answer_soon(request, response)
            return None if outcome.__class__ is bool else outcome  # type: ignore[return-value]
        conn.hold_answer(request, entry)  # the processor answers later, through conn.answer
        return None

    async def _dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        """One request, every kind of processor (see :meth:`dispatch`)."""
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
        if entry.pending >= entry.capacity:
            self.stats.busy_replies += 1
            if not oneway:
                await conn.reply_system(request, SysResponseCode.SYSTEM_BUSY, _OVERLOAD_REMARK)
            return
        if entry.inline:
            await self._handle(conn, request, entry)
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
        try:
            for hook in self.hooks.before:
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
        except ResponseCodeError as exc:
            response = error_reply(exc, ext_fields=self.config.system_reply_ext_fields)
        except Exception as exc:
            await self._processor_failed(conn, request, exc)
            return
        if response is not None or request.flag & RPC_ONEWAY:
            await conn.answer(request, response)
        elif entry.inline:
            conn.hold_answer(request, entry)
        # else the processor answers later, through conn.answer (the hooks run then)

    async def _processor_failed(self, conn: Connection, request: RemotingCommand, exc: Exception) -> None:
        self.stats.processor_errors += 1
        log.warning("processor for code %d from %s raised", request.code, conn.remote_address, exc_info=exc)
        if not request.flag & RPC_ONEWAY:
            await conn.reply_system(request, SysResponseCode.SYSTEM_ERROR, exception_simple_desc(exc))

    # -- connections and the periodic scan ---------------------------------------------

    def connection_opened(self, conn: Connection) -> None:
        """A connection of this endpoint started serving (its ``run`` calls this)."""
        self._connections.add(conn)
        self.stats.connections_opened += 1
        if self.listener is not None:
            notify(self.listener.on_channel_connect, conn)

    def partial_changed(self, conn: Connection, held: int) -> None:
        """A connection's reader now holds ``held`` bytes of an unfinished frame. Past
        the endpoint's budget, the connections holding the most are closed (largest
        first) until the rest fits: a peer cannot make the endpoint buffer without bound."""
        if held and not conn.partial_bytes:
            conn.partial_since = trio.current_time()
        elif not held:
            conn.partial_since = None
        self.partial_bytes += held - conn.partial_bytes
        conn.partial_bytes = held
        budget = self.config.max_partial_bytes
        if self.partial_bytes <= budget:
            return
        for victim in sorted(self._connections, key=lambda c: c.partial_bytes, reverse=True):
            if self.partial_bytes <= budget or not victim.partial_bytes:
                break
            log.warning(
                "closing connection #%d from %s: it holds %d bytes of an unfinished frame, and all "
                "connections together %d, past the budget of %d (max_partial_bytes)",
                victim.id, victim.remote_address, victim.partial_bytes, self.partial_bytes, budget,
            )
            self.partial_bytes -= victim.partial_bytes
            victim.partial_bytes = 0
            victim.partial_since = None
            victim.close(CloseReason.BAD_INPUT, RemotingFrameError(
                f"{victim.remote_address} held an unfinished frame past the endpoint's partial-frame budget",
                victim.remote_address,
            ))

    def connection_closed(self, conn: Connection) -> None:
        """A connection of this endpoint finished (its ``run`` calls this last)."""
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
        """Expire the calls past their deadline; close connections whose unfinished
        frame is older than ``frame_timeout`` (a peer trickling bytes). Returns how
        many calls expired."""
        now = trio.current_time()
        expired = 0
        frame_timeout = self.config.frame_timeout
        for conn in list(self._connections):
            if conn.responses:
                expired += conn.responses.expire(now)
            since = conn.partial_since
            if since is not None and frame_timeout is not None and now - since > frame_timeout:
                self.io_log.log(
                    logging.INFO, "closing connection #%d from %s: a frame unfinished for %.1f s (frame_timeout)",
                    conn.id, conn.remote_address, now - since,
                )
                conn.close(CloseReason.BAD_INPUT, RemotingFrameError(
                    f"{conn.remote_address} did not finish a frame within {frame_timeout} s", conn.remote_address
                ))
        self.stats.expired_by_scan += expired
        return expired

    def _begin_shutdown(self) -> None:
        """No new calls from now on; connections that close now close as SHUTDOWN."""
        self.invoker.closed = True

    def _abort(self) -> None:
        """``async with`` server or client left by an exception (ServiceContextManager's
        hook): pending calls fail as shut down."""
        self._begin_shutdown()

    async def _shutdown_connections(self, deadline: float) -> None:
        """Stop reading, let handlers finish up to ``deadline`` seconds, then close all."""
        self._begin_shutdown()
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
            conn.abort_handlers()
        for conn in conns:
            await conn.wait_closed()
        if self.tap is not None:
            self.tap.flush()
