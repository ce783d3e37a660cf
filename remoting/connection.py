"""One connection: a reader task feeding the frame decoder and dispatching what it
decodes, an outbox and its writer task, the table of the calls pending on it, and the
request-handler tasks it spawned.

Netty's counterpart is the channel with its pipeline (``NettyRemotingAbstract``'s
``processMessageReceived`` on the read side, ``writeAndFlush`` on the write side).
The parts, each its own module:

* the protocol is codecs' and sans-I/O: :class:`~trocket.codecs.frame.FrameDecoder`
  (bytes in, whole frames out, a typed error for what is not RocketMQ framing),
  :func:`~trocket.codecs.serialize.decode_command` / ``encode_command``;
* the lifecycle is one state machine with the reason it closed
  (:class:`~.state.Lifecycle`: OPEN, DRAINING, CLOSING, CLOSED), also without I/O;
* the write side is the :class:`~.outbox.Outbox`: the bounded queue, direct writes,
  corking, the writer task; raw fd reads and writes are :mod:`.fdio`'s;
* the tap's records go through a :class:`~.tap.TapRecorder`;
* what the connection uses of its endpoint is :class:`ConnectionOwner`.

What is left here is the reader, the answers, the handlers and the lifecycle's effects.

Tasks (all inside :meth:`Connection.run`, which the endpoint runs in its nursery)::

    run ── work nursery (request handlers; outlive the socket, their answers are dropped)
         └─ io nursery: reader (this task), writer, idle watcher

The reader ends on EOF (PEER), on an I/O error (IO_ERROR), on undecodable bytes
(BAD_INPUT, with a logged diagnosis), on :meth:`close` (LOCAL, or IDLE from the idle
watcher), or on :meth:`stop_reading` (DRAINING: wait for the handlers, flush their
answers, then close as GRACEFUL). Whatever ends it, pending calls fail at once with an
error whose ``__cause__`` is the exception that closed the connection, if one did, and
the socket is closed. Per-connection failure logs go through the endpoint's
:class:`~.ratelog.RateLimitedLog`, so a flood of resets is a few lines and a count.

Every answer goes out through :meth:`Connection.answer` (or its synchronous first
half, :meth:`Connection.answer_soon`): opaque, response flag and serialization from
the request, the response hooks' ``do_after_response``, encode, send. (One shortcut:
an inline processor's command answered at once, with no response hook to see it, is
finished and queued by the endpoint's ``dispatch`` itself, the same steps.) An answer may be
a :class:`~.replies.PreparedResponse`, which writes its own frame when no response
hook has to see a command (the broker's send processor answers SUCCESS from a template
that way). A request an inline processor answers later counts against its
registration's capacity until that answer is given (:meth:`Connection.hold_answer`).

After a read that left the socket empty the reader asks it (``FIONREAD``) whether the
peer's next requests arrived meanwhile and reads them at once if so: waiting for them
costs a pass through trio's run loop even when they are already there. It asks only
after a read that suggests more is on its way (several frames, a frame begun, or a
read that asking found): a peer with one request in flight sends nothing more before
its answer, so there the question is a syscall that always says 0. The answers of
such a run of reads (up to the reads it makes between two yields) go out together, in
one write after its last read: a write to a socket a peer waits on costs both sides a
system call and a wake-up, and the requests already there are answered within
microseconds anyway.

Code that runs inline in a reader (a processor, or what it calls) can have a function
called when the reader has handled every frame of its current read (or run of reads)
and written their answers (:func:`call_after_read`, Netty's ``channelReadComplete``):
work that many requests of one read share, done once for them without waking another
task.
"""

from __future__ import annotations

import array
import contextvars
import itertools
import logging
import os
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

import trio

from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from trocket.codecs.errors import CodecError, FrameError
from trocket.codecs.frame import FrameDecoder
from trocket.codecs.serialize import decode_command, encode_command

