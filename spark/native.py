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

import posixpath
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
from .storage import LOCAL, Storage, StorageError, file_size, open_input

__all__ = [
    "plan_native", "read_native_range", "NativeRange", "NativePlan", "Scan", "scan_records", "file_header_end", "record_ts",
    "file_label",
]

_U32 = struct.Struct(">I")
_HDRLEN = struct.Struct(">H")
_TS = struct.Struct(">Q")  # a record's timestamp, 8 bytes after its start

#: (path, capture name, start offset, end offset, seq base): a frame's ``seq`` is its
#: record's offset in the file plus the base (the sizes of the files before it in its
#: capture: a tap's rotated files are one capture, :mod:`trocket.spark.inputs`)
NativeRange = tuple[str, str, int, int, int]


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


class Scan(NamedTuple):
    """Where a hop over record lengths from a record boundary stopped."""

    end: int  # the end of the last whole record met (a record boundary)
    cuts: list[int]  # boundaries about ``split_bytes`` apart (the ranges' ends), ``end`` not included
    first_ts: int | None  # of the first whole record
    last_start: int | None  # offset of the last whole record
    bad_length: int | None  # an impossible record length at ``end`` (the file is garbled there)
    torn: int  # bytes at ``end`` that begin a record the file does not hold whole (0: none)


def scan_records(f, start: int, size: int, split_bytes: int | None = None, stop: int | None = None) -> Scan:
    """Hop from the record boundary ``start`` of the open capture ``f`` over the record
    lengths up to ``size`` (4 bytes looked at per record, read forward in chunks of
    :data:`CHUNK_BYTES`); ``split_bytes``: also cut about that often; ``stop``: end at
    the first boundary at or past it (``torn`` is then 0)."""
    w = _Window(f, start, size)
    cuts: list[int] = []
    cut = start + split_bytes if split_bytes else size + 1
    unpack = _U32.unpack_from
    lo, hi, last = MIN_RECORD_LENGTH, MAX_RECORD_LENGTH, size - 4
    off = start
    last_good = None
    first_ts = None
    buf, base = w.buf, w.base
    if stop is not None and stop < size:
        last = min(last, stop - 1)
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
                cuts.append(off)
                cut = off + split_bytes
            continue
        if not lo <= length <= hi:
            return Scan(off, cuts, first_ts, last_good, length, 0)
        return Scan(off, cuts, first_ts, last_good, None, size - off)
    return Scan(off, cuts, first_ts, last_good, None, 0 if stop is not None and off >= stop else size - off)


def record_ts(f, offset: int) -> int:
    """The timestamp of the record at ``offset``."""
    f.seek(offset + 8)
    return _TS.unpack(f.read(8))[0]


def file_header_end(f, name: str, problem: Report) -> int | None:
    """Where the records of the open capture ``f`` begin (its header checked), or None
    and a problem."""
    f.seek(0)
    head = f.read(FILE_HEADER_SIZE)
    reader = CaptureReader()
    reader.feed(head)
    try:
        reader.next_record()
    except CodecError as exc:
        problem(Problem("bad-file", name, f"{name}: {exc}"))
        return None
    if reader.buffered:  # fewer bytes than a file header
        problem(Problem("truncated-file", name, f"{name}: capture ends inside its file header"))
        return None
    return _HDRLEN.unpack_from(head, 10)[0]


def file_label(path: str, name: str) -> str:
    """How problems name the file ``path`` of capture ``name``: the name, or for a later
    file of a rotation set the name and the file (``tap/b.cap (b.cap.3)``)."""
    file = posixpath.basename(path)
    return name if file == posixpath.basename(name) else f"{name} ({file})"


def plan_native(path: str, name: str, split_bytes: int, problem: Report, base: int = 0, storage: Storage = LOCAL) -> NativePlan:
    """Cut one native capture file (a path or URI, reached through ``storage``) into
    ranges of whole records; problems go to ``problem``. Also the times of the first and
    last records (the file's span). ``base``: the file's seq base (see :data:`NativeRange`)."""
    label = file_label(path, name)
    try:
        f = open_input(path, storage)
    except (OSError, StorageError) as exc:
        problem(Problem("unreadable", name, f"{label}: cannot read ({getattr(exc, 'strerror', None) or exc})"))
        return NativePlan([], None, None)
    with f:
        size = file_size(f)
        if size == 0:
            problem(Problem("not-capture", name, f"{label}: empty file (not a capture)"))
            return NativePlan([], None, None)
        start = file_header_end(f, label, problem)
        if start is None:
            return NativePlan([], None, None)
        scan = scan_records(f, start, size, split_bytes)
        off = scan.end
        if scan.bad_length is not None:
            problem(Problem("bad-file", name, f"{label}: impossible record length {scan.bad_length} at offset {off}; the rest of the file ({size - off} bytes) is skipped"))
        elif scan.torn >= 4:
            (length,) = _U32.unpack(_read_at(f, off, 4))
            problem(Problem("truncated-file", name, f"{label}: capture ends inside a record at offset {off} ({off + 4 + length - size} bytes missing)"))
        elif scan.torn:
            problem(Problem("truncated-file", name, f"{label}: capture ends inside a record length at offset {off}"))
        bounds = [start, *scan.cuts]
        if off > bounds[-1]:
            bounds.append(off)
        ranges: list[NativeRange] = [(path, name, a, b, base) for a, b in zip(bounds, bounds[1:])]
        if scan.last_start is None:
            return NativePlan(ranges, None, None)
        return NativePlan(ranges, scan.first_ts, record_ts(f, scan.last_start))


def _read_at(f, offset: int, n: int) -> bytes:
    f.seek(offset)
    return f.read(n)


def read_native_range(
    rng: NativeRange, problem: Report, since_ns: int | None = None, until_ns: int | None = None, account=None, storage: Storage = LOCAL
) -> Iterator[tuple]:
    """The ``frames`` rows of one range (raw, unparsed records become problems); its
    file is reached through ``storage``.

    ``account`` (a Counter) gets the range's bytes by ``(capture, what)``: ``stream``
    (every record's frame bytes, raw ones and records that do not decode included),
    ``problem`` (raw bytes, records that do not decode) and ``filtered`` (frames outside
    ``since_ns``/``until_ns``); the rest are the frames' bytes."""
    path, name, off, end, base = rng
    raw_bytes: dict[str, int] = {}
    stream = bad = filtered = 0
    with open_input(path, storage) as f:
        w = _Window(f, off, end)
        buf, at = w.buf, w.base
        while off < end:
            rel = off - at
            if rel + 4 > len(buf) or rel + 4 + _U32.unpack_from(buf, rel)[0] > len(buf):
                rel = w.ensure(off, 4)
                rel = w.ensure(off, 4 + _U32.unpack_from(w.buf, rel)[0])
                buf, at = w.buf, w.base
            try:
                rec, nxt = decode_record(buf, rel)
            except CodecError as exc:
                problem(Problem("bad-record", name, f"{file_label(path, name)}: {exc}"))
                (length,) = _U32.unpack_from(buf, rel)
                off += 4 + length  # the plan checked every length: skip the record
                stream += 4 + length
                bad += 4 + length
                continue
            seq = base + off
            off = at + nxt
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
        problem(Problem("raw", name, f"{conn}: {n} bytes that are not RocketMQ frames (recorded raw) in {file_label(path, name)}"))
    if account is not None:
        account[(name, "stream")] += stream
        account[(name, "problem")] += bad + sum(raw_bytes.values())
        account[(name, "filtered")] += filtered
