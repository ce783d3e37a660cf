"""A pull's scan of consume-queue entries (``DefaultMessageStore.getMessage``'s loop).

A consume queue is a run of 20-byte entries, big-endian: commit-log offset ``i64``,
record size ``i32``, tags code ``i64``. A pull reads up to 32 of them from its offset
and serves the records they point at. :func:`scan_entries` is that loop's body for the
entries whose records lie in one commit-log segment the caller names by its bounds:
it skips blank entries, entries below the next segment's start after a record was found
gone, and entries whose tags code the subscription does not list; stops when the
batch is full; and writes down each record it serves as a stretch of the segment,
stretches of records lying back to back joined into one (a pull's records usually are:
one stretch, one view, instead of one a record; each record's queue offset and size
noted in one bytearray, no int objects). At the first entry whose record is not
inside those bounds it returns, and the caller reads that entry the general way (finds
its segment, or finds it gone) and calls again.

No I/O: it reads a buffer of entries and appends to the caller's lists. Compiled in the
accelerator (``codecs/_accel.pyx``), this function is the reference.
"""

from __future__ import annotations

import struct
from collections.abc import Collection

__all__ = [
    "BLANK_ENTRY_SIZE",
    "CQ_ENTRY_SIZE",
    "NO_NEXT_FILE",
    "SCAN_ELSEWHERE",
    "SCAN_END",
    "SCAN_FULL",
    "SERVED",
    "scan_entries",
]

#: ``ConsumeQueue.CQ_STORE_UNIT_SIZE``
CQ_ENTRY_SIZE = 20
#: the size field of ``fillPreBlank``'s entry (offset 0): a hole in the queue
BLANK_ENTRY_SIZE = 0x7FFFFFFF
#: ``Long.MIN_VALUE``: no next-segment start to skip to
NO_NEXT_FILE = -(1 << 63)
#: the scan read every entry up to its limit
SCAN_END = 0
#: the batch is full (``isTheBatchFull``): the entry at the position returned is not served
SCAN_FULL = 1
#: the entry at the position returned names a record outside the segment's bounds
SCAN_ELSEWHERE = 2

_ENTRY = struct.Struct(">qiq")
#: what the scan notes of each record it serves, back to back in one bytearray: its
#: queue offset and its size (native order: read back by the same process)
SERVED = struct.Struct("=qi")


def scan_entries(
    entries: bytes | bytearray | memoryview,
    pos: int,
    limit: int,
    first_offset: int,
    seg_from: int,
    seg_end: int,
    codes: Collection[int] | None,
    max_count: int,
    max_bytes: int,
    count: int,
    total: int,
    next_file_start: int,
    spans: list[int],
    served: bytearray,
) -> tuple[int, int, int, int, int]:
    """Scan ``entries`` from byte ``pos`` while a whole entry lies below ``limit``.

    ``first_offset`` is the queue offset of the entry at byte 0; ``[seg_from,
    seg_end)`` the commit-log offsets of a segment's written bytes (empty: every
    record is elsewhere); ``codes`` the subscription's tags codes (None: every entry
    matches; a code is compared with the entry's as a Java ``int``); ``count`` and
    ``total`` the records and bytes served so far, against ``max_count`` and
    ``max_bytes`` (the batch is full only once something was served);
    ``next_file_start`` as the loop keeps it (:data:`NO_NEXT_FILE`, or the start of the
    segment after one whose record was gone: entries below it are skipped; a record
    served resets it).

    Each record served is appended: its queue offset and size to ``served``
    (:data:`SERVED`), and its bytes to ``spans`` as a ``start, end`` pair of commit-log
    offsets, or by moving the end of the pair this call appended last when the record
    starts there. Returns ``(pos, count, total, next_file_start, stop)``:
    ``stop`` is :data:`SCAN_END`, :data:`SCAN_FULL` or :data:`SCAN_ELSEWHERE` (a record
    not inside the bounds, or of a size not above 0), ``pos`` the entry it stopped at
    (for :data:`SCAN_END`, past the last entry read)."""
    unpack = _ENTRY.unpack_from
    note = SERVED.pack
    mark = len(spans)
    while pos + CQ_ENTRY_SIZE <= limit:
        phys, size, tag = unpack(entries, pos)
        if (phys == 0 and size == BLANK_ENTRY_SIZE) or (next_file_start != NO_NEXT_FILE and phys < next_file_start):
            pos += CQ_ENTRY_SIZE
            continue
        if total and (count >= max_count or total + size > max_bytes):
            return pos, count, total, next_file_start, SCAN_FULL
        if codes is not None:
            tag &= 0xFFFFFFFF  # Java's intValue()
            if (tag - (1 << 32) if tag & 0x80000000 else tag) not in codes:
                pos += CQ_ENTRY_SIZE
                continue
        if size <= 0 or phys < seg_from or phys + size > seg_end:
            return pos, count, total, next_file_start, SCAN_ELSEWHERE
        pos += CQ_ENTRY_SIZE
        if len(spans) > mark and spans[-1] == phys:
            spans[-1] = phys + size
        else:
            spans.append(phys)
            spans.append(phys + size)
        served += note(first_offset + pos // CQ_ENTRY_SIZE - 1, size)
        count += 1
        total += size
        next_file_start = NO_NEXT_FILE
    return pos, count, total, next_file_start, SCAN_END


from .accel import accelerated  # noqa: E402

scan_entries = accelerated(scan_entries)
