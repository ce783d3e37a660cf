"""Results of puts and gets: ``PutMessageResult`` and ``GetMessageResult``."""

from __future__ import annotations

import enum
from functools import lru_cache

import attrs

from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.msgid import encode_offset_msg_id
from trocket.codecs.queue_scan import SERVED

__all__ = ["GetResult", "GetStatus", "PutResult", "PutStatus"]


@lru_cache(maxsize=64)
def store_host_hex(ip: str, port: int) -> str:
    """The offset message id's first part (IP and port, upper hex), once per store host."""
    return encode_offset_msg_id(ip, port, 0)[:-16]


class PutStatus(enum.Enum):
    """``PutMessageStatus`` (the ones this store produces)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetStatus(enum.Enum):
    """``GetMessageStatus``."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@attrs.define(slots=True)
class PutResult:
    """Where a message (or a batch) went. ``msg_id`` is computed on first read.

    For a batch, ``queue_offset`` and ``physical_offset`` are the first message's and
    ``msg_id`` is the comma-joined offset ids, as Java's batch ``AppendMessageResult``.
    """

    status: PutStatus
    queue_id: int
    queue_offset: int
    physical_offset: int
    wrote_bytes: int
    store_timestamp: int
    store_host: HostAddress
    msg_count: int = 1
    #: Record sizes of a batch (to compute each message's offset id); None for one message.
    record_sizes: tuple[int, ...] | None = None
    _msg_id: str | None = attrs.field(default=None, repr=False)

    @property
    def end_offset(self) -> int:
        """Commit-log offset just past this put: the flush it needs to be durable."""
        return self.physical_offset + self.wrote_bytes

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def physical_offsets(self) -> list[int]:
        if self.record_sizes is None:
            return [self.physical_offset]
        out = []
        pos = self.physical_offset
        for size in self.record_sizes:
            out.append(pos)
            pos += size
        return out

    @property
    def msg_id(self) -> str:
        """Offset message id(s): store host + commit-log offset (comma-joined for a batch)."""
        if self._msg_id is None:
            ip, port = self.store_host
            if self.record_sizes is None:  # one message: the host part is cached
                self._msg_id = store_host_hex(ip, port) + "%016X" % self.physical_offset
                return self._msg_id
            self._msg_id = ",".join(
                encode_offset_msg_id(ip, port, off) for off in self.physical_offsets
            )
        return self._msg_id


@attrs.define(slots=True)
class GetResult:
    """``GetMessageResult``: status, offsets and the stored records to send.

    ``runs`` are memoryviews into the commit log (no copy) holding the records back to
    back, one view per stretch of a segment the records fill contiguously (a pull's 32
    records are usually one); ``served`` notes each record's queue offset and size
    (:data:`~trocket.codecs.queue_scan.SERVED`), read as :attr:`queue_offsets` and
    :attr:`sizes`. A pull response body is the runs' concatenation (:meth:`joined`);
    :attr:`buffers` gives one view per record. Hold them only as long as needed: a
    segment deleted meanwhile stays mapped until its last view is freed.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    runs: list[memoryview] = attrs.field(factory=list)
    served: bytearray = attrs.field(factory=bytearray)
    buffer_total_size: int = 0
    #: ``suggestPullingFromSlave``: what this pull read lies further behind the commit
    #: log's end than ``access_message_in_memory_max_ratio`` of the RAM (a slow consumer)
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.served) // SERVED.size

    @property
    def queue_offsets(self) -> list[int]:
        return [q for q, _size in SERVED.iter_unpack(self.served)]

    @property
    def sizes(self) -> list[int]:
        return [size for _q, size in SERVED.iter_unpack(self.served)]

    @property
    def buffers(self) -> list[memoryview]:
        """One view per record, cut from the runs by the records' sizes."""
        out: list[memoryview] = []
        sizes = iter(self.sizes)
        for run in self.runs:
            end = len(run)
            at = 0
            while True:
                size = next(sizes)
                out.append(run[at : at + size])
                at += size
                if at >= end or size <= 0:  # (a record of no size is a run of its own)
                    break
        return out

    def keep(self, records: list[memoryview], queue_offsets: list[int]) -> None:
        """Serve ``records`` (views of some of :attr:`buffers`, the others dropped) at
        their ``queue_offsets``."""
        self.release()
        self.runs = records
        self.served = bytearray(b"".join(SERVED.pack(q, len(r)) for q, r in zip(queue_offsets, records)))
        self.buffer_total_size = sum(len(r) for r in records)

    def joined(self) -> bytes:
        """The records back to back: a PULL_MESSAGE body."""
        runs = self.runs
        return bytes(runs[0]) if len(runs) == 1 else b"".join(runs)

    def release(self) -> None:
        """Drop the views (lets a deleted segment be unmapped)."""
        for run in self.runs:
            run.release()
        self.runs = []
