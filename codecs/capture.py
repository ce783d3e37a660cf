"""The native capture format: what remoting's tap writes, what conformance and
spark read. Pure: bytes in, bytes out, and a reader over a byte stream.

File layout (all integers big-endian)::

    file header, 16 bytes, written once when the file is created:
        magic    8 bytes  b"TRKCAP\\r\\n"   (the CR LF catches text-mode mangling)
        version  u16      1
        hdrlen   u16      16 (bytes of this header; a reader skips to it)
        reserved u32      0

    then records, appended one after another:
        length     u32   bytes of the record after this field
        direction  u8    0 = received by the recording endpoint, 1 = sent by it
        role       u8    0 = unknown, 1 = the recorder is a server, 2 = a client
        flags      u16   bit 0 RAW: ``frame`` holds bytes that did not parse as a
                         frame (forwarded as they were by the capture proxy),
                         without a length prefix of its own; other bits reserved
                         (0; readers ignore unknown bits). Files without RAW
                         records read as before.
        timestamp  u64   Unix time in nanoseconds (when read from / written to the socket)
        conn_id    u64   connection id, unique within the recording process
        local      u16 length + UTF-8 ``host:port`` of the recording end
        remote     u16 length + UTF-8 ``host:port`` of the peer
        frame      the rest: one whole RocketMQ frame, its 4-byte length prefix included
                   (or, with RAW, one or more raw bytes)

The format is append-only: a writer only ever adds whole records at the end, so
a file being written is readable up to its last whole record (a cut-off tail
raises :class:`TruncatedCaptureError` unless the reader is told to tolerate it).
"""

from __future__ import annotations

import enum
import struct
from typing import BinaryIO, Callable, Iterator

import attrs

from .errors import CaptureFormatError, TruncatedCaptureError

__all__ = [
    "MAGIC",
    "VERSION",
    "FILE_HEADER",
    "FILE_HEADER_SIZE",
    "Direction",
    "FLAG_RAW",
    "Role",
    "CaptureRecord",
    "CaptureProblem",
    "CaptureFormatError",
    "TruncatedCaptureError",
    "encode_file_header",
    "encode_record",
    "encode_record_fields",
    "encode_addresses",
    "encode_record_with_addresses",
    "connection_head",
    "BATCH_PAYLOAD",
    "encode_record_batch",
    "decode_record",
    "CaptureReader",
    "iter_records",
    "read_records",
]

MAGIC = b"TRKCAP\r\n"
VERSION = 1
FILE_HEADER_SIZE = 16
_HEADER = struct.Struct(">8sHHI")
FILE_HEADER = _HEADER.pack(MAGIC, VERSION, FILE_HEADER_SIZE, 0)

_U32 = struct.Struct(">I")
_FIXED = struct.Struct(">BBHQQ")  # direction, role, flags, timestamp, conn id
_HEAD = struct.Struct(">IBBHQQ")  # the record length, then _FIXED
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
#: the smallest record: fixed fields, two empty addresses, one raw byte
MIN_RECORD_LENGTH = _FIXED.size + 2 + 2 + 1
#: flags bit: the record holds raw bytes that are not a frame (see the module docstring)
FLAG_RAW = 0x0001
#: a record can hold the largest frame remoting accepts (16 MiB) plus addresses
MAX_RECORD_LENGTH = 16 * 1024 * 1024 + 4 + _FIXED.size + 2 * (2 + 0xFFFF)


class Direction(enum.IntEnum):
    RECEIVED = 0
    SENT = 1


class Role(enum.IntEnum):
    UNKNOWN = 0
    SERVER = 1
    CLIENT = 2


@attrs.frozen(slots=True)
class CaptureRecord:
    timestamp_ns: int
    connection_id: int
    local_address: str
    remote_address: str
    direction: Direction
    frame: bytes
    role: Role = Role.UNKNOWN
    flags: int = 0

    @property
    def raw(self) -> bool:
        """True when ``frame`` holds unparsed bytes rather than a frame."""
        return bool(self.flags & FLAG_RAW)

    @property
    def payload(self) -> bytes:
        """The frame without its length prefix (what ``decode_command`` takes)."""
        return self.frame[4:]


@attrs.frozen(slots=True)
class CaptureProblem:
    """Something a capture reader could not read, reported instead of raised: a gap in a
    TCP stream, a packet cut by the snaplen, bytes that are no RocketMQ frame, a file cut
    off. ``kind`` is a short tag (``gap``, ``resync``, ``partial-frame``, ``not-rocketmq``,
    ``bad-frame``, ``overlap-conflict``, ``truncated-packet``, ``bad-packet``,
    ``truncated-file``, ``bad-file``); ``what`` says it for people. A problem of one
    stream carries its connection id and label (``client -> server``), the stream offset
    and the direction; a file's problem carries the file offset."""

    kind: str
    what: str
    timestamp_ns: int | None = None
    connection_id: int | None = None
    connection: str | None = None
    direction: Direction | None = None
    stream_offset: int | None = None
    file_offset: int | None = None

    def __str__(self) -> str:
        where = self.connection if self.connection is not None else "file"
        if self.connection_id is not None:
            where = f"conn {self.connection_id} ({where})"
        return f"{where}: {self.what}"


