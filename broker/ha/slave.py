"""The slave side of replication: ``HAService.HAClient``.

Connects to the master's HA port, reports its commit-log max offset (8 bytes) at once,
after every write and every ``haSendHeartbeatInterval``, and appends what the master
streams at the same physical offsets (:meth:`MessageStore.append_replicated`); what
one read brought is written (its framing checked: sizes, magic codes, positions),
reported (one report per read), then decoded and dispatched into the consume queues
(:meth:`MessageStore.dispatch_replicated`) -- on a SYNC_MASTER the answers wait on
the report, not on the decode (three quarters of the slave's work per record) nor the
dispatch, as with Java's slave, whose reput thread parses and dispatches later. All of
it runs without a checkpoint in between (:class:`~trocket.remoting.direct.DirectSocket`;
a report the socket cannot take whole is finished after the dispatch), so no task on
this broker finds the records written but not yet in their queues. Frames cut records anywhere; the
client keeps the tail of an incomplete record in memory (bounded) and writes only
whole records, so the log on disk never holds a torn one. The offset it reports
counts those buffered bytes (what the master must send next); every acknowledged
message is whole, hence written. On reconnect the buffer is dropped and the report
is the log's real end: no gap, no duplicate.

A frame at any other offset than the one expected closes the connection (Java's
"master pushed offset not equal the max phy offset in slave"), except a size-0 frame
below it: the master's log ends before the slave's (see :mod:`.protocol`), and the
client stops with :class:`~.protocol.SlaveAheadError` naming both offsets.
"""

from __future__ import annotations

import logging
import ssl
from typing import Callable

import trio

from ..store import MessageStore, PutMessageError
from trocket.remoting.direct import direct_or_stream
from .protocol import HEADER, HEADER_SIZE, OFFSET, HAProtocolError, SlaveAheadError

__all__ = ["HAClient"]

log = logging.getLogger(__name__)


