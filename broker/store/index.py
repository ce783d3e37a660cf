"""The index service: message keys and unique keys by topic, for QUERY_MESSAGE (RocketMQ
4.9.8's ``IndexService`` and ``IndexFile``, their file layout and limits).

An index file (``<store>/index/<yyyyMMddHHmmssSSS>``) is a hash table on disk: a 40-byte
header (begin/end store timestamps, begin/end commit-log offsets, slots used, entries),
``slot_num`` 4-byte slots (5 000 000 by default: ``maxHashSlotNum``), then up to
``index_num`` 20-byte entries (20 000 000: ``maxIndexNum``): the key's hash, the
message's commit-log offset, its store time in seconds after the file's first message,
and the previous entry of the same slot (a chain through the file, newest first). Entry
0 is never used (Java's ``invalidIndex``). A full file is followed by a new one; a file
is created sparse (``ftruncate``), so its 420 MB take disk as they fill.

A key is ``<topic>#<key>`` hashed as Java's ``String.hashCode`` (made non-negative): the
index files are Java's, byte for byte. Every message gets its ``UNIQ_KEY`` (the client's
message id) and each space-separated ``KEYS`` entry indexed; rolled-back transaction
records are not.

Building (:meth:`IndexService.build`) reads the records the dispatcher has dispatched
back from the commit log, after the last one indexed, as Java's reput thread feeds
``CommitLogDispatcherBuildIndex``: nothing happens on the send path. The per-record
work (the keys read from the properties, hashed and put) is
:func:`trocket.codecs.message.index.index_records`, compiled: in Python it cost a
third of a send's broker CPU. It runs in the store's index task
(:meth:`IndexService.run`), which looks every 10 ms while records come and, once it has
indexed everything, waits for the next record (a one-shot dispatch wake-up, registered
only while it waits, so a busy broker's puts call nothing for it; an idle broker wakes
once a second) and builds in bounded passes: on a busy broker a pass takes the
hundreds of records that came meanwhile. What was indexed is known from the last
file's header (its end commit-log offset), so a restart, after a crash too, goes on
from that record (again: a kill may have cut its keys short) and every record the
commit log kept gets indexed. A full file is flushed
when the next begins (in a worker thread, as Java's) and the last at shutdown; a killed
process loses nothing (the map's pages are the file's page cache), a power loss may
lose the last file's newest entries (as Java's, which also flushes only full files).

Each put writes a random slot of the 20 MB slot table and appends an entry; the first
write to each page of a file takes a page fault (on ext4 a page made, zeroed, its block
reserved). When :data:`PREFAULT_AFTER_ENTRIES` is set (it is not by default: measured
slower) and a file holds that many entries, the index task has a worker
thread take those faults ahead (:meth:`IndexService._prefault`): the whole slot table,
then the entries a megabyte ahead of the next, so the puts on the event loop's thread
find their pages ready. A file that stays small (a test's, an idle broker's) is left
sparse.

Queries (:meth:`IndexService.query`) walk the files newest first, the slot's chain in
each, keeping entries whose hash and store time match (a hash collision is the caller's
to filter, as Java's clients do). Retention removes every file whose last entry points
below the commit log's first byte (:meth:`IndexService.delete_expired`).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from typing import TYPE_CHECKING

import attrs
import trio

from trocket.codecs.errors import MessageDecodeError
from trocket.codecs.message.index import (
    INDEX_BLANK,
    INDEX_ENTRY_SIZE,
    INDEX_FULL,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    index_key_hash,
    index_records,
    put_index_key,
    write_index_header,
)

from .mapped_file import MappedFile

if TYPE_CHECKING:
    from .commit_log import CommitLog
    from .dispatcher import Dispatcher

__all__ = ["IndexFile", "IndexService", "index_key_hash", "HEADER_SIZE", "SLOT_SIZE", "ENTRY_SIZE"]

log = logging.getLogger(__name__)

HEADER_SIZE = INDEX_HEADER_SIZE
SLOT_SIZE = INDEX_SLOT_SIZE
ENTRY_SIZE = INDEX_ENTRY_SIZE
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
#: records indexed per pass before the task lets others run
PASS_RECORDS = 2048
#: how often the index task looks for records to index (Java's reput thread: 1 ms);
#: each look is one timer, so a busy broker's pass takes what came meanwhile
TICK_SECONDS = 0.01
#: with everything indexed, the task waits for the next record's dispatch, or this long
#: at most (the dispatcher's wake-up comes for every record, a prepared transaction's
#: too: this is only a safety net)
IDLE_WAIT_SECONDS = 1.0
#: a file's pages are populated ahead (:meth:`IndexService._prefault`) once it holds this
#: many entries; None: never (the default). Measured on a quiet machine with
#: ``broker_produce.py --part senders --keys --index --senders 16``, populating ahead made
#: the index cost x1.26 broker CPU per message against x1.04-1.05 without it, in the
#: rounds that restart on a store whose index file already holds entries.
PREFAULT_AFTER_ENTRIES: int | None = None
#: bytes of entries kept populated past the next entry (topped up when half is used)
PREFAULT_AHEAD = 1 << 20
#: bytes of the slot table populated per worker call (the index task waits for each)
PREFAULT_CHUNK = 4 << 20


def file_name(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in local time."""
    secs, millis = divmod(ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(secs)) + f"{millis:03d}"


