"""CommitLog: every message of every topic, appended to one log of mapped segments.

The put path is Java's ``CommitLog.putMessage`` with the work moved out of the lock:

* before the lock: encode the whole record (codecs' :func:`encode_store_record`, one call) into a
  fresh ``bytearray`` with placeholder QUEUEOFFSET / PHYSICALOFFSET / STORETIMESTAMP,
  body CRC, properties bytes, sizes, tag hash, all checked against the limits;
* under the one append lock (a ``threading.Lock``: callers are trio tasks and worker
  threads): pick the queue offset, patch the three fields, copy the bytes into the map
  (rolling to a new segment behind a BLANK record when they do not fit: the segment
  made ahead by :mod:`.allocate` when it is ready, else a file created right there),
  advance the counters, queue the dispatch request;
* after it: dispatch (consume-queue entries, listeners) and build the result, whose
  message id is computed only when read.

Time inside the lock is summed in :attr:`CommitLog.lock_ns` / :attr:`lock_count`; a
put that held it 1 ms or more is also recorded in :attr:`CommitLog.put_times`
(:mod:`.put_times`: Java's put-time figures without a bucket lookup per put).
"""

from __future__ import annotations

import struct
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import NamedTuple

import attrs

from trocket.codecs.errors import MessageDecodeError, MessageEncodeError
from trocket.codecs.message.batch import iter_batch_entries
from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.msgid import offset_msg_id
from trocket.codecs.message.properties import (
    MAX_PROPERTIES_LENGTH,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TAGS,
    decode_properties_bytes,
    encode_properties_bytes,
    get_property,
)
from trocket.codecs.message.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    OFFSET_PHYSICAL_OFFSET,
    OFFSET_QUEUE_OFFSET,
    OFFSET_STORE_TIMESTAMP,
    RECORD_FIXED_SIZE,
    dispatch_fields,
    encode_blank_into,
    encode_record_into,
    encode_store_record,
    peek_record,
    place_record,
    record_size,
    store_timestamp_offset,
)
from trocket.codecs.message.sysflag import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from trocket.codecs.names import RMQ_SYS_SCHEDULE_TOPIC

from .config import StoreConfig
from .errors import (
    MessageIllegalError,
    MessageTooLargeError,
    PropertiesTooLargeError,
    PutMessageError,
)
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue
from .messages import BatchInner, MessageInner, schedule_delay_ms, tags_hash
from .put_times import PutTimes
from .results import PutResult, PutStatus, store_host_hex

__all__ = ["CommitLog", "CreateSegmentError", "DispatchRequest", "ReplicaDataError", "check_record"]

_QQ = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET: adjacent at OFFSET_QUEUE_OFFSET
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
#: the shortest record that holds PHYSICALOFFSET
_MIN_RECORD = OFFSET_PHYSICAL_OFFSET + 8
_PROP_SEP = 2  # "\x02"
#: what a record may exceed ``max_message_size`` by: 4.9.8's encode buffer holds the
#: largest body plus 64 KiB (``MessageExtEncoder``)
RECORD_SLACK = 64 * 1024
_perf_ns = time.perf_counter_ns
#: a put holding the lock this long is recorded (PutTimes.record_slow); 1 ms, Java's unit
_SLOW_PUT_NS = 1_000_000
_new = object.__new__
_PUT_OK = PutStatus.PUT_OK


class CreateSegmentError(PutMessageError):
    """A new commit-log segment could not be created (disk full, permissions)."""

    status = PutStatus.CREATE_MAPEDFILE_FAILED