class HAClient:
    def __init__(
        self,
        store: MessageStore,
        master: tuple[str, int] | None = None,
        *,
        heartbeat: float = 5.0,
        housekeeping: float = 20.0,
        reconnect_delay: float = 1.0,
        max_record: int = 4 * 1024 * 1024,
        on_fatal: Callable[[BaseException], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        #: TLS to the master's HA port (trocket's ``haTlsEnable``), None: plain TCP
        self.ssl_context = ssl_context
        self._master = master
        self.heartbeat = heartbeat
        self.housekeeping = housekeeping
        self.reconnect_delay = reconnect_delay
        #: an incomplete record is buffered up to this many bytes (blank records included)
        self.partial_limit = 2 * max_record + (1 << 20)
        self.on_fatal = on_fatal
        self._master_changed = trio.Event()
        #: where the next byte from the master belongs (store end + buffered tail)
        self.received = 0
        self._partial = bytearray()
        #: nothing stored yet: the first frame may start anywhere (the master's last segment)
        self._empty = False
        self._failing: str | None = None
        #: the last refusal: (master, this log's end after it, why); the same refusal
        #: again (a corrupt record the master sends on every reconnect) is logged at DEBUG
        self._refused: tuple[str, int, str] | None = None
        self.connected = False
        self.connects = 0
        self.fatal: BaseException | None = None

    @property
    def master(self) -> tuple[str, int] | None:
        return self._master

    def set_master(self, master: tuple[str, int] | None) -> None:
        """The master's HA address (``updateHaMasterAddress``); a change reconnects."""
        if master != self._master:
            log.info("HA master address: %s -> %s", self._master, master)
            self._master = master
            self._master_changed.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while self.fatal is None:
            master = self._master
            if master is None:
                await self._master_changed.wait()
                self._master_changed = trio.Event()
                continue
            addr = f"{master[0]}:{master[1]}"
            try:
                stream = await trio.open_tcp_stream(*master)
                if self.ssl_context is not None:
                    stream = await self._tls(stream, master[0])
            except OSError as exc:
                # once per outage at INFO; the retries every reconnect_delay at DEBUG
                log.log(logging.INFO if self._failing != addr else logging.DEBUG,
                        "HA: cannot connect to master %s: %s", addr, exc)
                self._failing = addr
            else:
                self._failing = None
                try:
                    async with stream:
                        await self._follow(stream, addr)
                except SlaveAheadError as exc:
                    self.fatal = exc
                    log.error("HA: %s", exc)
                    if self.on_fatal is not None:
                        self.on_fatal(exc)
                    return
                except (HAProtocolError, PutMessageError) as exc:
                    refused = (addr, self.store.max_phy_offset, str(exc))
                    if refused != self._refused:
                        log.warning("HA: closing the connection to master %s: %s (retrying every %g s; the same "
                                    "failure again is logged at DEBUG)", addr, exc, self.reconnect_delay)
                    else:
                        log.debug("HA: closing the connection to master %s again: %s", addr, exc)
                    self._refused = refused
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    log.info("HA: connection to master %s lost: %s", addr, exc)
                finally:
                    self.connected = False
                    self._partial.clear()
            with trio.move_on_after(self.reconnect_delay):
                await self._master_changed.wait()
                self._master_changed = trio.Event()

    async def _tls(self, stream: trio.SocketStream, host: str) -> trio.SSLStream:
        assert self.ssl_context is not None
        tls = trio.SSLStream(stream, self.ssl_context, server_hostname=host)
        try:
            with trio.fail_after(self.housekeeping):
                await tls.do_handshake()
        except (trio.TooSlowError, trio.BrokenResourceError) as exc:
            await trio.aclose_forcefully(stream)
            raise OSError(f"TLS handshake failed: {exc.__cause__ or exc!r}") from exc
        return tls

    async def _follow(self, stream: trio.abc.Stream, addr: str) -> None:
        store = self.store
        self._partial.clear()
        self.received = store.max_phy_offset
        self._empty = self.received == 0
        sock = direct_or_stream(stream, 256 * 1024)
        await sock.send(OFFSET.pack(self.received))
        self.connected = True
        self.connects += 1
        retry = self._refused is not None and self._refused[:2] == (addr, self.received)
        log.log(logging.DEBUG if retry else logging.INFO, "HA: following master %s from offset %d", addr, self.received)
        reported = self.received
        buf = bytearray()
        receive = sock.receive
        send_nowait = sock.send_nowait
        current_time = trio.current_time
        dispatch = store.dispatch_replicated
        last_read = last_report = current_time()
        while True:
            # one cancel scope per heartbeat interval without a report, not per read
            with trio.move_on_at(last_report + self.heartbeat):
                while True:
                    data = await receive()
                    if not data:
                        raise HAProtocolError("master closed the connection")
                    last_read = current_time()
                    unsent = b""
                    try:
                        if buf:
                            buf += data
                            self._frames(buf, memoryview(buf), addr)
                        else:  # the usual case: whole frames, parsed in the socket's buffer
                            rest = self._frames(None, data, addr)
                            if rest:
                                buf += data[len(data) - rest:]
                        if len(buf) > self.partial_limit + HEADER_SIZE:
                            raise HAProtocolError(f"frame larger than {self.partial_limit} bytes")
                        if self.received != reported:  # one report per read, as Java's per dispatch
                            reported = self.received
                            unsent = send_nowait(OFFSET.pack(reported))
                            last_report = current_time()
                    finally:
                        # the records are written and reported (the master's answers wait on
                        # it): now decoded and dispatched into the consume queues, with no
                        # checkpoint since they were written
                        dispatch()
                    if unsent:  # the socket had no room for the whole report
                        await sock.send_rest(unsent)
            now = current_time()
            if now - last_report < self.heartbeat:
                continue
            # a heartbeat interval without a report: report, and give up on a silent master
            if now - last_read >= self.housekeeping:
                raise HAProtocolError(f"master silent for {self.housekeeping:.0f} s")
            await sock.send(OFFSET.pack(self.received))
            last_report = current_time()

    def _frames(self, buf: bytearray | None, view: memoryview, addr: str) -> int:
        """Apply the whole frames at the start of ``view``; returns how many bytes are
        left (an incomplete frame). With ``buf`` (``view`` is over it), those frames
        are deleted from it."""
        pos = 0
        n = len(view)
        while n - pos >= HEADER_SIZE:
            offset, size = HEADER.unpack_from(view, pos)
            if size < 0:
                raise HAProtocolError(f"frame with negative size {size}")
            if n - pos - HEADER_SIZE < size:
                break
            body = view[pos + HEADER_SIZE : pos + HEADER_SIZE + size]
            try:
                self._frame(offset, body, addr)
            finally:
                body.release()
            pos += HEADER_SIZE + size
        if buf is not None:
            view.release()
            if pos:
                del buf[:pos]
        return n - pos

    def _frame(self, offset: int, body: memoryview, addr: str) -> None:
        received = self.received
        if self._empty and offset != received and len(body) and not self._partial:
            # an empty slave takes the master's start (the last segment's)
            received = self.received = offset
        if offset != received:
            if not len(body) and offset < received:
                raise SlaveAheadError(received, offset, addr)
            raise HAProtocolError(
                f"master pushed offset {offset}, not the slave's offset {received}"
            )
        if not len(body):
            return
        self._empty = False
        self._append(body)

    def _append(self, body: memoryview) -> None:
        """Write the whole records of ``partial + body``; keep the incomplete tail. The
        store walks the records once, checking their framing and counting the whole
        ones (:meth:`MessageStore.append_replicated` with ``partial``); ``body`` is
        copied only into the log, and into the buffer only for its incomplete tail."""
        partial = self._partial
        append = self.store.append_replicated
        received = self.received
        buffered = bool(partial)
        if buffered:
            partial += body
            data = memoryview(partial)
            base = received - (len(partial) - len(body))  # physical offset of partial[0]
        else:
            data = body
            base = received
        pos = 0
        try:
            n = len(data)
            while pos < n:  # more than once only after the blank record that ends a segment
                taken = append(base + pos, data[pos:], dispatch=False, partial=True) - (base + pos)
                if not taken:
                    break
                pos += taken
        finally:
            if buffered:
                data.release()
        if buffered:
            del partial[:pos]
        elif pos < len(body):
            partial += body[pos:]
        if len(partial) > self.partial_limit:
            raise HAProtocolError(f"an incomplete record of more than {self.partial_limit} bytes")
        self.received = received + len(body)
