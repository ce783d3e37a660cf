"""The native capture format (:mod:`trocket.codecs.capture`) read in ranges.

A native file has no sync markers, so a range must start on a record boundary. One
task per file hops from length field to length field (4 bytes looked at per record,
the file read forward in chunks of :data:`CHUNK_BYTES`, never mapped whole: a reader's
memory stays flat whatever the file's size; about a second for a million records) and cuts the file into ranges of
about ``split_bytes`` on record boundaries; the ranges are then read and decoded in
parallel, each record with :func:`trocket.codecs.capture.decode_record` and each frame
with :func:`trocket.spark.rows.frame_row`. Nothing here touches Spark: these are the
functions the executors run (and the single-process baseline, too).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from trocket.codecs.capture import (
    FILE_HEADER_SIZE,
    MAX_RECORD_LENGTH,
    MIN_RECORD_LENGTH,
    CaptureReader,
    Direction,
    Role,
    decode_record,
)
from trocket.codecs.errors import CodecError

from .problems import Problem
from .rows import endpoints, frame_row

__all__ = ["plan_native", "read_native_range", "NativeRange", "NativePlan"]

_U32 = struct.Struct(">I")
_HDRLEN = struct.Struct(">H")
_TS = struct.Struct(">Q")  # a record's timestamp, 8 bytes after its start

#: (path, capture name, start offset, end offset)
NativeRange = tuple[str, str, int, int]


class NativePlan(NamedTuple):
    ranges: list[NativeRange]
    first_ts: int | None  # of the first record
    last_ts: int | None  # of the last whole record
Report = Callable[[Problem], None]


#: bytes a reader holds at once: a range is read chunk by chunk, never mapped whole
CHUNK_BYTES = 8 << 20


class _Window:
    """A file read forward through a buffer of about :data:`CHUNK_BYTES`: the bytes at
    ``[off, off + n)`` on demand (offsets only grow), so a reader's memory stays flat
    whatever the file's size (mapping a whole 2.7 GB capture made its pages the worker's
    resident set)."""

    __slots__ = ("_f", "buf", "base", "size")

    def __init__(self, f, start: int, size: int) -> None:
        self._f = f
        f.seek(start)
        self.buf = b""
        self.base = start
        self.size = size

    def ensure(self, off: int, n: int) -> int:
        """Make ``[off, off + n)`` buffered (as far as the file goes); ``off``'s index in :attr:`buf`."""
        rel = off - self.base
        if rel + n > len(self.buf):
            keep = self.buf[rel:] if rel < len(self.buf) else b""
            self._f.seek(off + len(keep))
            self.buf = keep + self._f.read(max(CHUNK_BYTES, n - len(keep)))
            self.base = off
            rel = 0
        return rel


