"""The native capture format (:mod:`trocket.codecs.capture`) read in ranges.

A native file has no sync markers, so a range must start on a record boundary. One
task per file hops from length field to length field (4 bytes read per record, through
``mmap``; well under a second for a million records) and cuts the file into ranges of
about ``split_bytes`` on record boundaries; the ranges are then read and decoded in
parallel, each record with :func:`trocket.codecs.capture.decode_record` and each frame
with :func:`trocket.spark.rows.frame_row`. Nothing here touches Spark: these are the
functions the executors run (and the single-process baseline, too).
"""

from __future__ import annotations

import mmap
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


def _open_map(path: str) -> mmap.mmap | None:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def plan_native(path: str, name: str, split_bytes: int, problem: Report) -> NativePlan:
    """Cut one native capture into ranges of whole records; problems go to ``problem``.
    Also the times of the first and last records (the capture's span)."""
    try:
        mm = _open_map(path)
    except OSError as exc:
        problem(Problem("unreadable", name, f"{name}: cannot read ({exc.strerror or exc})"))
        return NativePlan([], None, None)
    if mm is None:
        problem(Problem("not-capture", name, f"{name}: empty file (not a capture)"))
        return NativePlan([], None, None)
    with mm:
        size = len(mm)
        reader = CaptureReader()
        reader.feed(mm[:FILE_HEADER_SIZE])
        try:
            reader.next_record()
        except CodecError as exc:
            problem(Problem("bad-file", name, f"{name}: {exc}"))
            return NativePlan([], None, None)
        if reader.buffered:  # fewer bytes than a file header
            problem(Problem("truncated-file", name, f"{name}: capture ends inside its file header"))
            return NativePlan([], None, None)
        (off,) = _HDRLEN.unpack_from(mm, 10)
        ranges: list[NativeRange] = []
        start = off
        cut = start + split_bytes
        unpack = _U32.unpack_from
        lo, hi, last = MIN_RECORD_LENGTH, MAX_RECORD_LENGTH, size - 4
        first_off = off
        last_good = None
        while off <= last:  # the hot loop: one unpack and two compares a record
            length = unpack(mm, off)[0]
            if lo <= length <= hi and off + 4 + length <= size:
                last_good = off
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
        return NativePlan(ranges, _TS.unpack_from(mm, first_off + 8)[0], _TS.unpack_from(mm, last_good + 8)[0])


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
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        while off < end:
            try:
                rec, nxt = decode_record(mm, off)
            except CodecError as exc:
                problem(Problem("bad-record", name, f"{name}: {exc}"))
                (length,) = _U32.unpack_from(mm, off)
                off += 4 + length  # the plan checked every length: skip the record
                stream += 4 + length
                bad += 4 + length
                continue
            seq = off
            off = nxt
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
