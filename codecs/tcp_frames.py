"""RocketMQ frames from a reassembled byte stream that may have holes: the frame splitter
of :mod:`.tcp_connection`, with resynchronisation.

Unlike :class:`~trocket.codecs.frame.FrameDecoder` (a live connection, where a bad length
ends the connection), a capture must go on after a hole or a garbled frame: the splitter
drops the frame the hole cut, then scans for the next *plausible frame header* — a length
the frame limit allows, a serialize type of 0 (JSON) or 1 (ROCKETMQ), a header length
inside the frame, and a header that decodes — and carries on from there. Bytes skipped
are reported, never passed on as a frame.

Output tuples: ``(FRAME, offset, frame_bytes, ts_ns)`` (the whole frame, length prefix
included; the timestamp of the segment that completed it) and
``(PROBLEM, offset, kind, what, ts_ns)``.
"""

from __future__ import annotations

import re
import struct

from .errors import CodecError
from .frame import DEFAULT_MAX_FRAME_LENGTH, sniff_foreign_protocol
from .header_binary import decode_binary_header
from .header_json import decode_json_header

__all__ = ["FRAME", "PROBLEM", "FrameSplitter", "plausible_frame_at"]

FRAME = 0
PROBLEM = 1

_U32 = struct.Struct(">I")
#: a header longer than this is not believed while resynchronising (RocketMQ's are tiny)
MAX_RESYNC_HEADER = 64 * 1024
#: a stream that never showed a frame within this many bytes is not RocketMQ
NOT_ROCKETMQ_AFTER = 64 * 1024
# a candidate frame start: length < 16 MiB (top byte 0), then a serialize type of 0 or 1
_CANDIDATE = re.compile(rb"(?=\x00[\x00-\xff]{3}[\x00\x01])", re.S)


