"""ConsumeQueue: the per topic/queue index of the commit log (RocketMQ's ``ConsumeQueue``).

Fixed 20-byte entries, big-endian: commit-log offset ``i64``, record size ``i32``, tag
hash ``i64``. Entry *n* (the message's queue offset) lives at byte ``n * 20`` of the
queue's logical space, cut into files of ``entries_per_file`` entries under
``consumequeue/<topic>/<queueId>/``, each named by its first byte's logical offset.

Entries are appended by the dispatcher only (one writer at a time, under its lock);
readers in other threads only read below the write position.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator

import attrs

from .mapped_file_queue import MappedFileQueue

__all__ = ["BLANK_ENTRY", "CQ_STORE_UNIT_SIZE", "ConsumeQueue", "iter_entries"]

#: ``ConsumeQueue.CQ_STORE_UNIT_SIZE``.
CQ_STORE_UNIT_SIZE = 20
_ENTRY = struct.Struct(">qiq")
#: ``fillPreBlank``'s entry (offset 0, size ``Integer.MAX_VALUE``): a hole in the queue.
BLANK_ENTRY = (0, 0x7FFFFFFF, 0)
_BLANK_BYTES = _ENTRY.pack(*BLANK_ENTRY)


def iter_entries(view: memoryview) -> Iterator[tuple[int, int, int]]:
    """``(commit-log offset, size, tag hash)`` of every whole entry in ``view``."""
    usable = len(view) - len(view) % CQ_STORE_UNIT_SIZE
    return _ENTRY.iter_unpack(view[:usable])


def _is_blank(offset: int, size: int) -> bool:
    return offset == 0 and size == BLANK_ENTRY[1]


@attrs.define(slots=True, eq=False)
class ConsumeQueue:
    """One queue of one topic."""

    topic: str
    queue_id: int
    entries_per_file: int
    _files: MappedFileQueue
    #: First valid byte of the logical space (``minLogicOffset``); entries below were
    #: deleted with their commit-log segment.
    min_logic_offset: int = 0
    #: End (offset + size) of the last entry's record (Java ``maxPhysicOffset``); -1 when empty.
    max_physic_offset: int = -1
    #: Unmapped (its topic was deleted, or the store closed): readers of another
    #: thread that held it may find its files gone.
    closed: bool = False

    @classmethod
    def open(
        cls, root: str, topic: str, queue_id: int, entries_per_file: int, *, preallocate: bool = False
    ) -> ConsumeQueue:
        """Map the queue's existing files (none is created until the first entry)."""
        directory = os.path.join(root, topic, str(queue_id))
        files = MappedFileQueue(directory, entries_per_file * CQ_STORE_UNIT_SIZE, preallocate)
        files.load()
        return cls(topic, queue_id, entries_per_file, files)

    @property
    def files(self) -> MappedFileQueue:
        return self._files

    @property
    def file_size(self) -> int:
        return self.entries_per_file * CQ_STORE_UNIT_SIZE

    # -- offsets ---------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """``getMinOffsetInQueue``: the first queue offset still served."""
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """``getMaxOffsetInQueue``: one past the last entry (the next queue offset)."""
        return self._files.max_offset // CQ_STORE_UNIT_SIZE

    def get(self, index: int) -> tuple[int, int, int] | None:
        """The entry at queue offset ``index``, or None if not stored."""
        pos = index * CQ_STORE_UNIT_SIZE
        if index < 0 or pos < self.min_logic_offset or pos >= self._files.max_offset:
            return None
        mf = self._files.find(pos)
        if mf is None:
            return None
        return _ENTRY.unpack_from(mf.view, pos - mf.file_from_offset)

    def entries_from(self, index: int) -> memoryview | None:
        """``getIndexBuffer``: raw entries from ``index`` to the end of its file's data."""
        pos = index * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self._files.find(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel >= mf.wrote_position:
            return None
        return mf.select(rel)

    def roll_next_file(self, index: int) -> int:
        """``rollNextFile``: the first queue offset of the file after ``index``'s."""
        return index + self.entries_per_file - index % self.entries_per_file

    def sizes_between(self, start: int, end: int) -> tuple[int, int]:
        """(entries, record bytes they index) from queue offset ``start`` to ``end``
        (blank entries and files already deleted left out): what a statistics pass
        reads, so that a put counts nothing itself. Record sizes stay below 2**24, so
        an entry whose size's top byte is set is a blank; the four size bytes are
        summed column by column (slices with a stride), no tuple per entry."""
        start = max(start, self.min_offset)
        count = total = 0
        while start < end:
            view = self.entries_from(start)
            if view is None:
                start = self.roll_next_file(start)
                continue
            n = min(len(view) // CQ_STORE_UNIT_SIZE, end - start)
            if n <= 0:
                break
            data = bytes(view[: n * CQ_STORE_UNIT_SIZE])
            view.release()
            high = data[8::CQ_STORE_UNIT_SIZE]
            blanks = n - high.count(0)
            total += (
                (sum(high) << 24) + (sum(data[9::CQ_STORE_UNIT_SIZE]) << 16)
                + (sum(data[10::CQ_STORE_UNIT_SIZE]) << 8) + sum(data[11::CQ_STORE_UNIT_SIZE])
                - blanks * BLANK_ENTRY[1]
            )
            count += n - blanks
            start += n
        return count, total

    def last_entry(self) -> tuple[int, int, int] | None:
        return self.get(self.max_offset - 1) if self.max_offset > self.min_offset else None

    # -- writing ---------------------------------------------------------------------

    def put(self, offset: int, size: int, tag_hash: int, queue_offset: int) -> bool:
        """``putMessagePositionInfo``: append the entry for queue offset ``queue_offset``.

        An entry already present (rebuilding after a restart) is skipped. A queue whose
        first entry is not offset 0 (its files were lost or deleted) starts at that
        offset's file with blank entries before it, as ``fillPreBlank``; a gap inside
        a queue is filled with blank entries too, so entry *n* stays at byte ``20 n``.
        """
        if offset + size <= self.max_physic_offset:
            return True  # already built
        expect = queue_offset * CQ_STORE_UNIT_SIZE
        files = self._files
        segments = files._files  # (files.last without the property call, on every put)
        mf = segments[-1] if segments else None
        if mf is not None:
            # the common case: the entry right after the last one, in the last file
            pos = mf.wrote_position
            if mf.file_from_offset + pos == expect and pos + CQ_STORE_UNIT_SIZE <= mf.file_size and mf._view is not None:
                _ENTRY.pack_into(mf._view, pos, offset, size, tag_hash)
                mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
                self.max_physic_offset = offset + size
                return True
        if mf is None:
            mf = files.create_next(expect)
            if expect != mf.file_from_offset:
                self.min_logic_offset = expect
            else:
                self.min_logic_offset = mf.file_from_offset
        current = files.max_offset
        if expect < current:
            return True  # queue offset already holds an entry
        while current < expect:
            mf = files.last_for_write()
            mf.append(_BLANK_BYTES)
            current += CQ_STORE_UNIT_SIZE
        mf = files.last_for_write()
        mf.append(_ENTRY.pack(offset, size, tag_hash))
        self.max_physic_offset = offset + size
        return True

    def flush(self) -> int:
        return self._files.flush()

    def dirty(self) -> bool:
        return self._files.dirty()

    # -- recovery --------------------------------------------------------------------

    def recover(self) -> None:
        """Find the end of the entries (``recover``): the first entry that is not
        ``offset >= 0 and size > 0`` ends the queue. Earlier files are full by
        construction; the last one is scanned."""
        files = self._files
        last = files.last
        if last is None:
            return
        end = 0
        for i, (offset, size, _tag) in enumerate(iter_entries(last.read_raw(0, last.file_size))):
            if offset < 0 or size <= 0:
                break
            end = (i + 1) * CQ_STORE_UNIT_SIZE
        # Set the position then truncate to it, which zeroes any torn remains.
        files.truncate_dirty(last.file_from_offset + end)
        self._refresh_max_physic()

    def _refresh_max_physic(self) -> None:
        self.max_physic_offset = -1
        index = self.max_offset - 1
        while index >= self.min_offset:
            entry = self.get(index)
            if entry is None:
                break
            if not _is_blank(entry[0], entry[1]):
                self.max_physic_offset = entry[0] + entry[1]
                break
            index -= 1

    def truncate_dirty(self, phy_end: int) -> None:
        """Drop entries whose record does not lie wholly below ``phy_end``
        (``truncateDirtyLogicFiles``)."""
        self.truncate_while(lambda offset, size, index: offset + size > phy_end)

    def truncate_while(self, bad: Callable[[int, int, int], bool]) -> int:
        """Drop entries from the tail while ``bad(offset, size, queue_offset)``; returns
        how many went. Blank entries at the tail go with them."""
        dropped = 0
        index = self.max_offset - 1
        while index >= self.min_offset:
            entry = self.get(index)
            if entry is None:
                break
            offset, size, _tag = entry
            if not _is_blank(offset, size) and not bad(offset, size, index):
                break
            index -= 1
            dropped += 1
        if dropped:
            self._files.truncate_dirty((index + 1) * CQ_STORE_UNIT_SIZE)
            if self._files.last is None or self.max_offset <= self.min_offset:
                self.min_logic_offset = min(self.min_logic_offset, self._files.max_offset)
        self._refresh_max_physic()
        return dropped

    # -- retention -------------------------------------------------------------------

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """``correctMinOffset``: the first entry pointing at or above the commit log's
        first byte becomes the queue's minimum."""
        first = self._files.first
        if first is None:
            return
        start = max(self.min_logic_offset, first.file_from_offset)
        limit = self._files.max_offset
        for pos in range(start, limit, CQ_STORE_UNIT_SIZE):
            mf = self._files.find(pos)
            if mf is None:
                break
            offset, size, _tag = _ENTRY.unpack_from(mf.view, pos - mf.file_from_offset)
            if offset >= phy_min_offset and not _is_blank(offset, size):
                self.min_logic_offset = pos
                return
        self.min_logic_offset = limit

    def delete_expired(self, phy_min_offset: int) -> int:
        """``deleteExpiredFile``: delete files (never the last) whose entries all point
        below ``phy_min_offset``; returns how many."""
        count = 0
        files = self._files.files
        for mf in files[:-1]:
            last_pos = mf.file_size - CQ_STORE_UNIT_SIZE
            offset, size, _tag = _ENTRY.unpack_from(mf.view, last_pos)
            if offset + size <= phy_min_offset or _is_blank(offset, size):
                count += 1
            else:
                break
        if count:
            self._files.delete_first(count)
        self.correct_min_offset(phy_min_offset)
        return count

    # -- lookup by time --------------------------------------------------------------

    def offset_by_time(self, timestamp: int, store_time: Callable[[int, int], int], phy_min: int) -> int:
        """``getOffsetInQueueByTime``: binary search of one file by store timestamp.

        The file searched is the first whose last entry was stored at or after
        ``timestamp`` (Java picks it by file modification time), else the last one.
        Inside it: an exact match wins; otherwise the nearer in time of the two
        neighbours (the earlier one on a tie), as Java 4.9.8.
        """
        files = self._files.files
        if not files:
            return 0
        chosen = files[-1]
        for mf in files:
            count = mf.wrote_position // CQ_STORE_UNIT_SIZE
            if count == 0:
                continue
            offset, size, _ = _ENTRY.unpack_from(mf.view, (count - 1) * CQ_STORE_UNIT_SIZE)
            if not _is_blank(offset, size) and store_time(offset, size) >= timestamp:
                chosen = mf
                break
        view = chosen.view
        low = max(0, self.min_logic_offset - chosen.file_from_offset)
        high = chosen.wrote_position - CQ_STORE_UNIT_SIZE
        target = left = right = -1
        left_value = right_value = -1
        while high >= low:
            mid = (low + high) // (2 * CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
            offset, size, _ = _ENTRY.unpack_from(view, mid)
            if offset < phy_min or _is_blank(offset, size):
                low = mid + CQ_STORE_UNIT_SIZE
                left = mid
                continue
            stored = store_time(offset, size)
            if stored < 0:
                return 0
            if stored == timestamp:
                target = mid
                break
            if stored > timestamp:
                high = mid - CQ_STORE_UNIT_SIZE
                right, right_value = mid, stored
            else:
                low = mid + CQ_STORE_UNIT_SIZE
                left, left_value = mid, stored
        if target != -1:
            pos = target
        elif left_value == -1:
            pos = right
        elif right_value == -1:
            pos = left
        else:
            pos = right if abs(timestamp - left_value) > abs(timestamp - right_value) else left
        if pos < 0:
            return 0
        return (chosen.file_from_offset + pos) // CQ_STORE_UNIT_SIZE

    def close(self) -> None:
        self.closed = True
        self._files.close()

    def delete(self) -> None:
        self.closed = True
        self._files.delete_all()
