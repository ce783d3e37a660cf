"""The stored-message record: what the commit log holds and PULL_MESSAGE returns.

Layout (RocketMQ 4.9.8 ``CommitLog.MessageExtEncoder`` / ``MessageDecoder.decode``), all
big-endian, offsets for IPv4 hosts (``sys_flag`` bits 0x10/0x20 make BORNHOST/STOREHOST
16-byte IPs + port, 20 bytes instead of 8, and shift what follows)::

     0 TOTALSIZE i32          40 BORNTIMESTAMP i64        84 BODYLEN i32, BODY
     4 MAGICCODE i32          48 BORNHOST ip4 + port i32     TOPICLEN i8, TOPIC
     8 BODYCRC i32            56 STORETIMESTAMP i64          PROPLEN i16, PROPERTIES
    12 QUEUEID i32            64 STOREHOST ip4 + port i32
    16 FLAG i32               72 RECONSUMETIMES i32
    20 QUEUEOFFSET i64        76 PREPAREDTRANSACTIONOFFSET i64
    28 PHYSICALOFFSET i64
    36 SYSFLAG i32

TOTALSIZE is 91 + body + topic + properties (``calMsgLength``), +12 per IPv6 host. A
commit-log file ends in a *blank* record: TOTALSIZE (the bytes left) and
:data:`BLANK_MAGIC_CODE`, nothing else guaranteed. The magic codes are Java's
``0xAABBCCDD ^ 1880681586 + 8`` and ``0xBBCCDDEE ^ 1880681586 + 8`` (``+`` binds first).

For the store: :func:`encode_record_into` writes a record into a preallocated buffer
(bytearray, mmap, memoryview) with no intermediate copy; do that outside the append
lock, then under it copy the bytes to the append position and fill in
QUEUEOFFSET / PHYSICALOFFSET / STORETIMESTAMP with :func:`patch_record`, as Java's
``doAppend`` does. Their byte offsets are the ``OFFSET_*`` constants (STORETIMESTAMP's
moves with BORNHOST's size: :func:`store_timestamp_offset`).

Decoding is stricter than Java, which trusts every length and ignores TOTALSIZE and
MAGICCODE: here each length is checked against the buffer, TOTALSIZE must equal the
bytes the fields take, ports must be 0-65535 and text must be UTF-8. Any violation, a
corrupt zlib body or a truncated record raises :class:`MessageDecodeError`, never
anything else. The body is inflated when SYSFLAG bit 0 is set (``decompress=True``);
SYSFLAG itself is left as stored, as Java leaves it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import NamedTuple

from ..errors import MessageDecodeError
from .crc import body_crc as compute_body_crc
from ..errors import MessageEncodeError
from .hosts import HostAddress, bytes_to_ip, ip_to_bytes
from .message import MessageExt
from .properties import (
    MAX_PROPERTIES_LENGTH,
    decode_properties_bytes,
    encode_properties_bytes,
    utf8,
)
from .sysflag import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOSTADDRESS_V6_FLAG

__all__ = [
    "BLANK_MAGIC_CODE",
    "END_FILE_MIN_BLANK_LENGTH",
    "MAX_TOPIC_LENGTH",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "OFFSET_BODY_CRC",
    "OFFSET_BORN_HOST",
    "OFFSET_BORN_TIMESTAMP",
    "OFFSET_FLAG",
    "OFFSET_MAGIC_CODE",
    "OFFSET_PHYSICAL_OFFSET",
    "OFFSET_QUEUE_ID",
    "OFFSET_QUEUE_OFFSET",
    "OFFSET_STORE_TIMESTAMP",
    "OFFSET_SYS_FLAG",
    "OFFSET_TOTAL_SIZE",
    "RECORD_FIXED_SIZE",
    "RecordHead",
    "decode_record",
    "decode_records",
    "dispatch_fields",
    "encode_blank_into",
    "place_record",
    "encode_record",
    "encode_record_into",
    "encode_store_record",
    "iter_records",
    "patch_record",
    "peek_record",
    "record_head",
    "record_size",
    "store_timestamp_offset",
]

#: ``CommitLog.MESSAGE_MAGIC_CODE`` (Java int -626843481), unsigned.
MESSAGE_MAGIC_CODE = 0xDAA320A7
#: ``CommitLog.BLANK_MAGIC_CODE`` (Java int -875286124): the end-of-file filler record.
BLANK_MAGIC_CODE = 0xCBD43194
#: 5.x's magic for records with an ``i16`` topic length. 4.9.8 never writes it; decoded
#: (only) so that a 4.9 client of ours can read a 5.x broker's long topics.
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB
#: A blank record is at least TOTALSIZE + MAGICCODE.
END_FILE_MIN_BLANK_LENGTH = 8
#: Topic bytes fit the signed length byte of a V1 record.
MAX_TOPIC_LENGTH = 127

OFFSET_TOTAL_SIZE = 0
OFFSET_MAGIC_CODE = 4
OFFSET_BODY_CRC = 8
OFFSET_QUEUE_ID = 12
OFFSET_FLAG = 16
OFFSET_QUEUE_OFFSET = 20  #: ``MessageDecoder.QUEUE_OFFSET_POSITION``; filled under the lock
OFFSET_PHYSICAL_OFFSET = 28  #: ``PHY_POS_POSITION``; filled under the lock
OFFSET_SYS_FLAG = 36
OFFSET_BORN_TIMESTAMP = 40
OFFSET_BORN_HOST = 48
#: STORETIMESTAMP with an IPv4 born host (``MESSAGE_STORE_TIMESTAMP_POSTION``); 68 with IPv6.
OFFSET_STORE_TIMESTAMP = 56

#: Record bytes besides body, topic and properties, IPv4 hosts (``calMsgLength`` of nothing).
RECORD_FIXED_SIZE = 91
_HOST_EXTRA = 12  # a 16-byte IP instead of 4

# Everything from TOTALSIZE to BODYLEN, one struct per (born v6, store v6).
_FIXED = {
    (born6, store6): struct.Struct(
        ">iIiiiqqiq" + ("16si" if born6 else "4si") + "q" + ("16si" if store6 else "4si") + "iqi"
    )
    for born6 in (False, True)
    for store6 in (False, True)
}
#: positions in a ``_FIXED`` unpack: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG,
#: QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP, born IP, born port,
#: STORETIMESTAMP, store IP, store port, RECONSUMETIMES, PREPARED offset, BODYLENGTH
(_F_TOTAL, _, _F_CRC, _F_QUEUE_ID, _, _F_QUEUE_OFFSET, _F_PHYSICAL, _F_SYS_FLAG, _, _,
 _F_BORN_PORT, _F_STORE_TS, _, _F_STORE_PORT, _, _, _F_BODY_LEN) = range(17)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_PEEK = struct.Struct(">iI")
_MAPPED_PREFIX = b"\x00" * 10 + b"\xff\xff"
_NO_HOST = HostAddress("0.0.0.0", 0)

Buffer = bytes | bytearray | memoryview


def _layout(sys_flag: int) -> struct.Struct:
    return _FIXED[bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)]


def store_timestamp_offset(sys_flag: int) -> int:
    """Offset of STORETIMESTAMP in a record with this SYSFLAG (56; 68 with an IPv6 born host)."""
    return OFFSET_STORE_TIMESTAMP + (_HOST_EXTRA if sys_flag & BORNHOST_V6_FLAG else 0)


def record_size(body_len: int, topic_len: int, properties_len: int, sys_flag: int = 0) -> int:
    """``CommitLog.calMsgLength``: TOTALSIZE of a record with these byte lengths."""
    size = RECORD_FIXED_SIZE + topic_len + max(body_len, 0) + max(properties_len, 0)
    if sys_flag & BORNHOST_V6_FLAG:
        size += _HOST_EXTRA
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        size += _HOST_EXTRA
    return size


# -- encoding ----------------------------------------------------------------------


def _host_ip(host: HostAddress | tuple[str, int], v6: bool, which: str) -> bytes:
    raw = ip_to_bytes(host[0])
    if v6:
        return raw if len(raw) == 16 else _MAPPED_PREFIX + raw
    if len(raw) != 4:
        raise MessageEncodeError(
            f"{which} {host[0]} is IPv6 but SYSFLAG lacks its IPv6 bit "
            f"(0x{BORNHOST_V6_FLAG if which == 'born host' else STOREHOSTADDRESS_V6_FLAG:02x})"
        )
    return raw


def _topic_bytes(topic: str | bytes) -> bytes:
    data = utf8(topic, "topic") if isinstance(topic, str) else bytes(topic)
    if len(data) > MAX_TOPIC_LENGTH:
        raise MessageEncodeError(
            f"topic is {len(data)} bytes, a record holds at most {MAX_TOPIC_LENGTH}"
        )
    return data


def _properties_bytes(properties: Mapping[str, str | None] | str | Buffer) -> Buffer:
    data = properties
    if type(data) is not bytes:  # the broker's put path passes bytes: no ABC check
        if isinstance(properties, Mapping):
            return encode_properties_bytes(properties)
        data = utf8(properties, "properties") if isinstance(properties, str) else properties
    if len(data) > MAX_PROPERTIES_LENGTH:
        raise MessageEncodeError(
            f"properties are {len(data)} bytes, more than the maximum {MAX_PROPERTIES_LENGTH}"
        )
    return data


def encode_record_into(
    buf: bytearray | memoryview,
    offset: int,
    *,
    topic: str | bytes,
    body: Buffer = b"",
    properties: Mapping[str, str | None] | str | Buffer = b"",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: HostAddress | tuple[str, int] = _NO_HOST,
    store_timestamp: int = 0,
    store_host: HostAddress | tuple[str, int] = _NO_HOST,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    body_crc: int | None = None,
) -> int:
    """Write one record at ``buf[offset:]``; returns its size (TOTALSIZE).

    ``topic`` and ``properties`` may be given already encoded (bytes), and properties as
    the client's raw string, which Java stores verbatim. ``body`` is written as is (a
    compressed body must already be zlib data with :data:`COMPRESSED_FLAG` set).
    ``body_crc`` defaults to :func:`~trocket.codecs.message.crc.body_crc` of the body.
    The hosts' IP size must agree with the SYSFLAG IPv6 bits (an IPv4 host under a set
    bit is written IPv4-mapped); see :func:`~trocket.codecs.message.sysflag.with_host_flags`.
    """
    topic_data = _topic_bytes(topic)
    props = _properties_bytes(properties)
    born6 = bool(sys_flag & BORNHOST_V6_FLAG)
    store6 = bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)
    fixed = _FIXED[born6, store6]
    body_len = len(body)
    topic_len = len(topic_data)
    props_len = len(props)
    size = fixed.size + body_len + 1 + topic_len + 2 + props_len
    if offset < 0 or len(buf) - offset < size:
        raise MessageEncodeError(
            f"record of {size} bytes does not fit the buffer at offset {offset} (size {len(buf)})"
        )
    try:
        fixed.pack_into(
            buf,
            offset,
            size,
            MESSAGE_MAGIC_CODE,
            compute_body_crc(body) if body_crc is None else body_crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            _host_ip(born_host, born6, "born host"),
            born_host[1],
            store_timestamp,
            _host_ip(store_host, store6, "store host"),
            store_host[1],
            reconsume_times,
            prepared_transaction_offset,
            body_len,
        )
    except struct.error as exc:
        raise MessageEncodeError(f"record field does not fit its Java type: {exc}") from None
    pos = offset + fixed.size
    buf[pos : pos + body_len] = body
    pos += body_len
    buf[pos] = topic_len
    pos += 1
    buf[pos : pos + topic_len] = topic_data
    pos += topic_len
    _I16.pack_into(buf, pos, props_len)
    pos += 2
    buf[pos : pos + props_len] = props
    return size


def encode_store_record(
    size: int,
    topic: str | bytes,
    body: Buffer,
    properties: str | Buffer,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress | tuple[str, int],
    store_host: HostAddress | tuple[str, int],
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> bytearray:
    """The commit log's record of one message in a new ``bytearray`` of ``size`` bytes
    (the store computed it), as :func:`encode_record_into` writes it at offset 0 with
    QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP 0 (:func:`place_record` sets them
    under the append lock). Positional, for the store's put: its compiled twin makes the
    record in one call. :class:`MessageEncodeError` as :func:`encode_record_into`."""
    buf = bytearray(size)
    encode_record_into(
        buf, 0, topic=topic, body=body, properties=properties, queue_id=queue_id, flag=flag, sys_flag=sys_flag,
        born_timestamp=born_timestamp, born_host=born_host, store_host=store_host, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
    )
    return buf


def encode_record(msg: MessageExt, *, java_order: bool = False) -> bytes:
    """``MessageDecoder.encode(msg, false)``: one record from a :class:`MessageExt`.

    Fields are written as they are (``body_crc`` included; TOTALSIZE is computed, not
    taken from ``store_size``); properties in dict order, or Java ``HashMap`` order with
    ``java_order``.
    """
    topic = _topic_bytes(msg.topic)
    props = encode_properties_bytes(msg.properties, java_order=java_order)
    out = bytearray(record_size(len(msg.body), len(topic), len(props), msg.sys_flag))
    encode_record_into(
        out,
        0,
        topic=topic,
        body=msg.body,
        properties=props,
        queue_id=msg.queue_id,
        flag=msg.flag,
        queue_offset=msg.queue_offset,
        physical_offset=msg.commit_log_offset,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_timestamp=msg.store_timestamp,
        store_host=msg.store_host,
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
        body_crc=msg.body_crc,
    )
    return bytes(out)


def patch_record(
    buf: bytearray | memoryview,
    record_offset: int,
    *,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int | None = None,
) -> None:
    """Fill in the fields the store only knows under its append lock (Java's ``doAppend``)."""
    try:
        _I64.pack_into(buf, record_offset + OFFSET_QUEUE_OFFSET, queue_offset)
        _I64.pack_into(buf, record_offset + OFFSET_PHYSICAL_OFFSET, physical_offset)
        if store_timestamp is not None:
            (sys_flag,) = _I32.unpack_from(buf, record_offset + OFFSET_SYS_FLAG)
            _I64.pack_into(buf, record_offset + store_timestamp_offset(sys_flag), store_timestamp)
    except struct.error as exc:
        raise MessageEncodeError(f"cannot patch record at {record_offset}: {exc}") from None


_QQ = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET: adjacent


def place_record(
    view: memoryview,
    pos: int,
    record: bytearray,
    size: int,
    queue_offset: int,
    physical_offset: int,
    ts_at: int,
    store_timestamp: int,
) -> None:
    """The commit log's append, under its lock: fill QUEUEOFFSET, PHYSICALOFFSET and the
    STORETIMESTAMP at ``ts_at`` into ``record`` (one encoded record of ``size`` bytes,
    :func:`encode_record_into`), then copy it to ``view[pos:]``, its TOTALSIZE last.

    A process killed in the middle of the copy (kill -9, the memory itself intact) then
    leaves TOTALSIZE 0 -- the end of the log for recovery -- never the prefix of a record
    whose tail is missing: a cut inside the properties passes every check recovery can
    make (sizes agree, the body CRC matches), so such a torn record would have been
    dispatched and served. The caller checks that the record fits ``view``."""
    _QQ.pack_into(record, OFFSET_QUEUE_OFFSET, queue_offset, physical_offset)
    _I64.pack_into(record, ts_at, store_timestamp)
    src = memoryview(record)
    view[pos + 4 : pos + size] = src[4:size]
    view[pos : pos + 4] = src[:4]


def encode_blank_into(buf: bytearray | memoryview, offset: int, size: int) -> None:
    """Mark the last ``size`` bytes of a commit-log file as the blank end-of-file record."""
    if size < END_FILE_MIN_BLANK_LENGTH or len(buf) - offset < END_FILE_MIN_BLANK_LENGTH:
        raise MessageEncodeError(f"a blank record needs {END_FILE_MIN_BLANK_LENGTH} bytes")
    try:
        _PEEK.pack_into(buf, offset, size, BLANK_MAGIC_CODE)
    except struct.error as exc:
        raise MessageEncodeError(f"blank record size {size}: {exc}") from None


# -- decoding ----------------------------------------------------------------------


def peek_record(buf: Buffer, offset: int = 0) -> tuple[int, int]:
    """``(TOTALSIZE, MAGICCODE)`` of the record at ``offset`` (magic unsigned), for scanners."""
    if offset < 0 or len(buf) - offset < END_FILE_MIN_BLANK_LENGTH:
        raise MessageDecodeError(f"no record header at offset {offset}: buffer ends at {len(buf)}")
    total, magic = _PEEK.unpack_from(buf, offset)
    return total, magic


def _inflate(data: memoryview) -> bytes:
    # UtilAll.uncompress: an InflaterInputStream read to its end; trailing bytes ignored.
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data)
    except zlib.error as exc:
        raise MessageDecodeError(f"compressed body is not a valid zlib stream: {exc}") from None
    if not inflater.eof:
        raise MessageDecodeError("compressed body ends before its zlib stream does")
    return out