def plausible_frame_at(buf: bytes | bytearray, pos: int, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> bool | None:
    """Whether a plausible frame header starts at ``pos``: True, False, or None when more
    bytes are needed to tell."""
    if len(buf) - pos < 8:
        return None
    (length,) = _U32.unpack_from(buf, pos)
    stype = buf[pos + 4]
    hlen = (buf[pos + 5] << 16) | (buf[pos + 6] << 8) | buf[pos + 7]
    if length < 4 or length > max_frame_length or stype > 1 or hlen > length - 4 or hlen > MAX_RESYNC_HEADER:
        return False
    if stype == 0 and (hlen < 2 or (len(buf) > pos + 8 and buf[pos + 8] != 0x7B)):  # "{"
        return False
    if len(buf) - pos < 8 + hlen:
        return None
    header = bytes(buf[pos + 8 : pos + 8 + hlen])
    try:
        if stype == 0:
            decode_json_header(header)
        else:
            decode_binary_header(header)
    except (CodecError, ValueError, TypeError, KeyError):
        return False
    return True


class FrameSplitter:
    """Frames out of one direction's reassembled stream.

    ``synced`` says whether the stream is known to start on a frame boundary (its SYN was
    captured); if not, the first frame is found by scanning, like after a gap.
    """

    __slots__ = ("_buf", "_off", "_synced", "_max", "_dead", "_skip_from", "_scan", "_frames", "_first", "_skip_to",
                 "fed_bytes", "frame_bytes")

    def __init__(self, *, synced: bool, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._off = 0  # stream offset of _buf[0]
        self._synced = synced
        self._max = max_frame_length
        self._dead = False  # not RocketMQ: bytes are dropped
        self._skip_from: int | None = None if synced else 0  # where skipping started
        self._scan = 0  # _buf index where the resync scan goes on
        self._frames = 0
        self._first = True
        self._skip_to: int | None = None  # the end of a frame a gap cut: its rest is dropped
        #: bytes given to :meth:`data`, and those of them that left in frames: the rest
        #: (:attr:`dropped_bytes`) were reported (lost to a gap, skipped, a partial frame,
        #: not RocketMQ) or are still buffered
        self.fed_bytes = 0
        self.frame_bytes = 0

    @property
    def frames(self) -> int:
        return self._frames

    @property
    def buffered(self) -> int:
        return len(self._buf)

    @property
    def dropped_bytes(self) -> int:
        """Bytes fed that became no frame and are no longer buffered (each drop is one of
        the problems reported: a frame lost to a gap, skipped bytes, a partial frame, a
        stream that is not RocketMQ)."""
        return self.fed_bytes - self.frame_bytes - len(self._buf)

    def data(self, offset: int, data: bytes, ts: int) -> list[tuple]:
        self.fed_bytes += len(data)
        if self._dead:
            return []
        out: list[tuple] = []
        if self._skip_to is not None:
            if offset + len(data) <= self._skip_to:
                return out
            if offset < self._skip_to:
                data = data[self._skip_to - offset :]
                offset = self._skip_to
            self._skip_to = None
        if not self._buf:
            self._off = offset
        if self._first and self._synced and offset == 0:
            self._first = False
            head = bytes(data[:4])
            protocol = "HTTP/1.x (a response line)" if head == b"HTTP" else sniff_foreign_protocol(head)
            if protocol is not None:
                self._dead = True
                out.append((PROBLEM, offset, "not-rocketmq", f"the stream speaks {protocol}, not RocketMQ remoting", ts))
                return out
        if not self._buf and self._synced:
            # the common case: the segment starts on a frame boundary; whole frames are
            # sliced straight out of it, only a trailing part is buffered
            pos = self._whole_frames(data, offset, out, ts)
            if pos == len(data):
                return out
            data = data[pos:]
            self._off = offset + pos
        self._buf += data
        self._split(out, ts)
        return out

    def _whole_frames(self, data: bytes, offset: int, out: list, ts: int) -> int:
        pos = 0
        n = len(data)
        maxlen = self._max
        while n - pos >= 8:
            (length,) = _U32.unpack_from(data, pos)
            end = pos + 4 + length
            if end > n or length < 4 or length > maxlen or data[pos + 4] > 1:
                break  # incomplete, or implausible: the buffered path handles (and reports) it
            if ((data[pos + 5] << 16) | (data[pos + 6] << 8) | data[pos + 7]) > length - 4:
                break
            out.append((FRAME, offset + pos, data[pos:end] if pos or end != n else data, ts))
            self._frames += 1
            self.frame_bytes += end - pos
            pos = end
        return pos

    def gap(self, offset: int, length: int, ts: int) -> list[tuple]:
        """``length`` bytes at ``offset`` are missing. The frame they cut is lost; when
        its header was captured the next frame is known to start right after it (and is
        checked there), else the next plausible header is searched for."""
        if self._dead:
            return []
        out: list[tuple] = []
        end = offset + length
        if self._skip_to is not None:
            out.append((PROBLEM, offset, "gap", f"{length} bytes missing at stream offset {offset} (in a frame already lost)", ts))
            if end < self._skip_to:
                return out
            self._skip_to = None
            self._skip_from = end
            self._off = end
            return out
        lost = len(self._buf)
        next_frame = None
        if self._synced and lost >= 4:
            (flen,) = _U32.unpack_from(self._buf, 0)
            next_frame = self._off + 4 + flen
        if self._synced and lost:
            what = f"{length} bytes missing at stream offset {offset}: the frame at offset {self._off} is lost"
        elif self._synced:
            what = f"{length} bytes missing at stream offset {offset}"
        else:
            what = f"{length} bytes missing at stream offset {offset} (while resynchronising)"
            self._flush_skip(out, offset, ts)
        out.append((PROBLEM, offset, "gap", what, ts))
        self._buf.clear()
        self._synced = False
        self._scan = 0
        if next_frame is not None and next_frame >= end:
            self._skip_to = next_frame  # the lost frame's rest: dropped without a report
            self._skip_from = next_frame
            self._off = next_frame
        else:
            self._skip_from = end
            self._off = end
        return out

    def finish(self, ts: int = 0) -> list[tuple]:
        out: list[tuple] = []
        if self._dead:
            return out
        if self._synced and self._buf:
            out.append((PROBLEM, self._off, "partial-frame", f"the stream ends inside a frame at offset {self._off} ({len(self._buf)} bytes of it captured)", ts))
        elif not self._synced and self._buf:
            end = self._off + len(self._buf)
            if self._frames == 0 and self._skip_from == 0:
                self._not_rocketmq(out, end, ts)
            else:
                self._flush_skip(out, end, ts)
        self._buf.clear()
        return out

    # -- internals -----------------------------------------------------------------

    def _flush_skip(self, out: list, end: int, ts: int) -> None:
        start = self._skip_from
        if start is not None and end > start:
            out.append((PROBLEM, start, "resync", f"{end - start} bytes skipped at stream offset {start} (no plausible frame header)", ts))
        self._skip_from = None

    def _not_rocketmq(self, out: list, end: int, ts: int) -> None:
        self._dead = True
        self._buf.clear()
        self._skip_from = None
        out.append((PROBLEM, 0, "not-rocketmq", f"no RocketMQ frame header in the first {end} bytes of the stream: not RocketMQ traffic", ts))

    def _split(self, out: list, ts: int) -> None:
        buf = self._buf
        pos = 0
        maxlen = self._max
        while True:
            if not self._synced:
                if pos:
                    self._drop_before(pos)
                    pos = 0
                found = self._resync(out, ts)
                if found is None:
                    break
                pos = found
            if len(buf) - pos < 8:
                break
            (length,) = _U32.unpack_from(buf, pos)
            stype = buf[pos + 4]
            if length < 4 or length > maxlen or stype > 1 or ((buf[pos + 5] << 16) | (buf[pos + 6] << 8) | buf[pos + 7]) > length - 4:
                at = self._off + pos
                if at or self._frames:  # at the very start: reported as not RocketMQ or a skip
                    out.append((PROBLEM, at, "bad-frame", f"implausible frame header at stream offset {at} (length {length}, type {stype}); resynchronising", ts))
                self._synced = False
                self._skip_from = at
                self._scan = pos + 1
                continue
            end = pos + 4 + length
            if end > len(buf):
                break
            out.append((FRAME, self._off + pos, bytes(buf[pos:end]), ts))
            self._frames += 1
            self.frame_bytes += end - pos
            pos = end
        if pos:
            self._drop_before(pos)
        if self._dead:
            buf.clear()

    def _resync(self, out: list, ts: int) -> int | None:
        """The buffer index of the next plausible frame header at or after the scan point,
        or None (bytes before an undecided candidate are kept, the rest dropped)."""
        buf = self._buf
        search = _CANDIDATE.search
        scan = self._scan
        while True:
            # (a match object pins the bytearray's size: keep none alive while resizing)
            m = search(buf, scan)
            if m is None:
                break
            cand = m.start()
            del m
            scan = cand + 1
            verdict = plausible_frame_at(buf, cand, self._max)
            if verdict is None:
                self._drop_before(cand)
                return None
            if verdict:
                self._flush_skip(out, self._off + cand, ts)
                self._synced = True
                self._scan = 0
                return cand
        # nothing here: keep the last 7 bytes (a candidate may start in them)
        self._drop_before(max(0, len(buf) - 7))
        self._scan = 0
        skipped_from = self._skip_from
        if self._frames == 0 and skipped_from == 0 and self._off >= NOT_ROCKETMQ_AFTER:
            self._not_rocketmq(out, self._off, ts)
        return None

    def _drop_before(self, index: int) -> None:
        """Forget the buffer's bytes before ``index`` (consumed or skipped)."""
        if index > 0:
            del self._buf[:index]
            self._off += index
            self._scan = max(0, self._scan - index)
