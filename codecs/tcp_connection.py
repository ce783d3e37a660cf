"""TCP connections of a packet capture -> :class:`~trocket.codecs.capture.CaptureRecord`
frames and :class:`~trocket.codecs.capture.CaptureProblem` reports. Pure.

Two levels, so Spark can group by connection before reassembling:

- :class:`TcpConnection`: one connection (both directions) from *its* segments in capture
  order; a :class:`~.tcp_reassembly.StreamReassembler` and a
  :class:`~.tcp_frames.FrameSplitter` per direction.
- :class:`ConnectionTracker`: any segments, demultiplexed by :func:`connection_key`
  (the unordered address pair), a new connection when a port pair is reused (a new SYN).

The convention that makes pcap frames look like a server's tap (``trocket broker --tap``):
the **server** side is the recorder. The server is the SYN's destination (or the SYN-ACK's
source); when the handshake was not captured, a well-known RocketMQ port (9876, 10909,
10911, 10912) when only one side has one (a broker also sends requests to its clients);
else the sender of the first frame that decodes is the client if that frame is a request
and the server if it is a response; failing that, the lower port. Every record has
``role = SERVER``, ``local_address`` = the server, ``remote_address`` = the client,
``direction = RECEIVED`` for client -> server and ``SENT`` for server -> client. A record's
timestamp is the capture time of the segment that completed its frame.

Connection ids: the tracker numbers connections 1, 2, 3 ... in the order their first
segment appears in the capture (``id_factory`` overrides it, e.g. a hash of the key for
readers that see only part of a file).
"""

from __future__ import annotations

from typing import Callable, Union

import attrs

from .capture import CaptureProblem, CaptureRecord, Direction, Role
from .errors import CodecError
from .header_binary import decode_binary_header
from .header_json import decode_json_header
from .pcap_decode import ACK, RST, SYN, TcpSegment
from .tcp_frames import FRAME, FrameSplitter
from .tcp_reassembly import CONFLICT, DATA, GAP, StreamReassembler, seq_diff

__all__ = ["ConnectionKey", "connection_key", "TcpConnection", "ConnectionTracker", "Item", "WELL_KNOWN_PORTS", "ByteCounts"]

ConnectionKey = tuple[str, str]
Item = Union[CaptureRecord, CaptureProblem]

#: name server, broker VIP channel, broker, HA
WELL_KNOWN_PORTS = frozenset({9876, 10909, 10911, 10912})


@attrs.frozen(slots=True)
class ByteCounts:
    """Where a connection's captured payload bytes went: ``payload`` = ``frames`` (in
    frames) + ``duplicates`` (retransmitted or overlapping copies) + ``problems`` (lost
    with a reported problem: a frame a gap cut, skipped bytes, a partial frame, a stream
    that is not RocketMQ, segments after the connection ended) + ``buffered`` (not yet
    decided: 0 once the connection is finished)."""

    payload: int = 0
    frames: int = 0
    duplicates: int = 0
    problems: int = 0
    buffered: int = 0

    @property
    def unaccounted(self) -> int:
        return self.payload - self.frames - self.duplicates - self.problems - self.buffered

    def __add__(self, other: ByteCounts) -> ByteCounts:
        return ByteCounts(*(a + b for a, b in zip(attrs.astuple(self), attrs.astuple(other))))

    def __sub__(self, other: ByteCounts) -> ByteCounts:
        return ByteCounts(*(a - b for a, b in zip(attrs.astuple(self), attrs.astuple(other))))


def connection_key(src: str, dst: str) -> ConnectionKey:
    """The unordered endpoint pair both directions of a connection share."""
    return (src, dst) if src <= dst else (dst, src)


def _port(endpoint: str) -> int:
    return int(endpoint.rpartition(":")[2])


def _server_from_frame(key: ConnectionKey, sender: str, frame: bytes) -> str:
    """The server of a connection whose handshake was not captured, from its first frame."""
    a, b = key
    pa, pb = _port(a), _port(b)
    a_known, b_known = pa in WELL_KNOWN_PORTS, pb in WELL_KNOWN_PORTS
    if a_known != b_known:  # a broker or name server port on one side only: it is the server
        return a if a_known else b
    resp = _frame_is_response(frame)
    if resp is None:
        return a if pa <= pb else b
    other = b if sender == a else a
    return sender if resp else other