@attrs.define(slots=True, eq=False)
class IndexFile:
    """One index file (see the module docstring); ``header`` mirrors its 40-byte header
    (begin/end store time, begin/end commit-log offset, slots used, entries + 1) and is
    written back on every put (:mod:`trocket.codecs.message.index`)."""

    mf: MappedFile
    slot_num: int
    index_num: int
    header: list[int] = attrs.field(factory=lambda: [0, 0, 0, 0, 0, 1])
    #: the file's bytes before this are populated (:meth:`IndexService._prefault`)
    populated: int = 0

    @classmethod
    def size_for(cls, slot_num: int, index_num: int) -> int:
        return HEADER_SIZE + slot_num * SLOT_SIZE + index_num * ENTRY_SIZE

    @classmethod
    def create(cls, path: str, slot_num: int, index_num: int, end_phy_offset: int = 0, end_timestamp: int = 0) -> IndexFile:
        """A new, empty file; it starts where the previous one ended (Java's constructor)."""
        mf = MappedFile.open(path, cls.size_for(slot_num, index_num), create=True, file_from_offset=0)
        f = cls(mf, slot_num, index_num, [end_timestamp, end_timestamp, end_phy_offset, end_phy_offset, 0, 1])
        write_index_header(mf.view, f.header)
        return f

    @classmethod
    def load(cls, path: str, slot_num: int, index_num: int) -> IndexFile:
        size = os.path.getsize(path)
        if size != cls.size_for(slot_num, index_num):
            raise ValueError(
                f"{path}: {size} bytes, not an index file of {slot_num} slots and {index_num} entries "
                f"({cls.size_for(slot_num, index_num)} bytes): maxHashSlotNum/maxIndexNum changed?"
            )
        mf = MappedFile.open(path, size, file_from_offset=0)
        header = list(_HEADER.unpack_from(mf.view, 0))
        header[5] = max(1, header[5])
        mf.wrote_position = size
        return cls(mf, slot_num, index_num, header)

    @property
    def path(self) -> str:
        return self.mf.path

    @property
    def begin_timestamp(self) -> int:
        return self.header[0]

    @property
    def end_timestamp(self) -> int:
        return self.header[1]

    @property
    def begin_phy_offset(self) -> int:
        return self.header[2]

    @property
    def end_phy_offset(self) -> int:
        return self.header[3]

    @property
    def hash_slot_count(self) -> int:
        return self.header[4]

    @property
    def index_count(self) -> int:
        return self.header[5]

    @property
    def full(self) -> bool:
        """``isWriteFull``."""
        return self.header[5] >= self.index_num

    def put(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``putKey``: False when the file is full."""
        return put_index_key(self.mf.view, self.slot_num, self.index_num, self.header, key_hash, phy_offset,
                             store_timestamp)

    def time_matched(self, begin: int, end: int) -> bool:
        """``isTimeMatched``: the file's time range overlaps ``[begin, end]``."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or b <= begin <= e or b <= end <= e

    def select(self, out: list[int], key_hash: int, max_num: int, begin: int, end: int) -> None:
        """``selectPhyOffset``: the commit-log offsets of the entries of ``key_hash``
        stored within ``[begin, end]``, newest first, until ``out`` holds ``max_num``."""
        count = self.header[5]
        if count <= 1:
            return
        view = self.mf.view
        (index,) = _SLOT.unpack_from(view, HEADER_SIZE + (key_hash % self.slot_num) * SLOT_SIZE)
        if index <= 0 or index > count:
            return
        base = HEADER_SIZE + self.slot_num * SLOT_SIZE
        while len(out) < max_num:
            hash_read, phy, diff, prev = _ENTRY.unpack_from(view, base + index * ENTRY_SIZE)
            if diff < 0:
                break
            stored = self.header[0] + diff * 1000
            if hash_read == key_hash and begin <= stored <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == index or stored < begin:
                break
            index = prev

    def flush(self) -> None:
        """``fdatasync`` the file (the map's pages are the file's page cache)."""
        fd = self.mf._fd
        if fd >= 0:
            try:
                os.fdatasync(fd)
            except OSError:
                if self.mf._fd >= 0:
                    raise

    def close(self) -> None:
        self.mf.close()

    def destroy(self) -> None:
        self.mf.close()
        try:
            os.unlink(self.mf.path)
        except FileNotFoundError:
            pass


@attrs.define(slots=True, eq=False)
class IndexService:
    """The index files of one store (see the module docstring)."""

    directory: str
    slot_num: int = 5_000_000
    index_num: int = 20_000_000
    files: list[IndexFile] = attrs.field(factory=list)
    #: the commit-log offset the next record to index starts at
    next_offset: int = 0
    #: keys indexed since the store opened
    keys_indexed: int = 0
    #: full files not flushed yet (the index task flushes them in a worker thread)
    _unflushed: list[IndexFile] = attrs.field(factory=list, repr=False)
    #: False once the kernel could not populate pages ahead (:meth:`_prefault`)
    _prefaulting: bool = attrs.field(default=True, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    # -- life ----------------------------------------------------------------------

    def load(self, commit_log: CommitLog) -> None:
        """Map the existing files (oldest first) and find where indexing goes on: at the
        record the last file indexed last (again: a crash may have cut its keys short;
        Java's ``buildIndex`` also redoes the record at ``endPhyOffset``), else at the
        commit log's first byte."""
        os.makedirs(self.directory, exist_ok=True)
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if name.isdigit() and os.path.isfile(path):
                self.files.append(IndexFile.load(path, self.slot_num, self.index_num))
        self.next_offset = commit_log.min_offset
        last = self.files[-1] if self.files else None
        if last is not None and last.index_count > 1:
            # past the recovered end when a power loss cut the commit log shorter
            self.next_offset = max(self.next_offset, min(last.end_phy_offset, commit_log.max_offset))

    def close(self) -> None:
        with self._lock:
            for f in self.files:
                f.close()

    def flush(self) -> None:
        for f in list(self.files):
            f.flush()
        self._unflushed.clear()

    # -- building -------------------------------------------------------------------

    def _last_file(self) -> IndexFile:
        """``getAndCreateLastIndexFile``: the last file, or a new one when it is full."""
        last = self.files[-1] if self.files else None
        if last is not None and not last.full:
            return last
        return self._next_file()

    def _next_file(self) -> IndexFile:
        """A new last file; the one before it takes no more entries and is flushed by
        the index task in a worker thread (Java's ``FlushIndexFileThread``): an
        ``fdatasync`` of 420 MB must not stall the event loop."""
        last = self.files[-1] if self.files else None
        name = file_name(int(time.time() * 1000))
        path = os.path.join(self.directory, name)
        while os.path.exists(path):  # two files within a millisecond (tiny test files)
            name = str(int(name) + 1)
            path = os.path.join(self.directory, name)
        f = IndexFile.create(path, self.slot_num, self.index_num,
                             last.end_phy_offset if last else 0, last.end_timestamp if last else 0)
        with self._lock:
            self.files.append(f)
        if last is not None:
            self._unflushed.append(last)
        log.info("index file %s created (%d slots, %d entries)", name, self.slot_num, self.index_num)
        return f

    def build(self, commit_log: CommitLog, end: int, limit: int = PASS_RECORDS) -> int:
        """Index the records from :attr:`next_offset` up to ``end`` (the dispatched end),
        at most ``limit`` of them, segment by segment; how many were read."""
        done = 0
        at = max(self.next_offset, commit_log.min_offset)
        files = commit_log.files
        while at < end and done < limit:
            mf = files.find(at)
            if mf is None:  # removed by retention meanwhile: go on from what is left
                first = files.min_offset
                if first <= at:
                    break
                at = first
                continue
            base = mf.file_from_offset
            f = self._last_file()
            pos, records, keys, status = index_records(
                mf.view, at - base, min(mf.wrote_position, end - base), f.mf.view, f.slot_num, f.index_num,
                f.header, limit - done)
            done += records
            self.keys_indexed += keys
            at = base + pos
            if status == INDEX_FULL:
                self._next_file()
            elif status == INDEX_BLANK or pos + 8 > mf.file_size:
                at = mf.file_end_offset  # the segment's end: the next one's first record
            elif records == 0:
                break  # nothing more written yet
        self.next_offset = at
        return done

    async def run(self, commit_log: CommitLog, dispatcher: Dispatcher,
                  *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Index what the dispatcher dispatched, in passes of at most
        :data:`PASS_RECORDS` every :data:`TICK_SECONDS` while records come; caught up, wait
        for the next one (:meth:`_next_dispatch`); until cancelled."""
        token = trio.lowlevel.current_trio_token()
        task_status.started()
        while True:
            if self.next_offset >= dispatcher.dispatched_offset:
                await self._next_dispatch(dispatcher, token)
                await trio.sleep(TICK_SECONDS)  # a pass takes what comes meanwhile
            if self.next_offset < dispatcher.dispatched_offset:
                try:
                    done = self.build(commit_log, dispatcher.dispatched_offset)
                except (MessageDecodeError, ValueError, IndexError) as exc:
                    log.error("index build stopped at commit-log offset %d: %s", self.next_offset, exc)
                    await trio.sleep(1)
                    continue
                while self._unflushed:
                    await trio.to_thread.run_sync(self._unflushed.pop(0).flush)
                if self._prefault_range() is not None:
                    await self._prefault()
                if done >= PASS_RECORDS:
                    await trio.lowlevel.checkpoint()  # more to do: after the others' turn
                    continue
                await trio.sleep(TICK_SECONDS)

    def _prefault_range(self) -> tuple[IndexFile, int, int] | None:
        """The last file's next range to populate (:meth:`_prefault`), or None: once it
        holds :data:`PREFAULT_AFTER_ENTRIES`, its slot table (in chunks of
        :data:`PREFAULT_CHUNK`), then :data:`PREFAULT_AHEAD` bytes past its next entry,
        topped up when half of them are used."""
        after = PREFAULT_AFTER_ENTRIES
        f = self.files[-1] if self.files and self._prefaulting and after is not None else None
        if f is None or after is None or f.index_count < after or f.full:
            return None
        entries_at = HEADER_SIZE + f.slot_num * SLOT_SIZE
        if f.populated < entries_at:
            return f, f.populated, min(entries_at, f.populated + PREFAULT_CHUNK)
        next_at = entries_at + f.index_count * ENTRY_SIZE
        if f.populated - next_at >= PREFAULT_AHEAD // 2:
            return None
        end = min(next_at + PREFAULT_AHEAD, f.mf.file_size)
        start = max(f.populated, next_at)
        return (f, start, end) if start < end else None

    async def _prefault(self) -> None:
        """Take the page faults of the last file's random slot writes and of its next
        entries in a worker thread (:meth:`MappedFile.populate`), one range a pass
        (:meth:`_prefault_range`), instead of in the index task's puts on the event
        loop's thread: populated together, a page costs half its fault (a fresh 20 MB
        slot table: ~5,000 faults, populated in 5 calls). Java's index takes them in
        its puts."""
        while (wanted := self._prefault_range()) is not None:
            f, start, end = wanted
            if not await trio.to_thread.run_sync(f.mf.populate, start, end):
                self._prefaulting = False
                log.info("index file pages are not populated ahead (madvise MADV_POPULATE_WRITE refused)")
                return
            f.populated = end

    async def _next_dispatch(self, dispatcher: Dispatcher, token: trio.lowlevel.TrioToken) -> None:
        """Until the dispatcher dispatches a record past :attr:`next_offset` (at most
        :data:`IDLE_WAIT_SECONDS`): a one-shot wake-up (:meth:`Dispatcher.wake_once`)
        that wakes this task from whichever thread put the record, registered only for
        the wait: the puts after the one that wakes it call nothing."""
        woken = trio.Event()

        def wake() -> None:
            try:
                token.run_sync_soon(woken.set)
            except trio.RunFinishedError:
                pass

        dispatcher.wake_once(wake)
        try:
            if self.next_offset >= dispatcher.dispatched_offset:  # nothing came while it registered
                with trio.move_on_after(IDLE_WAIT_SECONDS):
                    await woken.wait()
        finally:
            dispatcher.cancel_wake(wake)

    # -- queries --------------------------------------------------------------------

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """``queryOffset``: up to ``max_num`` commit-log offsets of ``key``'s messages on
        ``topic`` stored within ``[begin, end]`` (newest files first; each offset once,
        where Java's would repeat a record indexed again after a restart), and the last
        file's end time and offset (Java's ``indexLastUpdateTimestamp/Phyoffset``)."""
        key_hash = index_key_hash(f"{topic}#{key}")
        out: list[int] = []
        last_ts = last_phy = 0
        with self._lock:
            files = list(self.files)
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.time_matched(begin, end):
                try:
                    f.select(out, key_hash, max_num, begin, end)
                except ValueError:  # removed by retention meanwhile (its map released)
                    continue
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        if len(set(out)) != len(out):  # a record indexed again after a restart: once
            out = list(dict.fromkeys(out))
        return out, last_ts, last_phy

    # -- retention ------------------------------------------------------------------

    def delete_expired(self, min_phy_offset: int) -> int:
        """``deleteExpiredFile``: the files (never the last) whose entries all point
        below ``min_phy_offset``; how many were removed."""
        with self._lock:
            gone = []
            for f in self.files[:-1]:
                if f.end_phy_offset < min_phy_offset:
                    gone.append(f)
                else:
                    break
            self.files = self.files[len(gone):]
        for f in gone:
            f.destroy()
            log.info("index file %s deleted (its messages are gone)", os.path.basename(f.path))
        return len(gone)
