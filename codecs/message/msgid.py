"""RocketMQ's two message ids: the client's unique id and the broker's offset id.

Offset id (``MessageDecoder.createMessageId`` / ``decodeMessageId``): upper-case hex of the
store host's IP (4 or 16 bytes), its port (``i32``) and the record's commit-log offset
(``i64``): 32 hex chars for IPv4, 56 for IPv6. ``127.0.0.1:10911`` offset 3 is
``7F00000100002A9F0000000000000003``.

Unique id (``MessageClientIDSetter``, the ``UNIQ_KEY`` property): a per-process prefix of
IP (4 or 16 bytes), pid as a ``short`` and the class loader's ``hashCode()`` (an ``int``),
then per message the milliseconds since the start of the current month (``int``) and a
counter (``short``); upper-case hex, 32 or 56 chars. Java keeps the month start in a static
field set when the class loads and moves it only when the clock reaches the next month's
start; a clock that steps back less than 1000 s before it writes 0 (the NTP guard) and
further back writes the negative ``int``. More than 24.8 days into a month the ``int``
cast wraps negative; the hex is then just the low 32 bits, which readers take unsigned.

Months are calendar months in the JVM's default time zone (``Calendar.getInstance()``).
The codecs have no clock and no idea of the machine's zone: callers pass ``now_ms`` and a
``tzinfo`` (UTC by default). Midnight of the 1st that does not exist or happens twice
(a DST change at midnight) is read as ``zoneinfo`` does with ``fold=0``; Java's lenient
``Calendar`` may pick the other instant there.

Java accepts lower-case hex (it upper-cases first); so do the decoders here. Anything
else that is not a well-formed id raises :class:`MessageIdError`.
"""

from __future__ import annotations

import struct
from datetime import datetime, timedelta, timezone, tzinfo
from typing import NamedTuple

import attrs

from ..errors import MessageIdError
from ..errors import MessageEncodeError
from .hosts import HostAddress, bytes_to_ip, ip_to_bytes

__all__ = [
    "OffsetMessageId",
    "UniqueIdGenerator",
    "UniqueIdInfo",
    "decode_offset_msg_id",
    "decode_unique_id",
    "encode_offset_msg_id",
    "month_start_ms",
    "offset_msg_id_from_host_bytes",
]

_PORT_OFFSET = struct.Struct(">iq")
_PORT = struct.Struct(">i")
_ID_TAIL = struct.Struct(">HiIH")  # pid, class-loader hash, ms in month, counter
_HEX_CHARS = str.maketrans("", "", "0123456789abcdefABCDEF")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
#: Java's guard against small clock steps back (``diff > -1000_000``).
_NTP_TOLERANCE_MS = 1_000_000