def plan_native(path: str, name: str, split_bytes: int, problem: Report) -> NativePlan:
    """Cut one native capture into ranges of whole records; problems go to ``problem``.
    Also the times of the first and last records (the capture's span)."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        problem(Problem("unreadable", name, f"{name}: cannot read ({exc.strerror or exc})"))
        return NativePlan([], None, None)
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            problem(Problem("not-capture", name, f"{name}: empty file (not a capture)"))
            return NativePlan([], None, None)
        w = _Window(f, 0, size)
        reader = CaptureReader()
        reader.feed(w.buf[: w.ensure(0, FILE_HEADER_SIZE) + FILE_HEADER_SIZE])
        try:
            reader.next_record()
        except CodecError as exc:
            problem(Problem("bad-file", name, f"{name}: {exc}"))
            return NativePlan([], None, None)
        if reader.buffered:  # fewer bytes than a file header
            problem(Problem("truncated-file", name, f"{name}: capture ends inside its file header"))
            return NativePlan([], None, None)
        (off,) = _HDRLEN.unpack_from(w.buf, 10)
        ranges: list[NativeRange] = []
        start = off
        cut = start + split_bytes
        unpack = _U32.unpack_from
        lo, hi, last = MIN_RECORD_LENGTH, MAX_RECORD_LENGTH, size - 4
        first_off = off
        last_good = None
        first_ts = last_ts = None
        buf, base = w.buf, w.base
        while off <= last:  # the hot loop: one unpack and two compares a record
            rel = off - base
            if rel + 16 > len(buf):  # the length and the timestamp of the record at off
                rel = w.ensure(off, 16)
                buf, base = w.buf, w.base
            length = unpack(buf, rel)[0]
            if lo <= length <= hi and off + 4 + length <= size:
                last_good = off
                if first_ts is None:
                    first_ts = _TS.unpack_from(buf, rel + 8)[0]
                off += 4 + length
                if off >= cut:
                    ranges.append((path, name, start, off))
                    start = off
                    cut = off + split_bytes
                continue
            if not lo <= length <= hi:
                problem(Problem("bad-file", name, f"{name}: impossible record length {length} at offset {off}; the rest of the file ({size - off} bytes) is skipped"))
            else:
                problem(Problem("truncated-file", name, f"{name}: capture ends inside a record at offset {off} ({off + 4 + length - size} bytes missing)"))
            break
        else:
            if off < size:
                problem(Problem("truncated-file", name, f"{name}: capture ends inside a record length at offset {off}"))
        if off > start:
            ranges.append((path, name, start, off))
        if last_good is None:
            return NativePlan(ranges, None, None)
        rel = w.ensure(last_good, 16)
        last_ts = _TS.unpack_from(w.buf, rel + 8)[0]
        return NativePlan(ranges, first_ts, last_ts)


def read_native_range(
    rng: NativeRange, problem: Report, since_ns: int | None = None, until_ns: int | None = None, account=None
) -> Iterator[tuple]:
    """The ``frames`` rows of one range (raw, unparsed records become problems).

    ``account`` (a Counter) gets the range's bytes by ``(capture, what)``: ``stream``
    (every record's frame bytes, raw ones and records that do not decode included),
    ``problem`` (raw bytes, records that do not decode) and ``filtered`` (frames outside
    ``since_ns``/``until_ns``); the rest are the frames' bytes."""
    path, name, off, end = rng
    raw_bytes: dict[str, int] = {}
    stream = bad = filtered = 0
    with open(path, "rb") as f:
        w = _Window(f, off, end)
        buf, base = w.buf, w.base
        while off < end:
            rel = off - base
            if rel + 4 > len(buf) or rel + 4 + _U32.unpack_from(buf, rel)[0] > len(buf):
                rel = w.ensure(off, 4)
                rel = w.ensure(off, 4 + _U32.unpack_from(w.buf, rel)[0])
                buf, base = w.buf, w.base
            try:
                rec, nxt = decode_record(buf, rel)
            except CodecError as exc:
                problem(Problem("bad-record", name, f"{name}: {exc}"))
                (length,) = _U32.unpack_from(buf, rel)
                off += 4 + length  # the plan checked every length: skip the record
                stream += 4 + length
                bad += 4 + length
                continue
            seq = off
            off = base + nxt
            n = len(rec.frame)
            stream += n
            ts = rec.timestamp_ns
            if (since_ns is not None and ts < since_ns) or (until_ns is not None and ts >= until_ns):
                filtered += n
                continue
            client, server, direction = endpoints(
                rec.local_address, rec.remote_address, rec.direction == Direction.SENT, rec.role == Role.CLIENT
            )
            if rec.raw:  # the capture proxy's unparsed bytes
                key = f"{client}->{server}"
                raw_bytes[key] = raw_bytes.get(key, 0) + n
                continue
            yield frame_row(name, rec.connection_id, seq, ts, client, server, direction, rec.frame)
    for conn, n in sorted(raw_bytes.items()):
        problem(Problem("raw", name, f"{conn}: {n} bytes that are not RocketMQ frames (recorded raw) in {name}"))
    if account is not None:
        account[(name, "stream")] += stream
        account[(name, "problem")] += bad + sum(raw_bytes.values())
        account[(name, "filtered")] += filtered