def _walk(view: memoryview, offset: int, check_magic: bool) -> tuple[tuple, int, str, int, int]:
    """The checks every record decode makes, and what they find: ``(fixed fields, body
    position, topic, properties position, end)`` -- the fields from TOTALSIZE to
    BODYLENGTH as :data:`_FIXED` unpacks them. Raises :class:`MessageDecodeError` for a
    record that is not whole and consistent (sizes, magic, UTF-8 topic, ports)."""
    limit = len(view)
    if offset < 0 or limit - offset < END_FILE_MIN_BLANK_LENGTH:
        raise MessageDecodeError(f"record at {offset} truncated: buffer ends at {limit}")
    total, magic = _PEEK.unpack_from(view, offset)
    v2 = False
    if magic != MESSAGE_MAGIC_CODE:
        if magic == MESSAGE_MAGIC_CODE_V2:
            v2 = True
        elif check_magic:
            if magic == BLANK_MAGIC_CODE:
                raise MessageDecodeError(f"blank record at {offset} (end of a commit-log file)")
            raise MessageDecodeError(f"record at {offset} has bad magic code 0x{magic:08X}")
    if limit - offset < OFFSET_BORN_HOST:
        raise MessageDecodeError(
            f"record at {offset} truncated: {limit - offset} bytes, the header needs more"
        )
    (sys_flag,) = _I32.unpack_from(view, offset + OFFSET_SYS_FLAG)
    fixed = _layout(sys_flag)
    end = offset + total
    if total < fixed.size + 3 or end > limit:
        raise MessageDecodeError(
            f"record at {offset}: TOTALSIZE {total} impossible with {limit - offset} bytes left"
        )
    fields = fixed.unpack_from(view, offset)
    body_pos = offset + fixed.size
    body_len = fields[_F_BODY_LEN]
    if body_len < 0 or body_len > end - body_pos:
        raise MessageDecodeError(f"record at {offset}: body length {body_len} out of bounds")
    pos = body_pos + body_len
    if v2:
        if end - pos < 2:
            raise MessageDecodeError(f"record at {offset}: truncated before the topic length")
        (topic_len,) = _I16.unpack_from(view, pos)
        pos += 2
    else:
        if pos >= end:
            raise MessageDecodeError(f"record at {offset}: truncated before the topic length")
        topic_len = view[pos]
        if topic_len > 127:
            topic_len -= 256
        pos += 1
    if topic_len < 0 or topic_len > end - pos - 2:
        raise MessageDecodeError(f"record at {offset}: topic length {topic_len} out of bounds")
    try:
        topic = str(view[pos : pos + topic_len], "utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"record at {offset}: topic is not UTF-8: {exc.reason}") from None
    pos += topic_len
    (props_len,) = _I16.unpack_from(view, pos)
    pos += 2
    if props_len < 0 or pos + props_len != end:
        raise MessageDecodeError(
            f"record at {offset}: properties length {props_len} disagrees with TOTALSIZE {total}"
        )
    born_port, store_port = fields[_F_BORN_PORT], fields[_F_STORE_PORT]
    if not (0 <= born_port <= 0xFFFF and 0 <= store_port <= 0xFFFF):
        raise MessageDecodeError(
            f"record at {offset}: port out of range (born {born_port}, store {store_port})"
        )
    return fields, body_pos, topic, pos, end


def _as_bytes_view(buf: Buffer) -> memoryview:
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _check_crc(view: memoryview, offset: int, crc: int, body_pos: int, body_len: int) -> None:
    actual = compute_body_crc(view[body_pos : body_pos + body_len])
    if actual != crc:
        raise MessageDecodeError(f"record at {offset}: BODYCRC {crc} but the body's CRC is {actual}")


def decode_record(
    buf: Buffer,
    offset: int = 0,
    *,
    decompress: bool = True,
    read_body: bool = True,
    check_magic: bool = True,
    check_crc: bool = False,
) -> tuple[MessageExt, int]:
    """Decode the record at ``buf[offset:]``; returns it and the offset just past it.

    ``check_magic`` rejects anything but :data:`MESSAGE_MAGIC_CODE` (and the 5.x V2
    magic); Java's reader never looks. ``check_crc`` compares BODYCRC with the stored
    body. ``read_body=False`` skips the body as Java's ``readBody=false`` does.
    """
    view = _as_bytes_view(buf)
    fields, body_pos, topic, props_pos, end = _walk(view, offset, check_magic)
    (
        total,
        _,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_ts,
        born_ip,
        born_port,
        store_ts,
        store_ip,
        store_port,
        reconsume_times,
        prepared_offset,
        body_len,
    ) = fields
    if check_crc:
        _check_crc(view, offset, crc, body_pos, body_len)
    body = b""
    if body_len and read_body:
        raw_body = view[body_pos : body_pos + body_len]
        body = _inflate(raw_body) if decompress and sys_flag & COMPRESSED_FLAG else bytes(raw_body)
    properties = decode_properties_bytes(view[props_pos:end]) if props_pos < end else {}
    msg = MessageExt(  # positional: the decode hot path; order is MessageExt's fields
        topic,
        body,
        flag,
        properties,
        None,
        queue_id,
        total,
        queue_offset,
        sys_flag,
        born_ts,
        HostAddress(bytes_to_ip(born_ip), born_port),
        store_ts,
        HostAddress(bytes_to_ip(store_ip), store_port),
        physical_offset,
        crc,
        reconsume_times,
        prepared_offset,
    )
    return msg, end


def dispatch_fields(
    buf: Buffer, offset: int = 0, *, check_crc: bool = False
) -> tuple[int, str, int, int, int, int, int, str]:
    """What a consume-queue dispatch needs of the record at ``buf[offset:]``:
    ``(TOTALSIZE, topic, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP,
    properties string)``, checked as :func:`decode_record` checks, without the hosts,
    the body or the properties map it builds (a replicating slave and recovery read
    every record this way; look properties up with :func:`~.properties.get_property`,
    as the put path does). Properties that are not UTF-8 raise
    :class:`MessageDecodeError`, as there."""
    view = _as_bytes_view(buf)
    fields, body_pos, topic, props_pos, end = _walk(view, offset, True)
    if check_crc:
        _check_crc(view, offset, fields[_F_CRC], body_pos, fields[_F_BODY_LEN])
    try:
        props = str(view[props_pos:end], "utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"properties are not valid UTF-8: {exc.reason}") from None
    return (
        fields[_F_TOTAL], topic, fields[_F_QUEUE_ID], fields[_F_QUEUE_OFFSET], fields[_F_PHYSICAL],
        fields[_F_SYS_FLAG], fields[_F_STORE_TS], props,
    )


class RecordHead(NamedTuple):
    """A record's fixed part, TOTALSIZE to BODYLENGTH (IP fields as raw bytes), and the
    position of its body."""

    total_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_length: int
    body_position: int


def record_head(buf: Buffer, offset: int = 0) -> RecordHead:
    """The fixed part of the record at ``buf[offset:]``: one struct read, for a reader
    that wants a few fields of a record whose framing :func:`dispatch_fields` (or
    :func:`decode_record`) has checked -- this checks only that the bytes are there
    (``struct.error`` otherwise)."""
    (sys_flag,) = _I32.unpack_from(buf, offset + OFFSET_SYS_FLAG)
    fixed = _layout(sys_flag)
    return RecordHead._make((*fixed.unpack_from(buf, offset), offset + fixed.size))


def iter_records(
    buf: Buffer,
    *,
    decompress: bool = True,
    read_body: bool = True,
    check_magic: bool = True,
    check_crc: bool = False,
    strict: bool = True,
) -> Iterator[MessageExt]:
    """Every record of a PULL_MESSAGE body (records back to back).

    ``strict=False`` stops quietly at the first record that does not decode, as Java's
    ``MessageDecoder.decodes`` and the JS client do, instead of raising.
    """
    view = _as_bytes_view(buf)
    pos = 0
    limit = len(view)
    while pos < limit:
        try:
            msg, pos = decode_record(
                view,
                pos,
                decompress=decompress,
                read_body=read_body,
                check_magic=check_magic,
                check_crc=check_crc,
            )
        except MessageDecodeError:
            if strict:
                raise
            return
        yield msg


def decode_records(buf: Buffer, **options: bool) -> list[MessageExt]:
    """:func:`iter_records` as a list (same keyword options)."""
    return list(iter_records(buf, **options))


# The compiled twin when built (codecs/accel.py); the function above stays the reference.
from ..accel import accelerated, provide  # noqa: E402

provide("ip_to_bytes", ip_to_bytes)

encode_record_into = accelerated(encode_record_into)
encode_store_record = accelerated(encode_store_record)
place_record = accelerated(place_record)
dispatch_fields = accelerated(dispatch_fields)