def encode_file_header() -> bytes:
    return FILE_HEADER


def encode_addresses(local_address: str, remote_address: str) -> bytes:
    """The two address fields of a record; a writer may keep them per connection and
    pass them to :func:`encode_record_with_addresses`."""
    local = local_address.encode("utf-8")
    remote = remote_address.encode("utf-8")
    if len(local) > 0xFFFF or len(remote) > 0xFFFF:
        raise CaptureFormatError("an address longer than 65535 bytes cannot be recorded")
    return b"".join((_U16.pack(len(local)), local, _U16.pack(len(remote)), remote))


def connection_head(connection_id: int, local_address: str, remote_address: str) -> tuple[Callable[..., bytes], bytes]:
    """For a writer appending many records of one connection: ``(pack, tail)``, where
    ``tail`` holds the connection's fixed fields (conn id, both addresses) and
    ``pack(length, direction, role, flags, timestamp_ns, tail)`` a record's whole head,
    ``len(tail) + 16`` bytes, in one call; the frame follows it. ``length`` is the
    record's length field: the head's size less 4, plus the frame's."""
    tail = _U64.pack(connection_id) + encode_addresses(local_address, remote_address)
    return struct.Struct(f">IBBHQ{len(tail)}s").pack, tail


#: :func:`encode_record_batch` item kind bit: the data is a frame's payload, without its
#: 4-byte length field (what a frame decoder yields); the record gets the length put back.
#: Without it the data is a whole frame. Bit 0 of a kind is the direction.
BATCH_PAYLOAD = 2
_batch_heads: dict[int, tuple[Callable[..., bytes], Callable[..., bytes]]] = {}
_pack_fixed = struct.Struct(">BBHQ").pack  # direction, role, flags, timestamp


def encode_record_batch(tail: bytes, received_ns: int, sent_ns: int, role: int, items: list, out: list) -> int:
    """The records of many frames of one connection, for a writer that keeps the frames
    by reference: appends two parts per record to ``out``, its head (through the frame's
    length field, for a payload) and the frame's bytes (the item's own object), and
    returns the bytes appended. ``tail`` is :func:`connection_head`'s; ``items`` is flat,
    ``[kind, data, kind, data, ...]``, ``kind`` the direction plus :data:`BATCH_PAYLOAD`
    when ``data`` is a payload; the received frames' timestamp is ``received_ns``, the
    sent ones' ``sent_ns``. The records, joined, are what :func:`encode_record_fields`
    makes for each frame (flags 0), byte for byte."""
    m = _FIXED.size - 8 + len(tail)  # a head's bytes after its length field
    heads = _batch_heads.get(m)
    if heads is None:
        heads = _batch_heads[m] = (struct.Struct(f">I{m}s").pack, struct.Struct(f">I{m}sI").pack)
    head_frame, head_payload = heads
    fixed = (_pack_fixed(0, role, 0, received_ns) + tail, _pack_fixed(1, role, 0, sent_ns) + tail)
    append = out.append
    total = 0
    it = iter(items)
    for kind, data in zip(it, it):
        if data.__class__ is not bytes:
            data = bytes(data)  # the caller may reuse its buffer
        if kind & BATCH_PAYLOAD:
            n = m + 4 + len(data)
            append(head_payload(n, fixed[kind & 1], len(data)))
        else:
            n = m + len(data)
            append(head_frame(n, fixed[kind & 1]))
        append(data)
        total += n + 4
    return total


def encode_record_with_addresses(
    timestamp_ns: int, connection_id: int, addresses: bytes, direction: int, role: int, frame: bytes, flags: int = 0
) -> bytes:
    """One record, its address fields already encoded (:func:`encode_addresses`)."""
    head = _HEAD.pack(_FIXED.size + len(addresses) + len(frame), direction, role, flags, timestamp_ns, connection_id)
    return b"".join((head, addresses, frame))


def encode_record_fields(
    timestamp_ns: int,
    connection_id: int,
    local_address: str,
    remote_address: str,
    direction: int,
    role: int,
    frame: bytes,
    flags: int = 0,
) -> bytes:
    """One record from its fields (no record object)."""
    return encode_record_with_addresses(
        timestamp_ns, connection_id, encode_addresses(local_address, remote_address), direction, role, frame, flags
    )


def encode_record(record: CaptureRecord) -> bytes:
    return encode_record_fields(
        record.timestamp_ns,
        record.connection_id,
        record.local_address,
        record.remote_address,
        record.direction,
        record.role,
        record.frame,
        record.flags,
    )


