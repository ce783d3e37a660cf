"""MessageStore: the facade the broker uses (``DefaultMessageStore``).

Typical life::

    store = MessageStore.open(StoreConfig(store_dir=..., store_host=("10.0.0.5", 10911)))
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)          # flushers, checkpoint, next segment
        result = await store.async_put_message(MessageInner(topic="T", body=b"..."))
        got = store.get_message("G", "T", 0, 0, 32)
        ...
    store.shutdown()

``put_message``/``put_messages``/``get_message`` are plain functions, safe from trio
tasks and from worker threads (a put holds the append lock for microseconds); the
``async_`` variants add the SYNC_FLUSH wait. ``run`` also keeps the next commit-log
segment made ahead (:mod:`.allocate`), so a put that rolls the log over does not create
a file; without ``run`` (or with ``allocate_ahead`` off) puts create segments themselves.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

import attrs
import trio

from trocket.codecs.errors import MessageDecodeError
from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.message import MessageExt
from trocket.codecs.message.properties import PROPERTY_WAIT_STORE_MSG_OK
from trocket.codecs.message.record import decode_record
from trocket.codecs.names import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC

from .allocate import AllocateService
from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .config import FlushMode, StoreConfig
from .consume_queue import BLANK_ENTRY, CQ_STORE_UNIT_SIZE, ConsumeQueue
from .dispatcher import Dispatcher, MessageArrivingListener
from .errors import PutMessageError, StoreError, StoreLoadError
from .flush import FlushService
from .index import IndexService
from .messages import BatchInner, MessageInner, message_inner
from .queue_table import ConsumeQueueTable, DetachedTopic
from .recovery import RecoveryReport, recover
from .results import GetResult, GetStatus, PutResult, PutStatus
from .retention import RetentionResult, delete_expired

__all__ = ["MessageStore", "SlaveModeError", "StoreClosedError"]

_MIN = -(1 << 63)
#: ``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``
_TOTAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
_ENTRY = __import__("struct").Struct(">qiq")
#: ``MAX_MANUAL_DELETE_FILE_TIMES``: the retention passes one DELETE_EXPIRED_COMMITLOG makes manual
MANUAL_DELETE_PASSES = 20
#: Topics ``cleanUnusedTopic`` never removes.
_NEVER_CLEANED = frozenset({RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC})


class StoreClosedError(PutMessageError):
    """The store has been shut down (Java: SERVICE_NOT_AVAILABLE)."""

    status = PutStatus.SERVICE_NOT_AVAILABLE


class SlaveModeError(StoreClosedError):
    """A put on a slave's store (Java's ``checkStoreStatus``: "message store is slave
    mode, so putMessage is forbidden"; SERVICE_NOT_AVAILABLE)."""


