"""The master side of replication: ``HAService.AcceptSocketService`` + ``HAConnection``.

:class:`HAServer` listens on the HA port and serves every slave that connects, as Java's
``AcceptSocketService`` does: a new connection never evicts a live slave nor blocks a
real one. A connection counts as a slave -- in ``transfer.connections``, so that
SYNC_MASTER sends wait for it -- only once its first report is plausible: 8-byte
offsets within the master's commit log, non-decreasing. A TLS or HTTP preface, junk, a
negative offset, or silence until ``haHousekeepingInterval`` close it without it ever
being waited for; ``haAllowedSlaves`` (trocket's; empty: any) limits the hosts served, and
so does ACL's ``globalWhiteRemoteAddresses`` when the broker has ACL on and the list is
set (a host in either list is served). With ``haTlsEnable`` (trocket's; Java's HA has no
TLS) the port speaks TLS only, with the broker's ``tls.server.*`` certificate.
SYNC sends wait for the slave that is ahead (Java's ``push2SlaveMaxOffset``: the most
any slave acknowledged). Per slave, one reader (``ReadSocketService``) and one writer
(``WriteSocketService``):

* the reader takes the slave's 8-byte offsets; the first says where to start (0: the
  start of the master's last segment, as Java's), each later one is an
  acknowledgement for :class:`~.transfer.GroupTransferService`;
* the writer streams 12-byte headers + commit-log bytes from there, at most
  ``haTransferBatchSize`` per frame and never across a segment, until it has sent
  everything stored; then it parks until the store appends (a message-arriving
  listener wakes it, whatever the role) or, as Java's ``allWaitForRunning(100)``, at
  most 100 ms, and sends a size-0 heartbeat every ``haSendHeartbeatInterval``.
* sends stored inline by a client connection's reader do not wake the writer: the
  reader ships them itself once it has handled its whole read
  (:func:`~trocket.remoting.call_after_read`, Netty's ``channelReadComplete``), one
  frame for all the sends of the read, when the socket takes it (the writer finishes
  what it does not). On a SYNC_MASTER the answers wait on this round trip; the writer's
  turn in trio's run loop is no longer part of it.

Both use :class:`~.direct.DirectSocket` (a syscall, no checkpoint, when the socket is
ready): on a SYNC_MASTER a send's answer waits on this round trip. An
acknowledgement completes the sends it covers right in the reader
(:meth:`~.transfer.GroupTransferService.notify_acked`).

Bad input closes that connection only, with a log line: junk that decodes as an
offset beyond the master's log (the slave is then told the master's end, see
:mod:`.protocol`), a negative offset, one before the master's first stored byte, an
acknowledgement of bytes never sent or going backwards, silence past
``haHousekeepingInterval``.
"""

from __future__ import annotations

import logging
import ssl
import threading
from typing import TYPE_CHECKING

import trio

from trocket.codecs.frame import sniff_foreign_protocol
from trocket.remoting import call_after_read
from trocket.remoting.direct import direct_or_stream
from trocket.remoting.ratelog import RateLimitedLog
from trocket.remoting.server import open_listeners

from ..store import MessageStore
from .protocol import HEADER, OFFSET, HAProtocolError
from .transfer import GroupTransferService

if TYPE_CHECKING:
    from ..acl import AclValidator

__all__ = ["HAServer", "HAConnection"]

log = logging.getLogger(__name__)

#: the longest an idle writer parks without a wake-up (Java's ``allWaitForRunning(100)``)
IDLE_WAIT = 0.1


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