from .errors import (
    RemotingCommandDecodeError,
    RemotingConnectionClosedError,
    RemotingFrameError,
    RemotingSendRequestError,
    RemotingShutdownError,
)
from .events import notify
from .fdio import bytes_waiting, read_into, receive_buffer
from .outbox import Outbox
from .replies import PreparedResponse, SysResponseCode, exception_simple_desc, system_response
from .response import ResponseTable
from .state import CloseReason, ConnState, Lifecycle
from .tap import RECEIVED_PAYLOAD, TapRecorder

if TYPE_CHECKING:
    from .config import EndpointConfig
    from .events import ChannelEventListener
    from .hooks import HookSet
    from .invoker import Invoker
    from .ratelog import RateLimitedLog
    from .response import InvokeCallback, ResponseFuture
    from .stats import RemotingStats
    from .tap import TapSink

__all__ = ["Connection", "ConnectionOwner", "call_after_read", "format_address"]

log = logging.getLogger(__name__)

_connection_ids = itertools.count(1)
_wait_readable = trio.lowlevel.wait_readable
_readv = os.readv  # a plain-TCP reader's read when readable (else fdio.read_into waits)
_checkpoint = trio.lowlevel.checkpoint
_checkpoint_if_cancelled = trio.lowlevel.checkpoint_if_cancelled
#: reads in a row a reader makes without passing through trio's run loop (data that
#: arrived while it handled the previous read); then it checkpoints
_MAX_READS_WITHOUT_YIELD = 8

_IO_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
_CLOSING = ConnState.CLOSING


class Admission(Protocol):
    """What a held answer counts against (a processor registration's admission)."""

    pending: int


class ConnectionOwner(Protocol):
    """What a connection uses of the endpoint that runs it (the endpoint satisfies it
    without this module importing the endpoint's; Netty's ``ChannelHandlerContext``)."""

    config: EndpointConfig
    listener: ChannelEventListener | None
    tap: TapSink | None
    stats: RemotingStats
    role: int
    hooks: HookSet
    invoker: Invoker
    io_log: RateLimitedLog

    @property
    def shutting_down(self) -> bool: ...

    def dispatch(self, conn: Connection, request: RemotingCommand) -> Awaitable[object] | None: ...

    def partial_changed(self, conn: Connection, held: int) -> None: ...

    def connection_opened(self, conn: Connection) -> None: ...

    def connection_closed(self, conn: Connection) -> None: ...


#: the connection whose reader runs in this task (set once by the reader; task-local)
_reading: contextvars.ContextVar[Connection | None] = contextvars.ContextVar("trocket_reading", default=None)


def call_after_read(fn: Callable[[], object]) -> bool:
    """Call ``fn()`` once the connection reader that is running now has handled every
    frame of its current read (or run of reads: see the module docstring) and written
    their answers, before it waits for the next (Netty's ``channelReadComplete``) --
    or earlier, when a request of that read makes
    the reader wait (an answer waiting for room, an async processor): before any other
    task runs. For code that runs inline in a reader -- a processor registered inline,
    or what it calls -- and wants to do once, for all the requests of one read, what it
    would otherwise wake a task for. Returns False, and schedules nothing, anywhere else
    (another task, a thread, between reads): the caller must act itself. ``fn`` runs in
    the reader's task; an exception it raises is logged."""
    conn = _reading.get()
    if conn is None:
        return False
    after = conn._after_read
    if after is None:
        return False
    after.append(fn)
    return True


def format_address(sockaddr) -> str:
    """``host:port`` (``[host]:port`` for IPv6), computed once per connection."""
    if isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
        host, port = sockaddr[0], sockaddr[1]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return str(sockaddr)


def _address_of(get_address) -> str | None:
    """``format_address(get_address())``, or None if the socket no longer knows it
    (``getpeername`` fails once a peer has reset the connection)."""
    try:
        return format_address(get_address())
    except OSError:
        return None


def _socket_of(stream: trio.abc.Stream):
    while not isinstance(stream, trio.SocketStream):
        inner = getattr(stream, "transport_stream", None)
        if inner is None:
            return None
        stream = inner
    return stream.socket


class _Unanswerable(Exception):
    """A response a hook refused or that does not encode: answered SYSTEM_ERROR."""

    def __init__(self, remark: str) -> None:
        self.remark = remark


