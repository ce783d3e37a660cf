"""Results of puts and gets: ``PutMessageResult`` and ``GetMessageResult``."""

from __future__ import annotations

import enum
from functools import lru_cache

import attrs

from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.msgid import encode_offset_msg_id

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

    ``buffers`` are memoryviews into the commit log (no copy); a pull response body is
    their concatenation (:meth:`joined`). Hold them only as long as needed: a segment
    deleted meanwhile stays mapped until its last view is freed.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = attrs.field(factory=list)
    queue_offsets: list[int] = attrs.field(factory=list)
    buffer_total_size: int = 0
    #: ``suggestPullingFromSlave``: what this pull read lies further behind the commit
    #: log's end than ``access_message_in_memory_max_ratio`` of the RAM (a slow consumer)
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    def joined(self) -> bytes:
        """The records back to back: a PULL_MESSAGE body."""
        return b"".join(self.buffers)

    def release(self) -> None:
        """Drop the views (lets a deleted segment be unmapped)."""
        for buf in self.buffers:
            buf.release()
        self.buffers = []
