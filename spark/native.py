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

from .rows import endpoints, frame_row

__all__ = ["plan_native", "read_native_range", "NativeRange"]

_U32 = struct.Struct(">I")
_HDRLEN = struct.Struct(">H")

#: (path, capture name, start offset, end offset)
NativeRange = tuple[str, str, int, int]
Problem = Callable[[str], None]


def _open_map(path: str) -> mmap.mmap | None:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def plan_native(path: str, name: str, split_bytes: int, problem: Problem) -> list[NativeRange]:
    """Cut one native capture into ranges of whole records; problems go to ``problem``."""
    try:
        mm = _open_map(path)
    except OSError as exc:
        problem(f"{name}: cannot read ({exc.strerror or exc})")
        return []
    if mm is None:
        problem(f"{name}: empty capture (no records)")
        return []
    with mm:
        size = len(mm)
        reader = CaptureReader()
        reader.feed(mm[:FILE_HEADER_SIZE])
        try:
            reader.next_record()
        except CodecError as exc:
            problem(f"{name}: {exc}")
            return []
        if reader.buffered:  # fewer bytes than a file header
            problem(f"{name}: capture ends inside its file header")
            return []
        (off,) = _HDRLEN.unpack_from(mm, 10)
        ranges: list[NativeRange] = []
        start = off
        cut = start + split_bytes
        unpack = _U32.unpack_from
        lo, hi, last = MIN_RECORD_LENGTH, MAX_RECORD_LENGTH, size - 4
        while off <= last:  # the hot loop: one unpack and two compares a record
            length = unpack(mm, off)[0]
            if lo <= length <= hi and off + 4 + length <= size:
                off += 4 + length
                if off >= cut:
                    ranges.append((path, name, start, off))
                    start = off
                    cut = off + split_bytes
                continue
            if not lo <= length <= hi:
                problem(f"{name}: impossible record length {length} at offset {off}; the rest of the file is skipped")
            else:
                problem(f"{name}: capture ends inside a record at offset {off} ({off + 4 + length - size} bytes missing)")
            break
        else:
            if off < size:
                problem(f"{name}: capture ends inside a record length at offset {off}")
        if off > start:
            ranges.append((path, name, start, off))
        if not ranges:
            problem(f"{name}: empty capture (no records)")
        return ranges


def read_native_range(
    rng: NativeRange, problem: Problem, since_ns: int | None = None, until_ns: int | None = None
) -> Iterator[tuple]:
    """The ``frames`` rows of one range (raw, unparsed records become problems)."""
    path, name, off, end = rng
    raw_bytes: dict[str, int] = {}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        while off < end:
            try:
                rec, nxt = decode_record(mm, off)
            except CodecError as exc:
                problem(f"{name}: {exc}")
                (length,) = _U32.unpack_from(mm, off)
                off += 4 + length  # the plan checked every length: skip the record
                continue
            seq = off
            off = nxt
            ts = rec.timestamp_ns
            if (since_ns is not None and ts < since_ns) or (until_ns is not None and ts >= until_ns):
                continue
            client, server, direction = endpoints(
                rec.local_address, rec.remote_address, rec.direction == Direction.SENT, rec.role == Role.CLIENT
            )
            if rec.raw:  # the capture proxy's unparsed bytes
                key = f"{client}->{server}"
                raw_bytes[key] = raw_bytes.get(key, 0) + len(rec.frame)
                continue
            yield frame_row(name, seq, ts, client, server, direction, rec.frame)
    for conn, n in sorted(raw_bytes.items()):
        problem(f"{conn}: {n} bytes that are not RocketMQ frames (recorded raw)")