class Connection:
    """One transport connection, either side. Don't make these yourself: servers
    accept them, clients open them. Processors receive the one a request came on.

    ``outbox`` is its write side (:class:`~.outbox.Outbox`): :meth:`send_frame_nowait`
    and :meth:`send_frame` send through it; code on the hot path (the answer path, the
    invoker) calls ``outbox.send_nowait`` directly."""

    __slots__ = (
        "id",
        "stream",
        "endpoint",
        "local_address",
        "remote_address",
        "peer",
        "tls",
        "responses",
        "outbox",
        "life",
        "inflight",
        "_last_read",
        "_fd",
        "_read_scope",
        "_io_scope",
        "_work",
        "_writer_done",
        "_idle_waiter",
        "_closed_event",
        "_tap",
        "_after_read",
        "_held",
        "partial_bytes",
        "partial_since",
        "__weakref__",
    )

    def __init__(
        self,
        endpoint: ConnectionOwner,
        stream: trio.abc.Stream,
        *,
        tls: bool = False,
        peer: str | None = None,
        remote_address: str | None = None,
    ) -> None:
        """``remote_address``: the peer's address as the accept already knows it (a
        peer that reset the connection meanwhile makes ``getpeername`` fail)."""
        self.id = next(_connection_ids)
        self.stream = stream
        self.endpoint = endpoint
        sock = _socket_of(stream)
        self.local_address = (sock and _address_of(sock.getsockname)) or "?"
        if remote_address is None:
            remote_address = (sock and _address_of(sock.getpeername)) or peer or "?"
        self.remote_address = remote_address
        #: the address the client dialled (its connection-table key); None when accepted
        self.peer = peer
        self.tls = tls
        self.responses = ResponseTable()
        # direct reads and writes only on plain TCP (TLS needs the SSLStream's state machine)
        self._fd = sock.fileno() if sock is not None and isinstance(stream, trio.SocketStream) else -1
        self.outbox = Outbox(stream, self._fd, endpoint.config, remote_address)
        self.life = Lifecycle()
        self.inflight = 0  # request handlers running or queued for this connection
        self._last_read = self.outbox.last_io
        self._read_scope = trio.CancelScope()
        #: while the reader handles a read: what :func:`call_after_read` queued for its end
        self._after_read: list[Callable[[], object]] | None = None
        self._io_scope: trio.CancelScope | None = None
        self._work: trio.Nursery | None = None
        self._writer_done = trio.Event()
        self._idle_waiter: trio.Event | None = None
        self._closed_event = trio.Event()
        #: the tap's recorder of this connection's frames (None: the endpoint has no tap)
        self._tap: TapRecorder | None = None
        if endpoint.tap is not None:
            self._tap = self.outbox.tap = TapRecorder(
                endpoint.tap, self.id, self.local_address, self.remote_address, endpoint.role
            )
        #: requests an inline processor answers later: id(request) -> its registration
        self._held: dict[int, Admission] = {}
        #: bytes of a frame begun and not finished, and since when (trio time; None when
        #: none is): the endpoint bounds the first across connections, the second per frame
        self.partial_bytes = 0
        self.partial_since: float | None = None

    def __repr__(self) -> str:
        return f"<Connection #{self.id} {self.local_address} -> {self.remote_address} {self.life.state.name}>"

    @property
    def last_io(self) -> float:
        """When it last read or wrote (trio time): what the idle timeout counts from."""
        return max(self._last_read, self.outbox.last_io)

    # -- sending -------------------------------------------------------------------------

    def send_frame_nowait(self, frame: bytes) -> bool:
        """Send or queue an encoded frame without waiting; ``False`` when the outbox is
        full; :class:`~.errors.RemotingSendRequestError` when the connection is closed
        (see :class:`~.outbox.Outbox`)."""
        return self.outbox.send_nowait(frame)

    async def send_frame(self, frame: bytes) -> None:
        """Send or queue an encoded frame, waiting for room (backpressure)."""
        await self.outbox.send(frame)

    async def send_command(self, cmd: RemotingCommand) -> None:
        await self.outbox.send(encode_command(cmd))

    def cork(self) -> bool:
        """:meth:`Outbox.cork <trocket.remoting.outbox.Outbox.cork>`: hold what is sent
        until :meth:`uncork`, for answers completed together outside the reader."""
        return self.outbox.cork()

    def uncork(self, was_corked: bool = False) -> None:
        self.outbox.uncork(was_corked)

    # -- answers ---------------------------------------------------------------------------

    async def answer(self, request: RemotingCommand, response: RemotingCommand | PreparedResponse | None) -> bool:
        """Finish and send the response to ``request``: the one way every answer goes
        out, now (the endpoint, for what a processor returns) or later (a processor
        that returned ``None`` and answers from :meth:`start_handler` or a callback).

        Copies the request's opaque and serialization, sets the response flag, runs
        the response hooks' ``do_after_response``, encodes, and sends (without waiting
        when there is room; else waiting for room: backpressure). A
        :class:`~.replies.PreparedResponse` writes its own frame when no response hook
        has to see a command. A hook that raises or a response that does not encode is
        answered SYSTEM_ERROR instead. A oneway request gets no answer (the hooks still
        see ``response``, ``None`` as a rule). Returns whether an answer was sent or
        queued (``False``: oneway, or the connection is gone and the answer is dropped).
        """
        outcome = self.answer_soon(request, response)
        return outcome if outcome.__class__ is bool else await outcome  # type: ignore[misc]

    def answer_soon(
        self, request: RemotingCommand, response: RemotingCommand | PreparedResponse | None
    ) -> bool | Awaitable[bool]:
        """:meth:`answer` without a coroutine when nothing has to wait: its result now,
        or, when the answer must wait for room in the outbox, an awaitable of it (await
        it, or hand it to :meth:`start_handler`; later answers on this connection queue
        behind it). For code that answers many requests at once outside a task (a
        callback completing several later answers) and for the reader's own path."""
        held = self._held
        if held:
            entry = held.pop(id(request), None)
            if entry is not None:
                entry.pending -= 1
        after = self.endpoint.hooks.after
        if request.flag & RPC_ONEWAY:
            if after:
                self._after_oneway(request, response)
            return False
        if (
            after
            or isinstance(response, RemotingCommand)
            or (frame := response.frame_for(request)) is None  # type: ignore[union-attr]
        ):
            # a command (a PreparedResponse as one, when a response hook must see it)
            try:
                frame = self._answer_frame(request, response)  # type: ignore[arg-type]
            except _Unanswerable as exc:
                return self.reply_system(request, SysResponseCode.SYSTEM_ERROR, exc.remark)
        try:
            if self.outbox.send_nowait(frame):
                return True
        except RemotingSendRequestError:
            return False
        return self.send_answer(frame)

    def hold_answer(self, request: RemotingCommand, entry: Admission) -> None:
        """``request``'s inline processor answers it later: count it pending against
        ``entry`` until :meth:`answer` (or :meth:`answer_soon`) gives its answer or
        the connection ends. The endpoint calls this when such a processor returns
        ``None`` for a two-way request."""
        entry.pending += 1
        self._held[id(request)] = entry

    def _release_held(self) -> None:
        """The connection ended: what its processors held unanswered is no longer pending."""
        held = self._held
        for entry in held.values():
            entry.pending -= 1
        held.clear()

    async def send_answer(self, frame: bytes) -> bool:
        """Send a finished answer's frame, waiting for room; ``False`` when the
        connection is gone (the answer is dropped)."""
        try:
            await self.outbox.send(frame)
        except RemotingSendRequestError:
            return False
        return True

    def _answer_frame(self, request: RemotingCommand, response: RemotingCommand | PreparedResponse) -> bytes:
        """Finish ``response`` (a prepared one as its command; opaque, response flag,
        serialization from ``request``; the response hooks' ``do_after_response``) and
        encode it; :class:`_Unanswerable` (logged here) when a hook raises or it does
        not encode."""
        if not isinstance(response, RemotingCommand):
            response = response.command()
        response.opaque = request.opaque
        response.flag |= RPC_RESPONSE
        response.serialize_type = request.serialize_type
        try:
            for hook in self.endpoint.hooks.after:
                hook.do_after_response(self.remote_address, request, response)
            return encode_command(response)
        except Exception as exc:
            if isinstance(exc, CodecError):
                log.warning("response to code %d from %s does not encode: %s", request.code, self.remote_address, exc)
                remark = f"response does not encode: {exc}"
            else:
                log.warning("RPC hook for code %d from %s raised", request.code, self.remote_address, exc_info=True)
                self.endpoint.stats.processor_errors += 1
                remark = exception_simple_desc(exc)
            raise _Unanswerable(remark) from None

    def _after_oneway(self, request: RemotingCommand, response: RemotingCommand | PreparedResponse | None) -> None:
        """The response hooks see the answer to a oneway request, which is not sent."""
        hooks = self.endpoint.hooks.after
        if response is not None and not isinstance(response, RemotingCommand):
            response = response.command()
        try:
            for hook in hooks:
                hook.do_after_response(self.remote_address, request, response)
        except Exception:
            self.endpoint.stats.processor_errors += 1
            log.warning("RPC hook for code %d from %s raised", request.code, self.remote_address, exc_info=True)

    async def reply_system(self, request: RemotingCommand, code: int, remark: str) -> bool:
        """Answer with one of remoting's own codes (:class:`~.replies.SysResponseCode`:
        busy, not supported, system error) as RocketMQ does: no hooks. ``False`` if
        the connection is gone."""
        response = system_response(request, code, remark, ext_fields=self.endpoint.config.system_reply_ext_fields)
        try:
            await self.outbox.send(encode_command(response))
        except RemotingSendRequestError:
            return False
        return True

    # -- calls from this side (delegating to the endpoint) -------------------------------

    async def invoke_sync(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Call the peer and wait for its response (see :class:`~.invoker.Invoker`)."""
        return await self.endpoint.invoker.sync(self, request, timeout)

    async def invoke_async(
        self, request: RemotingCommand, timeout: float, callback: InvokeCallback | None = None
    ) -> ResponseFuture:
        """Call the peer; returns the call's future once the request is queued."""
        return await self.endpoint.invoker.call_async(self, request, timeout, callback)

    async def invoke_oneway(self, request: RemotingCommand, timeout: float) -> None:
        """Send the peer a oneway request."""
        await self.endpoint.invoker.oneway(self, request, timeout)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def state(self) -> ConnState:
        return self.life.state

    @property
    def close_reason(self) -> CloseReason | None:
        """Why it closed (None while open or draining)."""
        return self.life.reason

    @property
    def close_detail(self) -> str | None:
        """The text a caller gave :meth:`close`, if any."""
        return self.life.detail

    @property
    def close_cause(self) -> BaseException | None:
        """The exception that closed it, if one did."""
        return self.life.cause

    @property
    def is_active(self) -> bool:
        """Open or draining: it still sends."""
        return self.life.state < _CLOSING

    @property
    def closed(self) -> bool:
        """Finished: pending calls failed, socket closed."""
        return self.life.state is ConnState.CLOSED

    @property
    def close_description(self) -> str:
        """How errors and logs say why it closed, e.g. ``failed: [Errno 104] ...``."""
        return self.life.description

    def close(self, reason: CloseReason | str = CloseReason.LOCAL, cause: BaseException | None = None) -> None:
        """Close now: stop reading and writing (queued frames are dropped), fail
        pending calls (their errors chain ``cause``). Request handlers still running
        finish; their answers are dropped. A ``str`` reason is a LOCAL close with that
        text. Closing a closing or closed connection does nothing."""
        if not self.life.close(reason, cause):
            return
        self.outbox.close(discard=True)
        if self._io_scope is not None:
            self._io_scope.cancel()

    def stop_reading(self) -> None:
        """Graceful close: read no more requests; once the handlers running now
        have finished and their answers are written, close."""
        self.life.drain()
        self._read_scope.cancel()

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    def abort_handlers(self) -> None:
        """Shutdown past its deadline: cancel the request handlers too."""
        self.close(CloseReason.SHUTDOWN)
        if self._work is not None:
            self._work.cancel_scope.cancel()

    def start_handler(self, async_fn, *args) -> None:
        """Run ``async_fn(*args)`` as one of this connection's request handlers.

        For work that answers a request later (a send waiting for its flush, a held
        pull): it is counted in flight, so a graceful close or shutdown waits for it,
        up to the shutdown deadline, and it is cancelled past that."""
        if self._work is None:
            raise RemotingConnectionClosedError("connection is not running", self.remote_address)
        self.inflight += 1
        try:
            self._work.start_soon(self._run_handler, async_fn, args)
        except BaseException:
            self._handler_done()
            raise

    async def _run_handler(self, async_fn, args) -> None:
        try:
            await async_fn(*args)
        finally:
            self._handler_done()

    def _handler_done(self) -> None:
        self.inflight -= 1
        if not self.inflight and self._idle_waiter is not None:
            self._idle_waiter.set()

    async def run(self) -> None:
        """Serve the connection until it closes (the endpoint runs this in its nursery)."""
        endpoint = self.endpoint
        endpoint.connection_opened(self)
        try:
            async with trio.open_nursery() as work:
                self._work = work
                try:
                    async with trio.open_nursery() as io:
                        self._io_scope = io.cancel_scope
                        if self.life.state >= _CLOSING:
                            io.cancel_scope.cancel()
                        io.start_soon(self._write_loop)
                        idle = endpoint.config.idle_timeout
                        if idle is not None:
                            io.start_soon(self._idle_loop, idle)
                        await self._read_loop()
                        if self.life.state is ConnState.DRAINING:
                            await self._drain()
                        self.close(CloseReason.PEER)  # the reader saw EOF (else: closing already)
                        io.cancel_scope.cancel()
                finally:
                    self._teardown()
                    with trio.CancelScope(shield=True):
                        await trio.aclose_forcefully(self.stream)
                    if endpoint.listener is not None:
                        notify(endpoint.listener.on_channel_close, self)
        finally:
            self._teardown()  # cancelled before the io nursery started
            self.life.to(ConnState.CLOSED)
            self._release_held()
            if self.partial_bytes:
                endpoint.partial_changed(self, 0)
            endpoint.connection_closed(self)
            self._closed_event.set()

    def _teardown(self) -> None:
        """Be CLOSING (a run cancelled from outside closes as SHUTDOWN or LOCAL) and
        fail every pending call, chaining what closed the connection."""
        shutting_down = self.endpoint.shutting_down
        if self.life.state < _CLOSING:
            self.close(CloseReason.SHUTDOWN if shutting_down else CloseReason.LOCAL)
        if not self.responses:
            return
        address = self.remote_address
        cause = self.close_cause
        if shutting_down or self.close_reason is CloseReason.SHUTDOWN:

            def factory(f: ResponseFuture) -> RemotingConnectionClosedError:
                error = RemotingShutdownError(f"endpoint shut down while call {f.opaque} to {address} was pending", address)
                error.__cause__ = cause
                return error
        else:
            description = self.close_description

            def factory(f: ResponseFuture) -> RemotingConnectionClosedError:
                error = RemotingConnectionClosedError(
                    f"connection to {address} {description} while call {f.opaque} was pending", address
                )
                error.__cause__ = cause
                return error

        self.responses.fail_all(factory)

    async def _drain(self) -> None:
        while self.inflight:
            self._idle_waiter = trio.Event()
            await self._idle_waiter.wait()
        self.outbox.close(discard=False)  # the writer flushes what is queued, then ends
        await self._writer_done.wait()
        self.close(CloseReason.GRACEFUL)

    def _fail(self, error: BaseException, what: str) -> None:
        if self.life.state >= _CLOSING:
            return
        self.endpoint.io_log.log(
            logging.INFO, "connection #%d %s -> %s: %s failed: %r",
            self.id, self.local_address, self.remote_address, what, error,
        )
        if self.endpoint.listener is not None:
            notify(self.endpoint.listener.on_channel_exception, self, error)
        self.close(CloseReason.IO_ERROR, error)

    # -- tasks -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        endpoint = self.endpoint
        cfg = endpoint.config
        decoder = FrameDecoder(cfg.max_frame_length)
        size = cfg.receive_size
        receive = self.stream.receive_some
        buf, view = receive_buffer(size)  # plain TCP: see fdio.receive_buffer
        bufs = (buf,)
        pop_pending = self.responses.pop
        stats = endpoint.stats
        dispatch = endpoint.dispatch
        # tapped: the frames of one synchronous stretch (a read's frames and the answers
        # sent while handling them) are recorded together, in order, when it ends
        tap = self._tap
        outbox = self.outbox
        life = self.life
        fd = self._fd
        # the run's clock, asked directly: trio.current_time() is three Python calls to it
        current_time = trio.lowlevel.current_clock().current_time
        inq = array.array("i", [0])  # FIONREAD's answer: bytes waiting in the socket
        unyielded = 0
        # the last direct read left the socket empty (it did not fill the buffer)
        drained = False
        # ask FIONREAD before waiting: only after a read that suggests more is on its way
        # (several frames, a frame begun, or itself found by asking). A peer with one
        # request in flight sends nothing more before its answer, so asking it is a
        # syscall that always says 0; a busier peer's reads carry several frames
        probe = False
        # the answers of the reads since the last write, corked: when more has arrived
        # by the end of a read, that read comes at once and one write carries the
        # answers of both (a write to a socket a peer waits on costs both sides a wake-up)
        held = False
        held_completed = 0  # the calls those reads completed (Outbox.end_read's count)
        after_read: list[Callable[[], object]] = []
        _reading.set(self)  # this task's context: call_after_read finds this connection
        try:
            with self._read_scope:
                while True:
                    try:
                        # ``receive_some`` on the fd, skipping the read that would fail:
                        # after a read that did not fill the buffer the socket is almost
                        # surely drained, so wait for readiness first instead of trying a
                        # ``recv`` that raises EAGAIN (a syscall and an exception per
                        # message on a request/response connection). ``data`` is a view
                        # of the thread's buffer: the decoder copies it before the next await.
                        if probe and drained and unyielded < _MAX_READS_WITHOUT_YIELD and bytes_waiting(fd, inq):
                            # More arrived while we handled the last read: read it now (a
                            # wait would cost a pass through trio's run loop for data
                            # already there), its answers joining the held ones. Still a
                            # cancellation point: a processor that closed the connection
                            # (or stop_reading) ends the reader here.
                            await _checkpoint_if_cancelled()
                            unyielded += 1
                        else:
                            probe = False
                            if held:  # the run of reads ends: one write for its answers
                                held = False
                                self._end_run(held_completed, after_read)
                                held_completed = 0
                            if fd >= 0:  # (TLS: receive_some below waits itself)
                                if not drained or unyielded >= _MAX_READS_WITHOUT_YIELD:
                                    await _checkpoint()  # a busy peer must not starve the other tasks
                                else:
                                    await _wait_readable(fd)
                            unyielded = 0
                        if fd >= 0:
                            try:  # (read_into without its coroutine: readable all but always)
                                n = _readv(fd, bufs)
                            except BlockingIOError:
                                n = await read_into(fd, bufs)
                            drained = n < size
                            data = view[:n]
                        else:
                            data = await receive(size)
                    except _IO_ERRORS as exc:
                        self._fail(exc, "receive")
                        return
                    if not data:
                        if decoder.buffered:
                            endpoint.io_log.log(
                                logging.INFO, "connection #%d from %s: peer closed inside a frame (%d bytes buffered)",
                                self.id, self.remote_address, decoder.buffered,
                            )
                        return
                    self._last_read = current_time()
                    outbox.corked = True
                    self._after_read = after_read
                    completed = held_completed
                    handled = False
                    frames = 0
                    taps = tap.begin() if tap is not None else None
                    try:
                        decoder.feed(data)
                        while (payload := decoder.next_frame()) is not None:
                            frames += 1
                            if taps is not None:
                                taps.append(RECEIVED_PAYLOAD)
                                taps.append(payload)
                            try:
                                cmd = decode_command(payload)
                            except CodecError as exc:
                                self._bad_input(RemotingCommandDecodeError, exc)
                                return
                            if cmd.flag & RPC_RESPONSE:
                                fut = pop_pending(cmd.opaque)
                                if fut is None:
                                    stats.dropped_responses += 1
                                else:
                                    fut.set_response(cmd)
                                    completed += 1
                            else:
                                pending = dispatch(self, cmd)
                                if pending is not None:
                                    if tap is not None:  # the stretch ends: what others send now records itself
                                        tap.end()
                                    # ... and what was queued to run after it runs now: other
                                    # tasks run while this one waits
                                    self._after_read = None
                                    if after_read:
                                        _run_after_read(after_read)
                                    await pending
                                    self._after_read = after_read
                                    if tap is not None:
                                        taps = tap.resume()
                        handled = True
                    except FrameError as exc:
                        self._bad_input(RemotingFrameError, exc)
                        return
                    finally:
                        try:
                            if tap is not None:
                                tap.end()
                            buffered = decoder.buffered
                            if buffered != self.partial_bytes:  # a frame begun, finished or grown
                                endpoint.partial_changed(self, buffered)
                            if handled:
                                # the answers (and what call_after_read queued) wait, corked,
                                # for the loop's next turn: one write, unless more has arrived
                                # to join them (:meth:`_end_run`)
                                held, held_completed = True, completed
                                probe = frames > 1 or buffered > 0 or unyielded > 0
                            else:
                                held, held_completed = False, 0
                                if life.state < _CLOSING:
                                    # write what was queued, with one write; decide whether
                                    # the next frame may go straight to the socket
                                    outbox.end_read(completed)
                        finally:  # what was queued runs whatever happened above
                            self._after_read = None
                            if after_read and not held:
                                _run_after_read(after_read)
        finally:
            if held:  # stopped between two reads of a run
                self._end_run(held_completed, after_read)

    def _end_run(self, completed: int, after_read: list[Callable[[], object]]) -> None:
        """The end of a run of reads: write their answers with one write (unless the
        connection is closing), then call what :func:`call_after_read` queued."""
        try:
            if self.life.state < _CLOSING:
                self.outbox.end_read(completed)
        finally:
            if after_read:
                _run_after_read(after_read)

    def _bad_input(self, kind: type, exc: CodecError) -> None:
        error = kind(f"bad input from {self.remote_address}: {exc}", self.remote_address)
        error.__cause__ = exc
        self.endpoint.stats.decode_errors += 1
        self.endpoint.io_log.log(
            logging.WARNING, "closing connection #%d %s -> %s: %s", self.id, self.local_address, self.remote_address, exc
        )
        if self.endpoint.listener is not None:
            notify(self.endpoint.listener.on_channel_exception, self, error)
        self.close(CloseReason.BAD_INPUT, error)

    async def _write_loop(self) -> None:
        try:
            await self.outbox.run()
        except _IO_ERRORS as exc:
            self._fail(exc, "send")
        finally:
            self._writer_done.set()

    async def _idle_loop(self, idle: float) -> None:
        while True:
            last_io = self.last_io
            await trio.sleep_until(last_io + idle)
            if trio.current_time() >= self.last_io + idle:
                self.endpoint.io_log.log(
                    logging.INFO, "connection #%d from %s idle for %.1f s: closing", self.id, self.remote_address, idle
                )
                if self.endpoint.listener is not None:
                    notify(self.endpoint.listener.on_channel_idle, self)
                self.close(CloseReason.IDLE)
                return


def _run_after_read(after_read: list[Callable[[], object]]) -> None:
    """Call what :func:`call_after_read` queued, in order, and empty the list; one that
    raises is logged and the rest still run."""
    try:
        for fn in after_read:
            try:
                fn()
            except Exception:
                log.exception("a call after a read failed")
    finally:
        after_read.clear()