def _java_int(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


@attrs.define(slots=True, eq=False)
class MessageStore:
    config: StoreConfig
    commit_log: CommitLog
    queues: ConsumeQueueTable
    dispatcher: Dispatcher
    checkpoint: StoreCheckpoint
    flush_service: FlushService
    recovery: RecoveryReport
    #: Makes the next commit-log segment ahead of need (None: ``allocate_ahead`` off).
    allocate_service: AllocateService | None
    #: The index of keys (None: ``message_index_enable`` off).
    index: IndexService | None
    _lock_fd: int = attrs.field(repr=False)
    _closed: bool = False
    #: puts refused: closed, or a slave's store (one flag, so the put path checks one)
    _no_puts: bool = False
    _slave: bool = False
    _shutdown_lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)
    #: retention passes left that clean as if by hand (DELETE_EXPIRED_COMMITLOG)
    manual_delete_passes: int = 0

    # -- life ------------------------------------------------------------------------

    @classmethod
    def open(cls, config: StoreConfig) -> MessageStore:
        """Load the files, recover (see :mod:`.recovery`), create the abort file."""
        os.makedirs(config.store_dir, exist_ok=True)
        os.makedirs(config.commit_log_dir, exist_ok=True)
        os.makedirs(config.consume_queue_dir, exist_ok=True)
        lock_fd = os.open(config.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock_fd)
            raise StoreLoadError(f"{config.store_dir} is in use by another store") from None
        try:
            abnormal = os.path.exists(config.abort_path)
            checkpoint = StoreCheckpoint.load(config.checkpoint_path)
            commit_log = CommitLog.open(config)
            queues = ConsumeQueueTable(
                config.consume_queue_dir, config.consume_queue_entries_per_file, config.preallocate
            )
            queues.load()
            dispatcher = Dispatcher(commit_log, queues)
            report = recover(
                commit_log,
                queues,
                dispatcher,
                checkpoint,
                abnormal=abnormal,
                check_crc=config.check_crc_on_recover,
            )
            # From now on a crash must not trust the last clean end: mark the store open.
            checkpoint.clean_commit_log_end = -1
            checkpoint.flush()
            fd = os.open(config.abort_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, str(os.getpid()).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            flush = FlushService(config, commit_log, queues, dispatcher, checkpoint)
            allocate = (
                AllocateService(commit_log.files, config.preallocate) if config.allocate_ahead else None
            )
            index = None
            if config.message_index_enable:
                index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
                index.load(commit_log)
        except BaseException:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)
            raise
        return cls(
            config, commit_log, queues, dispatcher, checkpoint, flush, report, allocate, index, lock_fd
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The store's background work -- the flushers and, with ``allocate_ahead``, the
        next-segment service; start it in the broker's nursery."""
        async with trio.open_nursery() as nursery:
            if self.allocate_service is not None:
                await nursery.start(self.allocate_service.run)
            await nursery.start(self.flush_service.run)
            if self.index is not None:
                await nursery.start(self.index.run, self.commit_log, self.dispatcher)
            task_status.started()

    def shutdown(self) -> None:
        """Flush everything, record the clean end, remove the abort file, delete an
        unused next segment, unmap."""
        with self._shutdown_lock:
            if self._closed:
                return
            self._closed = self._no_puts = True
            self.dispatcher.drain()
            self.flush_service.flush_all_sync()
            self.checkpoint.clean_commit_log_end = self.commit_log.max_offset
            self.checkpoint.flush()
            try:
                os.unlink(self.config.abort_path)
            except FileNotFoundError:
                pass
            self.queues.close()
            if self.index is not None:
                self.index.flush()
                self.index.close()
            self.commit_log.files.discard_spare()
            self.commit_log.close()
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)

    def abandon(self) -> None:
        """Let go of the files as a crash would: no flush, no checkpoint, the abort file
        and an unused next segment stay, so the next open recovers. For crash tests and
        fail-over."""
        with self._shutdown_lock:
            if self._closed:
                return
            self._closed = self._no_puts = True
            self.queues.close()
            if self.index is not None:
                self.index.close()
            self.commit_log.close()
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- replication (broker/ha) ---------------------------------------------------------

    @property
    def slave(self) -> bool:
        """A slave's store: puts are refused (:class:`SlaveModeError`); the commit log
        grows only by :meth:`append_replicated`."""
        return self._slave

    def set_slave(self, slave: bool) -> None:
        self._slave = slave
        self._no_puts = self._closed or slave

    def _refuse_put(self) -> None:
        if self._closed:
            raise StoreClosedError("message store is shut down")
        raise SlaveModeError("message store is slave mode, so putMessage is forbidden")

    def append_replicated(
        self, offset: int, data: bytes | bytearray | memoryview, *, dispatch: bool = True, partial: bool = False,
    ) -> int:
        """A slave's append: whole records streamed by the master, written at the same
        physical offset (which must be this log's end), then decoded and dispatched into
        the consume queues (``dispatch=False``: by the caller's next
        :meth:`dispatch_replicated` -- the HA client reports first, as Java's slave
        reports before its reput thread parses and dispatches). Returns the new end;
        with ``partial``, ``data`` may end inside a record, and the end returned says
        how much of it was written (see :meth:`CommitLog.append_replicated`).
        Raises :class:`~.commit_log.ReplicaDataError` for bytes that do not fit (nothing
        is written; see :meth:`dispatch_replicated` for a record that does not decode)."""
        if self._closed:
            raise StoreClosedError("message store is shut down")
        end = self.commit_log.append_replicated(offset, data, partial=partial)
        if dispatch:
            self.dispatch_replicated()
        return end

    def dispatch_replicated(self) -> None:
        """Decode what :meth:`append_replicated` wrote and dispatch it (consume queues,
        listeners). A record that does not decode cuts the log back to the start of its
        append and raises :class:`~.commit_log.ReplicaDataError` (the records before it
        are dispatched)."""
        try:
            self.commit_log.decode_replicated()
        finally:
            self.dispatcher.drain()

    # -- put -------------------------------------------------------------------------

    def put_message(self, msg: MessageInner) -> PutResult:
        """Store one message; on return its consume-queue entry exists (not yet durable)."""
        if self._no_puts:
            self._refuse_put()
        result = self.commit_log.put_message(msg)
        self.dispatcher.drain()
        return result

    def put_send(
        self, topic: str, body: bytes | bytearray | memoryview, queue_id: int, flag: int, properties_bytes: bytes,
        sys_flag: int, born_timestamp: int, born_host: HostAddress, reconsume_times: int, tags_code: int,
    ) -> PutResult:
        """:meth:`put_message` of a producer's send given by its fields, as
        :func:`~trocket.broker.store.messages.message_inner` takes them (no message
        object made per send)."""
        if self._no_puts:
            self._refuse_put()
        if topic == RMQ_SYS_SCHEDULE_TOPIC:  # its tags code is a deliver time: the full way
            return self.put_message(message_inner(
                topic, body, queue_id, flag, properties_bytes, sys_flag, born_timestamp, born_host,
                reconsume_times, tags_code,
            ))
        result = self.commit_log.append(
            topic, body, queue_id, flag, properties_bytes, sys_flag, born_timestamp, born_host, reconsume_times, 0,
            tags_code, None,
        )
        self.dispatcher.drain()
        return result

    def append_message(self, msg: MessageInner) -> PutResult:
        """:meth:`put_message` without the dispatch: the caller stores several messages
        this way, then calls :meth:`dispatch` once (in a ``finally``) -- one consume-queue
        pass and listener wake-up for all of them."""
        if self._no_puts:
            self._refuse_put()
        return self.commit_log.put_message(msg)

    def append_fields(
        self, topic: str, body: bytes | bytearray | memoryview, queue_id: int, flag: int, properties_bytes: bytes,
        sys_flag: int, born_timestamp: int, born_host: HostAddress, reconsume_times: int, tags_code: int,
        prepared_transaction_offset: int = 0,
    ) -> PutResult:
        """:meth:`append_message` of a message given by its fields, as
        :func:`~trocket.broker.store.messages.message_inner` takes them, and its
        prepared transaction offset (no message object made: a transaction's END)."""
        if self._no_puts:
            self._refuse_put()
        if topic == RMQ_SYS_SCHEDULE_TOPIC:  # its tags code is a deliver time: the full way
            msg = message_inner(
                topic, body, queue_id, flag, properties_bytes, sys_flag, born_timestamp, born_host,
                reconsume_times, tags_code,
            )
            msg.prepared_transaction_offset = prepared_transaction_offset
            return self.commit_log.put_message(msg)
        return self.commit_log.append(
            topic, body, queue_id, flag, properties_bytes, sys_flag, born_timestamp, born_host, reconsume_times,
            prepared_transaction_offset, tags_code, None,
        )

    def dispatch(self) -> None:
        """Dispatch what :meth:`append_message` stored (consume queues, listeners)."""
        self.dispatcher.drain()

    def put_messages(self, batch: BatchInner) -> PutResult:
        """Store a batch body's messages with consecutive queue offsets."""
        if self._no_puts:
            self._refuse_put()
        result = self.commit_log.put_batch(batch)
        self.dispatcher.drain()
        return result

    async def _await_flush(self, result: PutResult, wait: bool) -> PutResult:
        if wait and self.config.flush_mode is FlushMode.SYNC:
            if not await self.flush_service.wait_flushed(result.end_offset):
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
        else:
            await trio.lowlevel.checkpoint()  # trio's rule: an async call is a checkpoint
        return result

    async def async_put_message(self, msg: MessageInner, *, wait: bool | None = None) -> PutResult:
        """:meth:`put_message`, then in SYNC_FLUSH mode await the group commit covering
        it, unless the message says ``WAIT=false`` (or ``wait=False``).
        FLUSH_DISK_TIMEOUT after ``sync_flush_timeout_ms``."""
        result = self.put_message(msg)
        if wait is None:
            wait = msg.properties.get(PROPERTY_WAIT_STORE_MSG_OK, "true").lower() == "true"
        return await self._await_flush(result, wait)

    async def async_put_messages(self, batch: BatchInner, *, wait: bool = True) -> PutResult:
        return await self._await_flush(self.put_messages(batch), wait)

    def add_listener(self, listener: MessageArrivingListener, topic: str | None = None) -> None:
        """Call ``listener(topic, queue_id, queue_offset, tag_hash, store_timestamp)`` for
        every message dispatched, or with ``topic`` for that topic's only (see
        :mod:`.dispatcher` for the threading rules)."""
        self.dispatcher.add_listener(listener, topic)

    def remove_listener(self, listener: MessageArrivingListener) -> None:
        self.dispatcher.remove_listener(listener)

    # -- get -------------------------------------------------------------------------

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int = 32,
        tag_hashes: Collection[int] | None = None,
        record_filter: Callable[[memoryview], bool] | None = None,
    ) -> GetResult:
        """``DefaultMessageStore.getMessage`` (4.9.8): up to ``max_msgs`` records from
        queue offset ``offset``. ``tag_hashes`` is the subscription's code set (None or
        empty: ``*``, everything matches); ``record_filter`` tests each record read
        (``MessageFilter.isMatchedByCommitLog``: the SQL92 filter), the scan going on past
        the records it refuses."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        min_offset = cq.min_offset
        max_offset = cq.max_offset
        if max_offset == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            # 4.9.8: the max offset (apache/rocketmq#4215; before it, 0 when the queue
            # still starts at 0, which sent a consumer back over everything)
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        entries = cq.entries_from(offset)
        if entries is None:
            return GetResult(
                GetStatus.OFFSET_FOUND_NULL, cq.roll_next_file(offset), min_offset, max_offset
            )
        return self._collect(cq, entries, offset, max_msgs, tag_hashes, min_offset, max_offset, record_filter)

    def _collect(
        self,
        cq: ConsumeQueue,
        entries: memoryview,
        offset: int,
        max_msgs: int,
        tag_hashes: Collection[int] | None,
        min_offset: int,
        max_offset: int,
        record_filter: Callable[[memoryview], bool] | None = None,
    ) -> GetResult:
        config = self.config
        commit_log = self.commit_log
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        buffers = result.buffers
        queue_offsets = result.queue_offsets
        total = 0
        max_bytes = config.max_transfer_bytes
        max_count = min(max_msgs, config.max_transfer_count)
        scan_limit = min(len(entries), max(config.max_filter_scan_bytes, max_msgs * CQ_STORE_UNIT_SIZE))
        filter_codes = set(tag_hashes) if tag_hashes else None
        next_phy_file_start = _MIN
        status = GetStatus.NO_MATCHED_MESSAGE
        unpack = _ENTRY.unpack_from
        i = 0
        while i + CQ_STORE_UNIT_SIZE <= scan_limit:
            phys, size, tag = unpack(entries, i)
            if (phys == BLANK_ENTRY[0] and size == BLANK_ENTRY[1]) or (
                next_phy_file_start != _MIN and phys < next_phy_file_start
            ):
                i += CQ_STORE_UNIT_SIZE
                continue
            if total and (len(buffers) >= max_count or total + size > max_bytes):
                break  # isTheBatchFull
            i += CQ_STORE_UNIT_SIZE
            if filter_codes is not None and _java_int(tag) not in filter_codes:
                continue
            view = commit_log.get_message(phys, size)
            if view is None:
                if not total:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = commit_log.roll_next_file(phys)
                continue
            if record_filter is not None and not record_filter(view):
                view.release()
                if not total:
                    status = GetStatus.NO_MATCHED_MESSAGE
                continue
            buffers.append(view)
            queue_offsets.append(offset + i // CQ_STORE_UNIT_SIZE - 1)
            total += size
            status = GetStatus.FOUND
            next_phy_file_start = _MIN
        result.status = status
        result.buffer_total_size = total
        if total:  # getMessage's diff > memory (maxOffsetPy - maxPhyOffsetPulling)
            behind = commit_log.max_offset - phys
            result.suggest_pulling_from_slave = behind > _TOTAL_MEMORY * config.access_message_in_memory_max_ratio // 100
        result.next_begin_offset = offset + i // CQ_STORE_UNIT_SIZE
        return result

    # -- offsets and lookups -----------------------------------------------------------

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        """``getMaxOffsetInQueue``: the next queue offset (0 for an unknown queue)."""
        cq = self.queues.find(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        """``getMinOffsetInQueue``."""
        cq = self.queues.find(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """``getOffsetInQueueByTime``."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(
            timestamp_ms, self.commit_log.pickup_store_timestamp, self.commit_log.min_offset
        )

    def get_commit_log_offset(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """``getCommitLogOffsetInQueue``: 0 when the entry is not there."""
        cq = self.queues.find(topic, queue_id)
        entry = cq.get(queue_offset) if cq is not None else None
        return entry[0] if entry is not None else 0

    def get_queue_entry(self, topic: str, queue_id: int, queue_offset: int) -> tuple[int, int, int] | None:
        """The consume-queue entry ``(commit-log offset, size, tags code)`` at
        ``queue_offset``, or None when it is not stored (blank entries included)."""
        cq = self.queues.find(topic, queue_id)
        return cq.get(queue_offset) if cq is not None else None

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """``getMessageStoreTimeStamp``: -1 when unknown."""
        cq = self.queues.find(topic, queue_id)
        entry = cq.get(queue_offset) if cq is not None else None
        if entry is None:
            return -1
        return self.commit_log.pickup_store_timestamp(entry[0], entry[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)

    def earliest_message_time(self) -> int:
        """``getEarliestMessageTime``: the store time of the commit log's first record
        still stored, -1 when there is none."""
        commit_log = self.commit_log
        view = commit_log.get_record(commit_log.min_offset)
        if view is None:
            return -1
        try:
            return commit_log.pickup_store_timestamp(commit_log.min_offset, len(view))
        finally:
            view.release()

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[memoryview], int, int]:
        """``queryMessage``: the records ``key`` (a KEYS entry or a UNIQ_KEY) names on
        ``topic``, stored within ``[begin, end]`` (ms), at most ``max_num`` (and
        ``max_msgs_num_batch``), oldest first; and the index's last update time and
        commit-log offset. Java tries three times, moving the end back to the newest
        match each time, when the messages the index names are gone."""
        index = self.index
        if index is None:
            return [], 0, 0
        max_num = min(max_num, self.config.max_msgs_num_batch)
        records: list[memoryview] = []
        last_ts = last_phy = 0
        for _ in range(3):
            offsets, last_ts, last_phy = index.query(topic, key, max_num, begin, end)
            if not offsets:
                break
            offsets.sort()
            first_ts = None
            for offset in offsets:
                view = self.commit_log.get_record(offset)
                if view is None:
                    continue
                if first_ts is None:
                    first_ts = self.commit_log.pickup_store_timestamp(offset, len(view))
                records.append(view)
            if records or first_ts is None or first_ts < begin:
                break
            end = first_ts
        return records, last_ts, last_phy

    def select_one_message_by_offset(self, commit_log_offset: int) -> memoryview | None:
        """``selectOneMessageByOffset``: the record's bytes (VIEW_MESSAGE_BY_ID)."""
        return self.commit_log.get_record(commit_log_offset)

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """``lookMessageByOffset``: the decoded message at a commit-log offset, or None."""
        view = self.commit_log.get_record(commit_log_offset)
        if view is None:
            return None
        try:
            msg, _ = decode_record(view)
        except MessageDecodeError:
            return None
        return msg

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def flushed_offset(self) -> int:
        return self.commit_log.flushed_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.max_offset - self.dispatcher.dispatched_offset)

    def lock_stats(self) -> tuple[int, int]:
        """(nanoseconds inside the append lock, acquisitions) since open."""
        return self.commit_log.lock_ns, self.commit_log.lock_count

    def topics(self) -> set[str]:
        return self.queues.topics()

    # -- maintenance -------------------------------------------------------------------

    def delete_expired(
        self, now: float | None = None, force: bool = False, used_ratio: float | None = None
    ) -> RetentionResult:
        """One retention pass (see :mod:`.retention`); call it periodically (Java: 10 s),
        from a worker thread. While :attr:`manual_delete_passes` is left, a pass counts
        one down and cleans as ``force`` does."""
        if self.manual_delete_passes > 0:
            self.manual_delete_passes -= 1
            force = True
        result = delete_expired(
            self.config, self.commit_log, self.queues, now, force=force, used_ratio=used_ratio
        )
        if self.index is not None:
            result.index_files = self.index.delete_expired(self.commit_log.min_offset)
        return result

    def execute_delete_files_manually(self) -> None:
        """``executeDeleteFilesManually`` (DELETE_EXPIRED_COMMITLOG): the next
        :data:`MANUAL_DELETE_PASSES` retention passes run whatever the hour and the disk,
        as a forced pass does. They still delete only segments older than
        ``file_reserved_time_hours`` (unless the disk is past
        ``disk_space_clean_forcibly_ratio``), as Java's manual passes do."""
        self.manual_delete_passes = MANUAL_DELETE_PASSES

    def clean_expired_consume_queues(self) -> list[DetachedTopic]:
        """``cleanExpiredConsumerQueue`` (CLEAN_EXPIRED_CONSUMEQUEUE): detach every
        consume queue whose last entry ends below the commit log's first byte (all its
        messages are gone), the schedule topic's excepted, as Java does; a queue with
        no entry yet stays. Their next queue offsets are forgotten, as
        :meth:`clean_unused_topics` forgets a deleted topic's: a send to such a queue
        afterwards starts it again at offset 0. Same locking and follow-up calls as
        :meth:`clean_unused_topics` (one :class:`DetachedTopic` per queue)."""
        with self._quiesced():
            min_phy = self.commit_log.min_offset
            keys = {
                (cq.topic, cq.queue_id) for cq in self.queues
                if cq.topic != RMQ_SYS_SCHEDULE_TOPIC and 0 <= cq.max_physic_offset < min_phy
            }
            if not keys:
                return []
            self.commit_log.forget_queue_offsets(keys.__contains__)
            return self.queues.detach_queues(keys)

    def clean_unused_topics(self, keep: Collection[str]) -> list[DetachedTopic]:
        """``cleanUnusedTopic``: detach the consume queues of every topic not in ``keep``
        (the topic configs left), except the schedule and transaction-op topics, as
        Java does; their next queue offsets are forgotten, so a send to such a topic
        afterwards starts a fresh queue at offset 0 (the old records age out of the
        commit log).

        Runs under the append lock and the dispatch lock, after dispatching whatever
        was appended: no put or dispatch touches those queues meanwhile. Then call
        :meth:`destroy_detached` (unmap: on the thread that serves pulls) and
        :meth:`DetachedTopic.remove_files` (any thread).

        The records stay in the commit log until retention: after a crash, recovery
        re-dispatches the last segments and rebuilds the deleted topic's queues from
        them (Java's too); a clean restart does not."""
        keep = set(keep) | _NEVER_CLEANED
        with self._quiesced():
            gone = self.queues.topics() - keep
            if not gone:
                return []
            self.commit_log.forget_queue_offsets(lambda key: key[0] in gone)
            return self.queues.detach_topics(gone)

    @contextmanager
    def _quiesced(self) -> Iterator[None]:
        """Hold the append lock and the dispatch lock, everything appended dispatched:
        no put or dispatch touches a queue meanwhile (for detaching queues)."""
        with self.commit_log.append_lock, self.dispatcher.lock:
            self.dispatcher.drain_locked()
            yield

    @staticmethod
    def destroy_detached(detached: list[DetachedTopic]) -> None:
        """Unmap the detached queues. A pull that found a queue before it was detached
        and reads it after gets nothing (Java: the destroyed file refuses to be held),
        so call this where pulls run (the trio thread), between them."""
        for d in detached:
            d.unmap()