class DispatchRequest(NamedTuple):
    """What the dispatcher needs of a stored record (Java's ``DispatchRequest``)."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    tag_hash: int
    store_timestamp: int
    sys_flag: int


_HOST_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


@lru_cache(maxsize=4096)
def _topic_bytes(topic: str) -> bytes:
    data = topic.encode("utf-8")
    if len(data) > MAX_TOPIC_LENGTH:
        raise MessageIllegalError(f"topic is {len(data)} bytes, a record holds at most 127")
    return data


def _counts_in_queue(sys_flag: int) -> bool:
    # Prepared and rolled-back transactional records get queue offset 0 and no
    # consume-queue entry (CommitLog.DefaultAppendMessageCallback / BuildConsumeQueue).
    tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
    return tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE


def _write_size_last(view: memoryview, pos: int, buf: bytes | bytearray, size: int) -> None:
    """Copy ``buf`` (one record, or a batch's records back to back) to ``view[pos:]``,
    its first TOTALSIZE last. A process killed in the middle of the copy (kill -9, the
    memory itself intact) then leaves TOTALSIZE 0 -- the end of the log for recovery --
    never the prefix of a record whose tail is missing: a cut inside the properties
    passes every check recovery can make (sizes agree, the body CRC matches), so such a
    torn record would have been dispatched and served. A batch becomes visible all at
    once, with its first record."""
    src = memoryview(buf)
    view[pos + 4 : pos + size] = src[4:size]
    view[pos : pos + 4] = src[:4]


def check_record(
    mf: MappedFile, pos: int, *, check_crc: bool, delays_ms: tuple[int, ...] = ()
) -> tuple[int, DispatchRequest | None]:
    """``checkMessageAndReturnSize`` on the record at ``pos`` of segment ``mf``.

    A ``SCHEDULE_TOPIC_XXXX`` record with a ``DELAY`` level gets its deliver time (store
    time + the level's delay in ``delays_ms``) as tag hash, as the put path gave it.

    Returns ``(size, request)`` for a valid record, ``(0, None)`` at the blank record
    that ends a segment, ``(-1, None)`` for anything else: bad magic, impossible size,
    a record that does not decode, a body CRC mismatch (with ``check_crc``) or a
    PHYSICALOFFSET that is not where the record sits.
    """
    file_size = mf.file_size
    view = mf.view
    if file_size - pos < END_FILE_MIN_BLANK_LENGTH:
        return -1, None
    total, magic = peek_record(view, pos)
    if magic == BLANK_MAGIC_CODE:
        return (0, None) if total == file_size - pos else (-1, None)
    if magic != MESSAGE_MAGIC_CODE or total <= 0 or total > file_size - pos:
        return -1, None
    try:
        fields = dispatch_fields(view, pos, check_crc=check_crc)  # (it bounds the record by TOTALSIZE)
    except MessageDecodeError:
        return -1, None
    physical = mf.file_from_offset + pos
    if fields[4] != physical:  # its PHYSICALOFFSET
        return -1, None
    return total, _dispatch_request(fields, physical, delays_ms)


def _dispatch_request(fields: tuple, physical: int, delays_ms: tuple[int, ...]) -> DispatchRequest:
    """The dispatch request of a record (its :func:`dispatch_fields`). TAGS is looked
    up as the put path looks it up (:func:`get_property`: Java's map reading); a ``SCHEDULE_TOPIC_XXXX``
    record with a ``DELAY`` level gets its deliver time as tag hash, as the put path
    gave it."""
    total, topic, queue_id, queue_offset, _, sys_flag, store_timestamp, props = fields
    tag = None
    if topic == RMQ_SYS_SCHEDULE_TOPIC:
        delay = schedule_delay_ms(delays_ms, get_property(props, PROPERTY_DELAY_TIME_LEVEL))
        if delay is not None:
            tag = store_timestamp + delay
    return DispatchRequest(
        topic,
        queue_id,
        queue_offset,
        physical,
        total,
        tags_hash(get_property(props, PROPERTY_TAGS)) if tag is None else tag,
        store_timestamp,
        sys_flag,
    )


class ReplicaDataError(PutMessageError):
    """Replicated commit-log bytes that cannot be appended here (wrong offset, not
    whole valid records, across a segment end)."""

    status = PutStatus.MESSAGE_ILLEGAL


def _whole_records(data: memoryview, physical: int, room: int) -> int:
    """How many bytes at the start of ``data`` (replicated bytes for ``physical``, with
    ``room`` bytes left in its segment) are whole records, each saying it belongs where
    it lands (PHYSICALOFFSET), up to and including a blank record, which must end the
    segment. A record still incomplete at the end is not counted (its first bytes may
    still be checked). Raises :class:`ReplicaDataError` at the first byte that cannot
    be a record there."""
    pos = 0
    n = len(data)
    while n - pos >= END_FILE_MIN_BLANK_LENGTH:
        total, magic = peek_record(data, pos)
        if magic == BLANK_MAGIC_CODE:
            if total != room - pos:
                raise ReplicaDataError(f"a blank record at {physical + pos} that does not end the segment")
            return pos + total if n - pos >= total else pos
        if magic != MESSAGE_MAGIC_CODE or total < _MIN_RECORD or total > room - pos:
            raise ReplicaDataError(f"no whole record at {physical + pos} (size {total}, magic {magic & 0xFFFFFFFF:#x})")
        if n - pos < total:
            break
        (says,) = _Q.unpack_from(data, pos + OFFSET_PHYSICAL_OFFSET)
        if says != physical + pos:
            raise ReplicaDataError(f"the record at {physical + pos} says it belongs at {says}")
        pos += total
    return pos


def _decode_records(data: memoryview, physical: int, delays_ms: tuple[int, ...]) -> list[DispatchRequest]:
    """The dispatch requests of the records in ``data`` (at ``physical``), which
    :func:`_whole_records` passed. Raises :class:`ReplicaDataError` for one that does
    not decode."""
    out: list[DispatchRequest] = []
    pos = 0
    n = len(data)
    while pos < n:
        total, magic = peek_record(data, pos)
        if magic == BLANK_MAGIC_CODE:
            break
        try:
            fields = dispatch_fields(data, pos)
        except MessageDecodeError as exc:
            raise ReplicaDataError(f"the record at {physical + pos} does not decode: {exc}") from None
        out.append(_dispatch_request(fields, physical + pos, delays_ms))
        pos += total
    return out


@attrs.define(slots=True, eq=False)
class CommitLog:
    """The commit log of one store."""

    config: StoreConfig
    files: MappedFileQueue
    #: Next queue offset per topic, then queue id (Java's ``topicQueueTable``; two
    #: levels: a tuple key costs a tuple, its hash and a comparison on every put). A
    #: topic's table is made by its first put (``defaultdict``).
    queue_offsets: defaultdict[str, dict[int, int]] = attrs.field(factory=lambda: defaultdict(dict))
    #: Dispatch requests in commit-log order, appended under the append lock and
    #: drained by the dispatcher.
    pending: deque[tuple] = attrs.field(factory=deque)  # DispatchRequest-shaped tuples
    #: Nanoseconds spent holding the append lock, and how many times it was taken.
    lock_ns: int = 0
    lock_count: int = 0
    #: puts that held the lock 1 ms or more (the statistics' put-time figures)
    put_times: PutTimes = attrs.field(factory=PutTimes)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)
    #: (end offset, store timestamp) of the last record written, replaced as one object
    #: so a flusher thread reads a consistent pair.
    tail: tuple[int, int] = (0, 0)
    #: Where the last :meth:`scan` stopped (the first byte not part of a valid record).
    scan_end: int = 0
    #: the store host the message-id prefix was computed for, and the prefix
    _msg_id_host: HostAddress | None = attrs.field(default=None, repr=False)
    _msg_id_prefix: str = attrs.field(default="", repr=False)
    #: (offset, size) of replicated bytes written but not decoded yet (a slave's)
    _undecoded: deque[tuple[int, int]] = attrs.field(factory=deque, repr=False)

    @property
    def append_lock(self) -> threading.Lock:
        """The append lock (topic deletion holds it to stop puts for a moment)."""
        return self._lock

    def next_queue_offset(self, topic: str, queue_id: int) -> int | None:
        """The queue offset the next record of the queue gets (None: the queue has had
        none since the store opened or it was forgotten)."""
        offsets = self.queue_offsets.get(topic)
        return None if offsets is None else offsets.get(queue_id)

    def set_queue_offset(self, topic: str, queue_id: int, offset: int) -> None:
        """Set the queue offset the queue's next record gets (recovery, a slave's
        replicated records). Call under the append lock, or before puts begin."""
        self.queue_offsets[topic][queue_id] = offset

    def forget_queue_offsets(self, forget: Callable[[tuple[str, int]], bool]) -> None:
        """Drop the next queue offsets of the ``(topic, queue id)`` keys ``forget``
        picks: a send to such a queue afterwards starts it again at offset 0. Call
        under the append lock."""
        table = self.queue_offsets
        for topic, offsets in list(table.items()):
            for queue_id in [q for q in offsets if forget((topic, q))]:
                del offsets[queue_id]
            if not offsets:
                del table[topic]

    @classmethod
    def open(cls, config: StoreConfig) -> CommitLog:
        files = MappedFileQueue(
            config.commit_log_dir, config.commit_log_segment_size, config.preallocate
        )
        files.load()
        return cls(config, files)

    # -- offsets ---------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """``getMinOffset``: first byte still stored."""
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        """``getMaxOffset``: one past the last byte written."""
        return self.files.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.files.flushed_where

    def roll_next_file(self, offset: int) -> int:
        """``rollNextFile``: start of the segment after the one holding ``offset``."""
        size = self.config.commit_log_segment_size
        return offset + size - offset % size

    @property
    def store_host(self) -> HostAddress:
        return self.config.store_host

    # -- preparation (outside the lock) ------------------------------------------------

    def _check_size(self, size: int, body_len: int) -> None:
        """4.9.8's ``MessageExtEncoder``: ``maxMessageSize`` limits the body, the record
        may be 64 KiB more (its encode buffer); and a record must fit in a segment."""
        limit = self.config.max_message_size
        if body_len > limit:
            raise MessageTooLargeError(body_len, limit, "body")
        if size > limit + RECORD_SLACK:
            raise MessageTooLargeError(size, limit + RECORD_SLACK)
        room = self.config.commit_log_segment_size - END_FILE_MIN_BLANK_LENGTH
        if size > room:
            raise MessageTooLargeError(size, room)

    # -- append (inside the lock) --------------------------------------------------------

    def _segment_for(self, size: int) -> MappedFile:
        """The segment to write ``size`` bytes into, rolling over behind a blank record
        when fewer than ``size + 8`` bytes are left (``END_FILE_MIN_BLANK_LENGTH``)."""
        files = self.files
        mf = files.last
        if mf is not None and size + END_FILE_MIN_BLANK_LENGTH <= mf.file_size - mf.wrote_position:
            return mf
        if mf is not None and not mf.is_full:
            encode_blank_into(mf.view, mf.wrote_position, mf.remaining)
            mf.wrote_position = mf.file_size
        try:
            return files.create_next(0)
        except OSError as exc:
            raise CreateSegmentError(f"cannot create a commit-log segment: {exc}") from exc

    def put_message(self, msg: MessageInner) -> PutResult:
        """Append one message; returns where it went (``PUT_OK``).

        Raises :class:`PutMessageError` subclasses for refused messages. The caller
        dispatches (see :class:`~trocket.broker.store.dispatcher.Dispatcher`).
        """
        topic = msg.topic
        props = msg.properties_bytes
        if props is None:
            _topic_bytes(topic)  # (its error first, as append's)
            try:
                props = encode_properties_bytes(msg.properties)
            except MessageEncodeError as exc:
                raise PropertiesTooLargeError(str(exc)) from None
        tag = msg.tags_code
        if tag is None:
            tag = msg.tag_hash()
        # ScheduleMessageService's queues: the tags code is the deliver time (append sets it)
        delay = self._schedule_delay(msg) if topic == RMQ_SYS_SCHEDULE_TOPIC else None
        return self.append(
            topic, msg.body, msg.queue_id, msg.flag, props, msg.sys_flag, msg.born_timestamp, msg.born_host,
            msg.reconsume_times, msg.prepared_transaction_offset, tag, delay,
        )

    def append(
        self,
        topic: str,
        body: bytes | bytearray | memoryview,
        queue_id: int,
        flag: int,
        props: bytes | bytearray | memoryview,
        sys_flag: int,
        born_timestamp: int,
        born_host: HostAddress,
        reconsume_times: int,
        prepared_transaction_offset: int,
        tag: int,
        delay: int | None,
    ) -> PutResult:
        """:meth:`put_message` of a message given by its fields (the send path's: no
        :class:`MessageInner` made): ``props`` the stored properties bytes, ``tag`` the
        consume queue's tags code, ``delay`` (a ``SCHEDULE_TOPIC_XXXX`` record's) makes
        it the store time plus ``delay``."""
        # -- prepared outside the lock (one call and one tuple less than a helper) --
        topic_b = _topic_bytes(topic)
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise PropertiesTooLargeError(f"properties are {len(props)} bytes, more than 32767")
        if sys_flag & _HOST_V6_FLAGS:
            size = record_size(len(body), len(topic_b), len(props), sys_flag)
            ts_at = store_timestamp_offset(sys_flag)
        else:  # IPv4 hosts: record_size and store_timestamp_offset, inline
            size = RECORD_FIXED_SIZE + len(topic_b) + len(body) + len(props)
            ts_at = OFFSET_STORE_TIMESTAMP
        config = self.config
        # (a record within max_message_size passes every limit; past it, the checks)
        if size > config.max_message_size or size > config.commit_log_segment_size - END_FILE_MIN_BLANK_LENGTH:
            self._check_size(size, len(body))
        try:
            buf = encode_store_record(
                size, topic_b, body, props, queue_id, flag, sys_flag, born_timestamp, born_host,
                config.store_host, reconsume_times, prepared_transaction_offset,
            )
        except MessageEncodeError as exc:
            raise MessageIllegalError(str(exc)) from None
        tran = sys_flag & TRANSACTION_ROLLBACK_TYPE  # _counts_in_queue, inline
        counts = tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE
        table = self.queue_offsets
        # acquire / release instead of ``with``: the statement looks up and calls the
        # lock's __enter__ / __exit__, about a thousand instructions more on every put
        lock = self._lock
        lock.acquire()
        try:
            t0 = _perf_ns()
            segments = self.files._files  # (files.last without the property call)
            mf = segments[-1] if segments else None
            if mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position:
                mf = self._segment_for(size)  # rolls over
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            if counts:
                offsets = table[topic]
                queue_offset = offsets.get(queue_id, 0)
                offsets[queue_id] = queue_offset + 1
            else:
                queue_offset = 0
            now = time.time_ns() // 1_000_000
            if delay is not None:
                tag = now + delay
            place_record(mf._view, pos, buf, size, queue_offset, phys, ts_at, now)  # TOTALSIZE last
            mf.wrote_position = pos + size
            mf.last_store_timestamp = now
            self.tail = (phys + size, now)
            # A plain tuple in DispatchRequest's field order (cheaper than the NamedTuple).
            self.pending.append((topic, queue_id, queue_offset, phys, size, tag, now, sys_flag))
            self.lock_count += 1
            elapsed = _perf_ns() - t0
            self.lock_ns += elapsed
            if elapsed >= _SLOW_PUT_NS:
                self.put_times.record_slow(elapsed)
        finally:
            lock.release()
        host = self.config.store_host
        if host is not self._msg_id_host:
            self._msg_id_prefix = store_host_hex(host[0], host[1])
            self._msg_id_host = host
        # PutResult by slot stores (its __init__ with ten arguments costs twice as much)
        result = _new(PutResult)
        result.status = _PUT_OK
        result.queue_id = queue_id
        result.queue_offset = queue_offset
        result.physical_offset = phys
        result.wrote_bytes = size
        result.store_timestamp = now
        result.store_host = host
        result.msg_count = 1
        result.record_sizes = None
        result._msg_id = offset_msg_id(self._msg_id_prefix, phys)
        return result

    def _schedule_delay(self, msg: MessageInner) -> int | None:
        level = msg.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        if level is None and msg.properties_bytes:
            try:
                level = decode_properties_bytes(msg.properties_bytes).get(PROPERTY_DELAY_TIME_LEVEL)
            except MessageDecodeError:
                return None
        return schedule_delay_ms(self.config.delay_levels_ms, level)

    def put_batch(self, batch: BatchInner) -> PutResult:
        """Append every message of a batch body under one lock acquisition, with
        consecutive queue offsets, contiguous in one segment."""
        if batch.sys_flag & TRANSACTION_ROLLBACK_TYPE:
            raise MessageIllegalError("a batch cannot hold transactional messages")
        topic_b = _topic_bytes(batch.topic)
        extra = bytes(batch.properties_bytes)
        extra_tags = decode_properties_bytes(extra).get(PROPERTY_TAGS) if extra else None
        try:
            entries = list(iter_batch_entries(batch.body))
        except MessageDecodeError as exc:
            raise MessageIllegalError(f"bad batch body: {exc}") from None
        if not entries:
            raise MessageIllegalError("empty batch")
        parts: list[tuple[bytes | memoryview, int]] = []
        sizes: list[int] = []
        tags: list[int] = []
        sys_flag = batch.sys_flag
        for entry in entries:
            props = entry.properties
            if extra:
                sep = b"\x02" if len(props) and props[-1] != _PROP_SEP else b""
                props = bytes(props) + sep + extra
            if len(props) > MAX_PROPERTIES_LENGTH:
                raise PropertiesTooLargeError(f"batch entry properties are {len(props)} bytes")
            size = record_size(len(entry.body), len(topic_b), len(props), sys_flag)
            self._check_size(size, len(entry.body))
            parts.append((props, size))
            sizes.append(size)
            if extra_tags is not None:
                tags.append(tags_hash(extra_tags))
            else:
                try:
                    entry_tags = decode_properties_bytes(entry.properties).get(PROPERTY_TAGS)
                except MessageDecodeError as exc:
                    raise MessageIllegalError(f"batch entry properties: {exc}") from None
                tags.append(tags_hash(entry_tags))
        total = sum(sizes)
        self._check_size(total, 0)
        buf = bytearray(total)
        at = 0
        try:
            for entry, (props, size) in zip(entries, parts):
                encode_record_into(
                    buf,
                    at,
                    topic=topic_b,
                    body=entry.body,
                    properties=props,
                    queue_id=batch.queue_id,
                    flag=entry.flag,
                    sys_flag=sys_flag,
                    born_timestamp=batch.born_timestamp,
                    born_host=batch.born_host,
                    store_host=self.config.store_host,
                    reconsume_times=batch.reconsume_times,
                )
                at += size
        except MessageEncodeError as exc:
            raise MessageIllegalError(str(exc)) from None
        ts_at = store_timestamp_offset(sys_flag)
        topic = batch.topic
        queue_id = batch.queue_id
        offsets_of = self.queue_offsets
        count = len(sizes)
        with self._lock:
            t0 = time.perf_counter_ns()
            mf = self._segment_for(total)
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            offsets = offsets_of[topic]
            first_queue_offset = offsets.get(queue_id, 0)
            offsets[queue_id] = first_queue_offset + count
            now = time.time_ns() // 1_000_000
            at = 0
            pending = self.pending
            for i in range(count):
                size = sizes[i]
                _QQ.pack_into(buf, at + OFFSET_QUEUE_OFFSET, first_queue_offset + i, phys + at)
                _Q.pack_into(buf, at + ts_at, now)
                pending.append(
                    (topic, queue_id, first_queue_offset + i, phys + at, size, tags[i], now, sys_flag)
                )
                at += size
            _write_size_last(mf._view, pos, buf, total)
            mf.wrote_position = pos + total
            mf.last_store_timestamp = now
            self.tail = (phys + total, now)
            self.lock_count += 1
            elapsed = time.perf_counter_ns() - t0
            self.lock_ns += elapsed
            if elapsed >= _SLOW_PUT_NS:
                self.put_times.record_slow(elapsed)
        return PutResult(
            PutStatus.PUT_OK,
            queue_id,
            first_queue_offset,
            phys,
            total,
            now,
            self.config.store_host,
            count,
            tuple(sizes),
        )

    # -- replication (a slave appends what its master streams) ---------------------------

    def append_replicated(self, offset: int, data: bytes | bytearray | memoryview, *, partial: bool = False) -> int:
        """Copy whole records (and a segment's closing blank record) received from a
        master at ``offset`` -- which must be this log's end -- into the log, as they
        were on the master; :meth:`decode_replicated` queues their dispatch requests
        later. Returns the new end.

        ``data`` must be whole records within one segment; with ``partial`` it may end
        inside a record (or go on after the segment's blank record): the whole records
        at its start are written and the returned end says how far (the HA client keeps
        the rest for the next frame; one walk over the records checks and counts them).

        Only the framing is checked here (sizes, magic codes, each record's
        PHYSICALOFFSET): the decode, three quarters of a slave's cost per record, comes
        after its report, off the master's critical path (Java's slave checks nothing
        before it reports). Raises :class:`ReplicaDataError` when the offset is not the
        end, the bytes do not fit the segment or are not whole records at those offsets
        (nothing is written).
        """
        n = len(data)
        if not n:
            return offset
        size = self.config.commit_log_segment_size
        room = size - offset % size
        if n > room and not partial:
            raise ReplicaDataError(f"{n} replicated bytes at {offset} cross the segment end")
        # checked outside the lock: a slave has no other writer, the offset is checked below
        whole = _whole_records(memoryview(data), offset, room)
        if whole < n and not partial:  # (a blank record taken ends the segment: n fits in it)
            raise ReplicaDataError(f"a torn record at {offset + whole}")
        if not whole:
            return offset
        with self._lock:
            files = self.files
            end = files.max_offset if files.files else offset
            if offset != end:
                if end or offset % size:
                    raise ReplicaDataError(f"replicated data at {offset}, but the commit log ends at {end}")
                files.delete_all()  # an empty log (an empty first segment) takes the master's start
            mf = files.last
            if mf is None or mf.is_full:
                if mf is None and offset % size:
                    raise ReplicaDataError(f"an empty commit log can start only at a segment boundary, not {offset}")
                try:
                    mf = files.create_next(offset)
                except OSError as exc:
                    raise CreateSegmentError(f"cannot create a commit-log segment: {exc}") from exc
            pos = offset - mf.file_from_offset
            _write_size_last(mf._view, pos, data, whole)
            mf.wrote_position = pos + whole
            self._undecoded.append((offset, whole))
            self.tail = (offset + whole, self.tail[1])
        return offset + whole

    def decode_replicated(self) -> None:
        """Queue the dispatch requests of what :meth:`append_replicated` wrote since the
        last call, in order, and advance the queue offsets and the store timestamp.

        A record that does not decode although its framing was right can only come from
        a corrupt master log: the log is cut back to the start of the append that
        brought it (later ones too: nothing undecodable stays) and
        :class:`ReplicaDataError` is raised, so the HA client reconnects from there."""
        undecoded = self._undecoded
        delays = self.config.delay_levels_ms
        files = self.files
        pending = self.pending
        while undecoded:
            offset, n = undecoded[0]
            mf = files.find(offset)
            pos = offset - mf.file_from_offset if mf is not None else 0
            try:
                if mf is None:
                    raise ReplicaDataError(f"replicated data at {offset} is gone before it was decoded")
                requests = _decode_records(mf.view[pos : pos + n], offset, delays)
            except ReplicaDataError:
                undecoded.clear()
                with self._lock:
                    files.truncate_dirty(offset)
                    self.tail = (offset, self.tail[1])
                raise
            undecoded.popleft()
            if not requests:
                continue
            with self._lock:
                for req in requests:
                    if _counts_in_queue(req[7]):
                        self.set_queue_offset(req[0], req[1], req[2] + 1)
                    pending.append(req)
                last_ts = requests[-1][6]
                mf.last_store_timestamp = last_ts
                self.tail = (self.tail[0], last_ts)

    # -- reading ---------------------------------------------------------------------

    def get_message(self, offset: int, size: int) -> memoryview | None:
        """``getMessage(offset, size)``: a view of the record, or None if not stored."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position or mf.closed:
            return None
        return mf.view[pos : pos + size]

    def get_record(self, offset: int) -> memoryview | None:
        """The whole record starting at ``offset`` (size read from TOTALSIZE)."""
        mf = self.files.find(offset)
        if mf is None or mf.closed:
            return None
        pos = offset - mf.file_from_offset
        if pos + END_FILE_MIN_BLANK_LENGTH > mf.wrote_position:
            return None
        total, magic = peek_record(mf.view, pos)
        if magic != MESSAGE_MAGIC_CODE or total <= 0 or pos + total > mf.wrote_position:
            return None
        return mf.view[pos : pos + total]

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """``pickupStoreTimestamp``: STORETIMESTAMP of the record at ``offset``, -1 if gone."""
        view = self.get_message(offset, size)
        if view is None or size < 64:
            return -1
        (sys_flag,) = _I32.unpack_from(view, 36)
        (ts,) = _Q.unpack_from(view, store_timestamp_offset(sys_flag))
        return ts

    # -- recovery --------------------------------------------------------------------

    def scan(self, start: int, *, check_crc: bool) -> Iterator[DispatchRequest]:
        """Valid records from ``start`` (a record boundary) on, across segments, until
        the first invalid one or the end; :attr:`scan_end` is where the scan stopped."""
        files = self.files
        self.scan_end = start
        mf = files.find(start)
        if mf is None:
            return
        pos = start - mf.file_from_offset
        index = files.files.index(mf)
        all_files = files.files
        delays = self.config.delay_levels_ms
        while True:
            size, request = check_record(mf, pos, check_crc=check_crc, delays_ms=delays)
            if size > 0 and request is not None:
                pos += size
                self.scan_end = mf.file_from_offset + pos
                yield request
                continue
            if size == 0:  # blank: the segment ends here, continue with the next one
                index += 1
                if index >= len(all_files):
                    self.scan_end = mf.file_end_offset
                    return
                mf = all_files[index]
                pos = 0
                self.scan_end = mf.file_from_offset
                continue
            return

    def set_end(self, end: int) -> int:
        """Make ``end`` the write position: later bytes are zeroed, later segments deleted,
        earlier segments marked full. Returns the bytes zeroed or deleted."""
        for mf in self.files:
            if mf.file_end_offset <= end:
                mf.wrote_position = mf.flushed_position = mf.file_size
        cut = self.files.truncate_dirty(end)
        self.tail = (end, self.tail[1])
        return cut

    def flush(self) -> int:
        return self.files.flush()

    def close(self) -> None:
        self.files.close()
