"""One direction of a TCP connection, reassembled: segments in capture order in, the byte
stream out as in-order data and explicit gaps. Pure, no clock.

Contract (what Wireshark's ``tcp.analysis`` and libnids do, minus guessing):

- Offsets are stream offsets from the first data byte: the byte after the SYN when the
  SYN was captured, else the first sequence number seen (a stream whose start was not
  captured). 32-bit sequence numbers are compared relative to the next expected one, so
  wraparound is transparent and offsets grow past 4 GiB.
- In-order data is delivered at once; retransmissions and duplicates are dropped; a
  segment partly before the next expected byte is trimmed.
- Out-of-order segments are buffered (at most ``max_buffer_bytes`` / ``max_segments``);
  overlapping copies are resolved *first copy wins*, and an overlap whose bytes differ is
  reported (also against recently delivered bytes, for retransmissions).
- A hole is declared missing (a GAP event, never filled with guessed bytes) when the
  peer acknowledged bytes the capture still has not shown ``ack_grace_ns`` (100 ms) of
  capture time later (they reached the peer, not the capture: Wireshark's "ACKed unseen
  segment"), when the buffer limit is hit, or at :meth:`finish`. Bytes a snaplen cut from a segment are a hole
  too: a retransmission may fill it, else it becomes a gap.

Events are tuples, cheap to build on the per-segment path:
``(DATA, offset, bytes, ts_ns)``, ``(GAP, offset, length, ts_ns)`` and
``(CONFLICT, offset, length, ts_ns)`` (an overlap whose copies differ, the first kept:
from the first differing byte to the end of the overlap).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

from .pcap_decode import FIN, SYN, TcpSegment

__all__ = ["DATA", "GAP", "CONFLICT", "StreamReassembler", "seq_diff"]

DATA = 0
GAP = 1
CONFLICT = 2

_MOD = 1 << 32
_HALF = 1 << 31
#: delivered bytes kept to compare retransmissions with (per direction)
_RECENT_BYTES = 64 * 1024


def _first_difference(a: bytes, b: bytes) -> int:
    return next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)


def seq_diff(a: int, b: int) -> int:
    """``a - b`` in 32-bit sequence space, as a signed number (RFC 1982 arithmetic)."""
    return ((a - b + _HALF) % _MOD) - _HALF


class StreamReassembler:
    """Reassembles one direction. Feed every segment of that direction with :meth:`feed`,
    the peer's acknowledgements with :meth:`acked`, then call :meth:`finish`."""

    __slots__ = (
        "started", "syn_seen", "isn", "next_seq", "next_abs", "fin_abs", "max_ack_abs",
        "_buf", "_starts", "_buffered", "max_buffer_bytes", "max_segments", "_recent", "_recent_bytes",
        "ack_grace_ns", "_pending_ack", "_last_ack", "duplicate_bytes", "delivered_bytes",
    )

    def __init__(self, *, max_buffer_bytes: int = 4 << 20, max_segments: int = 4096, ack_grace_ns: int = 100_000_000) -> None:
        self.started = False
        self.syn_seen = False
        self.isn: int | None = None
        self.next_seq = 0  # 32-bit sequence number of next_abs
        self.next_abs = 0  # stream offset of the next byte to deliver
        self.fin_abs: int | None = None
        self.max_ack_abs = 0
        self._buf: list[tuple[int, int, bytes | None]] = []  # (start, end, data or None = lost)
        self._starts: list[int] = []
        self._buffered = 0
        self.max_buffer_bytes = max_buffer_bytes
        self.max_segments = max_segments
        self._recent: deque[tuple[int, bytes]] = deque()
        self._recent_bytes = 0
        self.ack_grace_ns = ack_grace_ns
        self._pending_ack: tuple[int, int] | None = None  # (acked offset, capture time)
        self._last_ack = -1
        #: captured bytes dropped as copies of bytes already delivered or buffered
        #: (retransmissions, overlaps): with ``delivered_bytes`` and
        #: :attr:`buffered_data_bytes`, every captured payload byte fed is accounted for
        self.duplicate_bytes = 0
        self.delivered_bytes = 0

    def release(self) -> None:
        """Forget buffered and recent bytes (the connection is over)."""
        self._buf.clear()
        self._starts.clear()
        self._buffered = 0
        self._recent.clear()
        self._recent_bytes = 0

    @property
    def buffered_bytes(self) -> int:
        return self._buffered

    @property
    def buffered_data_bytes(self) -> int:
        """Captured bytes waiting in the out-of-order buffer (holes not counted)."""
        return sum(end - start for start, end, data in self._buf if data is not None)

    def _start(self, seq: int, syn: bool) -> None:
        self.started = True
        self.syn_seen = syn
        self.isn = (seq - 1) % _MOD if syn else None
        self.next_seq = seq
        self.next_abs = 0

    def feed(self, seg: TcpSegment) -> list[tuple]:
        seq = seg.seq
        flags = seg.flags
        if flags & SYN:
            seq = (seq + 1) % _MOD
            if not self.started:
                self._start(seq, True)
            elif not self.syn_seen and self.next_abs == 0 and not self._buf:
                self._start(seq, True)  # SYN captured after an early data segment's slot
        elif not self.started:
            if not seg.length and not flags & FIN:
                return []  # a bare ACK says nothing about where the data starts
            self._start(seq, False)
        start = self.next_abs + seq_diff(seq, self.next_seq)
        if flags & FIN:
            fin = start + seg.length
            if self.fin_abs is None or fin < self.fin_abs:
                self.fin_abs = fin
        length = seg.length
        events: list[tuple] = self._check_acked(seg.timestamp_ns) if self._pending_ack is not None else []
        if not length:
            return events
        payload = seg.payload
        end = start + length
        next_abs = self.next_abs
        if end <= next_abs:
            self._compare_recent(start, payload, events, seg.timestamp_ns)
            self.duplicate_bytes += len(payload)
            return events
        if start < next_abs:
            cut = next_abs - start
            self._compare_recent(start, payload[:cut], events, seg.timestamp_ns)
            captured = len(payload)
            payload = payload[cut:]
            self.duplicate_bytes += captured - len(payload)
            start = next_abs
        if start == next_abs and not self._buf:
            # the fast path: the next bytes, nothing waiting
            if payload:
                events.append((DATA, start, payload, seg.timestamp_ns))
                self.delivered_bytes += len(payload)
                self._remember(start, payload)
            got = start + len(payload)
            if got < end:
                # the snaplen cut the segment: what it held is lost unless retransmitted
                self._insert(got, end, None, events, seg.timestamp_ns)
            self._advance(got)
            return events
        cap_end = start + len(payload)
        if payload:
            self._insert(start, cap_end, payload, events, seg.timestamp_ns)
        if cap_end < end:
            self._insert(cap_end, end, None, events, seg.timestamp_ns)
        self._drain(events, seg.timestamp_ns)
        self._enforce_limits(events, seg.timestamp_ns)
        return events

    def acked(self, ack: int, ts_ns: int) -> list[tuple]:
        """The peer acknowledged ``ack`` at ``ts_ns``. Bytes it acknowledged that the
        capture has not shown are declared lost once ``ack_grace_ns`` of capture time
        has passed with them still missing (a capture may list a packet a little after
        the acknowledgement of it: multi-queue capture)."""
        if not self.started or (ack == self._last_ack and self._pending_ack is None):
            return []
        self._last_ack = ack
        ack_abs = self.next_abs + seq_diff(ack, self.next_seq)
        if self.fin_abs is not None and ack_abs > self.fin_abs:
            ack_abs = self.fin_abs  # the FIN's own sequence number is no data
        if ack_abs > self.max_ack_abs:
            self.max_ack_abs = ack_abs
        if ack_abs > self.next_abs and self._pending_ack is None:
            self._pending_ack = (ack_abs, ts_ns)
        return self._check_acked(ts_ns) if self._pending_ack is not None else []

    def _check_acked(self, ts_ns: int) -> list[tuple]:
        pending_abs, pending_ts = self._pending_ack
        if pending_abs <= self.next_abs:
            self._pending_ack = None
            if self.max_ack_abs > self.next_abs:
                self._pending_ack = (self.max_ack_abs, ts_ns)
            return []
        if ts_ns - pending_ts < self.ack_grace_ns:
            return []
        hole_end = min(pending_abs, self._starts[0]) if self._buf else pending_abs
        events: list[tuple] = [(GAP, self.next_abs, hole_end - self.next_abs, ts_ns)]
        self._advance(hole_end)
        self._drain(events, ts_ns)
        self._pending_ack = (self.max_ack_abs, ts_ns) if self.max_ack_abs > self.next_abs else None
        return events

    def finish(self, ts_ns: int = 0) -> list[tuple]:
        """End of capture: what is buffered is delivered around the holes, as gaps."""
        events: list[tuple] = []
        while self._buf:
            first = self._starts[0]
            if first > self.next_abs:
                events.append((GAP, self.next_abs, first - self.next_abs, ts_ns))
                self._advance(first)
            self._drain(events, ts_ns)
        # bytes the peer acknowledged but the capture never saw (a lost tail)
        limit = self.max_ack_abs
        if self.fin_abs is not None and limit > self.fin_abs:
            limit = self.fin_abs
        if self.started and limit > self.next_abs:
            events.append((GAP, self.next_abs, limit - self.next_abs, ts_ns))
            self._advance(limit)
        return events

    # -- internals -----------------------------------------------------------------

    def _advance(self, new_abs: int) -> None:
        self.next_seq = (self.next_seq + new_abs - self.next_abs) % _MOD
        self.next_abs = new_abs

    def _remember(self, start: int, data: bytes) -> None:
        recent = self._recent
        recent.append((start, data))
        self._recent_bytes += len(data)
        while self._recent_bytes > _RECENT_BYTES and len(recent) > 1:
            self._recent_bytes -= len(recent.popleft()[1])

    def _compare_recent(self, start: int, data: bytes, events: list, ts: int) -> None:
        """A retransmission: report it when it differs from what was delivered."""
        end = start + len(data)
        for rstart, rdata in self._recent:
            rend = rstart + len(rdata)
            lo, hi = max(start, rstart), min(end, rend)
            if lo < hi and data[lo - start : hi - start] != rdata[lo - rstart : hi - rstart]:
                at = lo + _first_difference(data[lo - start : hi - start], rdata[lo - rstart : hi - rstart])
                events.append((CONFLICT, at, hi - at, ts))
                return

    def _insert(self, start: int, end: int, data: bytes | None, events: list, ts: int) -> None:
        """Add [start, end) to the buffer where it is not covered yet (first copy wins;
        real bytes replace a snaplen's lost marker)."""
        buf, starts = self._buf, self._starts
        if data is not None and buf:
            self._carve_lost(start, end)
        i = bisect_left(starts, start)
        if i and buf[i - 1][1] > start:
            i -= 1
        pos = start
        pieces: list[tuple[int, int, bytes | None]] = []
        while pos < end:
            if i < len(buf) and buf[i][0] <= pos:
                bstart, bend, bdata = buf[i]
                hi = min(end, bend)
                if data is not None and bdata is not None and data[pos - start : hi - start] != bdata[pos - bstart : hi - bstart]:
                    at = pos + _first_difference(data[pos - start : hi - start], bdata[pos - bstart : hi - bstart])
                    events.append((CONFLICT, at, hi - at, ts))
                if data is not None:
                    self.duplicate_bytes += hi - pos  # a copy of bytes already buffered
                pos = hi
                i += 1
                continue
            nxt = buf[i][0] if i < len(buf) else end
            hi = min(end, nxt)
            pieces.append((pos, hi, None if data is None else data[pos - start : hi - start]))
            pos = hi
        for piece in pieces:
            j = bisect_left(starts, piece[0])
            buf.insert(j, piece)
            starts.insert(j, piece[0])
            self._buffered += piece[1] - piece[0]

    def _carve_lost(self, start: int, end: int) -> None:
        buf, starts = self._buf, self._starts
        i = bisect_left(starts, start)
        if i:
            i -= 1
        while i < len(buf) and buf[i][0] < end:
            bstart, bend, bdata = buf[i]
            if bdata is not None or bend <= start:
                i += 1
                continue
            del buf[i], starts[i]
            self._buffered -= bend - bstart
            for lo, hi in ((bstart, min(bend, start)), (max(bstart, end), bend)):
                if lo < hi:
                    buf.insert(i, (lo, hi, None))
                    starts.insert(i, lo)
                    self._buffered += hi - lo
                    i += 1

    def _drain(self, events: list, ts: int) -> None:
        buf, starts = self._buf, self._starts
        while buf and starts[0] <= self.next_abs:
            start, end, data = buf.pop(0)
            starts.pop(0)
            self._buffered -= end - start
            if end <= self.next_abs:
                if data is not None:
                    self.duplicate_bytes += end - start
                continue
            if data is None:
                events.append((GAP, self.next_abs, end - self.next_abs, ts))
            else:
                chunk = data[self.next_abs - start :]
                self.duplicate_bytes += len(data) - len(chunk)
                self.delivered_bytes += len(chunk)
                events.append((DATA, self.next_abs, chunk, ts))
                self._remember(self.next_abs, chunk)
            self._advance(end)

    def _enforce_limits(self, events: list, ts: int) -> None:
        while self._buf and (self._buffered > self.max_buffer_bytes or len(self._buf) > self.max_segments):
            first = self._starts[0]
            events.append((GAP, self.next_abs, first - self.next_abs, ts))
            self._advance(first)
            self._drain(events, ts)