class HAServer:
    def __init__(
        self,
        store: MessageStore,
        transfer: GroupTransferService,
        listen: tuple[str, int],
        *,
        batch_size: int = 32 * 1024,
        heartbeat: float = 5.0,
        housekeeping: float = 20.0,
        required: bool = True,
        allowed: tuple[str, ...] = (),
        acl: AclValidator | None = None,
        ssl_context: ssl.SSLContext | None = None,
        handshake_timeout: float = 10.0,
    ) -> None:
        self.store = store
        #: False: a listen address that cannot be bound is logged, and there is no server
        self.required = required
        self.transfer = transfer
        self.listen = listen
        self.batch_size = batch_size
        self.heartbeat = heartbeat
        self.housekeeping = housekeeping
        self.port = 0
        #: the hosts served (empty: any): trocket's ``haAllowedSlaves``
        self.allowed = frozenset(allowed)
        #: the broker's ACL: its global white list limits the hosts served when set
        self.acl = acl
        #: TLS on the HA port (``haTlsEnable``), None: plain TCP
        self.ssl_context = ssl_context
        self.handshake_timeout = handshake_timeout
        #: refusals are logged at most once a second (a flood of connections must not flood the log)
        self._refusal_log = RateLimitedLog(log, burst=1, interval=1.0, what="HA refusals")
        #: the slaves served now (connections whose first report was plausible)
        self.slaves: set[HAConnection] = set()
        #: connections refused or dropped for bad input (tests read it)
        self.rejected = 0
        #: the writers park here when they have sent everything stored
        self._idle_lot = trio.lowlevel.ParkingLot()
        #: writers parked with no wake-up on its way: the store's listener, called per
        #: message, reads this attribute (``bool(ParkingLot)`` is a Python call)
        self._writer_parked = 0
        #: a push is queued for the end of the current read (see _on_message_arriving)
        self._push_queued = False
        self._trio_thread = -1
        self._token: trio.lowlevel.TrioToken | None = None

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        host, port = self.listen
        try:
            listeners = await open_listeners(host, port)
        except OSError as exc:
            if self.required:
                raise
            log.warning("HA service not started: %s; set haListenPort (--ha-listen) for a slave to "
                        "follow this master", exc.strerror or exc)
            task_status.started(0)
            return
        self.port = listeners[0].socket.getsockname()[1]
        log.info("HA service listening on %s:%d", host, self.port)
        self._trio_thread = threading.get_ident()
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._handle, listeners)
            task_status.started(self.port)

    def _on_message_arriving(self, *_: object) -> None:
        """The store's listener, per message. A put made inline in a connection's reader
        (a send) is shipped when that reader has handled its whole read
        (:func:`~trocket.remoting.call_after_read`): one write to the slave for all the
        sends of a read, made right there, with no turn of the writer task (on a
        SYNC_MASTER the answers wait on this round trip). Any other put wakes the
        parked writer. After the first put of a read, one attribute read."""
        if self._push_queued:
            return
        if threading.get_ident() == self._trio_thread:
            if call_after_read(self._push):
                self._push_queued = True
            elif self._writer_parked:
                self._wake_writer()
        elif self._writer_parked and self._token is not None:
            try:
                self._token.run_sync_soon(self._wake_writer)
            except trio.RunFinishedError:
                pass

    def _wake_writer(self) -> None:
        self._idle_lot.unpark_all()

    def _push(self) -> None:
        """At the end of a read that stored messages: send them to every slave now."""
        self._push_queued = False
        for conn in self.slaves:
            conn.push_nowait()

    async def _idle_ticker(self) -> None:
        """The fallback wake-up of a parked writer (heartbeats; a missed listener call)."""
        while True:
            await trio.sleep(IDLE_WAIT)
            self._idle_lot.unpark_all()

    def allows(self, host: str) -> bool:
        """``host`` may be served: in ``haAllowedSlaves`` or ACL's global white list, when
        either is set (any host when neither is)."""
        if host in self.allowed:
            return True
        acl = self.acl
        if acl is not None and acl.table.global_white:
            return acl.white_listed(host)
        return not self.allowed

    async def _handle(self, stream: trio.SocketStream) -> None:
        peer = _peer(stream)
        transport: trio.abc.Stream = stream
        async with stream:
            host = peer.rpartition(":")[0].strip("[]")
            if not self.allows(host):
                self.rejected += 1
                self._refusal_log.log(logging.WARNING, "HA: refusing %s: not among haAllowedSlaves nor ACL's "
                                      "globalWhiteRemoteAddresses", peer)
                return
            if self.ssl_context is not None:
                transport = trio.SSLStream(stream, self.ssl_context, server_side=True)
                try:
                    with trio.fail_after(self.handshake_timeout):
                        await transport.do_handshake()
                except (trio.TooSlowError, trio.BrokenResourceError, OSError) as exc:
                    self.rejected += 1
                    self._refusal_log.log(logging.WARNING, "HA: TLS handshake with %s failed: %r", peer, exc)
                    return
            conn = HAConnection(self, transport, peer)
            try:
                await conn.run()
            except HAProtocolError as exc:
                self.rejected += 1
                log.warning("HA: closing %s %s: %s", "slave" if conn.joined else "connection from", peer, exc)
            except trio.TooSlowError:
                self.rejected += 1
                log.warning("HA: closing connection from %s: no offset report within %.0f s", peer, self.housekeeping)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                log.info("HA: slave %s disconnected: %s", peer, exc)

    def _joined(self, conn: HAConnection) -> None:
        """``conn``'s first report was plausible: it is a slave now, waited for."""
        if not self.slaves:
            # the writers wake on appends only while a slave follows (no cost per put otherwise)
            self.store.add_listener(self._on_message_arriving)
        self.slaves.add(conn)
        self.transfer.connections = len(self.slaves)
        self.transfer.reset_acked(max(c.ack_offset for c in self.slaves))

    def _left(self, conn: HAConnection) -> None:
        self.slaves.discard(conn)
        self.transfer.connections = len(self.slaves)
        if self.slaves:
            self.transfer.reset_acked(max(c.ack_offset for c in self.slaves))
        else:
            self.store.remove_listener(self._on_message_arriving)