def _frame_is_response(frame: bytes) -> bool | None:
    """Whether a frame is a response (None when its header does not decode)."""
    hlen = int.from_bytes(frame[5:8], "big")
    header = frame[8 : 8 + hlen]
    try:
        cmd = decode_json_header(header) if frame[4] == 0 else decode_binary_header(header)
    except (CodecError, ValueError, TypeError, KeyError):
        return None
    return cmd.is_response


class _Half:
    __slots__ = ("src", "reasm", "splitter", "truncated")

    def __init__(self, src: str, max_buffer_bytes: int) -> None:
        self.src = src
        self.reasm = StreamReassembler(max_buffer_bytes=max_buffer_bytes)
        self.splitter: FrameSplitter | None = None
        self.truncated = 0


class TcpConnection:
    """One TCP connection: feed its segments in capture order, then :meth:`finish`."""

    __slots__ = ("connection_id", "key", "server", "client", "_halves", "_last_ts", "closed", "_rst", "_max_buffer",
                 "payload_bytes", "late_bytes")

    def __init__(self, connection_id: int, key: ConnectionKey, *, max_buffer_bytes: int = 4 << 20) -> None:
        self.connection_id = connection_id
        self.key = key
        self.server: str | None = None
        self.client: str | None = None
        self._halves: dict[str, _Half] = {}
        self._last_ts = 0
        self.closed = False
        self._rst = False
        self._max_buffer = max_buffer_bytes
        self.payload_bytes = 0  # captured payload fed
        self.late_bytes = 0  # of it, what came after the connection was finished (dropped)

    @property
    def label(self) -> str:
        if self.server is not None:
            return f"{self.client} -> {self.server}"
        return f"{self.key[0]} <-> {self.key[1]}"

    def client_isn(self) -> int | None:
        half = self._halves.get(self.client) if self.client else None
        return half.reasm.isn if half is not None else None

    def _half(self, src: str) -> _Half:
        half = self._halves.get(src)
        if half is None:
            half = self._halves[src] = _Half(src, self._max_buffer)
        return half

    def _set_server(self, server: str) -> None:
        self.server = server
        self.client = self.key[1] if server == self.key[0] else self.key[0]

    def byte_counts(self) -> ByteCounts:
        """Where the captured payload fed so far went (see :class:`ByteCounts`)."""
        dup = frames = dropped = buffered = 0
        for half in self._halves.values():
            dup += half.reasm.duplicate_bytes
            buffered += half.reasm.buffered_data_bytes
            if half.splitter is not None:
                frames += half.splitter.frame_bytes
                dropped += half.splitter.dropped_bytes
                buffered += half.splitter.buffered
        return ByteCounts(self.payload_bytes, frames, dup, dropped + self.late_bytes, buffered)

    def continues(self, seg: TcpSegment, window: int = 1 << 20) -> bool:
        """Whether ``seg`` (from another file of the same address pair) carries on this
        connection's bytes: not a SYN, not earlier than what was seen, and its sequence
        (and acknowledgement) numbers within ``window`` of where each direction stands."""
        if self.closed or seg.flags & SYN or seg.timestamp_ns < self._last_ts:
            return False
        checked = False
        half = self._halves.get(seg.src)
        if half is not None and half.reasm.started:
            if abs(seq_diff(seg.seq, half.reasm.next_seq)) > window:
                return False
            checked = True
        other = self._halves.get(seg.dst)
        if seg.flags & ACK and other is not None and other.reasm.started:
            if abs(seq_diff(seg.ack, other.reasm.next_seq)) > window:
                return False
            checked = True
        return checked

    def feed(self, seg: TcpSegment) -> list[Item]:
        out: list[Item] = []
        if self.closed:
            self.payload_bytes += len(seg.payload)
            self.late_bytes += len(seg.payload)
            return out
        self.payload_bytes += len(seg.payload)
        self._last_ts = seg.timestamp_ns
        flags = seg.flags
        if flags & SYN and self.server is None:
            self._set_server(seg.src if flags & ACK else seg.dst)
        half = self._half(seg.src)
        if seg.length and len(seg.payload) < seg.length:
            half.truncated += 1
            if half.truncated == 1:
                self._problem(out, "truncated-packet", f"segment at seq {seg.seq} cut by the snaplen ({len(seg.payload)} of {seg.length} payload bytes captured); later ones are counted at the end", half.src, None, seg.timestamp_ns)
        if flags & ACK:
            # what this side acknowledges was sent before it: a hole it acknowledged past first
            other = self._halves.get(seg.dst)
            if other is not None and other.reasm.started:
                acked = other.reasm.acked(seg.ack, seg.timestamp_ns)
                if acked:
                    self._handle(other, acked, out)
        events = half.reasm.feed(seg)
        if events:
            self._handle(half, events, out)
        if flags & RST:
            self._rst = True
            out.extend(self.finish())
        return out

    def finish(self) -> list[Item]:
        """End of the connection or of the capture: flush holes and partial frames."""
        out: list[Item] = []
        if self.closed:
            return out
        self.closed = True
        ts = self._last_ts
        for half in list(self._halves.values()):
            events = half.reasm.finish(ts) if not self._rst else _finish_without_acks(half.reasm, ts)
            if events:
                self._handle(half, events, out)
            if half.splitter is not None:
                self._splitter_out(half, half.splitter.finish(ts), out)
            if half.truncated > 1:
                self._problem(out, "truncated-packet", f"{half.truncated} segments in all were cut by the snaplen", half.src, None, ts)
            half.reasm.release()  # (the splitter stays: its byte counts; finish emptied it)
        return out

    # -- internals -----------------------------------------------------------------

    def _handle(self, half: _Half, events: list[tuple], out: list[Item]) -> None:
        splitter = half.splitter
        if splitter is None:
            splitter = half.splitter = FrameSplitter(synced=half.reasm.syn_seen)
        for ev in events:
            kind = ev[0]
            if kind == DATA:
                res = splitter.data(ev[1], ev[2], ev[3])
            elif kind == GAP:
                res = splitter.gap(ev[1], ev[2], ev[3])
            else:  # CONFLICT
                assert kind == CONFLICT
                self._problem(out, "overlap-conflict", f"a retransmitted or overlapping copy differs from the first from stream offset {ev[1]} ({ev[2]} bytes to the end of the overlap; the first copy was kept)", half.src, ev[1], ev[3])
                continue
            if res:
                self._splitter_out(half, res, out)

    def _splitter_out(self, half: _Half, res: list[tuple], out: list[Item]) -> None:
        for item in res:
            if item[0] == FRAME:
                frame = item[2]
                if self.server is None:
                    self._set_server(_server_from_frame(self.key, half.src, frame))
                if half.src == self.server:
                    direction = Direction.SENT
                else:
                    direction = Direction.RECEIVED
                out.append(CaptureRecord(item[3], self.connection_id, self.server, self.client, direction, frame, Role.SERVER))
            else:
                self._problem(out, item[2], item[3], half.src, item[1], item[4])

    def _problem(self, out: list[Item], kind: str, what: str, src: str, offset: int | None, ts: int) -> None:
        direction = None
        if self.server is not None:
            direction = Direction.SENT if src == self.server else Direction.RECEIVED
        if direction is None:
            dst = self.key[1] if src == self.key[0] else self.key[0]
            side = f"{src} -> {dst}"
        else:
            side = "client to server" if direction == Direction.RECEIVED else "server to client"
        out.append(CaptureProblem(kind, f"{side}: {what}", ts, self.connection_id, self.label, direction, offset))