def _hex_bytes(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise MessageIdError(f"{what} must be a str, not {type(text).__name__}")
    if len(text) not in (32, 56):
        raise MessageIdError(f"{what} must be 32 or 56 hex characters, got {len(text)}: {text!r}")
    if text.translate(_HEX_CHARS):
        raise MessageIdError(f"{what} is not hexadecimal: {text!r}")
    return bytes.fromhex(text)


# -- offset message id -------------------------------------------------------------


class OffsetMessageId(NamedTuple):
    """A decoded offset message id: where the broker stored the message."""

    ip: str
    port: int
    offset: int

    @property
    def host(self) -> HostAddress:
        return HostAddress(self.ip, self.port)


def encode_offset_msg_id(ip: str, port: int, offset: int) -> str:
    """``MessageDecoder.createMessageId``: hex of store IP, port (``i32``) and offset (``i64``)."""
    try:
        tail = _PORT_OFFSET.pack(port, offset)
    except struct.error as exc:
        raise MessageEncodeError(f"port {port} / offset {offset} out of range: {exc}") from None
    return (ip_to_bytes(ip) + tail).hex().upper()


def offset_msg_id(host_hex: str, offset: int) -> str:
    """The offset id of ``offset`` from its host part: the first 16 (IPv4) or 40 (IPv6)
    hex digits of :func:`encode_offset_msg_id`, made once per store host. (The commit
    log's per-put id: a compiled twin, the ``%``-format alone costs ~2k instructions.)"""
    return host_hex + "%016X" % offset


def offset_msg_id_from_host_bytes(host: bytes | bytearray | memoryview, offset: int) -> str:
    """Offset id from the raw 8- or 20-byte STOREHOST field of a record (no IP parsing)."""
    return (bytes(host) + offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> OffsetMessageId:
    """``MessageDecoder.decodeMessageId``; the port must be 0-65535 (``InetSocketAddress``)."""
    raw = _hex_bytes(msg_id, "offset message id")
    ip_len = 4 if len(raw) == 16 else 16
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    if not 0 <= port <= 0xFFFF:
        raise MessageIdError(f"offset message id has port {port} outside 0-65535: {msg_id!r}")
    return OffsetMessageId(bytes_to_ip(raw[:ip_len]), port, offset)


# -- unique (client) message id ----------------------------------------------------


def month_start_ms(now_ms: int, tz: tzinfo = timezone.utc, months: int = 0) -> int:
    """Epoch ms of 00:00 on the 1st of ``now_ms``'s month in ``tz``, shifted by ``months``."""
    local = (_EPOCH + timedelta(milliseconds=now_ms)).astimezone(tz)
    year, month0 = divmod(local.year * 12 + local.month - 1 + months, 12)
    return (datetime(year, month0 + 1, 1, tzinfo=tz) - _EPOCH) // _MS


class UniqueIdInfo(NamedTuple):
    """What a unique id says (``MessageClientIDSetter.get*FromID``)."""

    ip: str
    pid: int  #: the low 16 bits of the producer's pid, unsigned
    class_loader_hash: int  #: signed 32-bit
    ms_in_month: int  #: ms since its month started, read unsigned as Java does
    counter: int
    #: ``getNearlyTimeFromID`` given the decoder's ``now_ms``: the id's month is taken to
    #: be the current one, or the one before if that would put the id in the future.
    approx_time_ms: int | None


def decode_unique_id(
    uniq_id: str, *, now_ms: int | None = None, tz: tzinfo = timezone.utc
) -> UniqueIdInfo:
    """Split a unique id into its parts; with ``now_ms``, also its approximate creation time."""
    raw = _hex_bytes(uniq_id, "unique message id")
    ip_len = len(raw) - 12
    pid, loader_hash, span, counter = _ID_TAIL.unpack_from(raw, ip_len)
    approx = None
    if now_ms is not None:
        start = month_start_ms(now_ms, tz)
        if start + span >= now_ms:
            start = month_start_ms(now_ms, tz, -1)
        approx = start + span
    return UniqueIdInfo(bytes_to_ip(raw[:ip_len]), pid, loader_hash, span, counter, approx)


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


@attrs.define(slots=True)
class UniqueIdGenerator:
    """``MessageClientIDSetter.createUniqID`` for one process, clock supplied per call.

    ``ip`` is a text IP or its 4/16 raw bytes, ``pid`` is cut to 16 bits and
    ``class_loader_hash`` to 32 as Java's casts do. ``start_ms`` plays the JVM's class-load
    time (the first month start comes from it); by default the first :meth:`next_id` call.
    Not thread-safe; one generator per trio task group or lock it.
    """

    ip: str | bytes
    pid: int
    class_loader_hash: int
    tz: tzinfo = timezone.utc
    start_ms: int | None = None
    counter: int = 0
    prefix: str = attrs.field(init=False)
    _month_start: int = attrs.field(init=False, default=0)
    _next_month_start: int = attrs.field(init=False, default=0)
    #: the last call's ``now_ms`` and the id's head for it (prefix + time): many ids a ms
    _head_ms: int | None = attrs.field(init=False, default=None)
    _head: str = attrs.field(init=False, default="")

    def __attrs_post_init__(self) -> None:
        raw_ip = ip_to_bytes(self.ip) if isinstance(self.ip, str) else bytes(self.ip)
        if len(raw_ip) not in (4, 16):
            raise MessageEncodeError(f"an IP is 4 or 16 bytes, got {len(raw_ip)}")
        tail = struct.pack(">HI", self.pid & 0xFFFF, self.class_loader_hash & 0xFFFFFFFF)
        self.prefix = (raw_ip + tail).hex().upper()
        if self.start_ms is not None:
            self._set_month(self.start_ms)

    def _set_month(self, now_ms: int) -> None:
        self._month_start = month_start_ms(now_ms, self.tz)
        self._next_month_start = month_start_ms(now_ms, self.tz, 1)

    def next_id(self, now_ms: int) -> str:
        """A new unique id for a message created at ``now_ms`` (epoch milliseconds)."""
        if now_ms != self._head_ms:
            self._head = self._head_at(now_ms)
            self._head_ms = now_ms
        counter = self.counter
        self.counter = (counter + 1) & 0xFFFFFFFF
        return "%s%04X" % (self._head, counter & 0xFFFF)

    def _head_at(self, now_ms: int) -> str:
        """The prefix and the time part of an id made at ``now_ms``."""
        if self.start_ms is None:
            self.start_ms = now_ms
            self._set_month(now_ms)
        elif now_ms >= self._next_month_start:
            self._set_month(now_ms)
        diff = _to_int32(now_ms - self._month_start)
        if -_NTP_TOLERANCE_MS < diff < 0:
            diff = 0
        return "%s%08X" % (self.prefix, diff & 0xFFFFFFFF)


from ..accel import accelerated  # noqa: E402

offset_msg_id = accelerated(offset_msg_id)