class HAConnection:
    def __init__(self, server: HAServer, stream: trio.abc.Stream, peer: str) -> None:
        self.server = server
        self.store = server.store
        self.stream = stream
        self.peer = peer
        #: the slave's first report (``slaveRequestOffset``) and latest (``slaveAckOffset``)
        self.request_offset = -1
        self.ack_offset = -1
        #: next byte to send (``nextTransferFromWhere``)
        self.next = -1
        self.sent_bytes = 0
        self._rest = bytearray()
        self.sock = direct_or_stream(stream, 64 * 1024)
        #: the writer task is inside a send: a push must not write between its bytes
        self._sending = False
        #: what a push could not write at once: the writer sends it before anything else
        self._unsent: bytes | memoryview = b""
        #: trio time of the last write (the writer's heartbeat is due a heartbeat after it)
        self.last_write = 0.0
        #: its first report was plausible: it is one of the server's slaves
        self.joined = False
        #: chunks sent by a push at the end of a read, and by the writer task
        self.pushed_chunks = 0
        self.written_chunks = 0
        self._scope: trio.CancelScope | None = None

    async def run(self) -> None:
        store = self.store
        first = await self._read_first()
        end = store.max_phy_offset
        if first == 0:
            start = end - end % store.config.commit_log_segment_size
            start = max(start, store.min_phy_offset)
        elif first < store.min_phy_offset:
            raise HAProtocolError(
                f"slave reports offset {first}, before this master's first stored offset "
                f"{store.min_phy_offset} (deleted): the slave must start from an empty store"
            )
        else:
            start = first
        self.request_offset = self.ack_offset = first
        self.next = start
        log.info("HA: slave %s follows from offset %d (reported %d)", self.peer, start, first)
        error: BaseException | None = None
        self.server._joined(self)
        self.joined = True
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._writer)
                nursery.start_soon(self.server._idle_ticker)
                try:
                    await self._reader()
                except (HAProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    error = exc  # raised outside the nursery: not wrapped in an exception group
                nursery.cancel_scope.cancel()
        finally:
            self.server._left(self)
        if error is not None:
            raise error

    async def _read_first(self) -> int:
        """The slave's first report (``slaveRequestOffset``), checked before the
        connection counts as a slave: what came is 8-byte offsets (a TLS or HTTP preface
        is not), each within ``[0, end]`` (the master's commit log), non-decreasing; the
        last is the report. One offset beyond ``end`` alone is a slave ahead of this
        master: it is told the master's end (a trocket slave then stops following), and
        the connection closes."""
        buf = bytearray()
        with trio.fail_after(self.server.housekeeping):
            while len(buf) < 8:
                data = await self.sock.receive()
                if not data:
                    raise HAProtocolError("closed before reporting an offset")
                buf += data
                protocol = sniff_foreign_protocol(bytes(buf[:4]))
                if protocol is not None:
                    raise HAProtocolError(f"not a slave: it speaks {protocol}")
        end = self.store.max_phy_offset
        usable = len(buf) - len(buf) % 8
        offsets = [OFFSET.unpack_from(buf, at)[0] for at in range(0, usable, 8)]
        self._rest = buf[usable:]
        first = offsets[-1]
        if len(offsets) == 1 and first > end:
            # tell a trocket slave where the master ends (a Java slave logs a mismatch)
            with trio.move_on_after(1):
                await self.sock.send(HEADER.pack(end, 0))
            raise HAProtocolError(f"slave reports offset {first}, beyond this master's commit log end {end}")
        if any(o < 0 or o > end for o in offsets) or offsets != sorted(offsets):
            raise HAProtocolError(
                f"not a slave: its first {usable} bytes are not offsets within this master's commit log "
                f"[0, {end}] ({', '.join(map(str, offsets[:4]))}{', ...' if len(offsets) > 4 else ''})"
            )
        return first

    async def _reader(self) -> None:
        buf = bytearray(self._rest)
        transfer = self.server.transfer
        housekeeping = self.server.housekeeping
        receive = self.sock.receive
        current_time = trio.current_time
        last_read = current_time()
        while True:
            # one cancel scope per housekeeping period, not per read
            with trio.move_on_at(last_read + housekeeping):
                while True:
                    data = await receive()
                    if not data:
                        return
                    last_read = current_time()
                    if not buf and len(data) == 8:  # the usual report: one offset
                        (offset,) = OFFSET.unpack(data)
                    else:
                        buf += data
                        usable = len(buf) - len(buf) % 8
                        if not usable:
                            continue
                        (offset,) = OFFSET.unpack_from(buf, usable - 8)
                        del buf[:usable]
                    if offset < self.ack_offset or offset > self.next:
                        raise HAProtocolError(
                            f"slave acknowledges offset {offset}, outside [{self.ack_offset}, {self.next}] "
                            "(acknowledged so far, sent so far)"
                        )
                    self.ack_offset = offset
                    transfer.notify_acked(offset)
            if current_time() - last_read >= housekeeping:
                raise HAProtocolError(f"silent for {housekeeping:.0f} s")

    def _chunk(self) -> memoryview | None:
        """Up to ``batch_size`` bytes from ``next``, within one segment (None: nothing new)."""
        files = self.store.commit_log.files
        mf = files.find(self.next)
        if mf is None:
            return None
        pos = self.next - mf.file_from_offset
        n = min(mf.wrote_position - pos, self.server.batch_size)
        if n <= 0:
            return None
        return mf.view[pos : pos + n]

    def _next_frame(self) -> tuple[bytes, memoryview] | None:
        """The next frame to send, header and chunk, counted as sent (None: nothing new)."""
        chunk = self._chunk()
        if chunk is None:
            return None
        n = len(chunk)
        start = self.next
        self.next += n
        self.sent_bytes += n
        return HEADER.pack(start, n), chunk

    def push_nowait(self) -> None:
        """Send the next chunk now, from the caller's task, if the socket takes it (see
        :meth:`HAServer._on_message_arriving`); the writer task is woken for what it
        does not take and for what is left beyond the chunk."""
        if self._sending or self._unsent or self.next < 0:
            return
        frame = self._next_frame()
        if frame is None:
            return
        try:
            self._unsent = self.sock.send_nowait(*frame)
        except (trio.BrokenResourceError, OSError) as exc:
            self._write_failed(exc)
            return
        self.last_write = trio.current_time()
        self.pushed_chunks += 1
        if self._unsent or self._chunk() is not None:
            self.server._wake_writer()

    def _write_failed(self, exc: BaseException) -> None:
        """A write to the slave failed (the writer's or a push's): end this connection."""
        log.info("HA: writing to slave %s failed: %s", self.peer, exc)
        if self._scope is not None:
            self._scope.cancel()

    async def _writer(self) -> None:
        server = self.server
        heartbeat = server.heartbeat
        idle_lot = server._idle_lot
        send = self.sock.send
        send_rest = self.sock.send_rest
        current_time = trio.current_time
        pack = HEADER.pack
        self.last_write = current_time()
        try:
            while True:
                self._sending = True
                try:
                    if self._unsent:  # the rest of a push
                        unsent, self._unsent = self._unsent, b""
                        await send_rest(unsent)
                        self.last_write = current_time()
                        continue
                    frame = self._next_frame()
                    if frame is not None:
                        await send(*frame)
                        self.last_write = current_time()
                        self.written_chunks += 1
                        continue
                    if current_time() - self.last_write >= heartbeat:
                        await send(pack(self.next, 0))
                        self.last_write = current_time()
                        continue
                finally:
                    self._sending = False
                server._writer_parked += 1
                try:
                    await idle_lot.park()  # an append, or the idle ticker
                finally:
                    server._writer_parked -= 1
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._write_failed(exc)