def decode_record(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[CaptureRecord, int]:
    """Decode the record at ``offset``; returns it and the offset after it."""
    end_of_data = len(data)
    if offset + 4 > end_of_data:
        raise TruncatedCaptureError(f"capture ends inside a record length at offset {offset}")
    (length,) = _U32.unpack_from(data, offset)
    if length < MIN_RECORD_LENGTH or length > MAX_RECORD_LENGTH:
        raise CaptureFormatError(f"impossible record length {length} at offset {offset}")
    start = offset + 4
    end = start + length
    if end > end_of_data:
        raise TruncatedCaptureError(
            f"capture ends inside a record at offset {offset} ({end - end_of_data} bytes missing)"
        )
    direction, role, flags, timestamp, conn_id = _FIXED.unpack_from(data, start)
    pos = start + _FIXED.size
    try:
        (llen,) = _U16.unpack_from(data, pos)
        pos += 2
        local = bytes(data[pos : pos + llen]).decode("utf-8")
        pos += llen
        (rlen,) = _U16.unpack_from(data, pos)
        pos += 2
        remote = bytes(data[pos : pos + rlen]).decode("utf-8")
        pos += rlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise CaptureFormatError(f"bad addresses in the record at offset {offset}: {exc}") from None
    raw = flags & FLAG_RAW
    if pos + (1 if raw else 4) > end:
        raise CaptureFormatError(f"record at offset {offset}: addresses overrun the record")
    frame = bytes(data[pos:end])
    if raw:
        pass
    elif (flen := _U32.unpack_from(frame, 0)[0]) != len(frame) - 4:
        raise CaptureFormatError(
            f"record at offset {offset}: frame says {flen} bytes but the record holds {len(frame) - 4}"
        )
    dir_ = _DIRECTIONS.get(direction)  # (the enum by value: a dict lookup, not an Enum call per record)
    if dir_ is None:
        raise CaptureFormatError(f"record at offset {offset}: unknown direction {direction}")
    role_ = _ROLES.get(role, Role.UNKNOWN)
    return CaptureRecord(timestamp, conn_id, local, remote, dir_, frame, role_, flags), end


_DIRECTIONS = {d.value: d for d in Direction}
_ROLES = {r.value: r for r in Role}


def _check_header(data: bytes | bytearray | memoryview) -> int:
    magic, version, hdrlen, _ = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise CaptureFormatError(f"not a trocket capture (magic {bytes(magic)!r})")
    if version != VERSION:
        raise CaptureFormatError(f"unsupported capture version {version}")
    if hdrlen < FILE_HEADER_SIZE:
        raise CaptureFormatError(f"bad capture header length {hdrlen}")
    return hdrlen


class CaptureReader:
    """Incremental, sans-I/O: ``feed`` bytes as they come, pull whole records.

    >>> r = CaptureReader()
    >>> r.feed(FILE_HEADER)
    >>> r.next_record() is None
    True
    """

    __slots__ = ("_buf", "_pos", "_header_done", "records_read")

    def __init__(self, *, expect_header: bool = True) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._header_done = not expect_header
        self.records_read = 0

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos and self._pos >= len(self._buf) - self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def next_record(self) -> CaptureRecord | None:
        buf = self._buf
        if not self._header_done:
            if len(buf) - self._pos < FILE_HEADER_SIZE:
                return None
            self._pos += _check_header(memoryview(buf)[self._pos :])
            self._header_done = True
        available = len(buf) - self._pos
        if available < 4:
            return None
        (length,) = _U32.unpack_from(buf, self._pos)
        if length < MIN_RECORD_LENGTH or length > MAX_RECORD_LENGTH:
            raise CaptureFormatError(f"impossible record length {length} after {self.records_read} records")
        if available < 4 + length:
            return None
        record, end = decode_record(buf, self._pos)
        self._pos = end
        self.records_read += 1
        return record

    def __iter__(self) -> Iterator[CaptureRecord]:
        while (record := self.next_record()) is not None:
            yield record

    def close(self, *, allow_truncated: bool = False) -> None:
        """End of input: raise if it cut a record (or the header) short."""
        if self.buffered and not allow_truncated:
            raise TruncatedCaptureError(
                f"capture ends with {self.buffered} bytes of an incomplete "
                f"{'record' if self._header_done else 'file header'}"
            )


def iter_records(
    stream: BinaryIO, *, chunk_size: int = 1 << 20, allow_truncated: bool = False
) -> Iterator[CaptureRecord]:
    """Records from a binary stream (an open file, a socket's makefile, ...)."""
    reader = CaptureReader()
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        reader.feed(chunk)
        yield from reader
    reader.close(allow_truncated=allow_truncated)


def read_records(data: bytes, *, allow_truncated: bool = False) -> list[CaptureRecord]:
    """Every record of a whole capture held in memory."""
    reader = CaptureReader()
    reader.feed(data)
    records = list(reader)
    reader.close(allow_truncated=allow_truncated)
    return records


from .accel import accelerated  # noqa: E402  (after the pure function it replaces)

encode_record_batch = accelerated(encode_record_batch)