def _finish_without_acks(reasm: StreamReassembler, ts: int) -> list[tuple]:
    # after a reset, acknowledgements past the last byte mean nothing more
    reasm.max_ack_abs = min(reasm.max_ack_abs, reasm.next_abs)
    return reasm.finish(ts)


class ConnectionTracker:
    """Segments of any connections in capture order -> records and problems.

    ``id_factory(key, incarnation)`` gives a connection its id (default: 1, 2, 3 ... in
    the order of first appearance). Connections are finished at a reset, when both sides
    have sent FIN and everything up to it arrived, and at :meth:`finish`.
    """

    #: closed connections remembered (to drop their late segments), oldest forgotten first
    MAX_CLOSED = 65536

    def __init__(self, *, id_factory: Callable[[ConnectionKey, int], int] | None = None, max_buffer_bytes: int = 4 << 20) -> None:
        self._conns: dict[ConnectionKey, TcpConnection] = {}
        self._closed: dict[ConnectionKey, None] = {}
        self._incarnations: dict[ConnectionKey, int] = {}
        self._id_factory = id_factory
        self._next_id = 1
        self._max_buffer = max_buffer_bytes
        self._ended = ByteCounts()  # the byte counts of connections no longer tracked
        self.late_bytes = 0  # payload of segments of finished connections (dropped)

    @property
    def connections(self) -> int:
        return self._next_id - 1 if self._id_factory is None else sum(self._incarnations.values())

    def _new(self, key: ConnectionKey) -> TcpConnection:
        n = self._incarnations.get(key, 0)
        self._incarnations[key] = n + 1
        if self._id_factory is None:
            cid = self._next_id
            self._next_id += 1
        else:
            cid = self._id_factory(key, n)
        old = self._conns.get(key)
        if old is not None:
            self._ended += old.byte_counts()
        conn = self._conns[key] = TcpConnection(cid, key, max_buffer_bytes=self._max_buffer)
        return conn

    def feed(self, seg: TcpSegment) -> list[Item]:
        src, dst = seg.src, seg.dst
        key = (src, dst) if src <= dst else (dst, src)
        conn = self._conns.get(key)
        flags = seg.flags
        out: list[Item] = []
        if conn is None:
            if key in self._closed:
                if not (flags & SYN and not flags & ACK):
                    self.late_bytes += len(seg.payload)
                    return out  # a late segment of a finished connection
                del self._closed[key]
            conn = self._new(key)
        elif flags & SYN and not flags & ACK and conn.client == src and conn.client_isn() not in (None, seg.seq):
            # a new connection on a reused port pair (a retransmitted SYN keeps its ISN)
            out.extend(conn.finish())
            conn = self._new(key)
        out.extend(conn.feed(seg))
        if not conn.closed and flags & 0x01:  # FIN: done when both sides finished
            halves = conn._halves
            if len(halves) == 2 and all(
                h.reasm.fin_abs is not None and h.reasm.next_abs >= h.reasm.fin_abs and not h.reasm.buffered_bytes for h in halves.values()
            ):
                out.extend(conn.finish())
        if conn.closed:
            self._retire(key)
        return out

    def byte_counts(self) -> ByteCounts:
        """Where the payload of every segment fed went, over all its connections."""
        total = self._ended + ByteCounts(problems=self.late_bytes, payload=self.late_bytes)
        for conn in self._conns.values():
            total += conn.byte_counts()
        return total

    def open_connection(self, key: ConnectionKey) -> TcpConnection | None:
        """The connection of ``key`` still being tracked, if any."""
        return self._conns.get(key)

    def end(self, key: ConnectionKey) -> list[Item]:
        """Finish the connection of ``key`` now and forget the key: its next segment
        starts a new connection even without a SYN (another capture's piece of traffic
        on the same address pair that does not carry on these bytes)."""
        out: list[Item] = []
        conn = self._conns.pop(key, None)
        if conn is not None:
            out.extend(conn.finish())
            self._ended += conn.byte_counts()
        self._closed.pop(key, None)
        return out

    def _retire(self, key: ConnectionKey) -> None:
        self._ended += self._conns[key].byte_counts()
        del self._conns[key]
        closed = self._closed
        closed[key] = None
        if len(closed) > self.MAX_CLOSED:
            del closed[next(iter(closed))]

    def finish(self) -> list[Item]:
        out: list[Item] = []
        for conn in self._conns.values():
            out.extend(conn.finish())
        return out
